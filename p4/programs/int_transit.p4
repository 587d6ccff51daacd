/* int_transit.p4: intlab's INT-MD v2.1 transit hop written in P4, for the v1model
 * architecture on intlab's switch. It does what the built-in pipeline does to a frame:
 *
 *   ingress: IPv4 forwarding by longest prefix (table `ipv4_lpm`, filled from a runtime
 *            file), the TTL counted down (a packet with TTL 1 or 0 dies here);
 *   egress:  when the frame carries INT (UDP destination port INT_PORT, shim type INT-MD,
 *            version 2), one hop record pushed on top of the stack with the fields its
 *            instruction bitmap asks for, in the order and units the built-in pipeline writes
 *            them (ns, bytes, kb/s; unknown fields all ones), including intlab's
 *            domain-specific block (txBytes, line rate). With no hop left the E flag is set;
 *            when the hop would not fit the link's MTU the M flag; nothing is added then.
 *
 * The values v1model has no field for come from intlab's extern (intlab.p4). Hop records are
 * byte-identical to the built-in pipeline's on the same schedule, and its tests hold it to
 * that. Single path: the route table has one port per prefix (no ECMP). */

#include <core.p4>
#include <v1model.p4>
#include <intlab.p4>

/* The UDP port that marks INT (intlab's default; the shim keeps the original port). */
#ifndef INT_PORT
#define INT_PORT 5790
#endif

const bit<16> TYPE_IPV4 = 0x0800;
const bit<8> PROTO_UDP = 17;
/* intlab's INT domain ("IL"): its DS instructions are txBytes (bit 0) and line rate (bit 1). */
const bit<16> INTLAB_DOMAIN = 0x494c;

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

/* INT v2.1 shim for UDP (section 5.7.2). */
header int_shim_t {
    bit<4> int_type;
    bit<2> npt;
    bit<2> reserved;
    bit<8> length;
    bit<16> next_field;
}

/* INT-MD metadata header (section 5.8). */
header int_md_t {
    bit<4> version;
    bit<1> d;
    bit<1> e;
    bit<1> m;
    bit<12> reserved;
    bit<5> hop_ml;
    bit<8> remaining_hops;
    bit<16> instructions;
    bit<16> domain_id;
    bit<16> ds_instructions;
    bit<16> ds_flags;
}

/* One header per field group of a hop, emitted in bitmap order. */
header int_node_id_t { bit<32> node_id; }
header int_l1_ports_t { bit<16> ingress; bit<16> egress; }
header int_hop_latency_t { bit<32> ns; }
header int_queue_t { bit<8> id; bit<24> occupancy; }
header int_ingress_ts_t { bit<64> ns; }
header int_egress_ts_t { bit<64> ns; }
header int_l2_ports_t { bit<32> ingress; bit<32> egress; }
header int_tx_util_t { bit<32> value; }
header int_buffer_t { bit<8> id; bit<24> occupancy; }
header int_word_t { bit<32> value; }
header intlab_tx_bytes_t { bit<64> bytes; }
header intlab_rate_t { bit<32> kbps; }

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    int_shim_t int_shim;
    int_md_t int_md;
    int_node_id_t node_id;
    int_l1_ports_t l1_ports;
    int_hop_latency_t hop_latency;
    int_queue_t queue;
    int_ingress_ts_t ingress_ts;
    int_egress_ts_t egress_ts;
    int_l2_ports_t l2_ports;
    int_tx_util_t tx_util;
    int_buffer_t buffer;
    int_word_t[6] reserved;
    intlab_tx_bytes_t tx_bytes;
    intlab_rate_t rate;
    int_word_t checksum_complement;
}

struct meta_t {
    bit<8> hop_words;
}

parser IntParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            INT_PORT: parse_shim;
            default: accept;
        }
    }

    /* A shim that is not INT-MD, has the reserved NPT or is shorter than the MD header is
     * left alone, as the built-in pipeline leaves it. */
    state parse_shim {
        pkt.extract(hdr.int_shim);
        transition select(hdr.int_shim.int_type, hdr.int_shim.npt, hdr.int_shim.length) {
            (_, 3, _): accept;
            (_, _, 0 .. 2): accept;
            (1, _, _): parse_md;
            default: accept;
        }
    }

    state parse_md {
        transition select(pkt.lookahead<bit<4>>()) {
            2: extract_md;
            default: accept;
        }
    }

    state extract_md {
        pkt.extract(hdr.int_md);
        transition accept;
    }
}

control IntVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IntIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action drop() {
        mark_to_drop(std);
    }

    action forward(bit<9> port) {
        std.egress_spec = port;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst: lpm; }
        actions = { forward; drop; }
        size = 1024;
        default_action = drop();
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            drop();
            return;
        }
        ipv4_lpm.apply();
        if (hdr.ipv4.ttl <= 1) {
            drop();
        } else {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
    }
}

control IntEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    intlab_metadata() lab;

    /* Hop ML the instructions ask for, in 4-byte words. */
    action count_words() {
        bit<16> ins = hdr.int_md.instructions;
        bit<8> w = 0;
        w = w + (bit<8>) ins[15:15] + (bit<8>) ins[14:14] + (bit<8>) ins[13:13] + (bit<8>) ins[12:12];
        w = w + 2 * ((bit<8>) ins[11:11] + (bit<8>) ins[10:10] + (bit<8>) ins[9:9]);
        w = w + (bit<8>) ins[8:8] + (bit<8>) ins[7:7];
        /* Reserved bits 9 to 14, one word each; bit 15 the checksum complement. */
        w = w + (bit<8>) ins[6:6] + (bit<8>) ins[5:5] + (bit<8>) ins[4:4] + (bit<8>) ins[3:3];
        w = w + (bit<8>) ins[2:2] + (bit<8>) ins[1:1] + (bit<8>) ins[0:0];
        if (hdr.int_md.domain_id == INTLAB_DOMAIN) {
            w = w + 2 * (bit<8>) hdr.int_md.ds_instructions[15:15];
            w = w + (bit<8>) hdr.int_md.ds_instructions[14:14];
        }
        meta.hop_words = w;
    }

    action push_hop() {
        bit<16> ins = hdr.int_md.instructions;
        if (ins[15:15] == 1) {
            hdr.node_id.setValid();
            hdr.node_id.node_id = lab.node_id();
        }
        if (ins[14:14] == 1) {
            hdr.l1_ports.setValid();
            hdr.l1_ports.ingress = (bit<16>) std.ingress_port;
            hdr.l1_ports.egress = (bit<16>) std.egress_port;
        }
        if (ins[13:13] == 1) {
            bit<64> latency = lab.departure_ns() - lab.arrival_ns();
            hdr.hop_latency.setValid();
            hdr.hop_latency.ns = latency > 0xfffffffe ? 32w0xfffffffe : (bit<32>) latency;
        }
        if (ins[12:12] == 1) {
            bit<32> q = lab.queue_bytes();
            hdr.queue.setValid();
            hdr.queue.id = 0;
            hdr.queue.occupancy = q > 0xfffffe ? 24w0xfffffe : (bit<24>) q;
        }
        if (ins[11:11] == 1) {
            hdr.ingress_ts.setValid();
            hdr.ingress_ts.ns = lab.arrival_ns();
        }
        if (ins[10:10] == 1) {
            hdr.egress_ts.setValid();
            hdr.egress_ts.ns = lab.departure_ns();
        }
        /* What this switch does not know is written as all ones. */
        if (ins[9:9] == 1) {
            hdr.l2_ports.setValid();
            hdr.l2_ports.ingress = 0xffffffff;
            hdr.l2_ports.egress = 0xffffffff;
        }
        if (ins[8:8] == 1) {
            hdr.tx_util.setValid();
            hdr.tx_util.value = 0xffffffff;
        }
        if (ins[7:7] == 1) {
            hdr.buffer.setValid();
            hdr.buffer.id = 0xff;
            hdr.buffer.occupancy = 0xffffff;
        }
        if (ins[6:6] == 1) { hdr.reserved[0].setValid(); hdr.reserved[0].value = 0xffffffff; }
        if (ins[5:5] == 1) { hdr.reserved[1].setValid(); hdr.reserved[1].value = 0xffffffff; }
        if (ins[4:4] == 1) { hdr.reserved[2].setValid(); hdr.reserved[2].value = 0xffffffff; }
        if (ins[3:3] == 1) { hdr.reserved[3].setValid(); hdr.reserved[3].value = 0xffffffff; }
        if (ins[2:2] == 1) { hdr.reserved[4].setValid(); hdr.reserved[4].value = 0xffffffff; }
        if (ins[1:1] == 1) { hdr.reserved[5].setValid(); hdr.reserved[5].value = 0xffffffff; }
        if (hdr.int_md.domain_id == INTLAB_DOMAIN) {
            if (hdr.int_md.ds_instructions[15:15] == 1) {
                hdr.tx_bytes.setValid();
                hdr.tx_bytes.bytes = lab.tx_bytes();
            }
            if (hdr.int_md.ds_instructions[14:14] == 1) {
                hdr.rate.setValid();
                hdr.rate.kbps = lab.line_rate_kbps();
            }
        }
        /* intlab keeps the UDP checksum right itself, so the complement is "unavailable". */
        if (ins[0:0] == 1) {
            hdr.checksum_complement.setValid();
            hdr.checksum_complement.value = 0xffffffff;
        }
        bit<16> bytes = (bit<16>) meta.hop_words << 2;
        hdr.int_md.remaining_hops = hdr.int_md.remaining_hops - 1;
        hdr.int_shim.length = hdr.int_shim.length + meta.hop_words;
        hdr.ipv4.total_len = hdr.ipv4.total_len + bytes;
        hdr.udp.length = hdr.udp.length + bytes;
    }

    apply {
        if (!hdr.int_md.isValid()) {
            return;
        }
        count_words();
        /* A Hop ML that disagrees with the instructions is not ours to extend. */
        if (meta.hop_words != (bit<8>) hdr.int_md.hop_ml || meta.hop_words > 31) {
            return;
        }
        bit<32> grown = (bit<32>) hdr.ipv4.total_len + ((bit<32>) meta.hop_words << 2);
        if (hdr.int_md.remaining_hops == 0) {
            hdr.int_md.e = 1;
        } else if (grown > lab.mtu() || (bit<16>) hdr.int_shim.length + (bit<16>) meta.hop_words > 255) {
            hdr.int_md.m = 1;
        } else {
            push_hop();
        }
    }
}

control IntChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
        /* RoCEv2 sends UDP checksum 0 (none); a present one follows the change. */
        update_checksum_with_payload(hdr.int_md.isValid() && hdr.udp.checksum != 0,
            { hdr.ipv4.src, hdr.ipv4.dst, 8w0, hdr.ipv4.protocol, hdr.udp.length,
              hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length, 16w0,
              hdr.int_shim, hdr.int_md, hdr.node_id, hdr.l1_ports, hdr.hop_latency, hdr.queue,
              hdr.ingress_ts, hdr.egress_ts, hdr.l2_ports, hdr.tx_util, hdr.buffer,
              hdr.reserved[0], hdr.reserved[1], hdr.reserved[2], hdr.reserved[3], hdr.reserved[4],
              hdr.reserved[5], hdr.tx_bytes, hdr.rate, hdr.checksum_complement },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control IntDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.int_shim);
        pkt.emit(hdr.int_md);
        pkt.emit(hdr.node_id);
        pkt.emit(hdr.l1_ports);
        pkt.emit(hdr.hop_latency);
        pkt.emit(hdr.queue);
        pkt.emit(hdr.ingress_ts);
        pkt.emit(hdr.egress_ts);
        pkt.emit(hdr.l2_ports);
        pkt.emit(hdr.tx_util);
        pkt.emit(hdr.buffer);
        pkt.emit(hdr.reserved);
        pkt.emit(hdr.tx_bytes);
        pkt.emit(hdr.rate);
        pkt.emit(hdr.checksum_complement);
    }
}

V1Switch(IntParser(), IntVerify(), IntIngress(), IntEgress(), IntChecksum(), IntDeparser()) main;
