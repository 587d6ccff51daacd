//! Frames built by int-format, written to pcapng, decoded by tshark with our Lua dissector and by
//! `intlab inspect --json`: both must report exactly what was written.

use std::borrow::Cow;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{DEFAULT_INT_PORT, HopRecord, Instructions};
use int_format::roce::{AethRepr, BthRepr, NakCode, Opcode, RethRepr, Syndrome};
use int_format::roles::{source, transit};
use pcap_file::DataLink;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use serde_json::Value;

mod support;
use support::tshark_fields;

/// What the test wrote into one frame.
struct Expected {
    opcode: u8,
    qp: u32,
    psn: u32,
    hops: Vec<HopRecord>,
    icrc_ok: bool,
}

fn repr(opcode: Opcode, qp: u32, psn: u32) -> RoceFrameRepr {
    let src = (MacAddress([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(198, 18, 0, 1));
    let dst = (MacAddress([2, 0, 0, 0, 0, 2]), Ipv4Addr::new(198, 18, 0, 2));
    let mut bth = BthRepr::new(opcode, qp, psn);
    bth.ack_req = opcode != Opcode::Cnp && opcode != Opcode::Acknowledge;
    let mut r = RoceFrameRepr::new(src, dst, 49152 + qp as u16, bth);
    r.ip.dscp = 26;
    r.ip.ident = psn as u16;
    r.reth = opcode.has_reth().then_some(RethRepr {
        virtual_addr: 0x7f00_0000_1000,
        rkey: 0x1234,
        dma_len: 3000,
    });
    r
}

fn hop(n: u32) -> HopRecord {
    HopRecord {
        node_id: Some(100 + n),
        ingress_port: Some(n as u16),
        egress_port: Some(10 + n as u16),
        hop_latency: Some(1000 * n + 7),
        queue_id: Some(0),
        queue_occupancy: Some(1052 * n),
        egress_ts: Some(5_000_000_000 + 12_345 * u64::from(n)),
        tx_bytes: Some(1_000_000 * u64::from(n) + 3),
        rate_kbps: Some(25_000_000 * n),
        ..HopRecord::default()
    }
}

fn build_frames() -> (Vec<Vec<u8>>, Vec<Expected>) {
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    let payload: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();

    // RDMA WRITE FIRST with RETH, through an INT source and 3 transit hops.
    let mut buf = vec![0u8; 2048];
    let len = repr(Opcode::WriteFirst, 0x11, 100).emit(&mut buf, &payload).unwrap();
    let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).unwrap();
    let cfg = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions: Instructions::FULL,
        hop_limit: 8,
    };
    let mut len = source::insert(&mut buf, &layout, &cfg).unwrap();
    for n in 1..=3 {
        let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).unwrap();
        len = transit::push_hop(&mut buf, &layout, &hop(n), 1500).unwrap().len;
    }
    frames.push(buf[..len].to_vec());
    expected.push(Expected {
        opcode: 0x06,
        qp: 0x11,
        psn: 100,
        hops: vec![hop(3), hop(2), hop(1)],
        icrc_ok: true,
    });

    let mut push = |r: RoceFrameRepr, payload: &[u8], corrupt: bool| {
        let mut buf = vec![0u8; 2048];
        let len = r.emit(&mut buf, payload).unwrap();
        if corrupt {
            buf[len - 10] ^= 0x40;
        }
        frames.push(buf[..len].to_vec());
        expected.push(Expected {
            opcode: r.bth.opcode.to_u8(),
            qp: r.bth.dest_qp,
            psn: r.bth.psn,
            hops: vec![],
            icrc_ok: !corrupt,
        });
    };
    push(repr(Opcode::WriteMiddle, 0x11, 101), &payload, false);
    let mut ack = repr(Opcode::Acknowledge, 0x22, 101);
    ack.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn: 1,
    });
    push(ack, &[], false);
    let mut nak = repr(Opcode::Acknowledge, 0x22, 102);
    nak.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
        msn: 1,
    });
    push(nak, &[], false);
    push(repr(Opcode::Cnp, 0x33, 0), &[], false);
    push(repr(Opcode::WriteMiddle, 0x11, 103), &payload, true);
    (frames, expected)
}

