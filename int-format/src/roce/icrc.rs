//! The RoCEv2 Invariant CRC.
//!
//! CRC-32 (the zlib polynomial) over 8 bytes of 0xFF standing in for the InfiniBand LRH, then the
//! IP header, UDP header, BTH and everything up to the ICRC, with the fields a network may change
//! set to all ones: IPv4 TOS, TTL and header checksum; UDP checksum; BTH byte 4 (FECN, BECN).
//! On the wire the CRC is stored least significant byte first (as Linux rxe does).

use crate::error::{Error, Layer, Result, need};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

const IPV4_MAX_HEADER: usize = 60;

/// Computes the ICRC from its three parts.
///
/// `ip_header` is the IPv4 header with options as it should be covered (its total length must
/// already be the one of the plain RoCE packet), `udp_header` the 8-byte UDP header likewise, and
/// `transport` the bytes from the BTH up to, not including, the ICRC. The masks are applied here
/// on copies; nothing is allocated.
pub fn compute_parts(ip_header: &[u8], udp_header: &[u8; 8], transport: &[u8]) -> Result<u32> {
    need(Layer::Icrc, 20, ip_header.len())?;
    if ip_header.len() > IPV4_MAX_HEADER {
        return Err(Error::Malformed {
            layer: Layer::Icrc,
            what: "IPv4 header longer than 60 bytes",
        });
    }
    need(Layer::Bth, 12, transport.len())?;
    let mut ip = [0u8; IPV4_MAX_HEADER];
    let ip = &mut ip[..ip_header.len()];
    ip.copy_from_slice(ip_header);
    ip[1] = 0xff; // TOS: DSCP and ECN
    ip[8] = 0xff; // TTL
    ip[10] = 0xff; // header checksum
    ip[11] = 0xff;
    let mut udp = *udp_header;
    udp[6] = 0xff;
    udp[7] = 0xff;
    let mut bth = [0u8; 12];
    bth.copy_from_slice(&transport[..12]);
    bth[4] = 0xff; // FECN, BECN, reserved

    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    h.update(ip);
    h.update(&udp);
    h.update(&bth);
    h.update(&transport[12..]);
    Ok(h.finalize())
}

/// Computes the ICRC of a plain RoCEv2 packet given from the IP header to the end of the ICRC
/// (the trailer's own 4 bytes are not covered).
pub fn compute(ip_packet: &[u8]) -> Result<u32> {
    let hl = ipv4_header_len(ip_packet)?;
    need(Layer::Icrc, hl + 8 + 12 + ICRC_LEN, ip_packet.len())?;
    let mut udp = [0u8; 8];
    udp.copy_from_slice(&ip_packet[hl..hl + 8]);
    compute_parts(&ip_packet[..hl], &udp, &ip_packet[hl + 8..ip_packet.len() - ICRC_LEN])
}

/// Reads the ICRC stored at the end of `ip_packet`.
pub fn stored(ip_packet: &[u8]) -> Result<u32> {
    need(Layer::Icrc, ICRC_LEN, ip_packet.len())?;
    let t = &ip_packet[ip_packet.len() - ICRC_LEN..];
    Ok(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
}

/// Writes `crc` in wire order into the last 4 bytes of `ip_packet`.
pub fn store(ip_packet: &mut [u8], crc: u32) {
    let n = ip_packet.len();
    ip_packet[n - ICRC_LEN..].copy_from_slice(&crc.to_le_bytes());
}

/// Computes the ICRC and writes it into the last 4 bytes of `ip_packet`.
pub fn fill(ip_packet: &mut [u8]) -> Result<()> {
    let crc = compute(ip_packet)?;
    store(ip_packet, crc);
    Ok(())
}

/// True when the stored ICRC matches the computed one.
pub fn verify(ip_packet: &[u8]) -> Result<bool> {
    Ok(compute(ip_packet)? == stored(ip_packet)?)
}

fn ipv4_header_len(ip_packet: &[u8]) -> Result<usize> {
    need(Layer::Icrc, 20, ip_packet.len())?;
    if ip_packet[0] >> 4 != 4 {
        return Err(Error::Malformed {
            layer: Layer::Icrc,
            what: "only IPv4 is supported",
        });
    }
    let hl = usize::from(ip_packet[0] & 0x0f) * 4;
    if hl < 20 {
        return Err(Error::Malformed {
            layer: Layer::Ipv4,
            what: "IHL below 5",
        });
    }
    need(Layer::Icrc, hl, ip_packet.len())?;
    Ok(hl)
}
