//! The datagrams the transport sends and receives: [INT] BTH [DETH] [RETH] [AtomicETH] [AETH]
//! [AtomicAckETH] [ImmDt] payload pad ICRC, and for data, the IPv4 and UDP headers in front
//! (written here, as a RoCE NIC writes them, and sent on a raw socket; the kernel adds only
//! Ethernet).
//!
//! The ICRC covers IPv4 and UDP fields, so it is computed over the headers as a RoCE receiver
//! sees them: version 4, IHL 5, ID 0 and DF, protocol 17, the addresses, the ports with
//! destination 4791, and the lengths, all as if the INT were not there (the frame the sink
//! restores). What [`write_ipv4`] writes is exactly that, and so is what Linux writes for the
//! UDP sockets ACKs leave on (unconnected, IP_PMTUDISC_DO: ID 0). The receiver checks received
//! datagrams the same way.

use std::net::Ipv4Addr;

use int_format::int::IntHeaders;
use int_format::roles::source;
// The extension headers a packet is built with, as int-format writes and reads them.
pub use int_format::roce::Extensions;
use int_format::roce::{Bth, BthRepr, ROCEV2_PORT, icrc};
use int_format::{Error, Layer, Result};

/// Ethernet + IPv4 + UDP bytes the kernel adds to every datagram.
pub const WIRE_OVERHEAD: u64 = 14 + 20 + 8;

/// The addresses and ports of a datagram, which the ICRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addressing {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
}

/// The IPv4 and UDP headers Linux writes for `roce_len` bytes of RoCE (BTH to ICRC).
fn predicted_headers(a: &Addressing, roce_len: usize) -> ([u8; 20], [u8; 8]) {
    let udp_len = (8 + roce_len) as u16;
    let total = 20 + udp_len;
    let mut ip = [0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[12..16].copy_from_slice(&a.src.octets());
    ip[16..20].copy_from_slice(&a.dst.octets());
    let mut udp = [0u8; 8];
    udp[0..2].copy_from_slice(&a.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&ROCEV2_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    (ip, udp)
}

/// The ICRC a receiver expects of `roce` (BTH up to, not including, the ICRC) sent with
/// addressing `a`.
pub fn icrc_for(a: &Addressing, roce: &[u8]) -> Result<u32> {
    let (ip, udp) = predicted_headers(a, roce.len() + icrc::ICRC_LEN);
    icrc::compute_parts(&ip, &udp, roce)
}

/// Writes a whole UDP payload into `buf` and returns its length: the INT header first when
/// `int` is given, then BTH (pad count filled in), the extension headers, `payload`, pad and
/// ICRC.
pub fn write(
    buf: &mut [u8],
    a: &Addressing,
    int: Option<&source::SourceConfig>,
    bth: &BthRepr,
    ext: Extensions,
    payload: &[u8],
) -> Result<usize> {
    ext.check(bth.opcode)?;
    let int_len = match int {
        Some(cfg) => source::write_header(buf, cfg, ROCEV2_PORT)?,
        None => 0,
    };
    let ext_len = bth.opcode.extension_len();
    let pad = (4 - payload.len() % 4) % 4;
    let roce_len = Bth::<&[u8]>::LEN + ext_len + payload.len() + pad;
    let total = int_len + roce_len + icrc::ICRC_LEN;
    if buf.len() < total {
        return Err(Error::NoRoom {
            need: total,
            capacity: buf.len(),
        });
    }
    let roce = &mut buf[int_len..int_len + roce_len];
    BthRepr {
        pad_count: pad as u8,
        ..*bth
    }
    .emit(&mut Bth::new_unchecked(&mut roce[..]));
    let mut at = Bth::<&[u8]>::LEN;
    at += ext.emit(bth.opcode, &mut roce[at..]);
    debug_assert_eq!(at, Bth::<&[u8]>::LEN + ext_len);
    roce[at..at + payload.len()].copy_from_slice(payload);
    roce[at + payload.len()..].fill(0);
    let crc = icrc_for(a, roce)?;
    buf[int_len + roce_len..total].copy_from_slice(&crc.to_le_bytes());
    Ok(total)
}

/// Bytes of the IPv4 and UDP headers [`write_ipv4`] puts in front.
pub const IPV4_UDP_HEADERS: usize = 28;

/// Writes a whole IPv4 packet into `buf` and returns its length: the IPv4 header (TOS `tos`,
/// ID 0, DF, TTL 64, header checksum), the UDP header (from `a.src_port` to `dst_port`, checksum
/// 0, as RoCEv2 sends), then what [`write`] writes.
#[allow(clippy::too_many_arguments)]
pub fn write_ipv4(
    buf: &mut [u8],
    a: &Addressing,
    dst_port: u16,
    tos: u8,
    int: Option<&source::SourceConfig>,
    bth: &BthRepr,
    ext: Extensions,
    payload: &[u8],
) -> Result<usize> {
    if buf.len() < IPV4_UDP_HEADERS {
        return Err(Error::NoRoom {
            need: IPV4_UDP_HEADERS,
            capacity: buf.len(),
        });
    }
    let body = write(&mut buf[IPV4_UDP_HEADERS..], a, int, bth, ext, payload)?;
    buf[..IPV4_UDP_HEADERS].copy_from_slice(&ipv4_udp_headers(a, dst_port, tos, body));
    Ok(IPV4_UDP_HEADERS + body)
}

/// The IPv4 and UDP headers Linux puts in front of `body` bytes sent from `a.src_port` to
/// `dst_port` with TOS `tos` (ID 0, DF, TTL 64, header checksum; UDP checksum 0, as RoCEv2
/// sends): what [`write_ipv4`] writes itself, and what a kernel socket adds to a reply.
pub fn ipv4_udp_headers(a: &Addressing, dst_port: u16, tos: u8, body: usize) -> [u8; IPV4_UDP_HEADERS] {
    let (mut ip, mut udp) = predicted_headers(a, body);
    let total = (IPV4_UDP_HEADERS + body) as u16;
    ip[1] = tos;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let c = int_format::checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    udp[2..4].copy_from_slice(&dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + body) as u16).to_be_bytes());
    let mut headers = [0u8; IPV4_UDP_HEADERS];
    headers[..20].copy_from_slice(&ip);
    headers[20..].copy_from_slice(&udp);
    headers
}

