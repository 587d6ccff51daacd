//! Why a verb was refused, with the errno a program gets for it.

/// A verb the NIC refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerbsError {
    /// An argument is out of range or inconsistent (EINVAL).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// An object of that handle does not exist, or belongs to another context (EINVAL).
    #[error("no {kind} {handle}")]
    NoObject {
        /// What kind of object.
        kind: &'static str,
        /// The handle given.
        handle: u32,
    },
    /// The queue or table is full (ENOMEM).
    #[error("no room: {0}")]
    Full(String),
    /// The object is still in use (EBUSY).
    #[error("busy: {0}")]
    Busy(String),
    /// The device does not implement this (EOPNOTSUPP).
    #[error("not supported: {0}")]
    NotSupported(String),
}

impl VerbsError {
    /// The errno a program sees.
    pub fn errno(&self) -> i32 {
        match self {
            VerbsError::Invalid(_) | VerbsError::NoObject { .. } => libc::EINVAL,
            VerbsError::Full(_) => libc::ENOMEM,
            VerbsError::Busy(_) => libc::EBUSY,
            VerbsError::NotSupported(_) => libc::EOPNOTSUPP,
        }
    }

    /// An [`VerbsError::Invalid`] saying `why`.
    pub fn invalid(why: impl Into<String>) -> VerbsError {
        VerbsError::Invalid(why.into())
    }
}
