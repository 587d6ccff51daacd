//! Frame buffers and the pool that recycles them, so forwarding allocates nothing once warm.

use crossbeam_channel::{Receiver, Sender};
use int_format::frame::FrameLayout;

/// Bytes kept free past the largest frame, for the INT hops a frame gains on its way.
pub const INT_TAILROOM: usize = 512;

/// One frame and what the pipeline learned about it.
#[derive(Debug)]
pub struct FrameBuf {
    data: Box<[u8]>,
    /// Frame length.
    pub len: usize,
    /// Port it came in on.
    pub ingress: u16,
    /// When it arrived, on the switch clock.
    pub arrival_ns: u64,
    /// `arrival_ns` was set by the port (kernel timestamp, or the virtual time of a link).
    pub arrival_known: bool,
    /// Where its layers sit, when it is IPv4/UDP.
    pub layout: Option<FrameLayout>,
    /// The frame was longer than the buffer and arrived cut short.
    pub truncated: bool,
    /// Its P4 program's values between ingress and egress (kept with the buffer for reuse).
    pub p4: Option<Box<intlab_p4::PacketState>>,
}

impl FrameBuf {
    fn new(capacity: usize) -> FrameBuf {
        FrameBuf {
            data: vec![0; capacity].into_boxed_slice(),
            len: 0,
            ingress: 0,
            arrival_ns: 0,
            arrival_known: false,
            layout: None,
            truncated: false,
            p4: None,
        }
    }

    /// The frame.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// The frame, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data[..self.len]
    }

    /// The whole buffer, for receiving into and for growing the frame.
    pub fn buffer_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Buffer capacity.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// Copies `other`'s frame and metadata into this buffer (for flooding).
    pub fn copy_from(&mut self, other: &FrameBuf) {
        let n = other.len.min(self.data.len());
        self.data[..n].copy_from_slice(&other.data[..n]);
        self.len = n;
        self.ingress = other.ingress;
        self.arrival_ns = other.arrival_ns;
        self.arrival_known = other.arrival_known;
        self.layout = other.layout;
        self.truncated = other.truncated;
    }
}

/// The frame's bytes: what a batched send sends.
impl AsRef<[u8]> for FrameBuf {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

/// The whole buffer: what a batched receive fills.
impl AsMut<[u8]> for FrameBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

/// A bounded pool of equal-sized frame buffers shared by all workers of a switch.
#[derive(Debug, Clone)]
pub struct FramePool {
    free_tx: Sender<FrameBuf>,
    free_rx: Receiver<FrameBuf>,
    capacity: usize,
}

impl FramePool {
    /// A pool of buffers of `capacity` bytes, keeping at most `keep` free ones.
    pub fn new(capacity: usize, keep: usize) -> FramePool {
        let (free_tx, free_rx) = crossbeam_channel::bounded(keep);
        FramePool {
            free_tx,
            free_rx,
            capacity,
        }
    }

    /// A free buffer (allocated only while the pool is still filling up).
    pub fn get(&self) -> FrameBuf {
        let mut b = self.free_rx.try_recv().unwrap_or_else(|_| FrameBuf::new(self.capacity));
        b.len = 0;
        b.arrival_known = false;
        b.layout = None;
        b.truncated = false;
        b
    }

    /// Gives a buffer back.
    pub fn put(&self, b: FrameBuf) {
        let _ = self.free_tx.try_send(b);
    }

    /// Buffer capacity in bytes.
    pub fn buffer_capacity(&self) -> usize {
        self.capacity
    }
}
