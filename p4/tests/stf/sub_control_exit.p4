// A sub-control's inout argument is copied back when it exits, as an action's is: the P4_16
// specification copies out on `exit` as on `return`.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t eth; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }

control Sub(inout bit<48> x) {
    apply {
        x = 48w0x0a;
        exit;
    }
}

control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    Sub() sub;
    apply {
        sm.egress_spec = 1;
        sub.apply(hdr.eth.src);
        // Never reached: the sub-control exits.
        hdr.eth.ether_type = 16w0xdead;
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
