//! System calls, each behind a safe function that checks its result: entering a network
//! namespace, interface offloads (the ethtool ioctl, so no `ethtool` program is needed),
//! per-namespace sysctls, timer slack, the lab's sockets and their batched I/O (system calls or
//! mapped packet rings), eventfd and epoll, and the open-file limit.

pub mod epoll;
pub mod eventfd;
pub mod mmsg;
pub mod netns;
pub mod offload;
pub mod packet_ring;
pub mod rlimit;
pub mod socket;
pub mod sysctl;
pub mod thread;
