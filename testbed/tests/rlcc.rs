//! `intlab rlcc` end to end: train, distil and explain write what they say; a checkpoint
//! PyTorch wrote acts as its JSON twin; broken policy files fail with the file and the reason, never a
//! panic. (The controller on real sockets is exercised in tests/controllers.rs.)

use std::path::{Path, PathBuf};
use std::process::Command;

use intlab_rlcc::{Mlp, Policy};

fn scratch(tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("rlcc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

/// Runs `intlab rlcc ARGS`: (success, stdout, stderr).
fn rlcc(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .arg("rlcc")
        .args(args)
        .output()
        .expect("intlab runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

#[test]
fn train_distill_and_explain_write_what_they_say() {
    let dir = scratch("cmds");
    let mlp = dir.join("m.json");
    let (ok, out, err) = rlcc(&["train", "--out", s(&mlp), "--updates", "200"]);
    assert!(ok, "{err}");
    assert!(out.contains("trained 200 updates"), "{out}");
    let curve = std::fs::read_to_string(dir.join("m-training.csv")).expect("curve CSV");
    assert_eq!(curve.lines().count(), 201, "a header and a row per update");
    let svg = std::fs::read_to_string(dir.join("m-training.svg")).expect("curve plot");
    assert!(
        svg.starts_with("<svg") && svg.contains("reward") && svg.contains("<polyline"),
        "not a plot"
    );
    assert!(matches!(Policy::load(&mlp), Ok(Policy::Mlp(_))));

    let trees = dir.join("t.json");
    let (ok, out, err) = rlcc(&["distill", s(&mlp), "--out", s(&trees), "--trees", "10"]);
    assert!(ok, "{err}");
    assert!(out.contains("10 trees of depth ≤ 4: RMSE against the MLP"), "{out}");
    let Ok(Policy::Trees(t)) = Policy::load(&trees) else {
        panic!("distill wrote no trees")
    };
    assert_eq!(t.trees().len(), 10);

    let (ok, out, err) = rlcc(&["explain", s(&mlp), "--trees", s(&trees)]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("under-utilized").count(), 4, "two tables: {out}");
    let (ok, _, err) = rlcc(&["distill", s(&trees)]);
    assert!(!ok && err.contains("expected an MLP policy"), "{err}");
}

/// A checkpoint written by PyTorch itself (rlcc/tests/fixtures/torch, from
/// scripts/make-torch-fixtures.py) explains as the same network written as our JSON.
#[test]
fn a_pytorch_checkpoint_acts_as_its_json_twin() {
    let dir = scratch("ckpt");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rlcc/tests/fixtures/torch");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("expected.json")).expect("fixture")).expect("json");
    let layers: Vec<Vec<Vec<f32>>> = serde_json::from_value(expected["weights"].clone()).expect("weights");
    let m = Mlp::from_layers(&layers).expect("the network");
    let json = dir.join("same.json");
    std::fs::write(&json, m.to_json()).expect("write");
    let file = fixtures.join("public_layout.pt");
    let (ok, a, err) = rlcc(&["explain", s(&file), "--trees", s(&json)]);
    assert!(ok, "{err}");
    let (ok, b, _) = rlcc(&["explain", s(&json), "--trees", s(&json)]);
    assert!(ok);
    let table = |t: &str| t.lines().skip(1).take(4).collect::<Vec<_>>().join("\n");
    assert_eq!(table(&a), table(&b), "the checkpoint acts as its JSON twin");
}

#[test]
fn broken_policy_files_fail_with_the_file_and_the_reason() {
    let dir = scratch("bad");
    let mut short = Mlp::zeros().layers();
    short[0].pop();
    let cases = [
        ("truncated.json", "{\"format\": \"intlab-rlcc-mlp\", \"version\": 1, \"lay".to_owned(), "EOF"),
        (
            "shape.json",
            format!("{{\"format\": \"intlab-rlcc-mlp\", \"version\": 1, \"layers\": {}}}", serde_json::to_string(&short).expect("json")),
            "layer 0: expected 12×4 weights, got 11×4",
        ),
        (
            "cycle.json",
            "{\"format\": \"intlab-rlcc-trees\", \"version\": 1, \"base\": 0, \"trees\": [{\"nodes\": [{\"feature\": 1, \"threshold\": 0, \"left\": 0, \"right\": 0}]}]}".to_owned(),
            "tree 0: node 0: child 0",
        ),
        ("other.json", "{\"format\": \"onnx\"}".to_owned(), "expected \"format\""),
        ("fake.zip", "PK\u{3}\u{4}garbage".to_owned(), "not a zip archive"),
        ("fake.pt", "\u{80}\u{2}binary".to_owned(), "not a PyTorch checkpoint"),
    ];
    for (name, text, reason) in cases {
        let file = dir.join(name);
        std::fs::write(&file, text).expect("write");
        let (ok, _, err) = rlcc(&["explain", s(&file)]);
        assert!(!ok, "{name} accepted");
        assert!(err.contains(s(&file)) && err.contains(reason), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}
