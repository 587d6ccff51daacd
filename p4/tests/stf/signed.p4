// Signed arithmetic: comparisons, arithmetic shifts, sign extension and saturation of int<W>
// as the P4_16 specification defines them (two's complement), on values read from the frame.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }

header values_t {
    int<32> a;
    int<32> b;
    bit<8>  a_lt_b;      // a < b
    int<32> a_shr_1;     // a >> 1
    int<64> a_wide;      // (int<64>) a
    int<32> a_sat_b;     // a |+| b
    int<8>  narrow;      // (int<8>) a
}

struct headers { ethernet_t eth; values_t v; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.v); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        hdr.v.a_lt_b = hdr.v.a < hdr.v.b ? 8w1 : 8w0;
        hdr.v.a_shr_1 = hdr.v.a >> 1;
        hdr.v.a_wide = (int<64>) hdr.v.a;
        hdr.v.a_sat_b = hdr.v.a |+| hdr.v.b;
        hdr.v.narrow = (int<8>) hdr.v.a;
        sm.egress_spec = 1;
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.v); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
