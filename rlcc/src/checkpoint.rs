//! PyTorch checkpoints holding RL-CC's network (4 → 12 → 12 → 1, no biases), as `torch.save`
//! writes them: the zip format (PyTorch 1.6 and later: `NAME/data.pkl` and one
//! `NAME/data/KEY` entry of raw little-endian bytes per storage) and the legacy format (a magic
//! number, then pickles of the protocol version, the system's sizes, the object and the storage
//! keys, then each storage's element count and bytes). The object may be a state_dict, the
//! public RL-CC repository's dict (`model_state_dict` beside `optimizer_state_dict`), or the
//! whole module. Its pickle is read without running code ([`crate::pickle`]); the three weight
//! matrices are the float tensors of shapes [12, 4], [12, 12] and [1, 12] outside the
//! optimizer's state. No third-party weights ship with intlab; users point it at their own.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use crate::PolicyError;
use crate::mlp::{HIDDEN, INPUTS, Mlp};
use crate::pickle::{self, Value};

/// The three weight matrices' shapes, as PyTorch's `Linear.weight` (out, in).
const SHAPES: [[usize; 2]; 3] = [[HIDDEN, INPUTS], [HIDDEN, HIDDEN], [1, HIDDEN]];

/// The legacy format's first pickle: protocol 2, the magic number 0x1950a86a20f9469cfc6c.
const LEGACY_MAGIC: [u8; 15] = [
    0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, b'.',
];

/// Deepest nesting walked when looking for tensors (a module tree is a few levels).
const MAX_DEPTH: usize = 32;

/// A tensor a checkpoint refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TensorRef {
    /// Where in the object: dict keys and module names joined by dots.
    name: String,
    /// The storage's key.
    key: String,
    /// Bytes per element: 4 for float32, 8 for float64; 0 for any other type.
    float_bytes: usize,
    offset: usize,
    shape: Vec<usize>,
    stride: Vec<usize>,
}

/// Reads the MLP from a checkpoint's bytes.
pub fn from_bytes(bytes: &[u8]) -> Result<Mlp, String> {
    let (tensors, storages) = if bytes.starts_with(b"PK\x03\x04") {
        read_zip(bytes)?
    } else if bytes.starts_with(&LEGACY_MAGIC) {
        read_legacy(bytes)?
    } else {
        return Err("not a PyTorch checkpoint (neither a zip archive nor the legacy format)".into());
    };
    let model: Vec<&TensorRef> = tensors
        .iter()
        .filter(|t| !t.name.split('.').any(|part| part.starts_with("optimizer")))
        .collect();
    let mut layers = Vec::new();
    for shape in SHAPES {
        let found: Vec<&&TensorRef> = model.iter().filter(|t| t.shape == shape && t.float_bytes > 0).collect();
        let t = match found.as_slice() {
            [t] => t,
            [] => {
                let seen: Vec<String> = model.iter().map(|t| format!("{} {:?}", t.name, t.shape)).collect();
                return Err(format!(
                    "no float tensor of shape {shape:?} outside the optimizer state: not RL-CC's 4-12-12-1 network (found {})",
                    if seen.is_empty() {
                        "no tensors".to_owned()
                    } else {
                        seen.join(", ")
                    }
                ));
            }
            many => {
                let names: Vec<&str> = many.iter().map(|t| t.name.as_str()).collect();
                return Err(format!("several tensors of shape {shape:?}: {}", names.join(", ")));
            }
        };
        let data = storages
            .get(&t.key)
            .ok_or_else(|| format!("{}: storage {} is missing", t.name, t.key))?;
        layers.push(matrix(t, data)?);
    }
    Mlp::from_layers(&layers)
}

/// Reads the MLP from a checkpoint file.
pub fn load(path: &Path) -> Result<Mlp, PolicyError> {
    let bytes = std::fs::read(path).map_err(|e| PolicyError::at(path, e.to_string()))?;
    from_bytes(&bytes).map_err(|m| PolicyError::at(path, m))
}

type Storages = HashMap<String, Vec<u8>>;

