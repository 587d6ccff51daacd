// Registers read and written outside their cells, as BMv2 runs them: a read leaves its result
// as it was, a write changes nothing.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header op_t {
    bit<8>   index;
    bit<8>   read_back;   // the cell's value (or what was here, when the index is outside)
}
struct headers { ethernet_t eth; op_t op; }
struct meta {}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.op); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    register<bit<8>>(4) cells;
    apply {
        sm.egress_spec = 1;
        // Write 0x40 + index, then read it back: outside the 4 cells nothing changes.
        cells.write((bit<32>) hdr.op.index, 8w0x40 + hdr.op.index);
        cells.read(hdr.op.read_back, (bit<32>) hdr.op.index);
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.op); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
