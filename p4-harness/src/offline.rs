//! P4 programs run offline, outside a lab: `intlab p4 test` (p4c's STF tests) and `intlab p4
//! run` (frames in and out as pcap files per port, as simple_switch's `--use-files`). Both run
//! the program on the switch model of `intlab_p4::sim`, through the executor the switch runs;
//! `intlab p4 test --veth` runs the test through the switch itself ([`crate::on_switch`]).

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use intlab_p4::{Datapath, PreprocessorOptions};
use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};

/// What `intlab p4 test` found.
pub struct TestOutcome {
    /// Expectations met.
    pub passed: usize,
    /// Expectations not met (and packets nobody expected).
    pub failed: usize,
    /// Packets the file sent and expected: a file with none tests nothing.
    pub exchanged: usize,
}

impl TestOutcome {
    /// Whether the test passed: something was exchanged and every expectation held.
    pub fn passed(&self) -> bool {
        self.failed == 0 && self.exchanged > 0
    }
}

/// Where an STF test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StfTarget {
    /// The switch model in memory: frames of any length.
    Memory,
    /// The lab's switch, frames over veth pairs.
    Veth,
}

/// Runs STF file `stf` on `program` on `target`, printing each expectation's verdict to `out`
/// (only the failures unless `verbose`).
pub fn test(
    program: &Path,
    options: &PreprocessorOptions,
    stf: &Path,
    target: StfTarget,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<TestOutcome> {
    let loaded = intlab_p4::load_with(program, options).with_context(|| format!("loading {}", program.display()))?;
    let text = std::fs::read_to_string(stf).with_context(|| format!("reading {}", stf.display()))?;
    let file = intlab_p4::stf::parse(&stf.display().to_string(), &text)?;
    let report = match target {
        StfTarget::Memory => intlab_p4::stf::run(&Datapath::new(loaded.ir, "stf"), &file)?,
        StfTarget::Veth => crate::on_switch::run(program, options, &file)?,
    };
    let exchanged = file
        .commands
        .iter()
        .filter(|(_, c)| {
            matches!(
                c,
                intlab_p4::stf::Command::Packet(..) | intlab_p4::stf::Command::Expect(..)
            )
        })
        .count();
    let mut passed = 0;
    let mut failed = 0;
    for v in &report.verdicts {
        if v.passed {
            passed += 1;
        } else {
            failed += 1;
        }
        if verbose || !v.passed {
            let place = if v.line > 0 {
                format!("{}:{}", stf.display(), v.line)
            } else {
                stf.display().to_string()
            };
            writeln!(out, "{} {place}: {}", if v.passed { "ok  " } else { "FAIL" }, v.text)?;
        }
    }
    writeln!(
        out,
        "{}: {passed} of {} expectations met",
        stf.display(),
        passed + failed
    )?;
    if exchanged == 0 {
        writeln!(out, "{}: sends and expects no packet: it tests nothing", stf.display())?;
    }
    Ok(TestOutcome {
        passed,
        failed,
        exchanged,
    })
}

/// Runs `program` on the frames of the pcap files `inputs` (P4 port, file), in the order of
/// their timestamps, and writes what leaves each port to `out_dir/port{N}_out.pcap`; returns
/// the files written with their frame counts.
pub fn run(
    program: &Path,
    options: &PreprocessorOptions,
    inputs: &[(u16, PathBuf)],
    out_dir: &Path,
    runtime: Option<&Path>,
    commands: Option<&Path>,
) -> Result<Vec<(PathBuf, usize)>> {
    let loaded = intlab_p4::load_with(program, options).with_context(|| format!("loading {}", program.display()))?;
    let dp = Datapath::new(loaded.ir, "run");
    if let Some(r) = runtime {
        intlab_p4::runtime_json::apply_file(&dp, r)?;
    }
    if let Some(c) = commands {
        for line in intlab_p4::cli_commands::apply_file(&dp, c)? {
            tracing::info!("{line}");
        }
    }
    let mut frames: Vec<(Duration, u16, Vec<u8>)> = Vec::new();
    for (port, path) in inputs {
        let f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut reader =
            PcapReader::new(BufReader::new(f)).with_context(|| format!("reading {} as pcap", path.display()))?;
        while let Some(p) = reader.next_packet() {
            let p = p.with_context(|| format!("reading {}", path.display()))?;
            frames.push((p.timestamp, *port, p.data.into_owned()));
        }
    }
    // Ports' files interleave by time; a port's frames keep their order.
    frames.sort_by_key(|f| f.0);
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let mut sim = intlab_p4::sim::SimSwitch::new(&dp);
    let mut outputs: std::collections::BTreeMap<u16, Vec<(Duration, Vec<u8>)>> = std::collections::BTreeMap::new();
    for (at, port, data) in frames {
        sim.set_time(at.as_nanos() as u64);
        for (p, frame) in sim.send(port, &data) {
            outputs.entry(p).or_default().push((at, frame));
        }
    }
    let mut written = Vec::new();
    for (port, frames) in outputs {
        let path = out_dir.join(format!("port{port}_out.pcap"));
        let f = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut w = PcapWriter::new(BufWriter::new(f)).with_context(|| format!("writing {}", path.display()))?;
        for (at, frame) in &frames {
            w.write_packet(&PcapPacket::new(*at, frame.len() as u32, frame))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        written.push((path, frames.len()));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct meta {}
parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply {} }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply { hdr.h.b = hdr.h.a + 1; sm.egress_spec = (bit<9>) hdr.h.a; }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply {} }
control C(inout headers hdr, inout meta m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("intlab-p4-offline-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("a temporary folder");
        d
    }

    #[test]
    fn an_stf_test_passes_and_a_wrong_expectation_fails_with_its_line() {
        let d = scratch("test");
        let program = d.join("p.p4");
        std::fs::write(&program, PROGRAM).unwrap();
        let good = d.join("good.stf");
        std::fs::write(&good, "packet 0 02 00 ff\nexpect 2 02 03 ff $\n").unwrap();
        let mut out = Vec::new();
        let r = test(&program, &Default::default(), &good, StfTarget::Memory, false, &mut out).unwrap();
        assert_eq!((r.passed, r.failed), (1, 0), "{}", String::from_utf8_lossy(&out));
        let bad = d.join("bad.stf");
        std::fs::write(&bad, "packet 0 02 00 ff\nexpect 2 02 04 ff $\n").unwrap();
        let mut out = Vec::new();
        let r = test(&program, &Default::default(), &bad, StfTarget::Memory, false, &mut out).unwrap();
        let text = String::from_utf8_lossy(&out);
        assert_eq!((r.passed, r.failed), (0, 1));
        assert!(text.contains("bad.stf:2") && text.contains("byte 1 differs"), "{text}");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn frames_from_pcap_files_come_out_per_port_in_pcap_files() {
        let d = scratch("run");
        let program = d.join("p.p4");
        std::fs::write(&program, PROGRAM).unwrap();
        let input = d.join("in.pcap");
        {
            let mut w = PcapWriter::new(File::create(&input).unwrap()).unwrap();
            for (i, a) in [3u8, 5, 3].iter().enumerate() {
                let data = [*a, 0, 0xee];
                w.write_packet(&PcapPacket::new(Duration::from_micros(i as u64), 3, &data))
                    .unwrap();
            }
        }
        let written = run(&program, &Default::default(), &[(1, input)], &d.join("out"), None, None).unwrap();
        let counts: Vec<(String, usize)> = written
            .iter()
            .map(|(p, n)| (p.file_name().unwrap().to_string_lossy().into_owned(), *n))
            .collect();
        assert_eq!(
            counts,
            [("port3_out.pcap".to_owned(), 2), ("port5_out.pcap".to_owned(), 1)]
        );
        let mut r = PcapReader::new(File::open(&written[1].0).unwrap()).unwrap();
        assert_eq!(r.next_packet().unwrap().unwrap().data.as_ref(), [5, 6, 0xee]);
        std::fs::remove_dir_all(d).unwrap();
    }
}
