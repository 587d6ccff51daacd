// Written for intlab's preprocessor test: ids from macros of a header found by -I, a block
// that exists only with -D WITH_COUNTER, registers named by token pasting, and a name made by
// stringizing.
#include <core.p4>
#include <v1model.p4>
#include "shared/ids.p4"

#define SKETCH(num) register<bit<32>>(1024) sketch##num
#define NAMED(x) @name(#x)

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
struct headers { ethernet_t ethernet; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}

control MyVerify(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    SKETCH(0);
    SKETCH(1);
#ifdef WITH_COUNTER
    @id(HITS_COUNTER_ID) counter(1, CounterType.packets) hits;
#endif
    @id(FWD_ACTION_ID) action fwd(bit<9> port) { sm.egress_spec = port; }
    @id(DROP_ACTION_ID) action drop() { mark_to_drop(sm); }
    @id(FWD_TABLE_ID) NAMED(forwarding) table t {
        key = { hdr.ethernet.dst: exact; }
        actions = { fwd; drop; }
        default_action = drop();
    }
    apply {
        t.apply();
        sketch0.write(0, 1);
        sketch1.write(0, 2);
#ifdef WITH_COUNTER
        hits.count(0);
#endif
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control MyCompute(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) { apply { packet.emit(hdr.ethernet); } }

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
