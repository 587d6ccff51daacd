//! Queues in memory both the program and the NIC map: a header with the producer's and the
//! consumer's counters (each on its own cache line) and a power-of-two array of fixed-size
//! entries. One side produces, the other consumes; counters are 64-bit and run free. The
//! memory is shared with a peer that may write anything at any time, so it is only ever
//! reached as atomic 64-bit words (each side hands its mapping over as `[AtomicU64]`), and what
//! is read is copied out before it is decoded (`entry.rs`).
//!
//! Layouts (offsets in bytes):
//!
//! | queue | header | entries |
//! |---|---|---|
//! | send (program → NIC) | producer @0, consumer @64 | [`crate::entry::SEND_WQE_LEN`] each, from @256 |
//! | receive, shared receive (program → NIC) | the same | [`crate::entry::RECV_WQE_LEN`] each |
//! | completion (NIC → program) | producer @0, consumer @64, arm @128, producer at arm @136 | [`crate::entry::CQE_LEN`] each |
//!
//! A QP's send and receive queues share one memfd, the receive queue right after the send
//! queue ([`Layout`]). The attention area (one per program) holds the doorbell flag @0 and a
//! bitmap of the objects that want the NIC's attention from @64 ([`AREA_BITS`] bits).

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of a queue's header.
pub const HEADER_LEN: usize = 256;
/// Objects (QPs, SRQs, CQs) the attention bitmap names at most.
pub const AREA_BITS: usize = 1 << 16;
/// Bytes of the attention area.
pub const AREA_LEN: usize = 64 + AREA_BITS / 8;
/// Entries a queue may have at most.
pub const MAX_ENTRIES: u32 = 1 << 20;

/// Bytes of a queue of `entries` entries of `entry_len` bytes; None when `entries` is not a
/// power of two or above [`MAX_ENTRIES`].
pub fn queue_len(entries: u32, entry_len: usize) -> Option<usize> {
    (entries.is_power_of_two() && entries <= MAX_ENTRIES).then(|| HEADER_LEN + entries as usize * entry_len)
}

/// Where a QP's two queues are in its memfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of the send queue (from 0).
    pub send_len: usize,
    /// Bytes of the receive queue (after the send queue; 0 with an SRQ).
    pub recv_len: usize,
}

impl Layout {
    /// The layout of a QP with `sq` send and `rq` receive entries (rq 0: none).
    pub fn qp(sq: u32, rq: u32) -> Option<Layout> {
        let send_len = queue_len(sq, crate::entry::SEND_WQE_LEN)?;
        let recv_len = if rq == 0 {
            0
        } else {
            queue_len(rq, crate::entry::RECV_WQE_LEN)?
        };
        Some(Layout { send_len, recv_len })
    }

    /// Bytes in all, rounded to pages.
    pub fn total(&self) -> usize {
        (self.send_len + self.recv_len).div_ceil(4096) * 4096
    }
}

/// Memory a queue lies in: something that holds a mapping and shows it as 64-bit words.
pub trait Words: Deref<Target: AsRef<[AtomicU64]>> {}

impl<M: Deref<Target: AsRef<[AtomicU64]>>> Words for M {}

/// A queue in shared memory `M`.
#[derive(Debug)]
pub struct Queue<M> {
    memory: M,
    /// Its header's first word in the memory.
    first: usize,
    entries: u32,
    entry_words: usize,
}

