//! Property-based fuzzing of every parser that takes bytes from outside the lab: frames through
//! int-format and the switch's ingress, datagrams past the transport's ICRC check, what a
//! program sends its NIC (commands and work queues), capture files through `intlab inspect`,
//! scenario YAML and `--set` values, what a site server and a coordinator read from each other
//! and the sites file, P4 source, STF tests, runtime JSON, CLI command files and P4Runtime
//! Write requests. Not a test (it runs for minutes):
//!
//! ```text
//! cargo bench -p intlab-benches --bench fuzz [-- TARGET...]     # FUZZ_CASES=1000000 by default
//! ```
//!
//! Each target starts from inputs the lab itself writes (valid frames, datagrams with a valid
//! ICRC, captures, the shipped scenarios) and mutates them, so the cases get past the first
//! check. Besides "no panic", each target checks what must hold of what it parsed; a violated
//! property or a panic is a finding, printed with the smallest input proptest shrank it to.

mod captures;
mod channel;
mod frames;
mod mutation;
mod p4;
mod scenarios;
mod sites;
mod texts;
mod transport;

use proptest::test_runner::{Config, TestError, TestRunner};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const DEFAULT_CASES: u32 = 1_000_000;

/// Outcome counts of one target, so the report shows how deep the cases got.
#[derive(Default)]
struct Tally(RefCell<BTreeMap<&'static str, u64>>);

impl Tally {
    fn count(&self, what: &'static str) {
        *self.0.borrow_mut().entry(what).or_default() += 1;
    }
}

/// What one target found.
struct Report {
    target: &'static str,
    cases: u32,
    elapsed: Duration,
    tally: BTreeMap<&'static str, u64>,
    finding: Option<String>,
}

/// A runner of `cases` cases that keeps no failure files.
fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    })
}

/// The report of a target that ran `cases` cases since `started`.
fn finish<T: std::fmt::Debug>(
    target: &'static str,
    cases: u32,
    started: Instant,
    tally: Tally,
    result: Result<(), TestError<T>>,
) -> Report {
    let finding = match result {
        Ok(()) => None,
        Err(TestError::Fail(why, input)) => Some(format!("{why}\nsmallest input: {input:#?}")),
        Err(TestError::Abort(why)) => Some(format!("aborted: {why}")),
    };
    Report {
        target,
        cases,
        elapsed: started.elapsed(),
        tally: tally.0.into_inner(),
        finding,
    }
}

/// A target's name on the command line, and how to run it for a number of cases.
type Target = (&'static str, fn(u32) -> Report);

fn main() {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .map(|v| v.parse().expect("FUZZ_CASES is a number of cases"))
        .unwrap_or(DEFAULT_CASES);
    // cargo bench passes `--bench`; other arguments pick targets by name.
    let wanted: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let targets: [Target; 13] = [
        ("frames", frames::fuzz_frames),
        ("transport", transport::fuzz_transport),
        ("channel", channel::fuzz_channel),
        ("captures", captures::fuzz_captures),
        ("scenarios", scenarios::fuzz_scenarios),
        ("set", scenarios::fuzz_set_values),
        ("site-protocol", sites::fuzz_site_protocol),
        ("sites-files", sites::fuzz_sites_files),
        ("p4-source", p4::fuzz_p4_source),
        ("stf", p4::fuzz_stf),
        ("runtime-json", p4::fuzz_runtime_json),
        ("cli-commands", p4::fuzz_cli_commands),
        ("p4runtime", p4::fuzz_p4runtime_writes),
    ];
    // Panics are caught and shrunk by proptest; their messages would drown the report.
    std::panic::set_hook(Box::new(|_| {}));
    let mut findings = 0;
    for (name, run) in targets {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        eprintln!("fuzz {name}: {cases} cases ...");
        let r = run(cases);
        println!(
            "{}: {} cases in {:.1} s ({:.0} cases/s)",
            r.target,
            r.cases,
            r.elapsed.as_secs_f64(),
            f64::from(r.cases) / r.elapsed.as_secs_f64()
        );
        for (what, n) in &r.tally {
            println!("    {what:<36} {n:>10}");
        }
        match r.finding {
            None => println!("    findings: none"),
            Some(f) => {
                findings += 1;
                println!("    FINDING: {f}");
            }
        }
    }
    if findings > 0 {
        std::process::exit(1);
    }
}
