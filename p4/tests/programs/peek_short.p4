// intlab test program: a lookahead needs the whole header it looks at. The parser chooses its
// next state on one field of a header it does not extract; a frame that holds that field but
// not the whole header fails the lookahead (PacketTooShort, as the P4_16 specification says of
// lookahead), which ingress turns into a port number so the test can see it. A state that
// peeks into a variable stops at the failed lookahead: the assignment after it never runs.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header probe_t {
    bit<8> kind;
    bit<56> rest;
}

struct headers_t {
    ethernet_t ethernet;
}

struct meta_t {
    bit<8> peeked;
    bit<1> after;
}

parser ShortParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x1234: by_select;
            0x5678: by_variable;
        }
    }

    state by_select {
        transition select(pkt.lookahead<probe_t>().kind) {
            1: accept;
        }
    }

    state by_variable {
        meta.peeked = pkt.lookahead<probe_t>().kind;
        meta.after = 1;
        transition select(meta.peeked) {
            1: accept;
        }
    }
}

control ShortVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control ShortIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (std.parser_error == error.PacketTooShort) {
            std.egress_spec = 3 + (bit<9>) meta.after;
        } else if (std.parser_error == error.NoError) {
            std.egress_spec = 1;
        } else {
            std.egress_spec = 2;
        }
    }
}

control ShortEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control ShortCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control ShortDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(ShortParser(), ShortVerify(), ShortIngress(), ShortEgress(), ShortCompute(), ShortDeparser()) main;
