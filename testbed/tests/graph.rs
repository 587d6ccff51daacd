//! `intlab graph` on every shipped scenario, as a user runs it: its DOT renders with Graphviz's
//! `dot` (scripts/test installs it), its SVG is well-formed XML with a node per node, its
//! Mermaid names every node and link.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The shipped scenario files.
fn shipped() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("topologies/")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{} shipped scenarios", files.len());
    files
}

/// Runs `program args` with `input` on its standard input; its output, or why it failed.
fn pipe(program: &str, args: &[&str], input: &str) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program} could not be run ({e}); scripts/test installs it"))?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn every_shipped_topology_draws_in_every_format() {
    for file in shipped() {
        let f = file.to_str().expect("a UTF-8 path");
        let name = file.file_stem().and_then(|s| s.to_str()).expect("a name");
        let dot = support::intlab_ok(&["graph", f]);
        let svg = pipe("dot", &["-Tsvg"], &dot).unwrap_or_else(|e| panic!("{name}: dot refused the DOT: {e}"));
        assert!(svg.contains("<svg"), "{name}: dot drew no SVG");
        let own = support::intlab_ok(&["graph", f, "--format", "svg"]);
        pipe(
            "python3",
            &[
                "-c",
                "import sys, xml.dom.minidom; xml.dom.minidom.parseString(sys.stdin.read())",
            ],
            &own,
        )
        .unwrap_or_else(|e| panic!("{name}: intlab's SVG is not well-formed: {e}"));
        let nodes = dot.matches(" [shape=").count();
        assert_eq!(own.matches("class=\"node\"").count(), nodes, "{name}");
        let mermaid = support::intlab_ok(&["graph", f, "--format", "mermaid"]);
        assert!(mermaid.starts_with("flowchart"), "{name}");
        assert_eq!(mermaid.matches(" ---|").count(), dot.matches(" -- ").count(), "{name}");
    }
}

#[test]
fn a_link_s_impairments_are_on_its_label() {
    let dot = support::intlab_ok(&[
        "graph",
        "--set",
        "defaults.link.loss=gemodel 0.505% 50%",
        "--set",
        "defaults.link.jitter=20us",
    ]);
    assert!(
        dot.contains("100Mbps, 200us, jitter 20us uniform, loss 1.00 %"),
        "{dot}"
    );
}
