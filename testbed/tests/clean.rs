//! `intlab clean` removes a killed run's leftovers (its own test binary: cargo runs test
//! binaries one at a time, so no other test's namespaces exist meanwhile). Run as root.

use std::process::Command;

use intlab_testbed::netns::{self, ip};

#[test]
fn clean_removes_leftover_namespaces_and_their_interfaces() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "run as root (scripts/test)");
    let prefix = format!("{}cl{}", netns::PREFIX, std::process::id() % 100_000);
    let (a, b) = (format!("{prefix}-a"), format!("{prefix}-b"));
    // What a SIGKILLed run leaves: namespaces (no Drop ran) with a veth pair between them.
    ip(&["netns", "add", &a]).expect("netns a");
    ip(&["netns", "add", &b]).expect("netns b");
    ip(&[
        "link", "add", "eth0", "netns", &a, "type", "veth", "peer", "name", "eth0", "netns", &b,
    ])
    .expect("veth");
    let refused = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .args(["clean", "--prefix", "other-"])
        .output()
        .expect("run");
    assert!(!refused.status.success(), "only intlab's own names may be cleaned");
    let out = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .args(["clean", "--prefix", &prefix])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("2 namespaces removed, 0 failures"), "{text}");
    let left: Vec<String> = netns::lab_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "left: {left:?}");
}
