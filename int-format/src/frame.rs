//! Whole frames: where each layer sits, the length fix-ups INT roles share, and a builder for
//! complete RoCEv2 frames.

use crate::error::{Error, Layer, Result, need};
use std::net::Ipv4Addr;

use crate::ethernet::{EthernetFrame, EthernetRepr, MacAddress, ethertype};
use crate::field::{set_u16, u16_at};
use crate::int::IntHeaders;
use crate::ipv4::{Ecn, Ipv4Packet, Ipv4Repr, PROTOCOL_UDP};
use crate::roce::{
    AethRepr, AtomicAckEth, AtomicEthRepr, Bth, BthRepr, DethRepr, Extensions, ImmDt, ROCEV2_PORT, RethRepr, icrc,
};
use crate::udp::{UdpPacket, UdpRepr};

/// Where the layers of an Ethernet/IPv4/UDP frame sit, found by one pass over the headers.
///
/// Offsets are from the start of the frame. The IP header checksum and the UDP length are
/// checked; the UDP checksum is not (use [`UdpPacket::verify_checksum`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLayout {
    /// Offset of the IPv4 header.
    pub ip: usize,
    /// Length of the IPv4 header, options included.
    pub ip_header_len: usize,
    /// Offset of the UDP header.
    pub udp: usize,
    /// Bytes of INT (shim, MD header, stack) after the UDP header; 0 when there is none.
    pub int_len: usize,
    /// Offset of what follows the UDP header and any INT (the BTH for RoCEv2).
    pub transport: usize,
    /// End of the IP packet; bytes after it are Ethernet padding.
    pub end: usize,
    /// Destination port of the transport: the shim's original port when INT is present.
    pub dst_port: u16,
}

