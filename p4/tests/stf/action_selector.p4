// An action selector: a group's member is chosen by BMv2's crc16 of the selector key, modulo the
// group's size, the members in the order of their handles.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t eth; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action_selector(HashAlgorithm.crc16, 32w1024, 32w16) sel;
    table ecmp {
        key = { hdr.eth.ether_type : exact; hdr.eth.src : selector; }
        actions = { set_port; NoAction; }
        implementation = sel;
    }
    apply { ecmp.apply(); }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
