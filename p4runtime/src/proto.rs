//! The P4Runtime v1 messages and service, compiled from proto/ by the build script.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Packages `p4.v1` and `p4.config.v1`.
pub mod p4 {
    /// P4Runtime's messages and service.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/p4.v1.rs"));
    }
    /// P4Info.
    pub mod config {
        /// P4Info v1.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/p4.config.v1.rs"));
        }
    }
}

/// Package `google.rpc`: the status an RPC error carries.
pub mod google {
    /// `google.rpc.Status`.
    pub mod rpc {
        include!(concat!(env!("OUT_DIR"), "/google.rpc.rs"));
    }
}

/// The descriptors of every message, for the text and JSON forms.
pub const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));
