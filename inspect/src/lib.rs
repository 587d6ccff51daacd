//! Captures read back: frames from pcap and pcapng files one at a time ([`capture`]), each
//! decoded into one line or one JSON object (`intlab inspect`).

#![forbid(unsafe_code)]

pub mod capture;
mod record;
mod text;

use std::io::Write;
use std::path::Path;

use anyhow::Result;

pub use record::{AethRecord, FrameRecord, HopJson, IcrcRecord, IntRecord, RoceRecord};

use crate::capture::{CaptureError, CaptureReader};

/// Counts over a whole capture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Frames read.
    pub frames: usize,
    /// RoCEv2 frames.
    pub roce: usize,
    /// Frames carrying INT.
    pub with_int: usize,
    /// RoCEv2 frames whose ICRC does not verify.
    pub bad_icrc: usize,
    /// Frames some layer of which could not be decoded.
    pub errors: usize,
    /// Where the file is cut, when it ends inside a block (every frame before was decoded).
    pub cut: Option<String>,
}

/// Decodes every frame of `path` and writes one line (or one JSON object) per frame to `out`.
/// A file cut inside a block (a capture whose run was killed) gives every complete frame and
/// says where it is cut in [`Summary::cut`].
pub fn inspect(path: &Path, int_port: u16, json: bool, out: &mut impl Write) -> Result<Summary> {
    let mut frames = CaptureReader::open(path)?;
    let mut summary = Summary::default();
    let mut i = 0;
    loop {
        let f = match frames.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e @ CaptureError::Cut { .. }) => {
                summary.cut = Some(e.to_string());
                break;
            }
            Err(e) => return Err(e.into()),
        };
        i += 1;
        let rec = FrameRecord::decode(i, &f, int_port);
        summary.frames += 1;
        summary.roce += usize::from(rec.roce.is_some());
        summary.with_int += usize::from(rec.int.is_some());
        summary.bad_icrc += usize::from(rec.roce.as_ref().and_then(|r| r.icrc.as_ref()).is_some_and(|c| !c.ok));
        summary.errors += usize::from(rec.error.is_some());
        if json {
            serde_json::to_writer(&mut *out, &rec)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{rec}")?;
        }
    }
    Ok(summary)
}