impl<M: Words> Queue<M> {
    /// The queue of `entries` entries of `entry_len` bytes at byte `offset` of `memory`; None
    /// when it does not fit there, `offset` is not 64-byte aligned, `entries` is not a power of
    /// two or `entry_len` not a multiple of 8.
    pub fn new(memory: M, offset: usize, entries: u32, entry_len: usize) -> Option<Queue<M>> {
        let len = queue_len(entries, entry_len)?;
        let words = (*memory).as_ref().len();
        let fits = offset.is_multiple_of(64) && entry_len.is_multiple_of(8) && offset.checked_add(len)? <= words * 8;
        fits.then_some(Queue {
            memory,
            first: offset / 8,
            entries,
            entry_words: entry_len / 8,
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        // `new` checked the whole queue lies within the words.
        &(*self.memory).as_ref()[self.first + i]
    }

    /// The producer's counter.
    pub fn producer(&self) -> &AtomicU64 {
        self.word(0)
    }

    /// The consumer's counter.
    pub fn consumer(&self) -> &AtomicU64 {
        self.word(8)
    }

    /// A completion queue's arm word: bit 0 armed, bit 1 solicited only, the rest a sequence.
    pub fn arm(&self) -> &AtomicU64 {
        self.word(16)
    }

    /// The producer's counter as the program saw it when it armed the completion queue:
    /// completions the NIC added after that count as after the arm, even those it added
    /// before it took the arm in.
    pub fn arm_producer(&self) -> &AtomicU64 {
        self.word(17)
    }

    /// Entries.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// The first word of the entry at counter `counter`.
    fn slot(&self, counter: u64) -> usize {
        HEADER_LEN / 8 + (counter & u64::from(self.entries - 1)) as usize * self.entry_words
    }

    /// Copies the entry at counter `counter` out into `buf`, word by word (at most an entry).
    pub fn read(&self, counter: u64, buf: &mut [u8]) {
        let s = self.slot(counter);
        for (i, chunk) in buf.chunks_exact_mut(8).take(self.entry_words).enumerate() {
            chunk.copy_from_slice(&self.word(s + i).load(Ordering::Relaxed).to_le_bytes());
        }
    }

    /// Writes `buf` (at most an entry, a multiple of 8 bytes) into the entry at `counter`.
    pub fn write(&self, counter: u64, buf: &[u8]) {
        let s = self.slot(counter);
        for (i, chunk) in buf.chunks_exact(8).take(self.entry_words).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            self.word(s + i).store(u64::from_le_bytes(w), Ordering::Relaxed);
        }
    }

    /// Entries the producer has published that the consumer has not taken (at most the
    /// queue's size, whatever a peer wrote into the counters).
    pub fn waiting(&self) -> u64 {
        let p = self.producer().load(Ordering::Acquire);
        let c = self.consumer().load(Ordering::Acquire);
        p.wrapping_sub(c).min(u64::from(self.entries))
    }
}

/// A program's attention area: the doorbell flag and the bitmap.
#[derive(Debug)]
pub struct Area<M> {
    memory: M,
}

impl<M: Words> Area<M> {
    /// The area at the start of `memory`; None when it is shorter than [`AREA_LEN`].
    pub fn new(memory: M) -> Option<Area<M>> {
        ((*memory).as_ref().len() * 8 >= AREA_LEN).then_some(Area { memory })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        &(*self.memory).as_ref()[i]
    }

    /// The doorbell flag: set by the program when it rings, cleared by the NIC before it looks.
    pub fn pending(&self) -> &AtomicU64 {
        self.word(0)
    }

    /// Marks object `index` as wanting attention (program side); true when the program must
    /// ring the doorbell (nobody rang it since the NIC last looked).
    pub fn mark(&self, index: u32) -> bool {
        let i = index as usize % AREA_BITS;
        self.word(8 + i / 64).fetch_or(1 << (i % 64), Ordering::Release);
        self.pending().swap(1, Ordering::AcqRel) == 0
    }

    /// Takes every marked object (NIC side), clearing the flag first so that a mark that comes
    /// meanwhile rings again; `f` is called with each index.
    pub fn take(&self, mut f: impl FnMut(u32)) {
        self.pending().store(0, Ordering::SeqCst);
        for w in 0..AREA_BITS / 64 {
            let word = self.word(8 + w);
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                f((w * 64) as u32 + b);
            }
        }
    }
}

/// Plain words, for tests and for anything that is not shared.
#[derive(Debug)]
pub struct LocalWords(pub Vec<AtomicU64>);

impl LocalWords {
    /// `bytes` bytes of zero words.
    pub fn new(bytes: usize) -> LocalWords {
        LocalWords((0..bytes.div_ceil(8)).map(|_| AtomicU64::new(0)).collect())
    }
}

impl AsRef<[AtomicU64]> for LocalWords {
    fn as_ref(&self) -> &[AtomicU64] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn entries_wrap_and_counters_sit_apart() {
        let mem = Arc::new(LocalWords::new(8192));
        let q = Queue::new(mem.clone(), 0, 4, 64).expect("fits");
        q.write(5, &[7; 64]);
        let mut b = [0u8; 64];
        q.read(1, &mut b);
        assert_eq!(b, [7; 64], "counter 5 is slot 1 of 4");
        q.producer().store(9, Ordering::Release);
        q.consumer().store(3, Ordering::Release);
        assert_eq!(mem.0[8].load(Ordering::Relaxed), 3, "the consumer at byte 64");
        assert_eq!(
            q.waiting(),
            4,
            "no more than the queue holds, whatever the counters say"
        );
        assert_eq!(queue_len(4, 64), Some(256 + 256));
        assert_eq!(queue_len(3, 64), None);
        assert_eq!(Layout::qp(8, 0).map(|l| l.total()), Some(8192));
        assert!(Queue::new(mem.clone(), 8192 - 256, 4, 64).is_none(), "does not fit");
        assert!(Queue::new(mem, 8, 4, 64).is_none(), "not aligned");
    }

    #[test]
    fn the_doorbell_rings_once_until_the_nic_looks() {
        let area = Area::new(Arc::new(LocalWords::new(AREA_LEN))).expect("long enough");
        assert!(area.mark(3));
        assert!(!area.mark(70), "already rung");
        let mut seen = Vec::new();
        area.take(|i| seen.push(i));
        assert_eq!(seen, vec![3, 70]);
        assert!(area.mark(AREA_BITS as u32 - 1), "rings again after the NIC looked");
        assert!(Area::new(Arc::new(LocalWords::new(64))).is_none());
    }
}
