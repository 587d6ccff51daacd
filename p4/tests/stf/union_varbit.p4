// A header union of IPv4 (with its options as a varbit, sized by the IHL read ahead) and IPv6:
// the options come out as they came in; making one member valid makes the other invalid.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len; bit<16> id; bit<16> frag;
    bit<8> ttl; bit<8> protocol; bit<16> checksum; bit<32> src; bit<32> dst;
    varbit<320> options;
}
header ipv6_t {
    bit<4> version; bit<8> class; bit<20> flow; bit<16> payload_len; bit<8> next;
    bit<8> hop_limit; bit<128> src; bit<128> dst;
}
header_union ip_t { ipv4_t v4; ipv6_t v6; }
struct headers { ethernet_t eth; ip_t ip; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x0800: v4; 0x86dd: v6; default: accept; }
    }
    state v4 {
        bit<4> ihl = pk.lookahead<bit<8>>()[3:0];
        pk.extract(hdr.ip.v4, (bit<32>) (((bit<9>) ihl - 5) * 32));
        transition accept;
    }
    state v6 { pk.extract(hdr.ip.v6); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.ip.v4.isValid()) {
            hdr.ip.v4.ttl = hdr.ip.v4.ttl - 1;
            if (hdr.ip.v4.tos == 0xff) {
                // Turned into IPv6: the union's IPv4 member is no longer valid.
                hdr.ip.v6.setValid();
                hdr.ip.v6.version = 6;
                hdr.ip.v6.hop_limit = 7;
                hdr.eth.ether_type = 0x86dd;
            }
        } else if (hdr.ip.v6.isValid()) {
            hdr.ip.v6.hop_limit = hdr.ip.v6.hop_limit - 1;
        }
        if (hdr.ip.v4.isValid() && hdr.ip.v6.isValid()) {
            sm.egress_spec = 2;  // never: a union has one valid member at most
        }
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.ip); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
