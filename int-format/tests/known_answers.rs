//! Published byte-level answers reproduced from the packet bytes.

use int_format::frame::FrameLayout;
use int_format::int::{self, HopRecord, Instructions, IntHeaders};
use int_format::ipv4::Ipv4Packet;
use int_format::roce::{Bth, BthRepr, Opcode, icrc};
use int_format::roles::{source, transit};

fn hex(s: &str) -> Vec<u8> {
    let digits: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

/// A CNP captured on a ConnectX-4 Lx (scapy `test/contrib/roce.uts`): zlib CRC 0x2A00FD82,
/// on the wire `82 fd 00 2a`.
const CONNECTX_CNP: &str = "e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2
    003c 718c 4000 4011 9161 0a00 1101 0a00 1201 0000 12b7 0028 0000 8100 ffff 4000
    0118 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 82fd 002a";

#[test]
fn connectx_cnp_icrc_is_reproduced() {
    let frame = hex(CONNECTX_CNP);
    let ip = &frame[14..];
    assert_eq!(icrc::compute(ip).unwrap(), 0x2A00_FD82);
    assert_eq!(&ip[ip.len() - 4..], &[0x82, 0xfd, 0x00, 0x2a]);
    assert!(icrc::verify(ip).unwrap());

    let layout = FrameLayout::parse(&frame, int::DEFAULT_INT_PORT).unwrap();
    let bth = BthRepr::parse(&Bth::new_checked(&frame[layout.transport..]).unwrap()).unwrap();
    assert_eq!(bth.opcode, Opcode::Cnp);
    assert!(bth.becn && !bth.fecn && !bth.ack_req);
    assert_eq!((bth.dest_qp, bth.psn, bth.pkey), (0x0118, 0, 0xffff));
}

#[test]
fn cnp_icrc_ignores_fields_the_network_may_change() {
    let mut frame = hex(CONNECTX_CNP);
    frame[14 + 1] = 0x03; // TOS: CE
    frame[14 + 8] = 1; // TTL
    frame[14 + 20 + 8 + 4] = 0x80; // FECN instead of BECN
    assert!(icrc::verify(&frame[14..]).unwrap());
    frame[14 + 20 + 8 + 7] ^= 1; // destination QP is covered
    assert!(!icrc::verify(&frame[14..]).unwrap());
}

/// The UC SEND ONLY example of scapy's RoCE tests: IP checksum 0xb4d5, ICRC bytes 78 f3 53 f3.
#[test]
fn scapy_uc_send_only_icrc_is_reproduced() {
    let mut frame = hex("248a07a8fa22 248a07a8fa22 0800
        45 01 0040 0478 4000 40 11 b4d5 c0a80007 c0a80007
        c000 12b7 002c aca2
        24 60 ffff 00 0000d3 00 cf1710");
    frame.extend_from_slice(b"F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P\x00\x00");
    frame.extend_from_slice(&[0; 4]);
    assert!(Ipv4Packet::new_checked(&frame[14..]).unwrap().verify_checksum());
    icrc::fill(&mut frame[14..]).unwrap();
    assert_eq!(&frame[frame.len() - 4..], &[0x78, 0xf3, 0x53, 0xf3]);
}

/// INT v2.1 sections 6.1/6.5: after 2 of at most 8 hops with bitmap 0x9000 (node ID, queue),
/// shim Length 7, Hop ML 2, remaining hop count 6; the stack is hop 2 then hop 1.
#[test]
fn int_v2_1_worked_example_is_built_byte_for_byte() {
    // A UDP datagram to port 4791 with 4 bytes of payload, no checksum.
    let mut buf = vec![0u8; 256];
    let plain = hex("020000000002 020000000001 0800
        45 00 0020 0001 4000 40 11 0000 c6120001 c6120002
        c000 12b7 000c 0000  01020304");
    buf[..plain.len()].copy_from_slice(&plain);
    int_format::ipv4::Ipv4Packet::new_unchecked(&mut buf[14..plain.len()]).fill_checksum();
    let mut len = plain.len();

    let port = int::DEFAULT_INT_PORT;
    let ins = Instructions {
        bitmap: 0x9000,
        domain_id: 0,
        ds_instructions: 0,
    };
    let layout = FrameLayout::parse(&buf[..len], port).unwrap();
    len = source::insert(
        &mut buf,
        &layout,
        &source::SourceConfig {
            int_port: port,
            instructions: ins,
            hop_limit: 8,
        },
    )
    .unwrap();
    for (node, occupancy) in [(0x11u32, 0x000100u32), (0x22, 0x000200)] {
        let hop = HopRecord {
            node_id: Some(node),
            queue_id: Some(node as u8),
            queue_occupancy: Some(occupancy),
            ..HopRecord::default()
        };
        let layout = FrameLayout::parse(&buf[..len], port).unwrap();
        let push = transit::push_hop(&mut buf, &layout, &hop, 1500).unwrap();
        assert_eq!(push.outcome, transit::PushOutcome::Pushed);
        len = push.len;
    }

    let expected = hex("
        14 07 12b7
        20 00 02 06   9000 0000   0000 0000
        00000022 22 000200
        00000011 11 000100");
    let int_at = 14 + 20 + 8;
    assert_eq!(&buf[int_at..int_at + expected.len()], &expected[..]);
    assert_eq!(&buf[int_at + expected.len()..len], &[1, 2, 3, 4]);
    // UDP destination port is the INT port; lengths grew by 4 + 12 + 2 × 8 bytes.
    assert_eq!(u16::from_be_bytes([buf[36], buf[37]]), port);
    assert_eq!(u16::from_be_bytes([buf[38], buf[39]]), 12 + 32);
    assert_eq!(u16::from_be_bytes([buf[16], buf[17]]), 32 + 32);
    assert!(Ipv4Packet::new_checked(&buf[14..len]).unwrap().verify_checksum());
    let int = IntHeaders::parse(&buf[int_at..len]).unwrap();
    assert_eq!(int.hop_count(), 2);
}