impl FrameLayout {
    /// Locates the layers of `frame`, treating UDP destination port `int_port` as INT (NPT=1).
    ///
    /// Non-IPv4 and non-UDP frames give [`Error::NotApplicable`]; broken headers give
    /// [`Error::Truncated`] or [`Error::Malformed`].
    pub fn parse(frame: &[u8], int_port: u16) -> Result<FrameLayout> {
        let eth = EthernetFrame::new_checked(frame)?;
        if eth.ethertype() != ethertype::IPV4 {
            return Err(Error::NotApplicable {
                layer: Layer::Ethernet,
                what: "not IPv4",
            });
        }
        let ip_off = EthernetFrame::<&[u8]>::HEADER_LEN;
        let ip = Ipv4Packet::new_checked(&frame[ip_off..])?;
        if !ip.verify_checksum() {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "bad header checksum",
            });
        }
        if ip.more_frags() || ip.frag_offset() != 0 {
            return Err(Error::NotApplicable {
                layer: Layer::Ipv4,
                what: "fragment",
            });
        }
        if ip.protocol() != PROTOCOL_UDP {
            return Err(Error::NotApplicable {
                layer: Layer::Ipv4,
                what: "not UDP",
            });
        }
        let ip_header_len = ip.header_len();
        let end = ip_off + usize::from(ip.total_len());
        let udp_off = ip_off + ip_header_len;
        let udp = UdpPacket::new_checked(&frame[udp_off..end])?;
        if usize::from(udp.len()) != end - udp_off {
            return Err(Error::Malformed {
                layer: Layer::Udp,
                what: "length disagrees with the IP total length",
            });
        }
        let after_udp = udp_off + UdpPacket::<&[u8]>::HEADER_LEN;
        let mut layout = FrameLayout {
            ip: ip_off,
            ip_header_len,
            udp: udp_off,
            int_len: 0,
            transport: after_udp,
            end,
            dst_port: udp.dst_port(),
        };
        if udp.dst_port() == int_port {
            let int = IntHeaders::parse(&frame[after_udp..end])?;
            if int.shim.npt != 1 {
                return Err(Error::Malformed {
                    layer: Layer::IntShim,
                    what: "NPT is not 1 on the INT port",
                });
            }
            layout.int_len = int.wire_len();
            layout.transport = after_udp + layout.int_len;
            layout.dst_port = int.shim.next_field;
        }
        Ok(layout)
    }

    /// True when the frame carries INT.
    pub fn has_int(&self) -> bool {
        self.int_len > 0
    }

    /// Offset of the INT shim (right after the UDP header).
    pub fn int_offset(&self) -> usize {
        self.udp + UdpPacket::<&[u8]>::HEADER_LEN
    }

    /// The INT of the frame, read in place.
    pub fn int<'a>(&self, frame: &'a [u8]) -> Option<Result<IntHeaders<'a>>> {
        self.has_int()
            .then(|| IntHeaders::parse(&frame[self.int_offset()..self.transport]))
    }

    /// True when the transport is RoCEv2 (destination port 4791, after INT if any).
    pub fn is_roce(&self) -> bool {
        self.dst_port == ROCEV2_PORT
    }

    /// Where the RoCEv2 headers, payload and ICRC sit.
    pub fn roce(&self, frame: &[u8]) -> Result<RoceLayout> {
        RoceLayout::parse(&frame[..self.end], self.transport)
    }

    /// The ICRC as stored and as computed over the frame with its INT virtually stripped.
    ///
    /// Stripping restores the original UDP destination port, UDP length and IP total length,
    /// which is exactly what the ICRC covered when the sender computed it.
    pub fn icrc(&self, frame: &[u8]) -> Result<IcrcCheck> {
        let packet = &frame[self.ip..self.end];
        let stored = icrc::stored(packet)?;
        let int_len = u16::try_from(self.int_len).map_err(|_| Error::Malformed {
            layer: Layer::IntShim,
            what: "INT too long",
        })?;
        let mut ip_header = [0u8; 60];
        let ip_header = &mut ip_header[..self.ip_header_len];
        ip_header.copy_from_slice(&frame[self.ip..self.udp]);
        let total = u16_at(ip_header, 2) - int_len;
        set_u16(ip_header, 2, total);
        let mut udp = [0u8; 8];
        udp.copy_from_slice(&frame[self.udp..self.udp + 8]);
        set_u16(&mut udp, 2, self.dst_port);
        let udp_len = u16_at(&udp, 4) - int_len;
        set_u16(&mut udp, 4, udp_len);
        need(Layer::Icrc, self.transport + icrc::ICRC_LEN, self.end)?;
        let computed = icrc::compute_parts(ip_header, &udp, &frame[self.transport..self.end - icrc::ICRC_LEN])?;
        Ok(IcrcCheck { stored, computed })
    }
}

/// The stored and the computed ICRC of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcrcCheck {
    /// Value in the trailer.
    pub stored: u32,
    /// Value computed over the frame (INT virtually stripped).
    pub computed: u32,
}

impl IcrcCheck {
    /// True when they agree.
    pub fn is_ok(&self) -> bool {
        self.stored == self.computed
    }
}

/// Where the RoCEv2 headers of a frame sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceLayout {
    /// Offset of the BTH.
    pub bth: usize,
    /// Offset of the extension headers (right after the BTH).
    pub ext: usize,
    /// Offset of the payload.
    pub payload: usize,
    /// Payload length without pad bytes.
    pub payload_len: usize,
    /// Offset of the ICRC.
    pub icrc: usize,
}

impl RoceLayout {
    /// Locates BTH, extension headers, payload and ICRC in `packet[bth..]`; `packet` ends at
    /// the end of the IP packet.
    pub fn parse(packet: &[u8], bth: usize) -> Result<RoceLayout> {
        let b = Bth::new_checked(&packet[bth..])?;
        let ext = bth + Bth::<&[u8]>::LEN;
        let payload = ext + b.opcode().extension_len();
        let pad = usize::from(b.pad_count());
        need(Layer::Bth, payload + pad + icrc::ICRC_LEN, packet.len())?;
        let icrc = packet.len() - icrc::ICRC_LEN;
        Ok(RoceLayout {
            bth,
            ext,
            payload,
            payload_len: icrc - pad - payload,
            icrc,
        })
    }
}

