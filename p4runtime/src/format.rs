//! A P4Runtime message in protobuf's three forms: binary, text (p4c's `.p4info.txtpb`,
//! p4runtime-shell's input) and JSON (protobuf's JSON mapping, as `.p4info.json`).

use std::sync::OnceLock;

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, ReflectMessage, Value};

use crate::proto::DESCRIPTORS;

/// A message that cannot be written or read in a form.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The built-in descriptors do not describe it (a bug of the build).
    #[error("no descriptor for {0}")]
    NoDescriptor(String),
    /// Bytes or text that are not the message.
    #[error("not a {message}: {reason}")]
    Parse {
        /// The message's full name.
        message: String,
        /// Why.
        reason: String,
    },
}

/// The three forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Protobuf's binary encoding.
    Binary,
    /// Protobuf's text format.
    Text,
    /// Protobuf's JSON mapping.
    Json,
}

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    // The descriptors are built into the binary by the build script, which checked them.
    POOL.get_or_init(|| DescriptorPool::decode(DESCRIPTORS).unwrap_or_else(|_| DescriptorPool::new()))
}

/// The descriptor of message type `full_name`.
fn descriptor(full_name: &str) -> Result<prost_reflect::MessageDescriptor, FormatError> {
    pool()
        .get_message_by_name(full_name)
        .ok_or_else(|| FormatError::NoDescriptor(full_name.to_owned()))
}

fn dynamic(full_name: &str, bytes: &[u8]) -> Result<DynamicMessage, FormatError> {
    DynamicMessage::decode(descriptor(full_name)?, bytes).map_err(|e| FormatError::Parse {
        message: full_name.to_owned(),
        reason: e.to_string(),
    })
}

/// `m` (protobuf type `full_name`, such as `p4.config.v1.P4Info`) in form `form`.
pub fn write<M: Message>(m: &M, full_name: &str, form: Form) -> Result<Vec<u8>, FormatError> {
    let bytes = m.encode_to_vec();
    match form {
        Form::Binary => Ok(bytes),
        Form::Text => {
            let d = dynamic(full_name, &bytes)?;
            let mut text = format!(
                "# proto-file: {}\n# proto-message: {full_name}\n\n",
                d.descriptor().parent_file().name()
            );
            text_message(&d, 0, &mut text);
            Ok(text.into_bytes())
        }
        Form::Json => {
            let d = dynamic(full_name, &bytes)?;
            let mut out = serde_json::to_vec_pretty(&d).map_err(|e| FormatError::Parse {
                message: full_name.to_owned(),
                reason: e.to_string(),
            })?;
            out.push(b'\n');
            Ok(out)
        }
    }
}

/// A message of type `M` (protobuf type `full_name`) from `data` in form `form`.
pub fn read<M: Message + Default>(data: &[u8], full_name: &str, form: Form) -> Result<M, FormatError> {
    let parse = |reason: String| FormatError::Parse {
        message: full_name.to_owned(),
        reason,
    };
    let bytes = match form {
        Form::Binary => data.to_vec(),
        Form::Text => {
            let text = std::str::from_utf8(data).map_err(|e| parse(e.to_string()))?;
            DynamicMessage::parse_text_format(descriptor(full_name)?, text)
                .map_err(|e| parse(e.to_string()))?
                .encode_to_vec()
        }
        Form::Json => {
            let mut de = serde_json::Deserializer::from_slice(data);
            DynamicMessage::deserialize(descriptor(full_name)?, &mut de)
                .map_err(|e| parse(e.to_string()))?
                .encode_to_vec()
        }
    };
    M::decode(bytes.as_slice()).map_err(|e| parse(e.to_string()))
}

/// `m`'s set fields in protobuf's text format as protoc and p4c print it: one line per scalar,
/// a block per message, a repeated field as one entry per element, in field-number order.
fn text_message(m: &DynamicMessage, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    for (field, value) in m.fields() {
        let kind = field.kind();
        match value {
            Value::List(list) => {
                for v in list {
                    text_field(field.name(), v, &kind, depth, out);
                }
            }
            Value::Map(map) => {
                // A map is its entries on the wire: messages of a key and a value.
                let Kind::Message(entry) = &kind else { continue };
                let (k_kind, v_kind) = (entry.map_entry_key_field().kind(), entry.map_entry_value_field().kind());
                for (k, v) in map {
                    out.push_str(&format!("{pad}{} {{\n", field.name()));
                    text_field("key", &Value::from(k.clone()), &k_kind, depth + 1, out);
                    text_field("value", v, &v_kind, depth + 1, out);
                    out.push_str(&format!("{pad}}}\n"));
                }
            }
            v => text_field(field.name(), v, &kind, depth, out),
        }
    }
}

/// One field's line, or its block for a message.
fn text_field(name: &str, v: &Value, kind: &Kind, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    if let Value::Message(inner) = v {
        out.push_str(&format!("{pad}{name} {{\n"));
        text_message(inner, depth + 1, out);
        out.push_str(&format!("{pad}}}\n"));
    } else {
        out.push_str(&format!("{pad}{name}: {}\n", scalar(v, kind)));
    }
}

/// A scalar as text format writes it: enums by name, strings and bytes quoted with C escapes.
fn scalar(v: &Value, kind: &Kind) -> String {
    match v {
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => e.get_value(*n).map_or_else(|| n.to_string(), |x| x.name().to_owned()),
            _ => n.to_string(),
        },
        Value::String(s) => quoted(s.as_bytes()),
        Value::Bytes(b) => quoted(b),
        Value::Bool(b) => b.to_string(),
        Value::I32(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F32(n) => n.to_string(),
        Value::F64(n) => n.to_string(),
        Value::Message(_) | Value::List(_) | Value::Map(_) => String::new(),
    }
}

/// `bytes` between double quotes, escaped as protobuf's C++ text printer escapes them.
fn quoted(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes {
        match b {
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b'"' => s.push_str("\\\""),
            b'\'' => s.push_str("\\'"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(char::from(b)),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s.push('"');
    s
}