/// A received RoCE datagram, read in place.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The INT the datagram carried (data packets sent to the INT port).
    pub int: Option<IntHeaders<'a>>,
    /// The raw INT bytes (shim, MD header, hops), for echoing.
    pub int_bytes: &'a [u8],
    /// The BTH.
    pub bth: BthRepr,
    /// The extension headers the opcode has (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt).
    pub ext: Extensions,
    /// Payload, pad excluded (for an ACK: the echoed INT bytes).
    pub payload: &'a [u8],
}

/// Parses a UDP payload received on the RoCE port (`via_int` false) or the INT port (true) and
/// verifies its ICRC against addressing `a`.
pub fn parse<'a>(datagram: &'a [u8], via_int: bool, a: &Addressing) -> Result<Received<'a>> {
    let (int, int_len) = if via_int {
        let int = IntHeaders::parse(datagram)?;
        if int.shim.npt != 1 || int.shim.next_field != ROCEV2_PORT {
            return Err(Error::Malformed {
                layer: Layer::IntShim,
                what: "INT does not wrap RoCEv2",
            });
        }
        (Some(int), int.wire_len())
    } else {
        (None, 0)
    };
    let roce_all = &datagram[int_len..];
    if roce_all.len() < Bth::<&[u8]>::LEN + icrc::ICRC_LEN {
        return Err(Error::Truncated {
            layer: Layer::Bth,
            need: 16,
            have: roce_all.len(),
        });
    }
    let (roce, crc) = roce_all.split_at(roce_all.len() - icrc::ICRC_LEN);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if icrc_for(a, roce)? != stored {
        return Err(Error::Malformed {
            layer: Layer::Icrc,
            what: "ICRC mismatch",
        });
    }
    let bth = BthRepr::parse(&Bth::new_checked(roce)?)?;
    let op = bth.opcode;
    let (ext, n) = Extensions::parse(op, &roce[Bth::<&[u8]>::LEN..])?;
    let at = Bth::<&[u8]>::LEN + n;
    let pad = usize::from(bth.pad_count);
    if roce.len() < at + pad {
        return Err(Error::Truncated {
            layer: Layer::Bth,
            need: at + pad,
            have: roce.len(),
        });
    }
    Ok(Received {
        int,
        int_bytes: &datagram[..int_len],
        bth,
        ext,
        payload: &roce[at..roce.len() - pad],
    })
}

#[cfg(test)]
mod tests {
    use int_format::ethernet::MacAddress;
    use int_format::frame::RoceFrameRepr;
    use int_format::int::{DEFAULT_INT_PORT, Instructions};
    use int_format::roce::{AethRepr, Opcode, RethRepr, Syndrome};

    use super::*;

    fn addressing() -> Addressing {
        Addressing {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            src_port: 49153,
        }
    }

    /// What we put in a UDP payload equals, byte for byte, the RoCE part of the frame int-format
    /// builds with the same headers (ID 0, DF), whose ICRC int-format computes itself.
    #[test]
    fn icrc_matches_a_whole_frame_built_by_int_format() {
        let a = addressing();
        let bth = BthRepr::new(Opcode::WriteFirst, 9, 77);
        let reth = RethRepr {
            virtual_addr: 0,
            rkey: 1,
            dma_len: 5000,
        };
        let payload: Vec<u8> = (0..1021).map(|i| i as u8).collect();
        let mut ours = [0u8; 2048];
        let n = write(&mut ours, &a, None, &bth, Extensions::reth(reth), &payload).unwrap();
        let mut frame = RoceFrameRepr::new(
            (MacAddress::default(), a.src),
            (MacAddress::default(), a.dst),
            a.src_port,
            bth,
        );
        frame.reth = Some(reth);
        let mut whole = [0u8; 2048];
        let len = frame.emit(&mut whole, &payload).unwrap();
        assert_eq!(&ours[..n], &whole[42..len]);
    }

