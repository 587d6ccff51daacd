// intlab test program: a protocol recognised before it is extracted. The parser looks at the
// fields of a header it has not extracted yet (`lookahead<H>().field`, in a tuple select) and
// takes the header only when its magic and version match; an exact table on one of its
// fields (filled from runtime JSON that writes the key as a list of one, as the tutorials
// do) answers the frame back out of the port it came in on, with the two MACs swapped.
#include <core.p4>
#include <v1model.p4>

const bit<16> PEEK_TYPE = 0x1234;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header peek_t {
    bit<8> magic;
    bit<4> version;
    bit<4> flags;
    bit<8> op;
    bit<32> value;
}

struct headers_t {
    ethernet_t ethernet;
    peek_t peek;
}

struct meta_t { }

parser PeekParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            PEEK_TYPE: check;
            default: accept;
        }
    }
    state check {
        transition select(pkt.lookahead<peek_t>().magic, pkt.lookahead<peek_t>().version) {
            (0x50, 1): take;
            default: accept;
        }
    }
    state take {
        pkt.extract(hdr.peek);
        transition accept;
    }
}

control PeekVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control PeekIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action drop() {
        mark_to_drop();
    }
    action answer(bit<32> add) {
        bit<48> tmp = hdr.ethernet.dst;
        hdr.ethernet.dst = hdr.ethernet.src;
        hdr.ethernet.src = tmp;
        hdr.peek.value = hdr.peek.value + add;
        std.egress_spec = std.ingress_port;
    }
    table ops {
        key = { hdr.peek.op: exact; }
        actions = { answer; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.peek.isValid()) {
            ops.apply();
        } else {
            drop();
        }
    }
}

control PeekEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control PeekCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control PeekDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.peek);
    }
}

V1Switch(PeekParser(), PeekVerify(), PeekIngress(), PeekEgress(), PeekCompute(), PeekDeparser()) main;
