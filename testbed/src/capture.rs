//! Reading frames from pcap and pcapng files, with timestamps in nanoseconds.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};
use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};

/// One captured frame.
#[derive(Debug, Clone)]
pub struct CapturedFrame {
    /// Timestamp in ns since the epoch (or since the capture start, as the file says).
    pub timestamp_ns: u128,
    /// Interface index in a pcapng file (0 for pcap).
    pub interface: u32,
    /// Interface name when the file gives one.
    pub interface_name: Option<String>,
    /// Length on the wire.
    pub original_len: u32,
    /// Captured bytes.
    pub data: Vec<u8>,
    /// Comment attached to the packet (pcapng only).
    pub comment: Option<String>,
}

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Reads every Ethernet frame of a pcap or pcapng file (detected by its magic number).
pub fn read_frames(path: &Path) -> Result<Vec<CapturedFrame>> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic)
        .with_context(|| format!("{}: too short to be a capture", path.display()))?;
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let reader = BufReader::new(file);
    if magic == PCAPNG_MAGIC {
        read_pcapng(reader).with_context(|| format!("{}: bad pcapng", path.display()))
    } else {
        read_pcap(reader).with_context(|| format!("{}: not a pcap or pcapng file", path.display()))
    }
}

fn read_pcap(reader: impl Read) -> Result<Vec<CapturedFrame>> {
    let mut r = PcapReader::new(reader)?;
    let header = r.header();
    if header.datalink != DataLink::ETHERNET {
        bail!("link type {:?} is not Ethernet", header.datalink);
    }
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p?;
        out.push(CapturedFrame {
            timestamp_ns: p.timestamp.as_nanos(),
            interface: 0,
            interface_name: None,
            original_len: p.orig_len,
            data: p.data.into_owned(),
            comment: None,
        });
    }
    Ok(out)
}

/// Per interface: the name, and units per second of its timestamps.
struct Interface {
    name: Option<String>,
    ticks_per_second: u128,
    ethernet: bool,
}

fn read_pcapng(reader: impl Read) -> Result<Vec<CapturedFrame>> {
    let mut r = PcapNgReader::new(reader)?;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut out = Vec::new();
    while let Some(block) = r.next_block() {
        match block? {
            Block::SectionHeader(_) => interfaces.clear(),
            Block::InterfaceDescription(idb) => {
                let mut itf = Interface {
                    name: None,
                    ticks_per_second: 1_000_000,
                    ethernet: idb.linktype == DataLink::ETHERNET,
                };
                for opt in &idb.options {
                    match opt {
                        InterfaceDescriptionOption::IfName(n) => itf.name = Some(n.to_string()),
                        InterfaceDescriptionOption::IfTsResol(res) => itf.ticks_per_second = ticks_per_second(*res)?,
                        _ => {}
                    }
                }
                interfaces.push(itf);
            }
            Block::EnhancedPacket(epb) => {
                let Some(itf) = interfaces.get(epb.interface_id as usize) else {
                    bail!("packet names interface {} which was never described", epb.interface_id);
                };
                if !itf.ethernet {
                    continue;
                }
                // pcap-file hands the raw 64-bit tick count over as if it were ns.
                let ticks = epb.timestamp.as_nanos();
                let comment = epb.options.iter().find_map(|o| match o {
                    pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption::Comment(c) => Some(c.to_string()),
                    _ => None,
                });
                out.push(CapturedFrame {
                    timestamp_ns: ticks * 1_000_000_000 / itf.ticks_per_second,
                    interface: epb.interface_id,
                    interface_name: itf.name.clone(),
                    original_len: epb.original_len,
                    data: epb.data.into_owned(),
                    comment,
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Decodes `if_tsresol`: bit 7 clear means 10^-n seconds, set means 2^-n seconds.
fn ticks_per_second(res: u8) -> Result<u128> {
    let n = u32::from(res & 0x7f);
    let v = if res & 0x80 == 0 {
        10u128.checked_pow(n)
    } else {
        2u128.checked_pow(n)
    };
    match v {
        Some(v) if v >= 1 && n <= 30 => Ok(v),
        _ => bail!("unsupported if_tsresol {res:#04x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_decodes_both_bases() {
        assert_eq!(ticks_per_second(6).unwrap(), 1_000_000);
        assert_eq!(ticks_per_second(9).unwrap(), 1_000_000_000);
        assert_eq!(ticks_per_second(0x80 | 10).unwrap(), 1024);
        assert!(ticks_per_second(0x7f).is_err());
    }
}