fn read_zip(bytes: &[u8]) -> Result<(Vec<TensorRef>, Storages), String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format!("not a zip archive: {e}"))?;
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    let pkl = names
        .iter()
        .find(|n| n.ends_with("/data.pkl") || *n == "data.pkl")
        .ok_or("no data.pkl entry: not a PyTorch checkpoint")?
        .clone();
    let prefix = pkl.strip_suffix("data.pkl").unwrap_or("").to_owned();
    let mut entry = |name: &str| -> Result<Vec<u8>, String> {
        let mut raw = Vec::new();
        zip.by_name(name)
            .map_err(|e| format!("{name}: {e}"))?
            .read_to_end(&mut raw)
            .map_err(|e| format!("{name}: {e}"))?;
        Ok(raw)
    };
    if let Ok(order) = entry(&format!("{prefix}byteorder"))
        && order != b"little"
    {
        return Err(format!(
            "saved {} endian: only little endian is read",
            String::from_utf8_lossy(&order)
        ));
    }
    let (root, _) = pickle::read(&entry(&pkl)?).map_err(|e| format!("{pkl}: {e}"))?;
    let tensors = tensors_of(&root)?;
    let mut storages = Storages::new();
    for t in &tensors {
        if !storages.contains_key(&t.key) {
            storages.insert(t.key.clone(), entry(&format!("{prefix}data/{}", t.key))?);
        }
    }
    Ok((tensors, storages))
}

fn read_legacy(bytes: &[u8]) -> Result<(Vec<TensorRef>, Storages), String> {
    let mut at = LEGACY_MAGIC.len();
    let mut next = |what: &str| -> Result<Value, String> {
        let (v, n) = pickle::read(&bytes[at..]).map_err(|e| format!("legacy checkpoint, {what}: {e}"))?;
        at += n;
        Ok(v)
    };
    let protocol = next("protocol")?;
    if protocol.as_int() != Some(1001) {
        return Err(format!("legacy checkpoint of protocol {protocol:?}: expected 1001"));
    }
    let sys = next("system info")?;
    if let Value::Dict(d) = &sys
        && d.borrow()
            .iter()
            .any(|(k, v)| k.as_str() == Some("little_endian") && v.as_int() == Some(0))
    {
        return Err("saved big endian: only little endian is read".into());
    }
    let root = next("object")?;
    let keys = next("storage keys")?
        .items()
        .ok_or("legacy checkpoint: the storage keys are no list")?;
    let tensors = tensors_of(&root)?;
    let size_of: HashMap<&str, usize> = tensors.iter().map(|t| (t.key.as_str(), t.float_bytes.max(1))).collect();
    let mut storages = Storages::new();
    for k in keys {
        let key = k
            .as_str()
            .ok_or("legacy checkpoint: a storage key is no str")?
            .to_owned();
        let head = bytes
            .get(at..at + 8)
            .ok_or_else(|| format!("legacy checkpoint cut short at storage {key}"))?;
        let count = u64::from_le_bytes(head.try_into().map_err(|_| "count")?) as usize;
        let elem = size_of.get(key.as_str()).copied().unwrap_or(4);
        let len = count.checked_mul(elem).ok_or("a storage larger than memory")?;
        let data = bytes
            .get(at + 8..at + 8 + len)
            .ok_or_else(|| format!("legacy checkpoint cut short in storage {key}"))?;
        storages.insert(key, data.to_vec());
        at += 8 + len;
    }
    Ok((tensors, storages))
}

/// Every tensor in `root`, named by the dict keys and module names that lead to it.
fn tensors_of(root: &Value) -> Result<Vec<TensorRef>, String> {
    let mut out = Vec::new();
    walk(root, "", 0, &mut out)?;
    Ok(out)
}

fn join(path: &str, part: &str) -> String {
    if path.is_empty() {
        part.to_owned()
    } else {
        format!("{path}.{part}")
    }
}

