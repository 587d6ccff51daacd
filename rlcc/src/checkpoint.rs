//! The public RL-CC checkpoint (`benja263/rl-cc`, `trained_models/rlcc_nn_model`): a PyTorch
//! zip whose `<name>/data/0`, `1` and `2` hold the three weight matrices as raw little-endian
//! float32, [12, 4], [12, 12] and [1, 12]. Read without unpickling, with the shapes fixed. No
//! third-party weights ship with intlab; users point it at their own copy.

use std::io::Read;
use std::path::Path;

use crate::PolicyError;
use crate::mlp::{HIDDEN, INPUTS, Mlp};

/// The three tensors' shapes, as (rows, columns).
const SHAPES: [(usize, usize); 3] = [(HIDDEN, INPUTS), (HIDDEN, HIDDEN), (1, HIDDEN)];

/// Reads the MLP from a checkpoint's bytes.
pub fn from_bytes(bytes: &[u8]) -> Result<Mlp, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format!("not a zip archive: {e}"))?;
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    let mut layers = Vec::new();
    for (k, &(rows, cols)) in SHAPES.iter().enumerate() {
        let suffix = format!("/data/{k}");
        let name = names
            .iter()
            .find(|n| n.ends_with(&suffix))
            .ok_or_else(|| format!("no `{suffix}` entry: not an RL-CC checkpoint"))?;
        let mut raw = Vec::new();
        zip.by_name(name)
            .and_then(|mut f| f.read_to_end(&mut raw).map_err(Into::into))
            .map_err(|e| format!("{name}: {e}"))?;
        if raw.len() != rows * cols * 4 {
            return Err(format!(
                "{name}: expected {rows}×{cols} float32 ({} bytes), got {} bytes",
                rows * cols * 4,
                raw.len()
            ));
        }
        let values: Vec<f32> = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        layers.push(values.chunks(cols).map(<[f32]>::to_vec).collect::<Vec<_>>());
    }
    Mlp::from_layers(&layers)
}

/// Reads the MLP from a checkpoint file.
pub fn load(path: &Path) -> Result<Mlp, PolicyError> {
    let bytes = std::fs::read(path).map_err(|e| PolicyError::at(path, e.to_string()))?;
    from_bytes(&bytes).map_err(|m| PolicyError::at(path, m))
}

/// Writes `mlp` as a checkpoint in that layout (stored entries, as `torch.save` writes them),
/// with a placeholder `data.pkl`: for tests, and to hand our weights to tools that expect it.
pub fn to_bytes(mlp: &Mlp) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let err = |e: zip::result::ZipError| e.to_string();
    out.start_file("archive/data.pkl", opts).map_err(err)?;
    out.write_all(b"intlab: weights only").map_err(|e| e.to_string())?;
    for (k, layer) in mlp.layers().iter().enumerate() {
        out.start_file(format!("archive/data/{k}"), opts).map_err(err)?;
        let bytes: Vec<u8> = layer.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
        out.write_all(&bytes).map_err(|e| e.to_string())?;
    }
    Ok(out.finish().map_err(err)?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_in_the_public_layout_round_trips() {
        let mut m = Mlp::zeros();
        for (k, w) in m.weights_mut().enumerate() {
            *w = k as f32 / 100.0 - 1.0;
        }
        let bytes = to_bytes(&m).expect("writes");
        assert_eq!(from_bytes(&bytes), Ok(m));
    }

    #[test]
    fn wrong_shapes_and_other_files_are_refused() {
        assert!(from_bytes(b"not a zip").unwrap_err().contains("not a zip archive"));
        let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        for (k, n) in [(0, 48), (1, 144), (2, 11)] {
            out.start_file(format!("m/data/{k}"), opts).expect("entry");
            std::io::Write::write_all(&mut out, &vec![0u8; n * 4]).expect("write");
        }
        let bytes = out.finish().expect("zip").into_inner();
        let e = from_bytes(&bytes).unwrap_err();
        assert!(
            e.contains("m/data/2: expected 1×12 float32 (48 bytes), got 44 bytes"),
            "{e}"
        );
    }
}
