//! intlab's runtime layer, below the switch and the transport: the system calls the lab needs,
//! wrapped once in [`sys`], the only module of the workspace's data path allowed `unsafe`
//! system calls. rustix covers some of them, but not recvmmsg or the ethtool ioctl, and one
//! small module over libc is simpler to audit than two layers.

#![warn(missing_docs)]

pub mod sys;
