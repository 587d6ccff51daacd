// Meters as BMv2 meters them (two-rate three-colour, RFC 2698; buckets full when the rates are
// set): a packet meter in an array, executed by index, and a byte meter attached to a table's
// entries. The colours (0 green, 1 yellow, 2 red) are written into the frame.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header colours_t { bit<8> index; bit<8> by_packets; bit<8> by_bytes; bit<24> pad; }
struct headers { ethernet_t eth; colours_t c; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.c); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    meter(32w4, MeterType.packets) per_packet;
    direct_meter<bit<8>>(MeterType.bytes) per_byte;
    action metered() { per_byte.read(hdr.c.by_bytes); }
    table t {
        key = { hdr.eth.ether_type : exact; }
        actions = { metered; NoAction; }
        meters = per_byte;
    }
    apply {
        per_packet.execute_meter((bit<32>) hdr.c.index, hdr.c.by_packets);
        t.apply();
        sm.egress_spec = 1;
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.c); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
