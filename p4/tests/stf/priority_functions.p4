// Priority queues and functions. Ingress sets the frame's priority from the frame; egress
// reads back the queue it came through (qid: simple_switch's queue is the priority). Functions
// with side effects: arguments evaluated left to right, each seeing the effects of the last,
// and copied out left to right (the last copy to a place wins).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header values_t {
    bit<8> prio; bit<8> qid;
    bit<8> n; bit<8> sum;
    bit<8> n2; bit<8> pair;
    bit<8> twice;
}
struct headers { ethernet_t eth; values_t v; }
struct meta {}

bit<8> bump(inout bit<8> x) { x = x + 1; return x; }
bit<8> pack(in bit<8> hi, in bit<8> lo) { return hi * 16 + lo; }
void both(out bit<8> first, out bit<8> second) { first = 1; second = 2; }

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.v); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        sm.priority = hdr.v.prio[2:0];
        sm.egress_spec = 1;
        hdr.v.sum = bump(hdr.v.n) * 10 + bump(hdr.v.n);
        hdr.v.pair = pack(bump(hdr.v.n2), hdr.v.n2);
        both(hdr.v.twice, hdr.v.twice);
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply { hdr.v.qid = (bit<8>) sm.qid; }
}
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.v); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
