// A register of more than 64 bits keeps every bit of what is written into it.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header op_t { bit<96> wide_back; }
struct headers { ethernet_t eth; op_t op; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.op); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    register<bit<96>>(1) wide;
    apply {
        sm.egress_spec = 1;
        wide.write(0, 96w0xa0a1a2a3a4a5a6a7a8a9aaab);
        wide.read(hdr.op.wide_back, 0);
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.op); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
