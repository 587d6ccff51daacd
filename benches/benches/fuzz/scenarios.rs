//! Scenario YAML through the loader and its checks.

use intlab_lab::scenario::{Overrides, Scenario};
use proptest::prelude::*;
use proptest::sample::Index;
use std::path::Path;
use std::time::Instant;

use crate::mutation::*;
use crate::{Report, Tally, finish, runner};

/// Seeds of the scenario target: the shipped scenarios and the built-in default.
pub fn scenario_seeds() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let mut seeds: Vec<String> = std::fs::read_dir(&dir)
        .expect("topologies/ is readable")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        .map(|e| std::fs::read_to_string(e.path()).expect("shipped scenario is readable"))
        .collect();
    seeds.sort();
    seeds
}

/// Values that make a scenario wrong in interesting ways.
pub const ODD_VALUES: &[&str] = &[
    "0",
    "-1",
    "0.5",
    "1e400",
    "NaN",
    ".inf",
    "",
    "~",
    "[]",
    "{}",
    "[[]]",
    "\"\"",
    "99999999999999999999",
    "4294967296",
    "0bps",
    "0.5bps",
    "1Tbps",
    "10Gbps",
    "1us",
    "-5us",
    "0ns",
    "1e9s",
    "0B",
    "1KB",
    "255.255.255.255/32",
    "0.0.0.0/0",
    "198.18.0.0/15",
    "../escape",
    "a/b",
    "lo",
    "x y",
    "hostname-longer-than-fifteen",
    "h1",
    "s1",
    "hpcc",
    "dcqcn",
    "yes",
    "!!binary aGk=",
    "&a x",
    "*a",
    "|",
    ">",
    "- a",
    "{a: *b}",
    "'",
    "\"\\u0000\"",
];

#[derive(Debug, Clone)]
pub enum Edit {
    DeleteLine(Index),
    DuplicateLine(Index),
    SwapLines(Index, Index),
    /// Replaces the value after the first `: ` on a line.
    Value(Index, Index),
    Bytes(Vec<Mutation>),
}

/// Any one edit, mostly an odd value in place of a good one.
pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        2 => any::<Index>().prop_map(Edit::DeleteLine),
        1 => any::<Index>().prop_map(Edit::DuplicateLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        6 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Value(a, b)),
        1 => proptest::collection::vec(mutation(), 1..3).prop_map(Edit::Bytes),
    ]
}

/// `text` after `edits`.
pub fn edited(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match e {
            Edit::DeleteLine(i) => {
                lines.remove(i.index(n));
            }
            Edit::DuplicateLine(i) => {
                let l = lines[i.index(n)].clone();
                lines.insert(i.index(n), l);
            }
            Edit::SwapLines(a, b) => lines.swap(a.index(n), b.index(n)),
            Edit::Value(i, v) => {
                let l = &mut lines[i.index(n)];
                if let Some(at) = l.find(": ") {
                    l.truncate(at + 2);
                    l.push_str(ODD_VALUES[v.index(ODD_VALUES.len())]);
                }
            }
            Edit::Bytes(m) => {
                let joined = lines.join("\n");
                let bytes = apply(joined.into_bytes(), m);
                lines = String::from_utf8_lossy(&bytes).lines().map(str::to_owned).collect();
            }
        }
    }
    lines.join("\n")
}

/// Runs the scenarios target: every refusal names the file.
pub fn fuzz_scenarios(cases: u32) -> Report {
    let seeds = scenario_seeds();
    let tally = Tally::default();
    let started = Instant::now();
    let sets = [
        "hosts=3",
        "workload.flows=0",
        "runtime.workers=0",
        "dilation=auto",
        "links=[]",
        "name=",
    ];
    let strategy = (
        0..seeds.len(),
        proptest::collection::vec(edit(), 1..4),
        proptest::option::weighted(0.1, 0..sets.len()),
    );
    let result = runner(cases).run(&strategy, |(seed, edits, set)| {
        let text = edited(&seeds[seed], &edits);
        let overrides = Overrides {
            set: set.map(|i| vec![sets[i].to_owned()]).unwrap_or_default(),
            ..Overrides::default()
        };
        match Scenario::from_text(&text, Path::new("fuzz.yaml"), &overrides) {
            Ok(s) => {
                tally.count("accepted");
                let _ = s.flows();
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("fuzz.yaml"), "an error names the file: {}", msg);
                prop_assert!(!e.message.is_empty(), "an error says what is wrong");
                if overrides.is_empty() {
                    // Without `--set`, whatever is wrong is somewhere in the file: say where.
                    prop_assert!(e.line > 0, "a refusal of the file without its line: {}", msg);
                    tally.count("refused with a line");
                } else {
                    tally.count("refused with --set");
                }
            }
        }
        Ok(())
    });
    finish("scenario YAML", cases, started, tally, result)
}

/// Runs the `--set` target: odd keys and values over the built-in scenario; a refusal names
/// what was set.
pub fn fuzz_set_values(cases: u32) -> Report {
    let keys = [
        "dilation",
        "duration",
        "seed",
        "capture",
        "runtime.workers",
        "controller.name",
        "controller.eta",
        "defaults.link.rate",
        "defaults.link.delay",
        "defaults.link.buffer",
        "defaults.link.ecn.kmin",
        "workload.flows",
        "hosts",
        "links",
        "nodes.s1.kind",
        "p4.program",
        "sites",
        "",
        ".",
        "a..b",
        "controller.",
    ];
    let tally = Tally::default();
    let started = Instant::now();
    let strategy = proptest::collection::vec(
        (
            0..keys.len(),
            0..ODD_VALUES.len(),
            proptest::collection::vec(mutation(), 0..2),
        ),
        1..3,
    );
    let result = runner(cases).run(&strategy, |sets| {
        let set: Vec<String> = sets
            .iter()
            .map(|(k, v, m)| {
                let raw = format!("{}={}", keys[*k], ODD_VALUES[*v]);
                String::from_utf8_lossy(&apply(raw.into_bytes(), m)).into_owned()
            })
            .collect();
        let overrides = Overrides {
            set,
            ..Overrides::default()
        };
        match Scenario::builtin(&overrides) {
            Ok(_) => tally.count("accepted"),
            Err(e) => {
                prop_assert!(!e.message.is_empty(), "a refusal says what is wrong");
                tally.count("refused");
            }
        }
        Ok(())
    });
    finish("--set values", cases, started, tally, result)
}
