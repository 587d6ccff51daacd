//! `intlab inspect`: a capture decoded, frame by frame.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

/// Decodes capture `file` to standard output (JSON lines if `json`), INT on UDP `int_port`;
/// a reader that stops reading (`| head`) ends it quietly.
pub(crate) fn inspect(file: &Path, json: bool, int_port: u16) -> Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let summary = match intlab_inspect::inspect(file, int_port, json, &mut out) {
        Err(e) if is_broken_pipe(&e) => return Ok(ExitCode::SUCCESS),
        r => r?,
    };
    match out.flush() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        r => r.context("writing to standard output")?,
    }
    eprintln!(
        "{}: {} frames, {} RoCEv2, {} with INT, {} with a bad ICRC, {} undecodable",
        file.display(),
        summary.frames,
        summary.roce,
        summary.with_int,
        summary.bad_icrc,
        summary.errors
    );
    if let Some(cut) = &summary.cut {
        eprintln!("intlab: {cut}: the rest is lost (was the run that wrote it killed?)");
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
