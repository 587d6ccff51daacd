// intlab test program: operators and casts on header fields, each result written to a header
// the frame gains, so a test reads every one from the bytes that come out. The operands come
// from the frame, so nothing folds at load time.
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_OPERANDS = 0x88b5;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header operands_t {
    bit<8> a;
    bit<8> b;
}

header results_t {
    bit<16> widened;
    bit<16> sign_extended;
    bit<8> const_minus;
    bit<8> const_times;
    bit<8> sub_saturated;
    bit<8> add_saturated;
    bit<8> arithmetic_shift;
    bit<8> signed_less;
    bit<8> unsigned_less;
    bit<8> concatenated;
    bit<4> narrowed;
    bit<4> low_nibble;
}

struct headers_t {
    ethernet_t ethernet;
    operands_t operands;
    results_t results;
}

struct meta_t { }

parser ArithParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            TYPE_OPERANDS: operands;
            default: accept;
        }
    }
    state operands {
        pkt.extract(hdr.operands);
        transition accept;
    }
}

control ArithVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control ArithIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        if (!hdr.operands.isValid()) {
            return;
        }
        bit<8> a = hdr.operands.a;
        bit<8> b = hdr.operands.b;
        hdr.results.setValid();
        hdr.results.widened = (bit<16>) a;
        hdr.results.sign_extended = (bit<16>) ((int<16>) ((int<8>) a));
        hdr.results.const_minus = 8w10 - b;
        hdr.results.const_times = 8w2 * b;
        hdr.results.sub_saturated = b |-| 8w5;
        hdr.results.add_saturated = a |+| 8w20;
        hdr.results.arithmetic_shift = (bit<8>) (((int<8>) a) >> 1);
        hdr.results.signed_less = ((int<8>) a < (int<8>) b) ? 8w1 : 8w0;
        hdr.results.unsigned_less = (a < b) ? 8w1 : 8w0;
        hdr.results.concatenated = a[7:4] ++ b[3:0];
        hdr.results.narrowed = (bit<4>) a;
        hdr.results.low_nibble = a[3:0] |+| 4w9;
    }
}

control ArithEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }

control ArithChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control ArithDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.operands);
        pkt.emit(hdr.results);
    }
}

V1Switch(ArithParser(), ArithVerify(), ArithIngress(), ArithEgress(), ArithChecksum(), ArithDeparser()) main;
