// PSA as psa_switch runs it: each packet path (normal unicast and multicast, resubmit,
// recirculate, ingress and egress clones) seen where PSA says, the egress parser reading the
// frame the ingress deparser wrote, and PSA's externs: Register.read as a value, Meter colours
// in PSA's numbering, Hash with its field list right-aligned, InternetChecksum.
#include <core.p4>
#include <psa.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header probe_t {
    bit<8>  op;
    bit<8>  path_in;    // ingress's packet_path: 0 normal, 5 resubmit, 6 recirculate
    bit<8>  path_out;   // egress's: 1 unicast, 2 multicast, 3 I2E clone, 4 E2E clone
    bit<8>  color;      // the meter's colour (PSA: 1 green)
    bit<16> hash;
    bit<16> csum;
    bit<8>  reg;
    bit<8>  flags;
}
struct headers_t { ethernet_t ethernet; probe_t probe; }
struct meta_t {}
struct empty_t {}

parser IngressParserImpl(packet_in pk, out headers_t hdr, inout meta_t m,
                         in psa_ingress_parser_input_metadata_t istd,
                         in empty_t resubmit_meta, in empty_t recirculate_meta) {
    state start { pk.extract(hdr.ethernet); pk.extract(hdr.probe); transition accept; }
}

control IngressImpl(inout headers_t hdr, inout meta_t m,
                    in psa_ingress_input_metadata_t istd,
                    inout psa_ingress_output_metadata_t ostd) {
    Register<bit<8>, bit<32>>(4) cells;
    Meter<bit<32>>(4, PSA_MeterType_t.PACKETS) meter0;
    Hash<bit<16>>(PSA_HashAlgorithm_t.CRC16) h;
    InternetChecksum() ck;
    apply {
        if (istd.packet_path == PSA_PacketPath_t.RESUBMIT) {
            hdr.probe.path_in = 5;
        } else if (istd.packet_path == PSA_PacketPath_t.RECIRCULATE) {
            hdr.probe.path_in = 6;
        }
        if (hdr.probe.op == 1) {
            cells.write(1, 7);
            hdr.probe.reg = cells.read(1) + 1;
            if (meter0.execute(0) == PSA_MeterColor_t.GREEN) {
                hdr.probe.color = 1;
            }
            bit<12> a = 0x456;
            hdr.probe.hash = h.get_hash({ a });
            ck.clear();
            ck.add({ hdr.ethernet.src });
            hdr.probe.csum = ck.get();
            send_to_port(ostd, (PortId_t) 2);
        } else if (hdr.probe.op == 2 && istd.packet_path == PSA_PacketPath_t.NORMAL) {
            ostd.drop = false;
            ostd.resubmit = true;
        } else if (hdr.probe.op == 3) {
            multicast(ostd, (MulticastGroup_t) 1);
        } else if (hdr.probe.op == 4) {
            ostd.clone = true;
            ostd.clone_session_id = (CloneSessionId_t) 5;
            send_to_port(ostd, (PortId_t) 2);
        } else if (hdr.probe.op == 5 && istd.packet_path == PSA_PacketPath_t.NORMAL) {
            send_to_port(ostd, PSA_PORT_RECIRCULATE);
        } else if (hdr.probe.op == 7) {
            ingress_drop(ostd);
        } else {
            send_to_port(ostd, (PortId_t) 2);
        }
    }
}

control IngressDeparserImpl(packet_out pk, out empty_t clone_i2e_meta, out empty_t resubmit_meta,
                            out empty_t normal_meta, inout headers_t hdr, in meta_t m,
                            in psa_ingress_output_metadata_t istd) {
    apply { pk.emit(hdr.ethernet); pk.emit(hdr.probe); }
}

parser EgressParserImpl(packet_in pk, out headers_t hdr, inout meta_t m,
                        in psa_egress_parser_input_metadata_t istd,
                        in empty_t normal_meta, in empty_t clone_i2e_meta, in empty_t clone_e2e_meta) {
    state start { pk.extract(hdr.ethernet); pk.extract(hdr.probe); transition accept; }
}

control EgressImpl(inout headers_t hdr, inout meta_t m,
                   in psa_egress_input_metadata_t istd,
                   inout psa_egress_output_metadata_t ostd) {
    apply {
        if (istd.packet_path == PSA_PacketPath_t.NORMAL_UNICAST) {
            hdr.probe.path_out = 1;
        } else if (istd.packet_path == PSA_PacketPath_t.NORMAL_MULTICAST) {
            hdr.probe.path_out = 2;
            hdr.probe.reg = (bit<8>) istd.instance;
        } else if (istd.packet_path == PSA_PacketPath_t.CLONE_I2E) {
            hdr.probe.path_out = 3;
        } else if (istd.packet_path == PSA_PacketPath_t.CLONE_E2E) {
            hdr.probe.path_out = 4;
        }
        if (hdr.probe.op == 6 && istd.packet_path == PSA_PacketPath_t.NORMAL_UNICAST) {
            // The clone is of the frame as the deparser writes it: flags 0x40 travel with it.
            hdr.probe.flags = 0x40;
            ostd.clone = true;
            ostd.clone_session_id = (CloneSessionId_t) 6;
        }
    }
}

control EgressDeparserImpl(packet_out pk, out empty_t clone_e2e_meta, out empty_t recirculate_meta,
                           inout headers_t hdr, in meta_t m, in psa_egress_output_metadata_t istd,
                           in psa_egress_deparser_input_metadata_t edstd) {
    apply {
        if (psa_recirculate(istd, edstd)) {
            hdr.probe.flags = hdr.probe.flags | 0x80;
        }
        pk.emit(hdr.ethernet);
        pk.emit(hdr.probe);
    }
}

IngressPipeline(IngressParserImpl(), IngressImpl(), IngressDeparserImpl()) ip;
EgressPipeline(EgressParserImpl(), EgressImpl(), EgressDeparserImpl()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
