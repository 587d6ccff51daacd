// intlab test program: multicast replicas and ingress-to-egress clones. The UDP destination
// port picks what ingress does; egress writes what the copy knows of itself where a test can
// read it off the wire or from a socket: instance_type into the IPv4 TOS byte, the user
// metadata the copy kept into the IPv4 identification, egress_rid into the UDP source port
// (with the UDP checksum cleared, so the receiving host still takes the datagram).
#include <core.p4>
#include <v1model.p4>

const bit<16> MULTICAST = 7000;
const bit<16> CLONE = 7001;
const bit<16> CLONE_KEEPING = 7002;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> tos;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> checksum;
    bit<32> src;
    bit<32> dst;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
}

struct meta_t {
    @field_list(1)
    bit<8> kept;
    bit<8> not_kept;
}

parser MirrorParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: ipv4;
            default: accept;
        }
    }
    state ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            17: udp;
            default: accept;
        }
    }
    state udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

control MirrorVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MirrorIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action to_host(bit<9> port) {
        std.egress_spec = port;
    }

    table hosts {
        key = { hdr.ipv4.dst: exact; }
        actions = { to_host; NoAction; }
        default_action = NoAction();
        const entries = {
            0xc6120001: to_host(1);
            0xc6120002: to_host(2);
            0xc6120003: to_host(3);
        }
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            mark_to_drop(std);
            return;
        }
        hosts.apply();
        // Ingress changes the frame; a clone must not see it.
        hdr.ipv4.ttl = 7;
        meta.kept = 0xaa;
        meta.not_kept = 0xbb;
        if (hdr.udp.isValid()) {
            if (hdr.udp.dst_port == MULTICAST) {
                std.mcast_grp = 3;
            } else if (hdr.udp.dst_port == CLONE) {
                clone(CloneType.I2E, 5);
            } else if (hdr.udp.dst_port == CLONE_KEEPING) {
                clone_preserving_field_list(CloneType.I2E, 5, 1);
            }
        }
    }
}

control MirrorEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.ipv4.tos = (bit<8>) std.instance_type;
        hdr.ipv4.identification = meta.kept ++ meta.not_kept;
        if (hdr.udp.isValid()) {
            hdr.udp.src_port = std.egress_rid;
            hdr.udp.checksum = 0;
        }
    }
}

control MirrorChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control MirrorDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
    }
}

V1Switch(MirrorParser(), MirrorVerify(), MirrorIngress(), MirrorEgress(), MirrorChecksum(), MirrorDeparser()) main;
