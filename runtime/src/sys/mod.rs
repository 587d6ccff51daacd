//! System calls, each behind a safe function that checks its result: entering a network
//! namespace, interface offloads (the ethtool ioctl, so no `ethtool` program is needed),
//! per-namespace sysctls, timer slack, the lab's sockets and their batched I/O (system calls,
//! mapped packet rings, or AF_XDP sockets with the small XDP program that feeds them), eventfd
//! and epoll, poll, signals to processes, and the open-file limit; what the NIC of a lab host
//! needs of the programs that use it: their descriptors (pidfd) and their memory; and mounts,
//! for the view a program has of its host's device.

pub mod bpf;
pub mod epoll;
pub mod eventfd;
pub mod mmsg;
pub mod mount;
pub mod netns;
pub mod offload;
pub mod packet_ring;
pub mod pidfd;
pub mod poll;
pub mod process;
pub mod process_memory;
pub mod rlimit;
pub mod socket;
pub mod sysctl;
pub mod thread;
pub mod xsk;
