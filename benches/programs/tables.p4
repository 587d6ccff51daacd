// The control-plane bench's program (benches/benches/control_plane.rs): IPv4 forwarding by an
// exact table of host addresses, then by longest prefix, each large enough for a million
// entries.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3> flags;
    bit<13> fragOffset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct metadata {}

struct headers {
    ethernet_t ethernet;
    ipv4_t ipv4;
}

parser TablesParser(packet_in packet, out headers hdr, inout metadata meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control TablesVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control TablesIngress(inout headers hdr, inout metadata meta,
                      inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    table host_exact {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { forward; drop; }
        size = 2000000;
        default_action = drop();
    }
    table prefix_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        size = 2000000;
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            if (!host_exact.apply().hit) {
                prefix_lpm.apply();
            }
        }
    }
}

control TablesEgress(inout headers hdr, inout metadata meta,
                     inout standard_metadata_t standard_metadata) {
    apply { }
}

control TablesCompute(inout headers hdr, inout metadata meta) {
    apply { }
}

control TablesDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(TablesParser(), TablesVerify(), TablesIngress(), TablesEgress(), TablesCompute(),
         TablesDeparser()) main;
