//! The CPU port of a P4 switch (simple_switch_grpc's `--cpu-port`): frames the program sends to
//! it go to the P4Runtime server as PacketIn, and the server's PacketOut frames arrive on it. The
//! two ends are a Unix datagram socket pair, so each frame keeps its bounds and the worker waits
//! on it as on any port.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;

use crate::frame::FrameBuf;

/// The controller's end of a P4 switch's CPU port.
#[derive(Debug, Clone)]
pub struct CpuPortEnd {
    /// The switch.
    pub switch: String,
    /// Frames the program sends to its CPU port are read here; frames written here arrive on it.
    pub socket: Arc<UnixDatagram>,
    /// The longest frame the switch takes.
    pub max_frame: usize,
}

/// The switch's end of a CPU port.
#[derive(Debug)]
pub struct ControllerSocket {
    socket: UnixDatagram,
}

impl ControllerSocket {
    /// A CPU port: the switch's end, and the controller's (blocking, to be set as its user likes).
    pub fn pair() -> io::Result<(ControllerSocket, UnixDatagram)> {
        let (switch, controller) = UnixDatagram::pair()?;
        switch.set_nonblocking(true)?;
        Ok((ControllerSocket { socket: switch }, controller))
    }

    /// The descriptor to wait on.
    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Reads frames until none is waiting or `bufs` is full.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf]) -> io::Result<usize> {
        let mut n = 0;
        while n < bufs.len() {
            match self.socket.recv(bufs[n].buffer_mut()) {
                Ok(len) => {
                    bufs[n].truncated = len > bufs[n].capacity();
                    bufs[n].len = len.min(bufs[n].capacity());
                    n += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// Writes the frames one by one; returns how many went, from the front. A controller end
    /// that is gone (no P4Runtime server) takes every frame: the program's PacketIns are lost, as
    /// BMv2 loses them with no client.
    pub fn send_batch(&mut self, frames: &[FrameBuf]) -> io::Result<usize> {
        let mut sent = 0;
        for f in frames {
            match self.socket.send(f.bytes()) {
                Ok(_) => sent += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNREFUSED | libc::ENOTCONN)) => sent += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }
}