    #[test]
    fn int_data_and_ack_round_trip() {
        let a = addressing();
        let cfg = source::SourceConfig {
            int_port: DEFAULT_INT_PORT,
            instructions: Instructions::HPCC,
            hop_limit: 8,
        };
        let mut buf = [0u8; 2048];
        let n = write(
            &mut buf,
            &a,
            Some(&cfg),
            &BthRepr::new(Opcode::WriteMiddle, 9, 78),
            Extensions::NONE,
            &[7; 1024],
        )
        .unwrap();
        let r = parse(&buf[..n], true, &a).unwrap();
        assert_eq!(r.bth.psn, 78);
        assert_eq!(r.payload, &[7; 1024][..]);
        assert_eq!(r.int.unwrap().hop_count(), 0);
        assert!(parse(&buf[..n], false, &a).is_err(), "INT bytes are not a BTH");
        let echo = r.int_bytes.to_vec();
        let ack = AethRepr {
            syndrome: Syndrome::Ack { credits: 31 },
            msn: 1,
        };
        let back = Addressing {
            src: a.dst,
            dst: a.src,
            src_port: ROCEV2_PORT,
        };
        let n = write(
            &mut buf,
            &back,
            None,
            &BthRepr::new(Opcode::Acknowledge, 9, 78),
            Extensions::aeth(ack),
            &echo,
        )
        .unwrap();
        let r = parse(&buf[..n], false, &back).unwrap();
        assert_eq!(r.ext.aeth, Some(ack));
        assert_eq!(r.payload, &echo[..]);
        // The same bytes from another source port fail the ICRC.
        assert!(matches!(
            parse(&buf[..n], false, &a),
            Err(Error::Malformed { layer: Layer::Icrc, .. })
        ));
    }

    #[test]
    fn cnp_is_the_standard_one() {
        let a = addressing();
        let mut buf = [0u8; 64];
        let n = write(
            &mut buf,
            &a,
            None,
            &BthRepr::new(Opcode::Cnp, 5, 0),
            Extensions::NONE,
            &[],
        )
        .unwrap();
        assert_eq!(n, 12 + 16 + 4);
        let r = parse(&buf[..n], false, &a).unwrap();
        assert!(r.bth.becn);
    }

    #[test]
    fn every_extension_header_round_trips_in_order() {
        use int_format::roce::{AtomicAckEth, AtomicEthRepr, DethRepr, ImmDt};
        let a = addressing();
        let mut buf = [0u8; 256];
        let ud = Extensions {
            deth: Some(DethRepr {
                qkey: 0x1111,
                src_qp: 0x42,
            }),
            immdt: Some(ImmDt(0xabcd)),
            ..Extensions::NONE
        };
        let n = write(
            &mut buf,
            &a,
            None,
            &BthRepr::new(Opcode::UdSendOnlyImm, 9, 1),
            ud,
            b"hello",
        )
        .unwrap();
        let r = parse(&buf[..n], false, &a).unwrap();
        assert_eq!((r.ext.deth, r.ext.immdt, r.payload), (ud.deth, ud.immdt, &b"hello"[..]));
        let atomic = Extensions {
            atomic: Some(AtomicEthRepr {
                virtual_addr: 8,
                rkey: 3,
                swap_add: 5,
                compare: 6,
            }),
            ..Extensions::NONE
        };
        let n = write(
            &mut buf,
            &a,
            None,
            &BthRepr::new(Opcode::CompareSwap, 9, 2),
            atomic,
            &[],
        )
        .unwrap();
        assert_eq!(parse(&buf[..n], false, &a).unwrap().ext.atomic, atomic.atomic);
        let ack = Extensions {
            aeth: Some(AethRepr {
                syndrome: Syndrome::Ack { credits: 31 },
                msn: 4,
            }),
            atomic_ack: Some(AtomicAckEth(77)),
            ..Extensions::NONE
        };
        let n = write(
            &mut buf,
            &a,
            None,
            &BthRepr::new(Opcode::AtomicAcknowledge, 9, 2),
            ack,
            &[],
        )
        .unwrap();
        let r = parse(&buf[..n], false, &a).unwrap();
        assert_eq!((r.ext.aeth, r.ext.atomic_ack), (ack.aeth, ack.atomic_ack));
        assert!(
            write(
                &mut buf,
                &a,
                None,
                &BthRepr::new(Opcode::WriteOnly, 9, 2),
                Extensions::NONE,
                &[]
            )
            .is_err(),
            "a WRITE ONLY needs its RETH"
        );
    }

    #[test]
    fn garbage_never_panics() {
        let a = addressing();
        let mut x = 0x1234_5678u32;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = parse(&bytes, false, &a);
            let _ = parse(&bytes, true, &a);
        }
    }
}