fn write_pcapng(path: &Path, frames: &[Vec<u8>]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = PcapNgWriter::new(file).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![
            InterfaceDescriptionOption::IfName(Cow::Borrowed("test0")),
            InterfaceDescriptionOption::IfTsResol(9),
        ],
    })
    .unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(1_000_000_000 + i as u64 * 1000),
            original_len: f.len() as u32,
            data: Cow::Borrowed(f),
            options: vec![],
        })
        .unwrap();
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    dir.join(format!("{name}-{}.pcapng", std::process::id()))
}

const FIELDS: [&str; 9] = [
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "intlab_int.node_id",
    "intlab_int.qlen",
    "intlab_int.tx_bytes",
    "intlab_int.ts",
    "intlab_int.rate",
    "intlab_int.hop_latency",
];

fn numbers(s: &str) -> Vec<u64> {
    s.split(',').filter(|x| !x.is_empty()).map(parse_number).collect()
}

fn parse_number(x: &str) -> u64 {
    match x.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => x.parse().unwrap_or_else(|_| panic!("not a number: {x}")),
    }
}

#[test]
fn tshark_with_lua_and_inspect_report_what_was_written() {
    let (frames, expected) = build_frames();
    let pcap = scratch("wireshark-agrees");
    write_pcapng(&pcap, &frames);

    let rows = tshark_fields(&pcap, &[], &FIELDS);
    assert_eq!(rows.len(), expected.len(), "one row per frame");
    for (i, (row, exp)) in rows.iter().zip(&expected).enumerate() {
        assert_eq!(numbers(&row[0]), vec![u64::from(exp.opcode)], "frame {}: opcode", i + 1);
        assert_eq!(numbers(&row[1]), vec![u64::from(exp.qp)], "frame {}: QP", i + 1);
        assert_eq!(numbers(&row[2]), vec![u64::from(exp.psn)], "frame {}: PSN", i + 1);
        let hop_field = |f: fn(&HopRecord) -> u64| exp.hops.iter().map(f).collect::<Vec<_>>();
        assert_eq!(
            numbers(&row[3]),
            hop_field(|h| h.node_id.unwrap().into()),
            "frame {}: node ids",
            i + 1
        );
        assert_eq!(
            numbers(&row[4]),
            hop_field(|h| h.queue_occupancy.unwrap().into()),
            "frame {}: qlen",
            i + 1
        );
        assert_eq!(
            numbers(&row[5]),
            hop_field(|h| h.tx_bytes.unwrap()),
            "frame {}: txBytes",
            i + 1
        );
        assert_eq!(
            numbers(&row[6]),
            hop_field(|h| h.egress_ts.unwrap()),
            "frame {}: ts",
            i + 1
        );
        assert_eq!(
            numbers(&row[7]),
            hop_field(|h| h.rate_kbps.unwrap().into()),
            "frame {}: rate",
            i + 1
        );
        assert_eq!(
            numbers(&row[8]),
            hop_field(|h| h.hop_latency.unwrap().into()),
            "frame {}: hop latency",
            i + 1
        );
    }

    // Ports and the INT header of the first frame, and the NAK syndrome.
    let header = tshark_fields(
        &pcap,
        &["-Y", "intlab_int"],
        &[
            "intlab_int.ingress_port",
            "intlab_int.egress_port",
            "intlab_int.hops",
            "intlab_int.rhc",
            "intlab_int.orig_port",
            "intlab_int.bitmap",
            "intlab_int.domain_id",
            "infiniband.reth.dmalen",
        ],
    );
    assert_eq!(header.len(), 1, "exactly one frame carries INT");
    let h = &header[0];
    assert_eq!(numbers(&h[0]), vec![3, 2, 1]);
    assert_eq!(numbers(&h[1]), vec![13, 12, 11]);
    assert_eq!(numbers(&h[2]), vec![3]);
    assert_eq!(numbers(&h[3]), vec![5]);
    assert_eq!(numbers(&h[4]), vec![4791]);
    assert_eq!(numbers(&h[5]), vec![u64::from(Instructions::FULL.bitmap)]);
    assert_eq!(numbers(&h[6]), vec![0x494c]);
    assert_eq!(numbers(&h[7]), vec![3000]);
    let naks = tshark_fields(
        &pcap,
        &["-Y", "infiniband.aeth.syndrome == 0x60"],
        &["infiniband.bth.psn"],
    );
    assert_eq!(naks, vec![vec!["102".to_string()]]);

    // intlab inspect --json agrees, and flags the corrupted ICRC.
    let out = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .arg("inspect")
        .arg("--json")
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), expected.len());
    for (i, (rec, exp)) in records.iter().zip(&expected).enumerate() {
        let roce = &rec["roce"];
        assert_eq!(roce["opcode"], u64::from(exp.opcode), "frame {}", i + 1);
        assert_eq!(roce["dest_qp"], u64::from(exp.qp), "frame {}", i + 1);
        assert_eq!(roce["psn"], u64::from(exp.psn), "frame {}", i + 1);
        assert_eq!(roce["icrc"]["ok"], exp.icrc_ok, "frame {}: ICRC verdict", i + 1);
        let hops = rec["int"]["hops"].as_array().cloned().unwrap_or_default();
        assert_eq!(hops.len(), exp.hops.len(), "frame {}: hop count", i + 1);
        for (j, (got, want)) in hops.iter().zip(&tshark_row_hops(&rows[i])).enumerate() {
            for (k, key) in ["node_id", "qlen", "tx_bytes", "ts", "rate", "hop_latency"]
                .iter()
                .enumerate()
            {
                assert_eq!(
                    got[key].as_u64(),
                    Some(want[k]),
                    "frame {} hop {}: {key} disagrees with tshark",
                    i + 1,
                    j + 1
                );
            }
        }
    }
    assert_eq!(records[3]["roce"]["aeth"]["nak"], "PSN_SEQUENCE_ERROR");
    assert_eq!(records[4]["roce"]["becn"], true);

    let text = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .arg("inspect")
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert_eq!(text.lines().filter(|l| l.contains("ICRC BAD")).count(), 1, "{text}");
    let _ = std::fs::remove_file(&pcap);
}

