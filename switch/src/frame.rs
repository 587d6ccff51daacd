//! Frame buffers and the pool that recycles them, so forwarding allocates nothing once warm.

use std::sync::{Arc, Mutex, MutexGuard};

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
    /// What egress needs of its P4 program's values after ingress (kept with the buffer for
    /// reuse).
    pub p4: Option<Box<intlab_p4::CarriedState>>,
    /// The queue (priority) a P4 program chose for it, when one did.
    pub p4_priority: Option<u8>,
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
            p4_priority: None,
        }
    }

    /// Forgets the frame it held (the buffers stay for reuse).
    fn reset(&mut self) {
        self.len = 0;
        self.arrival_known = false;
        self.layout = None;
        self.truncated = false;
        self.p4_priority = None;
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

    /// A new buffer holding a copy of this frame and its metadata (a link that duplicates it;
    /// rare enough that it need not come from a pool).
    pub fn duplicate(&self) -> FrameBuf {
        let mut copy = FrameBuf::new(self.capacity());
        copy.copy_from(self);
        copy
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
        self.p4_priority = other.p4_priority;
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

/// A bounded pool of equal-sized frame buffers shared by all workers of a switch, last in
/// first out, so that the buffers in use stay few and warm in the caches.
#[derive(Debug, Clone)]
pub struct FramePool {
    free: Arc<Mutex<Vec<FrameBuf>>>,
    keep: usize,
    capacity: usize,
}

impl FramePool {
    /// A pool of buffers of `capacity` bytes, keeping at most `keep` free ones.
    pub fn new(capacity: usize, keep: usize) -> FramePool {
        FramePool {
            free: Arc::new(Mutex::new(Vec::new())),
            keep,
            capacity,
        }
    }

    fn free(&self) -> MutexGuard<'_, Vec<FrameBuf>> {
        // A worker that panicked holding the lock left a list of whole buffers: still usable.
        self.free.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A free buffer (allocated only while the pool is still filling up).
    pub fn get(&self) -> FrameBuf {
        let mut b = self.free().pop().unwrap_or_else(|| FrameBuf::new(self.capacity));
        b.reset();
        b
    }

    /// Gives a buffer back.
    pub fn put(&self, b: FrameBuf) {
        let mut free = self.free();
        if free.len() < self.keep {
            free.push(b);
        }
    }

    /// Moves up to `n` free buffers to `to`.
    fn take(&self, n: usize, to: &mut Vec<FrameBuf>) {
        let mut free = self.free();
        let from = free.len().saturating_sub(n);
        to.extend(free.drain(from..));
    }

    /// Gives back the buffers of `from` past its first `keep` (those the pool has no room for
    /// are freed).
    fn give(&self, from: &mut Vec<FrameBuf>, keep: usize) {
        let mut free = self.free();
        let room = self.keep.saturating_sub(free.len());
        let surplus = from.len().saturating_sub(keep);
        free.extend(from.drain(from.len() - surplus..).take(room));
    }

    /// Buffer capacity in bytes.
    pub fn buffer_capacity(&self) -> usize {
        self.capacity
    }
}

/// A worker's own stack of free buffers in front of the shared pool: the buffer freed last is
/// the next one used, so a worker keeps recycling the few buffers still in its cache, and
/// takes the pool's lock once per batch, not per frame. (A first-in first-out pool would cycle
/// every frame through all the buffers a queue ever held, each cold, and with it the P4 state
/// each buffer keeps.)
#[derive(Debug)]
pub struct FrameStack {
    pool: FramePool,
    free: Vec<FrameBuf>,
}

/// Free buffers a worker keeps before it gives them back to the shared pool.
const STACK_DEPTH: usize = 64;

impl FrameStack {
    /// An empty stack in front of `pool`.
    pub fn new(pool: FramePool) -> FrameStack {
        FrameStack {
            pool,
            free: Vec::with_capacity(STACK_DEPTH),
        }
    }

    /// A free buffer, the one freed last if any.
    pub fn get(&mut self) -> FrameBuf {
        if self.free.is_empty() {
            // A worker that only receives (its frames freed by the workers that send them)
            // refills from the pool, a batch per lock.
            self.pool.take(STACK_DEPTH / 2, &mut self.free);
        }
        match self.free.pop() {
            Some(mut b) => {
                b.reset();
                b
            }
            None => self.pool.get(),
        }
    }

    /// Gives a buffer back.
    pub fn put(&mut self, b: FrameBuf) {
        if self.free.len() >= STACK_DEPTH {
            self.pool.give(&mut self.free, STACK_DEPTH / 2);
        }
        self.free.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_reuses_the_buffer_it_freed_last() {
        let mut stack = FrameStack::new(FramePool::new(64, 16));
        let (a, b) = (stack.get(), stack.get());
        let last = b.data.as_ptr();
        stack.put(a);
        stack.put(b);
        assert_eq!(stack.get().data.as_ptr(), last);
    }

    #[test]
    fn buffers_one_worker_frees_come_back_to_the_worker_that_receives() {
        // The receiving worker takes buffers, the sending worker frees them: they must flow
        // back through the shared pool, not be allocated anew.
        let pool = FramePool::new(64, 1 << 10);
        let (mut receiving, mut sending) = (FrameStack::new(pool.clone()), FrameStack::new(pool.clone()));
        let frames: Vec<FrameBuf> = (0..3 * STACK_DEPTH).map(|_| receiving.get()).collect();
        let addresses: Vec<*const u8> = frames.iter().map(|f| f.data.as_ptr()).collect();
        for f in frames {
            sending.put(f);
        }
        let again = receiving.get();
        assert!(addresses.contains(&again.data.as_ptr()), "a fresh buffer was allocated");
    }
}
