//! System calls, each behind a safe function that checks its result: entering a network
//! namespace, interface offloads (the ethtool ioctl, so no `ethtool` program is needed),
//! per-namespace sysctls, and thread timer slack.

pub mod netns;
pub mod offload;
pub mod sysctl;
pub mod thread;
