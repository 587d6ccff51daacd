// Egress-to-egress clones, recirculation and resubmission, with the metadata their field
// lists keep and the instance_type simple_switch gives each copy. An egress clone keeps the
// headers inside the metadata as BMv2 does (fabric-tna's INT reports rely on it).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header trace_t {
    bit<8> op;          // 1: clone at egress; 2: recirculate; 3: resubmit; 4: clone with a
                        // header in the metadata
    bit<8> passes;      // ingress passes the frame made
    bit<8> ikind;       // instance_type at ingress (of its last pass)
    bit<8> kind;        // instance_type at egress
    bit<8> kept;        // the metadata the field list kept
}
struct headers { ethernet_t eth; trace_t t; }
// Named as the tutorials name theirs (`const int FL_PACKET_IN = 1;`).
const int FL_PASSES = 1;
header report_t { bit<8> v; }
struct meta {
    @field_list(FL_PASSES) bit<8> passes;
    bit<8> not_kept;
    report_t report;
}

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.t); transition accept; }
}
control NoVerify(inout headers hdr, inout meta m) { apply {} }
control Ingress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        m.passes = m.passes + 1;
        m.not_kept = 0x77;
        hdr.t.passes = m.passes;
        hdr.t.ikind = (bit<8>) sm.instance_type;
        sm.egress_spec = 1;
        if (hdr.t.op == 3 && sm.instance_type == 0) {
            resubmit_preserving_field_list(FL_PASSES);
        }
    }
}
control Egress(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        hdr.t.kind = (bit<8>) sm.instance_type;
        hdr.t.kept = m.not_kept;
        if (hdr.t.op == 1 && sm.instance_type == 0) {
            clone_preserving_field_list(CloneType.E2E, 5, FL_PASSES);
        }
        if (hdr.t.op == 4 && sm.instance_type == 0) {
            m.report.setValid();
            m.report.v = 0x5a;
            clone_preserving_field_list(CloneType.E2E, 5, FL_PASSES);
        }
        if (hdr.t.op == 4 && sm.instance_type == 2) {
            hdr.t.kept = m.report.isValid() ? m.report.v : 8w0xee;
        }
        if (hdr.t.op == 2 && m.passes == 1) {
            recirculate_preserving_field_list(FL_PASSES);
        }
    }
}
control NoCompute(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.t); } }
V1Switch(P(), NoVerify(), Ingress(), Egress(), NoCompute(), D()) main;
