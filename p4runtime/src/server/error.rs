//! Errors as P4Runtime reports them: a gRPC status for the call, and for a Write one
//! `p4.v1.Error` per update, packed in the status's details (a `google.rpc.Status`).

use prost::Message;
use tonic::{Code, Status};

use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4rt;

/// Refused when an update of `kind` does not fit whether `what` exists: an INSERT of one that
/// does, a MODIFY or DELETE of one that does not.
pub fn check_exists(kind: p4rt::update::Type, exists: bool, what: &str) -> Result<(), UpdateError> {
    use p4rt::update::Type;
    match kind {
        Type::Insert if exists => Err(UpdateError::exists(format!("{what} exists"))),
        Type::Modify | Type::Delete if !exists => Err(UpdateError::not_found(format!("no {what}"))),
        Type::Unspecified => Err(UpdateError::invalid("update of no type")),
        _ => Ok(()),
    }
}

/// Why one update (or read of one entity) failed: a gRPC code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateError {
    /// The canonical code.
    pub code: Code,
    /// What is wrong, naming the value.
    pub message: String,
}

impl UpdateError {
    /// INVALID_ARGUMENT.
    pub fn invalid(message: impl Into<String>) -> UpdateError {
        UpdateError {
            code: Code::InvalidArgument,
            message: message.into(),
        }
    }

    /// NOT_FOUND.
    pub fn not_found(message: impl Into<String>) -> UpdateError {
        UpdateError {
            code: Code::NotFound,
            message: message.into(),
        }
    }

    /// ALREADY_EXISTS.
    pub fn exists(message: impl Into<String>) -> UpdateError {
        UpdateError {
            code: Code::AlreadyExists,
            message: message.into(),
        }
    }

    /// UNIMPLEMENTED.
    pub fn unimplemented(message: impl Into<String>) -> UpdateError {
        UpdateError {
            code: Code::Unimplemented,
            message: message.into(),
        }
    }

    /// A whole call failing with this.
    pub fn status(&self) -> Status {
        Status::new(self.code, self.message.clone())
    }
}

/// A Write's result: OK when every update applied, else UNKNOWN with one `p4.v1.Error` per
/// update in order (code OK for those that applied), as the specification asks.
pub fn write_status(results: &[Result<(), UpdateError>]) -> Result<(), Status> {
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed == 0 {
        return Ok(());
    }
    let details = results
        .iter()
        .map(|r| {
            let e = match r {
                Ok(()) => p4rt::Error::default(),
                Err(e) => p4rt::Error {
                    canonical_code: e.code as i32,
                    message: e.message.clone(),
                    ..Default::default()
                },
            };
            prost_types::Any {
                type_url: "type.googleapis.com/p4.v1.Error".into(),
                value: e.encode_to_vec(),
            }
        })
        .collect();
    let first = results
        .iter()
        .find_map(|r| r.as_ref().err())
        .map_or(String::new(), |e| e.message.clone());
    let message = format!("{failed} of {} updates failed; the first: {first}", results.len());
    let status = rpc::Status {
        code: Code::Unknown as i32,
        message: message.clone(),
        details,
    };
    Err(Status::with_details(
        Code::Unknown,
        message,
        status.encode_to_vec().into(),
    ))
}
