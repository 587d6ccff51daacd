//! The three INT roles on whole RoCEv2 frames.

use std::net::Ipv4Addr;

use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{HopRecord, Instructions};
use int_format::roce::{BthRepr, Opcode, RethRepr};
use int_format::roles::transit::PushOutcome;
use int_format::roles::{sink, source, transit};
use int_format::udp::UdpPacket;
use int_format::{Error, Layer};

const PORT: u16 = 5790;

fn write_first(buf: &mut [u8], payload_len: usize) -> usize {
    let src = (MacAddress([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(198, 18, 0, 1));
    let dst = (MacAddress([2, 0, 0, 0, 0, 2]), Ipv4Addr::new(198, 18, 0, 2));
    let mut repr = RoceFrameRepr::new(src, dst, 50000, BthRepr::new(Opcode::WriteFirst, 77, 1000));
    repr.reth = Some(RethRepr {
        virtual_addr: 0,
        rkey: 1,
        dma_len: 1 << 20,
    });
    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
    repr.emit(buf, &payload).unwrap()
}

fn hop(n: u64) -> HopRecord {
    HopRecord {
        node_id: Some(n as u32),
        ingress_port: Some(1),
        egress_port: Some(2),
        hop_latency: Some(500),
        queue_id: Some(0),
        queue_occupancy: Some(1500 * n as u32),
        egress_ts: Some(1_000_000 * n),
        tx_bytes: Some(10_000 * n),
        rate_kbps: Some(200_000),
        ..HopRecord::default()
    }
}

fn source_config(hop_limit: u8) -> source::SourceConfig {
    source::SourceConfig {
        int_port: PORT,
        instructions: Instructions::FULL,
        hop_limit,
    }
}

#[test]
fn source_transit_sink_round_trip_restores_the_frame() {
    let mut buf = vec![0u8; 4096];
    let len0 = write_first(&mut buf, 1024);
    let original = buf[..len0].to_vec();

    let layout = FrameLayout::parse(&buf[..len0], PORT).unwrap();
    let mut len = source::insert(&mut buf, &layout, &source_config(8)).unwrap();
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    assert!(layout.has_int());
    assert_eq!(layout.dst_port, 4791);
    assert!(
        layout.icrc(&buf[..len]).unwrap().is_ok(),
        "ICRC must verify with INT virtually stripped"
    );

    for n in 1..=3 {
        let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
        let push = transit::push_hop(&mut buf, &layout, &hop(n), 9000).unwrap();
        assert_eq!(push.outcome, PushOutcome::Pushed);
        len = push.len;
    }
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    let int = layout.int(&buf[..len]).unwrap().unwrap();
    assert_eq!(int.md.remaining_hops, 5);
    let hops: Vec<HopRecord> = int.hops().collect::<Result<_, _>>().unwrap();
    assert_eq!(hops, vec![hop(3), hop(2), hop(1)], "newest hop first");
    assert!(layout.icrc(&buf[..len]).unwrap().is_ok());

    let len = sink::strip(&mut buf, &layout).unwrap();
    assert_eq!(&buf[..len], &original[..]);
}

#[test]
fn present_udp_checksum_is_kept_right() {
    let mut buf = vec![0u8; 4096];
    let len0 = write_first(&mut buf, 100);
    {
        let mut udp = UdpPacket::new_unchecked(&mut buf[34..len0]);
        udp.fill_checksum(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    }
    let check = |buf: &[u8], len: usize| {
        UdpPacket::new_checked(&buf[34..len])
            .unwrap()
            .verify_checksum(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))
    };
    let layout = FrameLayout::parse(&buf[..len0], PORT).unwrap();
    let len = source::insert(&mut buf, &layout, &source_config(1)).unwrap();
    assert!(check(&buf, len));
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    let len = transit::push_hop(&mut buf, &layout, &hop(1), 9000).unwrap().len;
    assert!(check(&buf, len));
    // Hop limit now 0: E is set and the checksum still holds.
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    let push = transit::push_hop(&mut buf, &layout, &hop(2), 9000).unwrap();
    assert_eq!(push.outcome, PushOutcome::HopLimitExceeded);
    assert!(check(&buf, push.len));
    let layout = FrameLayout::parse(&buf[..push.len], PORT).unwrap();
    assert!(layout.int(&buf[..push.len]).unwrap().unwrap().md.hop_limit_exceeded);
    let len = sink::strip(&mut buf, &layout).unwrap();
    assert!(check(&buf, len));
}

#[test]
fn mtu_exceeded_sets_m_and_adds_nothing() {
    let mut buf = vec![0u8; 4096];
    let len0 = write_first(&mut buf, 1400);
    let layout = FrameLayout::parse(&buf[..len0], PORT).unwrap();
    let len = source::insert(&mut buf, &layout, &source_config(8)).unwrap();
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    let ip_len = len - 14;
    let push = transit::push_hop(&mut buf, &layout, &hop(1), ip_len + 10).unwrap();
    assert_eq!(push.outcome, PushOutcome::MtuExceeded);
    assert_eq!(push.len, len);
    let int = FrameLayout::parse(&buf[..len], PORT)
        .unwrap()
        .int(&buf[..len])
        .unwrap()
        .unwrap();
    assert!(int.md.mtu_exceeded && int.hop_count() == 0 && int.md.remaining_hops == 8);
}

#[test]
fn roles_refuse_frames_they_do_not_apply_to() {
    let mut buf = vec![0u8; 4096];
    let len = write_first(&mut buf, 10);
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    assert!(matches!(
        transit::push_hop(&mut buf, &layout, &hop(1), 1500),
        Err(Error::NotApplicable {
            layer: Layer::IntShim,
            ..
        })
    ));
    assert!(matches!(
        sink::strip(&mut buf, &layout),
        Err(Error::NotApplicable { .. })
    ));
    let len = source::insert(&mut buf, &layout, &source_config(4)).unwrap();
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    assert!(matches!(
        source::insert(&mut buf, &layout, &source_config(4)),
        Err(Error::NotApplicable { .. })
    ));
    // No room for another hop in a buffer cut to the frame.
    assert!(matches!(
        transit::push_hop(&mut buf[..len], &layout, &hop(1), 9000),
        Err(Error::NoRoom { .. })
    ));
}

#[test]
fn hop_ml_that_disagrees_with_instructions_is_malformed() {
    let mut buf = vec![0u8; 4096];
    let len = write_first(&mut buf, 10);
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    let len = source::insert(&mut buf, &layout, &source_config(4)).unwrap();
    buf[14 + 20 + 8 + 4 + 2] = 3; // Hop ML 3 where FULL needs 9
    let layout = FrameLayout::parse(&buf[..len], PORT).unwrap();
    assert!(matches!(
        transit::push_hop(&mut buf, &layout, &hop(1), 9000),
        Err(Error::Malformed {
            layer: Layer::IntMd,
            ..
        })
    ));
}
