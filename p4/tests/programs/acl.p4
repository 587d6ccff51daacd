// intlab test program: one ternary/range table whose entries come from simple_switch_CLI
// commands (priorities, multicast groups, mirroring sessions, handles).
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header ipv4_t {
    bit<8> version_ihl;
    bit<8> tos;
    bit<16> total_len;
    bit<32> id_flags;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> checksum;
    bit<32> src;
    bit<32> dst;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
}

struct meta_t { }

parser AclParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control AclVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control AclIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action to_port(bit<9> port) {
        std.egress_spec = port;
    }

    action to_group(bit<16> group) {
        std.mcast_grp = group;
    }

    action deny() {
        mark_to_drop(std);
    }

    table acl {
        key = {
            hdr.ipv4.src: ternary;
            hdr.ipv4.dst: range;
        }
        actions = { to_port; to_group; deny; }
        default_action = deny();
    }

    apply {
        acl.apply();
    }
}

control AclEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control AclCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control AclDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(AclParser(), AclVerify(), AclIngress(), AclEgress(), AclCompute(), AclDeparser()) main;
