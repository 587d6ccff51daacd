//! Reading frames from pcap and pcapng files one at a time, with timestamps in nanoseconds; a
//! file cut inside a block yields every complete frame, then says where it is cut.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError};

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

/// Bytes read from the file at a time.
const CHUNK: usize = 1 << 20;
/// Largest block read (a frame with its options is far smaller): beyond it the file is damaged.
const MAX_BLOCK: usize = 64 << 20;

/// Why a capture cannot be read on.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file cannot be opened or read.
    #[error("{file}: {cause}")]
    Io {
        /// The file.
        file: String,
        /// What failed.
        cause: std::io::Error,
    },
    /// The file ends inside a block: everything before it was read (a capture whose writer was
    /// killed ends so).
    #[error("{file}: cut at byte {at} inside a block, after {frames} complete frames")]
    Cut {
        /// The file.
        file: String,
        /// Offset of the incomplete block.
        at: u64,
        /// Frames read before it.
        frames: usize,
    },
    /// A block is malformed.
    #[error("{file}: byte {at}: {message}")]
    Malformed {
        /// The file.
        file: String,
        /// Offset of the block.
        at: u64,
        /// What is wrong.
        message: String,
    },
}

/// Per interface: the name, and units per second of its timestamps.
struct Interface {
    name: Option<String>,
    ticks_per_second: u128,
    ethernet: bool,
}

enum Format {
    Pcap(PcapParser),
    PcapNg(PcapNgParser, Vec<Interface>),
}

/// Reads a pcap or pcapng file one frame at a time, without holding it in memory.
pub struct CaptureReader<R = File> {
    file: R,
    name: String,
    buf: Vec<u8>,
    /// Bytes of `buf` already parsed.
    used: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
    format: Option<Format>,
    frames: usize,
}

/// What a parser said of the bytes at hand.
enum Step<T> {
    Done(usize, T),
    More,
    Bad(String),
}

fn step<T>(src: &[u8], r: Result<(&[u8], T), PcapError>) -> Step<T> {
    match r {
        Ok((rem, v)) => Step::Done(src.len() - rem.len(), v),
        Err(PcapError::IncompleteBuffer) => Step::More,
        Err(e) => Step::Bad(e.to_string()),
    }
}

impl CaptureReader<File> {
    /// Opens a pcap or pcapng file (told apart by its magic number).
    pub fn open(path: &Path) -> Result<CaptureReader, CaptureError> {
        let file = File::open(path).map_err(|cause| CaptureError::Io {
            file: path.display().to_string(),
            cause,
        })?;
        Ok(CaptureReader::from_reader(&path.display().to_string(), file))
    }
}

