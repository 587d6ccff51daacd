// MAC learning with a digest: a source address the `known` table does not hold is sent to the
// control plane with the port it came in on.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t eth; }
struct learn_t { bit<48> src; bit<9> port; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    action learn() { digest<learn_t>(1, { hdr.eth.src, sm.ingress_port }); }
    table known {
        key = { hdr.eth.src : exact; }
        actions = { learn; NoAction; }
        default_action = learn();
    }
    apply { known.apply(); sm.egress_spec = 1; }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
