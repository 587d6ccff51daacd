//! A TAP device the switch creates and keeps the descriptor of. The kernel side can be moved
//! into a host's namespace (`ip link set DEV netns NS`) while the switch goes on using the fd.
//! A TAP fd carries one frame per read or write: there is no batched call for it.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use tun_rs::{DeviceBuilder, Layer, SyncDevice};

use crate::frame::FrameBuf;

/// A TAP device.
pub struct TapDevice {
    dev: SyncDevice,
    name: String,
}

impl std::fmt::Debug for TapDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TapDevice({})", self.name)
    }
}

impl TapDevice {
    /// Creates TAP device `name` (no packet-information header, no offloads), non-blocking.
    pub fn create(name: &str) -> io::Result<TapDevice> {
        let dev = DeviceBuilder::new()
            .name(name)
            .layer(Layer::L2)
            .offload(false)
            .packet_information(false)
            .build_sync()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create TAP `{name}`: {e}")))?;
        dev.set_nonblocking(true)?;
        Ok(TapDevice {
            dev,
            name: name.to_owned(),
        })
    }

    /// The device's descriptor.
    pub fn fd(&self) -> RawFd {
        self.dev.as_raw_fd()
    }

    /// Reads frames until none is waiting or `bufs` is full.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf]) -> io::Result<usize> {
        let mut n = 0;
        while n < bufs.len() {
            match self.dev.recv(bufs[n].buffer_mut()) {
                Ok(len) => {
                    bufs[n].truncated = len > bufs[n].capacity();
                    bufs[n].len = len.min(bufs[n].capacity());
                    n += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => break, // device down
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// Writes the frames one by one; returns how many went out, from the front.
    pub fn send_batch(&mut self, frames: &[FrameBuf]) -> io::Result<usize> {
        let mut sent = 0;
        for f in frames.iter() {
            match self.dev.send(f.bytes()) {
                Ok(_) => sent += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::EIO) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }
}
