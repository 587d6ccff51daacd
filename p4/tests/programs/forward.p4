// intlab test program: IPv4 forwarding with a source-route stack, ECN marking and counters.
// It exercises the parser's syntax subset; its behaviour is asserted once programs run.
#include <core.p4>
#include <v1model.p4>

#define MAX_HOPS 4
#ifndef NO_ECN
#define ECN_THRESHOLD 19w10
#endif

const bit<16> TYPE_IPV4 = 0x0800;
const bit<16> TYPE_SRCROUTE = 16w0x1234;

typedef bit<9> port_t;
typedef bit<48> mac_t;
typedef bit<32> ip_t;

enum bit<8> Proto {
    TCP = 6,
    UDP = 17
}

header ethernet_t {
    mac_t dst;
    mac_t src;
    bit<16> ether_type;
}

header srcroute_t {
    bit<1> bos;
    bit<15> port;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<6> dscp;
    bit<2> ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> checksum;
    ip_t src;
    ip_t dst;
}

struct headers_t {
    ethernet_t ethernet;
    srcroute_t[MAX_HOPS] routes;
    ipv4_t ipv4;
}

struct meta_t {
    bit<32> hits;
    @name("flow_hash") bit<16> hash;
}

parser ForwardParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                     inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            TYPE_IPV4: parse_ipv4;
            TYPE_SRCROUTE: parse_route;
            16w0x8800 &&& 16w0xff00: accept;
            default: accept;
        }
    }

    state parse_route {
        pkt.extract(hdr.routes.next);
        transition select(hdr.routes.last.bos) {
            1: parse_ipv4;
            default: parse_route;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl >= 5, error.HeaderTooShort);
        transition select(hdr.ipv4.protocol, hdr.ipv4.ttl) {
            (8w17, _): accept;
            (_, 0 .. 1): reject;
            default: accept;
        }
    }
}

control ForwardVerify(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control ForwardIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    counter(64, CounterType.packets_and_bytes) port_packets;
    register<bit<32>>(1) seen;
    bit<32> tmp = 0;

    action drop() {
        mark_to_drop(std);
    }

    action forward(mac_t next_mac, port_t port) {
        std.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = next_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action follow_route() {
        std.egress_spec = (port_t) hdr.routes[0].port;
        hdr.routes.pop_front(1);
    }

    @name("routes")
    table ipv4_lpm {
        key = {
            hdr.ipv4.dst: lpm;
        }
        actions = {
            forward;
            drop;
            NoAction;
        }
        size = 1024;
        default_action = drop();
    }

    table acl {
        key = {
            hdr.ipv4.src: ternary @name("source");
            hdr.ipv4.protocol: exact;
            hdr.ipv4.dst[31:24]: range;
        }
        actions = {
            drop;
            NoAction;
        }
        const default_action = NoAction();
        const entries = {
            (32w0x0a000000 &&& 32w0xff000000, 6, 10 .. 20): drop();
            (_, 17, _): NoAction();
        }
    }

    apply {
        seen.read(tmp, 0);
        seen.write(0, tmp + 1);
        if (hdr.routes[0].isValid())
            follow_route();
        else if (hdr.ipv4.isValid()) {
            switch (acl.apply().action_run) {
                drop: {
                    return;
                }
                default: {
                    if (!ipv4_lpm.apply().hit) {
                        exit;
                    }
                }
            }
            port_packets.count((bit<32>) std.ingress_port);
            meta.hash = hdr.ipv4.src[15:0] ^ hdr.ipv4.dst[15:0];
            meta.hits = meta.hits |+| 1;
            hdr.ipv4.dscp = hdr.ipv4.ecn == 3 ? 6w1 : hdr.ipv4.dscp;
        }
    }
}

control ForwardEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
#ifdef ECN_THRESHOLD
        if (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2) {
            if (std.enq_qdepth >= ECN_THRESHOLD) {
                hdr.ipv4.ecn = 3;
            }
        }
#endif
    }
}

control ForwardCompute(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control ForwardDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.routes);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(ForwardParser(), ForwardVerify(), ForwardIngress(), ForwardEgress(), ForwardCompute(),
         ForwardDeparser()) main;