/// Rewrites the IP total length (and header checksum) and the UDP length (and a present UDP
/// checksum) after the UDP payload grew or shrank to `new_end`.
pub(crate) fn fix_lengths(frame: &mut [u8], layout: &FrameLayout, new_end: usize) -> Result<()> {
    let total = u16::try_from(new_end - layout.ip).map_err(|_| Error::Malformed {
        layer: Layer::Ipv4,
        what: "total length over 65535",
    })?;
    let udp_len = total - layout.ip_header_len as u16;
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[layout.ip..new_end]);
    ip.set_total_len(total);
    ip.fill_checksum();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let mut udp = UdpPacket::new_unchecked(&mut frame[layout.udp..new_end]);
    udp.set_len(udp_len);
    udp.refresh_checksum(src, dst);
    Ok(())
}

/// Refreshes a present UDP checksum after bytes inside the datagram changed.
pub(crate) fn refresh_udp_checksum(frame: &mut [u8], layout: &FrameLayout) {
    let ip = Ipv4Packet::new_unchecked(&frame[layout.ip..layout.end]);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    UdpPacket::new_unchecked(&mut frame[layout.udp..layout.end]).refresh_checksum(src, dst);
}

/// The values of a whole RoCEv2 frame: Ethernet, IPv4, UDP, BTH, extension headers, payload,
/// pad and ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceFrameRepr {
    /// Ethernet header (the EtherType is written as IPv4).
    pub eth: EthernetRepr,
    /// IPv4 header (protocol and payload length are filled in).
    pub ip: Ipv4Repr,
    /// UDP source port (the destination is 4791).
    pub udp_src_port: u16,
    /// BTH (the pad count is filled in).
    pub bth: BthRepr,
    /// DETH, required exactly for the UD opcodes.
    pub deth: Option<DethRepr>,
    /// RETH, required exactly for the opcodes that carry one.
    pub reth: Option<RethRepr>,
    /// AtomicETH, required exactly for the atomic requests.
    pub atomic: Option<AtomicEthRepr>,
    /// AETH, required exactly for the opcodes that carry one.
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH, required exactly for ATOMIC ACKNOWLEDGE.
    pub atomic_ack: Option<AtomicAckEth>,
    /// Immediate data, required exactly for the *_IMM opcodes.
    pub immdt: Option<ImmDt>,
}

impl RoceFrameRepr {
    /// A frame from `src` to `dst` (MAC, IPv4) with the usual IP values (TTL 64, DSCP 0, ECT(0),
    /// ID 0, DF) and no extension headers; set `reth`, `aeth` or `immdt` as the opcode needs.
    pub fn new(
        src: (MacAddress, Ipv4Addr),
        dst: (MacAddress, Ipv4Addr),
        udp_src_port: u16,
        bth: BthRepr,
    ) -> RoceFrameRepr {
        RoceFrameRepr {
            eth: EthernetRepr {
                src: src.0,
                dst: dst.0,
                ethertype: ethertype::IPV4,
            },
            ip: Ipv4Repr {
                src: src.1,
                dst: dst.1,
                protocol: PROTOCOL_UDP,
                payload_len: 0,
                ttl: 64,
                dscp: 0,
                ecn: Ecn::Ect0,
                ident: 0,
                dont_frag: true,
            },
            udp_src_port,
            bth,
            deth: None,
            reth: None,
            atomic: None,
            aeth: None,
            atomic_ack: None,
            immdt: None,
        }
    }

    /// Length of the frame that carries `payload_len` bytes of payload.
    pub fn frame_len(&self, payload_len: usize) -> usize {
        let pad = (4 - payload_len % 4) % 4;
        EthernetFrame::<&[u8]>::HEADER_LEN
            + 20
            + 8
            + Bth::<&[u8]>::LEN
            + self.bth.opcode.extension_len()
            + payload_len
            + pad
            + icrc::ICRC_LEN
    }

