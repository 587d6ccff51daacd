//! `intlab`: the command-line front of the lab.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use int_format::int::DEFAULT_INT_PORT;
use intlab_testbed::inspect;

/// A real-packet emulation lab for datacenter congestion control.
#[derive(Debug, Parser)]
#[command(name = "intlab", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode a pcap or pcapng capture: Ethernet/IPv4/UDP, every INT hop, RoCEv2 and its ICRC.
    Inspect {
        /// The capture file.
        file: PathBuf,
        /// One JSON object per frame instead of one line.
        #[arg(long)]
        json: bool,
        /// UDP destination port that signals INT.
        #[arg(long, default_value_t = DEFAULT_INT_PORT)]
        int_port: u16,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("intlab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Inspect { file, json, int_port } => {
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            let summary = match inspect::inspect(&file, int_port, json, &mut out) {
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
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
