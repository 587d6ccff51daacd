//! Every STF test in `tests/stf/` (a program `NAME.p4` and its test `NAME.stf`), run as
//! `intlab p4 test` runs it: each expectation must be met, and a test must expect something.

use std::path::{Path, PathBuf};

use intlab_p4::{Datapath, stf};

fn tests() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stf");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "stf"))
        .collect();
    found.sort();
    found
}

fn run(test: &Path) -> stf::Report {
    let program = test.with_extension("p4");
    let loaded = intlab_p4::load(&program).unwrap_or_else(|e| panic!("{e}"));
    let dp = Datapath::new(loaded.ir, "s1");
    let text = std::fs::read_to_string(test).unwrap_or_else(|e| panic!("{}: {e}", test.display()));
    let file = stf::parse(&test.display().to_string(), &text).unwrap_or_else(|e| panic!("{e}"));
    stf::run(&dp, &file).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_stf_test_meets_all_its_expectations() {
    let tests = tests();
    assert!(tests.len() >= 8, "the STF tests are missing: {tests:?}");
    for test in tests {
        let report = run(&test);
        let met = report.verdicts.iter().filter(|v| v.passed).count();
        assert!(met > 0, "{}: no expectation was checked", test.display());
        if let Some(v) = report.verdicts.iter().find(|v| !v.passed) {
            panic!("{}:{}: {}", test.display(), v.line, v.text);
        }
    }
}

#[test]
fn a_wrong_expectation_in_a_test_fails_with_its_line() {
    // The exit copy-back test with one byte of its first expectation changed.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stf");
    let text = std::fs::read_to_string(dir.join("exit_copy_back.stf")).expect("test file");
    let wrong = text.replacen("0003 $", "0004 $", 1);
    assert_ne!(wrong, text, "the expectation to change is in the file");
    let loaded = intlab_p4::load(&dir.join("exit_copy_back.p4")).unwrap_or_else(|e| panic!("{e}"));
    let dp = Datapath::new(loaded.ir, "s1");
    let file = stf::parse("wrong.stf", &wrong).unwrap_or_else(|e| panic!("{e}"));
    let report = stf::run(&dp, &file).unwrap_or_else(|e| panic!("{e}"));
    assert!(!report.passed());
    let failed: Vec<usize> = report.verdicts.iter().filter(|v| !v.passed).map(|v| v.line).collect();
    assert_eq!(failed, [3]);
}
