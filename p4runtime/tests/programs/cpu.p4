// A switch that sends what its table does not know to the controller (CPU port 510, with
// the ingress port in front), forwards what the controller sends back to the port it names,
// ages its entries; meters (indexed and direct) and an action selector for P4Runtime to set.
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 510;

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> _pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> _pad; }
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct headers { packet_in_t packet_in; packet_out_t packet_out; ethernet_t ethernet; }
struct metadata { bit<2> color; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) { CPU_PORT: parse_packet_out; default: parse_ethernet; }
    }
    state parse_packet_out { packet.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet { packet.extract(hdr.ethernet); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action to_port(bit<9> port) { sm.egress_spec = port; }
    action to_cpu() { sm.egress_spec = CPU_PORT; }
    table flows {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { to_port; to_cpu; }
        default_action = to_cpu();
        support_timeout = true;
    }
    meter(4, MeterType.packets) rate_limit;
    direct_meter<bit<2>>(MeterType.bytes) per_port;
    action seen_it() { per_port.read(meta.color); }
    table seen { key = { sm.ingress_port: exact; } actions = { seen_it; NoAction; } meters = per_port; }
    action_selector(HashAlgorithm.crc16, 16, 10) ecmp_selector;
    table ecmp {
        key = { hdr.ethernet.dstAddr: exact; hdr.ethernet.srcAddr: selector; }
        actions = { to_port; }
        implementation = ecmp_selector;
    }
    apply {
        rate_limit.execute_meter((bit<32>)0, meta.color);
        seen.apply();
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (hdr.ethernet.etherType == 0x9999) {
            ecmp.apply();
        } else {
            flows.apply();
        }
    }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
        }
    }
}
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.packet_in); packet.emit(hdr.ethernet); }
}
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