fn walk(v: &Value, path: &str, depth: usize, out: &mut Vec<TensorRef>) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    match v {
        Value::Dict(d) => {
            for (k, item) in d.borrow().iter() {
                let key = match k {
                    Value::Str(s) => s.to_string(),
                    Value::Int(i) => i.to_string(),
                    _ => continue,
                };
                // A module's own containers do not appear in the names state_dict gives.
                let next = match key.as_str() {
                    "_parameters" | "_buffers" | "_modules" => path.to_owned(),
                    _ => join(path, &key),
                };
                walk(item, &next, depth + 1, out)?;
            }
        }
        Value::List(_) | Value::Tuple(_) => {
            for (i, item) in v.items().unwrap_or_default().iter().enumerate() {
                walk(item, &join(path, &i.to_string()), depth + 1, out)?;
            }
        }
        Value::Object(o) => {
            let o = o.borrow();
            match &*o.class {
                "torch._utils _rebuild_tensor_v2" | "torch._utils _rebuild_tensor" => {
                    out.push(tensor(path, &o.args)?);
                }
                "torch._utils _rebuild_parameter" | "torch._utils _rebuild_parameter_with_state" => {
                    if let Some(t) = o.args.first() {
                        walk(t, path, depth + 1, out)?;
                    }
                }
                _ => {
                    if let Some(state) = &o.state {
                        walk(state, path, depth + 1, out)?;
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A tensor from `_rebuild_tensor_v2(storage, offset, size, stride, ...)`, its storage a
/// persistent ID `('storage', TYPE, KEY, LOCATION, COUNT)`.
fn tensor(name: &str, args: &[Value]) -> Result<TensorRef, String> {
    let bad = |what: &str| format!("{name}: a tensor whose {what} is not as torch.save writes it");
    let Some(Value::Persistent(pid)) = args.first() else {
        return Err(bad("storage"));
    };
    let pid = pid.items().ok_or_else(|| bad("storage"))?;
    let (Some(Value::Global(kind)), Some(key)) = (pid.get(1), pid.get(2).and_then(Value::as_str)) else {
        return Err(bad("storage"));
    };
    let float_bytes = match kind.rsplit(' ').next() {
        Some("FloatStorage") => 4,
        Some("DoubleStorage") => 8,
        _ => 0,
    };
    let dims = |v: Option<&Value>, what: &str| -> Result<Vec<usize>, String> {
        v.and_then(Value::items)
            .ok_or_else(|| bad(what))?
            .iter()
            .map(|d| {
                d.as_int()
                    .and_then(|d| usize::try_from(d).ok())
                    .ok_or_else(|| bad(what))
            })
            .collect()
    };
    let offset = args
        .get(1)
        .and_then(Value::as_int)
        .and_then(|o| usize::try_from(o).ok())
        .ok_or_else(|| bad("offset"))?;
    let shape = dims(args.get(2), "size")?;
    let stride = dims(args.get(3), "stride")?;
    if stride.len() != shape.len() {
        return Err(bad("stride"));
    }
    Ok(TensorRef {
        name: name.to_owned(),
        key: key.to_owned(),
        float_bytes,
        offset,
        shape,
        stride,
    })
}

/// The rows of 2-D float tensor `t` from its storage's bytes, through its offset and strides.
fn matrix(t: &TensorRef, data: &[u8]) -> Result<Vec<Vec<f32>>, String> {
    let [rows, cols] = [t.shape[0], t.shape[1]];
    let w = t.float_bytes;
    let value = |i: usize, j: usize| -> Result<f32, String> {
        let at = (t.offset + i * t.stride[0] + j * t.stride[1]) * w;
        let b = data
            .get(at..at + w)
            .ok_or_else(|| format!("{}: storage {} ends before element ({i}, {j})", t.name, t.key))?;
        Ok(match w {
            8 => f64::from_le_bytes(b.try_into().map_err(|_| "f64")?) as f32,
            _ => f32::from_le_bytes(b.try_into().map_err(|_| "f32")?),
        })
    };
    (0..rows).map(|i| (0..cols).map(|j| value(i, j)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_files_are_refused_with_the_reason() {
        assert!(
            from_bytes(b"{\"format\"")
                .unwrap_err()
                .contains("not a PyTorch checkpoint")
        );
        assert!(from_bytes(b"PK\x03\x04junk").unwrap_err().contains("not a zip archive"));
        let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        out.start_file("m/data/0", opts).expect("entry");
        let bytes = out.finish().expect("zip").into_inner();
        assert!(from_bytes(&bytes).unwrap_err().contains("no data.pkl"));
        let mut cut = LEGACY_MAGIC.to_vec();
        cut.extend_from_slice(&[0x80, 0x02, b'M', 0xe9, 0x03, b'.', 0x80]);
        assert!(
            from_bytes(&cut).unwrap_err().contains("system info"),
            "{:?}",
            from_bytes(&cut)
        );
    }
}
