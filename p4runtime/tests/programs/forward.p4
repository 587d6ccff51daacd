// The tutorials' basic.p4 names (p4c gives them known ids) and one of each other object
// P4Info lists: a controller header, a value set of a struct with @match, a register, a
// direct counter, a validity key, an action called directly, a digest.
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header packet_in_header_t { bit<9> ingress_port; bit<7> _pad; }
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t { bit<32> srcAddr; bit<32> dstAddr; }
struct pvs_t { @match(ternary) bit<16> ether; bit<8> proto; }
struct headers { packet_in_header_t packet_in; ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }
struct learn_t { bit<48> src; bit<9> port; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    value_set<pvs_t>(4) pvs;
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType, 8w0) { pvs: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { packet.extract(hdr.ipv4); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) seen;
    direct_counter(CounterType.packets_and_bytes) hits;
    action drop() { mark_to_drop(sm); }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        sm.egress_spec = port;
        hdr.ethernet.dstAddr = dstAddr;
    }
    action count_it() { seen.write(0, 1); }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }
    table valid {
        key = { hdr.ipv4.isValid(): exact; }
        actions = { ipv4_forward; }
        counters = hits;
    }
    apply {
        count_it();
        digest<learn_t>(1, { hdr.ethernet.srcAddr, sm.ingress_port });
        ipv4_lpm.apply();
        valid.apply();
    }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) { apply { packet.emit(hdr.ethernet); } }
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
