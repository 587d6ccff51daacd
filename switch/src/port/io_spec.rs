//! What a port is (a TAP, a veth, an in-process link, a tunnel, a CPU port) and how a switch
//! reads and writes its veths.

use std::path::PathBuf;

use serde::Deserialize;

/// How a port reaches the outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortIo {
    /// A TAP device the switch creates (and keeps the fd of); its kernel side may then be moved
    /// into a host's namespace.
    Tap {
        /// Device name.
        device: String,
    },
    /// An AF_PACKET socket on an existing interface (the switch's end of a veth pair), opened in
    /// `netns` when given.
    Veth {
        /// Interface name.
        device: String,
        /// Namespace (a path such as /var/run/netns/NAME) the interface lives in.
        netns: Option<PathBuf>,
    },
    /// One end of an in-process link to another switch port of the same fabric.
    Link(super::LinkEnd),
    /// A tunnel device (VXLAN) to a switch port on another machine, opened in `netns`: the
    /// frames it carries are stamped with their arrival time on the lab clock.
    Tunnel {
        /// Interface name.
        device: String,
        /// Namespace (a path such as /var/run/netns/NAME) the interface lives in.
        netns: PathBuf,
        /// What its frames' trailers are tagged with.
        seal: super::tunnel::TunnelSeal,
    },
    /// A P4 switch's CPU port (`p4.cpu_port`), whose other end is the P4Runtime server.
    Controller,
}

/// How a switch reads and writes its veth ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacketIo {
    /// AF_PACKET sockets with recvmmsg and sendmmsg: a system call per batch each way.
    Syscalls,
    /// Receive and transmit rings mapped into the process (PACKET_MMAP): received frames are
    /// read without a system call, sent ones handed over with one `send` per batch.
    Ring,
    /// An AF_XDP socket per port, fed by a small XDP program on the veth: frames are copied to
    /// the switch inside the sender's own transmit path and read without a system call; sent
    /// ones handed over with one system call per batch. Needs a kernel with AF_XDP and frames
    /// that fit XDP on veth (an MTU up to about 3.5 KB).
    Xdp,
    /// AF_XDP where the kernel and the port allow it, else `syscalls` (with a warning that
    /// says why): the standalone switch's default.
    Auto,
}
