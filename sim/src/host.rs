//! A host in the simulator: the lab's transport stack, whose datagrams become Ethernet frames on its
//! link and whose received frames become datagrams, as the kernel would make them.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

use int_format::ethernet::{EthernetFrame, MacAddress, ethertype};
use int_format::ipv4::{Ipv4Packet, PROTOCOL_UDP};
use int_format::pfc::PfcFrame;
use int_format::roce::ROCEV2_PORT;
use int_format::udp::UdpPacket;
use intlab_transport::packet::{Addressing, ipv4_udp_headers};
use intlab_transport::pause::Pause;
use intlab_transport::socket::{ECT0, RecvMeta, SendBatch};
use intlab_transport::{HostStack, Wire};

/// Ethernet header bytes in front of each packet.
const ETHERNET: usize = 14;

/// The MAC of the host with address `ip` (the simulator routes on addresses; MACs only need to be
/// unicast and distinct).
pub(crate) fn mac_of(ip: Ipv4Addr) -> MacAddress {
    let o = ip.octets();
    MacAddress([0x02, 0x00, o[0], o[1], o[2], o[3]])
}

/// A host's packets as they leave it: IPv4 packets, headers included.
#[derive(Debug)]
pub(crate) struct MemoryWire {
    ip: Ipv4Addr,
    /// TOS of the replies (the RoCE socket's).
    tos: u8,
    pub(crate) out: Vec<Vec<u8>>,
}

impl Wire for MemoryWire {
    fn send_replies(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        let (ip, tos) = (self.ip, self.tos);
        let out = &mut self.out;
        Ok(batch.drain(|payload, dst| out.push(udp_packet(ip, dst, tos, payload))))
    }

    fn send_packets(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        let out = &mut self.out;
        Ok(batch.drain(|packet, _| out.push(packet.to_vec())))
    }
}

/// The IPv4 packet the kernel makes of `payload` sent from `src`'s RoCE port to `dst` with TOS
/// `tos`.
fn udp_packet(src: Ipv4Addr, dst: SocketAddrV4, tos: u8, payload: &[u8]) -> Vec<u8> {
    let a = Addressing {
        src,
        dst: *dst.ip(),
        src_port: ROCEV2_PORT,
    };
    let mut p = ipv4_udp_headers(&a, dst.port(), tos, payload.len()).to_vec();
    p.extend_from_slice(payload);
    p
}

/// A host of the simulator.
pub(crate) struct BedHost {
    pub(crate) stack: HostStack<MemoryWire>,
    pub(crate) mac: MacAddress,
    /// The switch port its link ends on: (switch, port).
    pub(crate) attached: Option<(usize, usize)>,
    /// When it next needs running, as last asked for.
    pub(crate) armed: Option<u64>,
    /// (when, bytes) of every frame it put on its link, when asked to keep them.
    pub(crate) link_log: Option<Vec<(u64, usize)>>,
}

impl BedHost {
    pub(crate) fn new(stack: HostStack<MemoryWire>) -> BedHost {
        BedHost {
            mac: mac_of(stack.config().ip),
            stack,
            attached: None,
            armed: None,
            link_log: None,
        }
    }

    /// The wire of a host with address `ip` sending replies with DSCP `dscp`.
    pub(crate) fn wire(ip: Ipv4Addr, dscp: u8) -> MemoryWire {
        MemoryWire {
            ip,
            tos: (dscp << 2) | ECT0,
            out: Vec::new(),
        }
    }

    /// The Ethernet frames of what it sent since last asked, in order.
    pub(crate) fn take_frames(&mut self) -> Vec<Vec<u8>> {
        let mac = self.mac;
        self.stack
            .wire_mut()
            .out
            .drain(..)
            .map(|packet| {
                let dst = Ipv4Packet::new_checked(&packet[..]).map_or(Ipv4Addr::UNSPECIFIED, |ip| ip.dst_addr());
                let mut frame = vec![0u8; ETHERNET + packet.len()];
                let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
                eth.set_dst_addr(mac_of(dst));
                eth.set_src_addr(mac);
                eth.set_ethertype(ethertype::IPV4);
                eth.payload_mut().copy_from_slice(&packet);
                frame
            })
            .collect()
    }

    /// Frame `frame` reached the host at `now`: a PFC frame pauses its NIC, a UDP datagram to
    /// its RoCE or INT port goes to the stack as the socket would hand it over; the rest is
    /// what a kernel would drop.
    pub(crate) fn receive(&mut self, frame: &[u8], now: u64) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return;
        };
        match eth.ethertype() {
            ethertype::MAC_CONTROL => {
                let Ok(pfc) = PfcFrame::new_checked(frame) else {
                    return;
                };
                let cfg = self.stack.config();
                let pause = pfc
                    .quanta(usize::from(cfg.priority))
                    .map(|quanta| Pause::of(now, quanta, cfg.line_rate_bps));
                self.stack.pauses(1, pause, now);
            }
            ethertype::IPV4 => {
                let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                    return;
                };
                if ip.protocol() != PROTOCOL_UDP {
                    return;
                }
                let Ok(udp) = UdpPacket::new_checked(ip.payload()) else {
                    return;
                };
                let int_port = self.stack.config().int_port;
                let (from, to) = (udp.src_port(), udp.dst_port());
                if to != ROCEV2_PORT && to != int_port {
                    return;
                }
                let end = usize::from(udp.len()).clamp(8, ip.payload().len());
                let payload = &ip.payload()[8..end];
                let meta = RecvMeta {
                    len: payload.len(),
                    truncated: false,
                    from: SocketAddrV4::new(ip.src_addr(), from),
                    tos: Some((ip.dscp() << 2) | ip.ecn().bits()),
                    realtime_ns: None,
                    vlan: None,
                };
                self.stack.datagram(payload, meta, to == int_port, now);
            }
            _ => {}
        }
    }
}