    /// Writes the whole frame with `payload` into the front of `buf` and returns its length.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize> {
        let op = self.bth.opcode;
        let ext = Extensions {
            deth: self.deth,
            reth: self.reth,
            atomic: self.atomic,
            aeth: self.aeth,
            atomic_ack: self.atomic_ack,
            immdt: self.immdt,
        };
        ext.check(op)?;
        let len = self.frame_len(payload.len());
        if buf.len() < len {
            return Err(Error::NoRoom {
                need: len,
                capacity: buf.len(),
            });
        }
        let buf = &mut buf[..len];
        let pad = (4 - payload.len() % 4) % 4;

        let eth = EthernetRepr {
            ethertype: ethertype::IPV4,
            ..self.eth
        };
        eth.emit(&mut EthernetFrame::new_unchecked(&mut *buf));
        let ip_off = 14;
        let udp_off = ip_off + 20;
        let ip = Ipv4Repr {
            protocol: PROTOCOL_UDP,
            payload_len: len - udp_off,
            ..self.ip
        };
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[ip_off..]))?;
        let udp = UdpRepr {
            src_port: self.udp_src_port,
            dst_port: ROCEV2_PORT,
            payload_len: len - udp_off - 8,
        };
        udp.emit(&mut UdpPacket::new_unchecked(&mut buf[udp_off..]))?;

        let mut at = udp_off + 8;
        BthRepr {
            pad_count: pad as u8,
            ..self.bth
        }
        .emit(&mut Bth::new_unchecked(&mut buf[at..]));
        at += Bth::<&[u8]>::LEN;
        at += ext.emit(op, &mut buf[at..]);
        buf[at..at + payload.len()].copy_from_slice(payload);
        at += payload.len();
        buf[at..at + pad].fill(0);
        icrc::fill(&mut buf[ip_off..])?;
        Ok(len)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::roce::{NakCode, Opcode, Syndrome};

    /// A RoCE frame repr with plain defaults for tests.
    pub(crate) fn sample(opcode: Opcode, psn: u32) -> RoceFrameRepr {
        let src = (MacAddress([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(198, 18, 0, 1));
        let dst = (MacAddress([2, 0, 0, 0, 0, 2]), Ipv4Addr::new(198, 18, 0, 2));
        let mut r = RoceFrameRepr::new(src, dst, 49152, BthRepr::new(opcode, 0x12, psn));
        r.reth = opcode.has_reth().then_some(RethRepr {
            virtual_addr: 0x1000,
            rkey: 0xabcd,
            dma_len: 4096,
        });
        r.aeth = opcode.has_aeth().then_some(AethRepr {
            syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
            msn: 3,
        });
        r.immdt = opcode.has_immdt().then_some(ImmDt(0xdead_beef));
        r
    }

    #[test]
    fn built_frame_parses_back() {
        let repr = sample(Opcode::WriteFirst, 5);
        let mut buf = [0u8; 2048];
        let len = repr.emit(&mut buf, &[0x5a; 1001]).unwrap();
        let frame = &buf[..len];
        let l = FrameLayout::parse(frame, 5790).unwrap();
        assert!(l.is_roce() && !l.has_int());
        let r = l.roce(frame).unwrap();
        assert_eq!(r.payload_len, 1001);
        assert_eq!(
            BthRepr::parse(&Bth::new_checked(&frame[r.bth..]).unwrap())
                .unwrap()
                .pad_count,
            3
        );
        assert!(l.icrc(frame).unwrap().is_ok());
    }

    #[test]
    fn mismatched_extension_headers_are_refused() {
        let mut repr = sample(Opcode::WriteMiddle, 1);
        repr.reth = Some(RethRepr {
            virtual_addr: 0,
            rkey: 0,
            dma_len: 0,
        });
        assert!(matches!(repr.emit(&mut [0u8; 256], &[]), Err(Error::Malformed { .. })));
    }

    #[test]
    fn short_buffer_is_no_room() {
        let repr = sample(Opcode::SendOnly, 1);
        assert!(matches!(
            repr.emit(&mut [0u8; 40], &[1, 2, 3]),
            Err(Error::NoRoom { .. })
        ));
    }
}