/// The hop fields tshark gave for one frame, per hop: node, qlen, txBytes, ts, rate, latency.
fn tshark_row_hops(row: &[String]) -> Vec<[u64; 6]> {
    let cols: Vec<Vec<u64>> = (3..9).map(|c| numbers(&row[c])).collect();
    (0..cols[0].len())
        .map(|j| [cols[0][j], cols[1][j], cols[2][j], cols[3][j], cols[4][j], cols[5][j]])
        .collect()
}

#[test]
fn dissector_follows_another_int_port() {
    let (frames, _) = build_frames();
    let mut f = frames[0].clone();
    // Move the first frame to INT port 6000 (UDP checksum is zero, so nothing else changes).
    f[36..38].copy_from_slice(&6000u16.to_be_bytes());
    let pcap = scratch("other-port");
    write_pcapng(&pcap, &[f]);
    let rows = tshark_fields(
        &pcap,
        &["-o", "intlab_int.port:6000"],
        &["intlab_int.node_id", "infiniband.bth.psn"],
    );
    assert_eq!(rows, vec![vec!["103,102,101".to_string(), "100".to_string()]]);
    let out = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .args(["inspect", "--json", "--int-port", "6000"])
        .arg(&pcap)
        .output()
        .unwrap();
    let rec: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    assert_eq!(rec["int"]["hops"].as_array().map(Vec::len), Some(3));
    assert_eq!(rec["roce"]["icrc"]["ok"], true);
    let _ = std::fs::remove_file(&pcap);
}
