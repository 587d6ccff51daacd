//! A forwarder with no logic at all: one thread moves every frame that arrives on one veth to
//! the other, through AF_PACKET sockets (recvmmsg and sendmmsg, as the switch's ports) or
//! AF_XDP sockets. No parsing, no queues, no timers. The system bench runs applications through
//! it beside the bridge and the switch, to show what a user-space switch on the machine could
//! reach at best: the switch cannot do less work per frame than this.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use intlab_runtime::sys::mmsg::{self, BATCH, RecvMeta};
use intlab_runtime::sys::netns;
use intlab_runtime::sys::socket;
use intlab_runtime::sys::xsk::{XskPort, XskSizes};

/// How the forwarder reads and writes its two ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BareIo {
    /// AF_PACKET sockets, recvmmsg and sendmmsg.
    Syscalls,
    /// AF_XDP sockets in copy mode.
    Xdp,
}

enum BarePort {
    Packet(OwnedFd),
    Xdp(Box<XskPort>),
}

impl BarePort {
    fn open(device: &str, io: BareIo) -> io::Result<BarePort> {
        Ok(match io {
            BareIo::Syscalls => BarePort::Packet(socket::packet(device)?),
            BareIo::Xdp => BarePort::Xdp(Box::new(XskPort::open(
                device,
                XskSizes {
                    rx: 2048,
                    tx: 512,
                    max_frame: 1518,
                },
            )?)),
        })
    }

    fn fd(&self) -> RawFd {
        match self {
            BarePort::Packet(fd) => fd.as_raw_fd(),
            BarePort::Xdp(x) => x.fd(),
        }
    }

    /// Reads what waits into `bufs` (each 2 KB); returns the frames' lengths' count.
    fn recv(&mut self, bufs: &mut [Vec<u8>], lens: &mut [usize], meta: &mut [RecvMeta]) -> io::Result<usize> {
        match self {
            BarePort::Packet(fd) => {
                let n = mmsg::recv_batch(fd.as_raw_fd(), bufs, meta)?;
                for i in 0..n {
                    lens[i] = meta[i].len;
                }
                Ok(n)
            }
            BarePort::Xdp(x) => {
                let mut n = 0;
                x.recv(bufs.len(), |f| {
                    let len = f.data.len().min(bufs[n].len());
                    bufs[n][..len].copy_from_slice(&f.data[..len]);
                    lens[n] = len;
                    n += 1;
                })
            }
        }
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        match self {
            BarePort::Packet(fd) => mmsg::send_batch(fd.as_raw_fd(), frames, &[]),
            BarePort::Xdp(x) => x.send(frames),
        }
    }
}

/// A running forwarder between two interfaces of one namespace; stopped when dropped.
pub struct BareForwarder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<u64>>>,
}

impl BareForwarder {
    /// Starts forwarding between `a` and `b`, interfaces of the namespace at `netns_path`.
    pub fn start(netns_path: &Path, a: &str, b: &str, io: BareIo) -> io::Result<BareForwarder> {
        let (a, b) = (a.to_owned(), b.to_owned());
        let ports = netns::run_in(netns_path, move || {
            Ok([BarePort::open(&a, io)?, BarePort::open(&b, io)?])
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bare-fwd".into())
            .spawn(move || forward(ports, &flag))?;
        Ok(BareForwarder {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops it; returns how many frames it forwarded.
    pub fn stop(mut self) -> io::Result<u64> {
        self.finish()
    }

    fn finish(&mut self) -> io::Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| io::Error::other("the forwarder panicked"))?,
            None => Ok(0),
        }
    }
}

impl Drop for BareForwarder {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            eprintln!("bare forwarder: {e}");
        }
    }
}

fn forward(mut ports: [BarePort; 2], stop: &AtomicBool) -> io::Result<u64> {
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; 2048]).collect();
    let mut lens = [0usize; BATCH];
    let mut meta = [RecvMeta::default(); BATCH];
    let mut forwarded = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut moved = 0;
        for from in 0..2 {
            let n = ports[from].recv(&mut bufs, &mut lens, &mut meta)?;
            if n == 0 {
                continue;
            }
            let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
            for (f, (b, &l)) in frames.iter_mut().zip(bufs.iter().zip(&lens)).take(n) {
                *f = &b[..l];
            }
            ports[1 - from].send(&frames[..n])?;
            moved += n;
        }
        forwarded += moved as u64;
        if moved == 0 {
            // A 50 ms timeout so that `stop` is seen.
            intlab_runtime::sys::poll::readable(&ports.each_ref().map(|p| p.fd()), 50)?;
        }
    }
    Ok(forwarded)
}