impl<R: Read> CaptureReader<R> {
    /// Reads a capture from `source`, named `name` in errors.
    pub fn from_reader(name: &str, source: R) -> CaptureReader<R> {
        CaptureReader {
            file: source,
            name: name.to_string(),
            buf: Vec::new(),
            used: 0,
            base: 0,
            eof: false,
            format: None,
            frames: 0,
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.used as u64
    }

    /// Reads more of the file; false at its end.
    fn fill(&mut self) -> Result<bool, CaptureError> {
        if self.eof {
            return Ok(false);
        }
        if self.buf.len() - self.used > MAX_BLOCK {
            return Err(CaptureError::Malformed {
                file: self.name.clone(),
                at: self.offset(),
                message: format!("a block of more than {MAX_BLOCK} bytes"),
            });
        }
        self.buf.drain(..self.used);
        self.base += self.used as u64;
        self.used = 0;
        let have = self.buf.len();
        self.buf.resize(have + CHUNK, 0);
        let n = self
            .file
            .read(&mut self.buf[have..])
            .map_err(|cause| CaptureError::Io {
                file: self.name.clone(),
                cause,
            })?;
        self.buf.truncate(have + n);
        self.eof = n == 0;
        Ok(n > 0)
    }

    /// The end of the data: clean at a block boundary, a cut inside one.
    fn end<T>(&self) -> Result<Option<T>, CaptureError> {
        if self.used == self.buf.len() {
            Ok(None)
        } else {
            Err(CaptureError::Cut {
                file: self.name.clone(),
                at: self.offset(),
                frames: self.frames,
            })
        }
    }

    fn bad<T>(&self, message: String) -> Result<T, CaptureError> {
        Err(CaptureError::Malformed {
            file: self.name.clone(),
            at: self.offset(),
            message,
        })
    }

    /// The next Ethernet frame; None at the end of the file.
    pub fn next_frame(&mut self) -> Result<Option<CapturedFrame>, CaptureError> {
        loop {
            if let Some(frame) = self.try_next()? {
                return Ok(Some(frame));
            }
            if !self.fill()? {
                return self.end();
            }
        }
    }

    /// Parses what is at hand: a frame, or None when more bytes are needed (or a block that
    /// is no frame was consumed: the caller asks again).
    fn try_next(&mut self) -> Result<Option<CapturedFrame>, CaptureError> {
        loop {
            let src = &self.buf[self.used..];
            match &mut self.format {
                None => {
                    if src.len() < 4 {
                        return Ok(None);
                    }
                    let pcapng = src[..4] == PCAPNG_MAGIC;
                    let (n, format) = if pcapng {
                        match step(src, PcapNgParser::new(src)) {
                            Step::Done(n, p) => (n, Format::PcapNg(p, Vec::new())),
                            Step::More => return Ok(None),
                            Step::Bad(m) => return self.bad(format!("not a pcapng file: {m}")),
                        }
                    } else {
                        match step(src, PcapParser::new(src)) {
                            Step::Done(n, p) => (n, Format::Pcap(p)),
                            Step::More => return Ok(None),
                            Step::Bad(m) => return self.bad(format!("not a pcap or pcapng file: {m}")),
                        }
                    };
                    if let Format::Pcap(p) = &format
                        && p.header().datalink != DataLink::ETHERNET
                    {
                        return self.bad(format!("link type {:?} is not Ethernet", p.header().datalink));
                    }
                    self.used += n;
                    self.format = Some(format);
                }
                Some(Format::Pcap(parser)) => {
                    return match step(src, parser.next_packet(src)) {
                        Step::Done(n, p) => {
                            let frame = CapturedFrame {
                                timestamp_ns: p.timestamp.as_nanos(),
                                interface: 0,
                                interface_name: None,
                                original_len: p.orig_len,
                                data: p.data.into_owned(),
                                comment: None,
                            };
                            self.used += n;
                            self.frames += 1;
                            Ok(Some(frame))
                        }
                        Step::More => Ok(None),
                        Step::Bad(m) => self.bad(m),
                    };
                }
                Some(Format::PcapNg(parser, interfaces)) => {
                    let (n, block) = match step(src, parser.next_block(src)) {
                        Step::Done(n, b) => (n, b),
                        Step::More => return Ok(None),
                        Step::Bad(m) => return self.bad(m),
                    };
                    let frame = match block {
                        Block::SectionHeader(_) => {
                            interfaces.clear();
                            None
                        }
                        Block::InterfaceDescription(idb) => {
                            let mut itf = Interface {
                                name: None,
                                ticks_per_second: 1_000_000,
                                ethernet: idb.linktype == DataLink::ETHERNET,
                            };
                            for opt in &idb.options {
                                match opt {
                                    InterfaceDescriptionOption::IfName(n) => itf.name = Some(n.to_string()),
                                    InterfaceDescriptionOption::IfTsResol(res) => match ticks_per_second(*res) {
                                        Ok(t) => itf.ticks_per_second = t,
                                        Err(e) => return self.bad(e),
                                    },
                                    _ => {}
                                }
                            }
                            interfaces.push(itf);
                            None
                        }
                        Block::EnhancedPacket(epb) => {
                            let Some(itf) = interfaces.get(epb.interface_id as usize) else {
                                let id = epb.interface_id;
                                return self.bad(format!("packet names interface {id} which was never described"));
                            };
                            // pcap-file hands the raw 64-bit tick count over as if it were ns.
                            let ticks = epb.timestamp.as_nanos();
                            itf.ethernet.then(|| CapturedFrame {
                                timestamp_ns: ticks * 1_000_000_000 / itf.ticks_per_second,
                                interface: epb.interface_id,
                                interface_name: itf.name.clone(),
                                original_len: epb.original_len,
                                data: epb.data.into_owned(),
                                comment: epb.options.iter().find_map(|o| match o {
                                    EnhancedPacketOption::Comment(c) => Some(c.to_string()),
                                    _ => None,
                                }),
                            })
                        }
                        _ => None,
                    };
                    self.used += n;
                    if frame.is_some() {
                        self.frames += 1;
                        return Ok(frame);
                    }
                }
            }
        }
    }
}

/// Decodes `if_tsresol`: bit 7 clear means 10^-n seconds, set means 2^-n seconds.
fn ticks_per_second(res: u8) -> Result<u128, String> {
    let n = u32::from(res & 0x7f);
    let v = if res & 0x80 == 0 {
        10u128.checked_pow(n)
    } else {
        2u128.checked_pow(n)
    };
    match v {
        Some(v) if v >= 1 && n <= 30 => Ok(v),
        _ => Err(format!("unsupported if_tsresol {res:#04x}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_cut_inside_a_block_gives_every_complete_frame_then_says_where() {
        let dir = std::env::temp_dir().join(format!("intlab-cut-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.pcapng");
        let write = |frames: u8| {
            let mut c = intlab_switch::capture::PortCapture::create(&path, "p1", "test", 1_000_000).unwrap();
            for k in 0..frames {
                c.inbound(u64::from(k) * 1000, &[k; 60]);
            }
        };
        write(2);
        let two = std::fs::metadata(&path).unwrap().len();
        write(3);
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 10]).unwrap();
        let mut r = CaptureReader::open(&path).unwrap();
        assert_eq!(r.next_frame().unwrap().unwrap().data, vec![0u8; 60]);
        assert_eq!(r.next_frame().unwrap().unwrap().data, vec![1u8; 60]);
        match r.next_frame() {
            Err(CaptureError::Cut { at, frames, .. }) => {
                // The third block starts where a file of two frames ends.
                assert_eq!((frames, at), (2, two));
            }
            other => panic!("{other:?}"),
        }
        // The whole file reads to a clean end.
        std::fs::write(&path, &whole).unwrap();
        let mut r = CaptureReader::open(&path).unwrap();
        let mut n = 0;
        while r.next_frame().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tsresol_decodes_both_bases() {
        assert_eq!(ticks_per_second(6).unwrap(), 1_000_000);
        assert_eq!(ticks_per_second(9).unwrap(), 1_000_000_000);
        assert_eq!(ticks_per_second(0x80 | 10).unwrap(), 1024);
        assert!(ticks_per_second(0x7f).is_err());
    }
}
