// Frames carry their 802.1Q tags to the program: on a veth port the kernel takes the tag off
// into metadata, and the switch must put it back before the parser sees the frame. Tagged
// frames are forwarded by their VLAN id and keep their tag with its priority bits; untagged
// ones go to port 3.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> ether_type; }
struct headers { ethernet_t eth; vlan_t vlan; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            16w0x8100: parse_vlan;
            default: accept;
        }
    }
    state parse_vlan { pk.extract(hdr.vlan); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }

control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    action to(bit<9> port) { sm.egress_spec = port; }
    table by_vlan {
        key = { hdr.vlan.vid: exact; }
        actions = { to; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 3;
        if (hdr.vlan.isValid()) {
            by_vlan.apply();
        }
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.vlan); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
