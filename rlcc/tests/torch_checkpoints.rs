//! The checkpoint loader on files written by PyTorch's own `torch.save` (made by
//! `scripts/make-torch-fixtures.py`, committed in `tests/fixtures/torch/`): every layout users
//! save loads as the network PyTorch computed with, weight for weight and output for output.

use std::path::{Path, PathBuf};

use intlab_rlcc::{Mlp, Policy, checkpoint};
use serde::Deserialize;

#[derive(Deserialize)]
struct Expected {
    weights: Vec<Vec<Vec<f32>>>,
    inputs: Vec<[f32; 4]>,
    outputs: Vec<f32>,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch")
}

fn expected() -> Expected {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn every_layout_torch_save_writes_loads_as_the_same_network() {
    let want = expected();
    let reference = Mlp::from_layers(&want.weights).expect("the expected weights form the network");
    for file in [
        "state_dict.pt",
        "public_layout.pt",
        "whole_module.pt",
        "legacy_state_dict.pt",
        "legacy_public_layout.pt",
    ] {
        let path = fixtures().join(file);
        let m = checkpoint::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m, reference, "{file}: weights differ");
        for (x, y) in want.inputs.iter().zip(&want.outputs) {
            let got = m.act(x);
            assert!((got - y).abs() < 1e-6, "{file}: input {x:?} gives {got}, PyTorch {y}");
        }
        assert_eq!(
            Policy::load(&path),
            Ok(Policy::Mlp(Box::new(reference.clone()))),
            "{file}"
        );
    }
}

#[test]
fn a_damaged_checkpoint_is_refused_with_its_file() {
    let good = std::fs::read(fixtures().join("public_layout.pt")).expect("fixture");
    let dir = std::env::temp_dir().join(format!("intlab-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    // Cut in the middle of the zip, and a legacy file cut in its storages.
    let legacy = std::fs::read(fixtures().join("legacy_state_dict.pt")).expect("fixture");
    for (name, bytes, reason) in [
        ("cut.pt", &good[..good.len() / 2], "zip"),
        ("legacy-cut.pt", &legacy[..legacy.len() - 100], "cut short"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).expect("write");
        let e = checkpoint::load(&path).expect_err("refused");
        assert_eq!(e.file, path);
        assert!(e.message.contains(reason), "{name}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
