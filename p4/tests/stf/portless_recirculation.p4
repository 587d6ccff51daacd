// A frame sent to a port number no interface has still runs egress, as simple_switch runs it
// (and then loses the frame): fabric-tna sends frames to its port 510 so that egress
// recirculates them. Here egress recirculates what ingress sent to 510; the second pass goes
// to port 1.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header trace_t {
    bit<8> passes;  // ingress passes
    bit<8> seen;    // 0xfe once egress ran for port 510
    bit<8> eport;   // the port of the last egress pass
}
struct headers { ethernet_t eth; trace_t t; }
const int FL_PASSES = 1;
struct meta { @field_list(FL_PASSES) bit<8> passes; }

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.t); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        m.passes = m.passes + 1;
        hdr.t.passes = m.passes;
        if (sm.instance_type == 0) {
            sm.egress_spec = 510;
        } else {
            sm.egress_spec = 1;
        }
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        hdr.t.eport = (bit<8>) sm.egress_port;
        if (sm.egress_port == 510) {
            hdr.t.seen = 0xfe;
            recirculate_preserving_field_list(FL_PASSES);
        }
    }
}
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.t); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
