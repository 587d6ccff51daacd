//! Capture files (pcap and pcapng, cut and damaged) through `intlab inspect`'s reader.

use int_format::int::DEFAULT_INT_PORT;
use intlab_inspect::FrameRecord;
use intlab_inspect::capture::{CaptureError, CaptureReader};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use std::io::Cursor;
use std::time::{Duration, Instant};

use crate::frames::any_frame;
use crate::mutation::*;
use crate::{Report, Tally, finish, runner};

/// A capture as the lab writes it, and where each complete packet block ends.
#[derive(Debug, Clone)]
pub struct CaptureFile {
    bytes: Vec<u8>,
    frame_ends: Vec<usize>,
}

/// pcapng (with interface options, flags and comments) or pcap files of up to four frames.
pub fn capture_file() -> impl Strategy<Value = CaptureFile> {
    (
        any::<bool>(),
        proptest::collection::vec(any_frame(), 0..5),
        any::<bool>(),
        0u8..12,
    )
        .prop_map(|(pcapng, frames, comment, tsresol)| {
            use pcap_file::DataLink;
            use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
            use pcap_file::pcapng::blocks::interface_description::{
                InterfaceDescriptionBlock, InterfaceDescriptionOption,
            };
            use std::borrow::Cow;
            let mut frame_ends = Vec::new();
            let bytes = if pcapng {
                let mut w = pcap_file::pcapng::PcapNgWriter::new(Vec::new()).expect("in memory");
                w.write_pcapng_block(InterfaceDescriptionBlock {
                    linktype: DataLink::ETHERNET,
                    snaplen: 0,
                    options: vec![
                        InterfaceDescriptionOption::IfName(Cow::Borrowed("s1-eth1")),
                        InterfaceDescriptionOption::IfTsResol(tsresol),
                    ],
                })
                .expect("in memory");
                for (i, f) in frames.iter().enumerate() {
                    let mut options = vec![EnhancedPacketOption::Flags(1 + (i as u32 & 1))];
                    if comment {
                        options.push(EnhancedPacketOption::Comment(Cow::Borrowed("dropped: buffer_full")));
                    }
                    w.write_pcapng_block(EnhancedPacketBlock {
                        interface_id: 0,
                        timestamp: Duration::new(1_700_000_000 + i as u64, 123),
                        original_len: f.len() as u32,
                        data: Cow::Borrowed(f),
                        options,
                    })
                    .expect("in memory");
                    frame_ends.push(w.get_ref().len());
                }
                w.into_inner()
            } else {
                let mut w = pcap_file::pcap::PcapWriter::new(Vec::new()).expect("in memory");
                // 24 bytes of file header, then each packet's 16-byte header and its bytes.
                let mut end = 24;
                for (i, f) in frames.iter().enumerate() {
                    end += w
                        .write_packet(&pcap_file::pcap::PcapPacket::new(
                            Duration::new(1_700_000_000 + i as u64, 1000),
                            f.len() as u32,
                            f,
                        ))
                        .expect("in memory");
                    frame_ends.push(end);
                }
                w.into_writer()
            };
            CaptureFile { bytes, frame_ends }
        })
}

/// Reads every frame of `bytes` as `intlab inspect` does: the frames read, and how it ended.
pub fn read_capture(bytes: &[u8], tally: &Tally) -> Result<(usize, Result<(), CaptureError>), TestCaseError> {
    let mut reader = CaptureReader::from_reader("fuzz.pcapng", Cursor::new(bytes));
    let mut n = 0;
    let end = loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                n += 1;
                let rec = FrameRecord::decode(n, &f, DEFAULT_INT_PORT);
                let _ = rec.to_string();
                serde_json::to_string(&rec).map_err(|e| TestCaseError::fail(format!("JSON: {e}")))?;
                tally.count("frames decoded");
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    Ok((n, end))
}

/// Runs the captures target: cut files must give exactly their complete frames.
pub fn fuzz_captures(cases: u32) -> Report {
    let tally = Tally::default();
    let started = Instant::now();
    let strategy = (
        capture_file(),
        proptest::option::of(any::<Index>()),
        proptest::collection::vec(mutation(), 0..4),
    );
    let result = runner(cases).run(&strategy, |(file, cut, mutations)| {
        if let Some(cut) = cut {
            // A capture cut anywhere gives exactly the frames whose blocks are complete.
            let at = cut.index(file.bytes.len() + 1);
            let (n, end) = read_capture(&file.bytes[..at], &tally)?;
            let complete = file.frame_ends.iter().filter(|&&e| e <= at).count();
            prop_assert_eq!(n, complete, "frames read from a file cut at byte {}", at);
            if at == file.bytes.len() {
                prop_assert!(end.is_ok(), "a whole file ends cleanly: {:?}", end);
            }
            tally.count(if end.is_ok() {
                "cut ends cleanly"
            } else {
                "cut reported"
            });
        } else {
            let bytes = apply(file.bytes, &mutations);
            let (_, end) = read_capture(&bytes, &tally)?;
            tally.count(match end {
                Ok(()) => "damaged file read to its end",
                Err(CaptureError::Cut { .. }) => "damaged file: cut",
                Err(CaptureError::Malformed { .. }) => "damaged file: malformed",
                Err(CaptureError::Io { .. }) => "damaged file: io",
            });
        }
        Ok(())
    });
    finish("capture files (inspect)", cases, started, tally, result)
}
