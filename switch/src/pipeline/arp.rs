//! Answering ARP requests from the configured neighbour table (proxy ARP with the host's own MAC),
//! so hosts resolve each other without broadcasts crossing the fabric.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use int_format::ethernet::{EthernetFrame, MacAddress, ethertype};

const ARP_LEN: usize = 28;
const MIN_FRAME: usize = 60;

/// Rewrites an ARP request in `buf[..len]` into the reply for a known target and returns the
/// reply's length; `None` when it is not an IPv4-over-Ethernet request for a known address.
pub fn answer(buf: &mut [u8], len: usize, neighbors: &HashMap<Ipv4Addr, MacAddress>) -> Option<usize> {
    if len < 14 + ARP_LEN || buf.len() < MIN_FRAME {
        return None;
    }
    let arp = &buf[14..14 + ARP_LEN];
    // htype 1 (Ethernet), ptype IPv4, hlen 6, plen 4, operation 1 (request).
    if arp[..8] != [0, 1, 8, 0, 6, 4, 0, 1] {
        return None;
    }
    let sender_mac: [u8; 6] = arp[8..14].try_into().ok()?;
    let sender_ip: [u8; 4] = arp[14..18].try_into().ok()?;
    let target_ip: [u8; 4] = arp[24..28].try_into().ok()?;
    let target_mac = *neighbors.get(&Ipv4Addr::from(target_ip))?;
    if Ipv4Addr::from(target_ip) == Ipv4Addr::from(sender_ip) {
        return None; // gratuitous ARP
    }
    let mut eth = EthernetFrame::new_unchecked(&mut *buf);
    eth.set_dst_addr(MacAddress(sender_mac));
    eth.set_src_addr(target_mac);
    eth.set_ethertype(ethertype::ARP);
    let arp = &mut buf[14..14 + ARP_LEN];
    arp[7] = 2; // reply
    arp[8..14].copy_from_slice(&target_mac.0);
    arp[14..18].copy_from_slice(&target_ip);
    arp[18..24].copy_from_slice(&sender_mac);
    arp[24..28].copy_from_slice(&sender_ip);
    buf[14 + ARP_LEN..MIN_FRAME].fill(0);
    Some(MIN_FRAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_for_a_neighbour_becomes_its_reply() {
        let mut f = [0u8; 64];
        f[..6].fill(0xff);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[8, 6]);
        f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f[22..28].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[28..32].copy_from_slice(&[198, 18, 0, 1]);
        f[38..42].copy_from_slice(&[198, 18, 0, 2]);
        let n = HashMap::from([(Ipv4Addr::new(198, 18, 0, 2), MacAddress([2, 0, 0, 0, 0, 2]))]);
        assert_eq!(answer(&mut f, 42, &n), Some(60));
        assert_eq!(&f[..6], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(f[21], 2);
        assert_eq!(&f[22..28], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(&f[28..32], &[198, 18, 0, 2]);
        assert_eq!(&f[38..42], &[198, 18, 0, 1]);
        // Unknown target: no answer.
        f[38..42].copy_from_slice(&[198, 18, 0, 9]);
        f[21] = 1;
        assert_eq!(answer(&mut f, 42, &n), None);
    }
}
