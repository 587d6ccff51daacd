//! One egress port's FIFO on an exact virtual line-rate schedule.
//!
//! A frame that arrives at `a` starts transmission at `s = max(a, end of the previous frame)`
//! and ends at `s + bits/B`; it reaches the far end of the link `delay` later, and that is when
//! the worker releases it. The schedule is kept in picoseconds so that rounding never adds up.
//! Occupancy, the INT queue length and txBytes all come from this schedule, never from when a
//! thread happened to wake up.

use std::collections::VecDeque;

use crate::frame::FrameBuf;
use crate::units::{Nanos, Rate};

const PS_PER_NS: u64 = 1000;

#[derive(Debug)]
struct Entry {
    frame: FrameBuf,
    wire_len: u64,
    arrival_ps: u64,
    start_ps: u64,
    release_ps: u64,
    /// Bytes enqueued on this port up to and including this frame.
    cum_bytes: u64,
    /// Frames waiting (arrived, not started) when it arrived.
    enq_packets: u32,
}

/// A frame leaving the queue, with the values its INT hop and ECN decision need.
#[derive(Debug)]
pub struct Dequeued {
    /// The frame.
    pub frame: FrameBuf,
    /// When its transmission started (ns): its egress timestamp.
    pub start_ns: u64,
    /// Bytes queued behind it (arrived, not yet started) when it started.
    pub qlen: u64,
    /// Bytes transmitted on the port before it.
    pub tx_bytes_before: u64,
    /// Bytes it occupies on the wire.
    pub wire_len: u64,
    /// When it reaches the far end of the link (ns): end of transmission plus delay.
    pub release_ns: u64,
    /// When it was queued (ns; its arrival, kept in FIFO order).
    pub enqueued_ns: u64,
    /// Frames waiting when it was queued (v1model's `enq_qdepth`).
    pub enq_packets: u32,
    /// Frames waiting behind it when it started (v1model's `deq_qdepth`).
    pub deq_packets: u32,
}

/// Why a frame was not queued.
#[derive(Debug)]
pub enum Rejected {
    /// The buffer would overflow (tail drop); the frame is handed back.
    BufferFull(FrameBuf),
}

/// The FIFO of one egress port.
#[derive(Debug)]
pub struct EgressQueue {
    entries: VecDeque<Entry>,
    rate: Rate,
    delay_ps: u64,
    buffer: u64,
    last_end_ps: u64,
    last_arrival_ps: u64,
    enqueued_bytes: u64,
    released_cum_bytes: u64,
    tx_bytes: u64,
}

impl EgressQueue {
    /// A queue draining at `rate` into a link of `delay`, holding at most `buffer` bytes.
    pub fn new(rate: Rate, delay: Nanos, buffer: u64) -> EgressQueue {
        EgressQueue {
            entries: VecDeque::with_capacity(1024),
            rate,
            delay_ps: delay.0 * PS_PER_NS,
            buffer,
            last_end_ps: 0,
            last_arrival_ps: 0,
            enqueued_bytes: 0,
            released_cum_bytes: 0,
            tx_bytes: 0,
        }
    }

    fn serialization_ps(&self, bytes: u64) -> u64 {
        (u128::from(bytes) * 8 * 1_000_000_000_000 / u128::from(self.rate.bps())) as u64
    }

    /// Bytes waiting (arrived, transmission not started) at time `t_ps`.
    fn occupancy_at_ps(&self, t_ps: u64) -> u64 {
        let i = self.entries.partition_point(|e| e.start_ps <= t_ps);
        let started = if i == 0 {
            self.released_cum_bytes
        } else {
            self.entries[i - 1].cum_bytes
        };
        self.enqueued_bytes - started
    }

    /// Bytes waiting at `t_ns`.
    pub fn occupancy_at(&self, t_ns: u64) -> u64 {
        self.occupancy_at_ps(t_ns * PS_PER_NS)
    }

    /// Queues `frame`, which will take `wire_len` bytes on the wire, as arrived at its
    /// `arrival_ns` (clamped so arrivals stay in FIFO order). Tail-drops when the bytes waiting at
    /// arrival plus this frame exceed the buffer.
    pub fn enqueue(&mut self, frame: FrameBuf, wire_len: u64) -> Result<(), Rejected> {
        let arrival_ps = (frame.arrival_ns * PS_PER_NS).max(self.last_arrival_ps);
        if self.occupancy_at_ps(arrival_ps) + wire_len > self.buffer {
            return Err(Rejected::BufferFull(frame));
        }
        let waiting = self.entries.len() - self.entries.partition_point(|e| e.start_ps <= arrival_ps);
        let start_ps = arrival_ps.max(self.last_end_ps);
        let end_ps = start_ps + self.serialization_ps(wire_len);
        self.last_end_ps = end_ps;
        self.last_arrival_ps = arrival_ps;
        self.enqueued_bytes += wire_len;
        self.entries.push_back(Entry {
            frame,
            wire_len,
            arrival_ps,
            start_ps,
            release_ps: end_ps + self.delay_ps,
            cum_bytes: self.enqueued_bytes,
            enq_packets: u32::try_from(waiting).unwrap_or(u32::MAX),
        });
        Ok(())
    }

    /// When the next frame is due to be released (ns), if any is queued.
    pub fn next_release_ns(&self) -> Option<u64> {
        self.entries.front().map(|e| e.release_ps.div_ceil(PS_PER_NS))
    }

    /// Takes the next frame if it is due at `now_ns`.
    pub fn dequeue_due(&mut self, now_ns: u64) -> Option<Dequeued> {
        let front = self.entries.front()?;
        if front.release_ps > now_ns * PS_PER_NS {
            return None;
        }
        // Frames behind it that had arrived when it started transmitting.
        let start = front.start_ps;
        let behind = self.entries.partition_point(|e| e.arrival_ps <= start);
        let qlen = self.entries[behind - 1].cum_bytes - front.cum_bytes;
        let e = self.entries.pop_front()?;
        self.released_cum_bytes = e.cum_bytes;
        let tx_bytes_before = self.tx_bytes;
        self.tx_bytes += e.wire_len;
        Some(Dequeued {
            frame: e.frame,
            start_ns: e.start_ps / PS_PER_NS,
            qlen,
            tx_bytes_before,
            wire_len: e.wire_len,
            release_ns: e.release_ps.div_ceil(PS_PER_NS),
            enqueued_ns: e.arrival_ps / PS_PER_NS,
            enq_packets: e.enq_packets,
            deq_packets: u32::try_from(behind - 1).unwrap_or(u32::MAX),
        })
    }

    /// Frames held (waiting or on the link).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes every frame out (at shutdown), oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = FrameBuf> + '_ {
        self.entries.drain(..).map(|e| e.frame)
    }

    /// Bytes transmitted so far.
    pub fn tx_bytes(&self) -> u64 {
        self.tx_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FramePool;

    fn frame(pool: &FramePool, len: usize, arrival_ns: u64) -> FrameBuf {
        let mut f = pool.get();
        f.len = len;
        f.arrival_ns = arrival_ns;
        f
    }

    /// 1000 B at 8 Mb/s take exactly 1 ms.
    fn queue(buffer: u64, delay_ns: u64) -> EgressQueue {
        EgressQueue::new(Rate(8_000_000), Nanos(delay_ns), buffer)
    }

    #[test]
    fn departures_follow_the_line_rate_exactly() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 50_000);
        for _ in 0..4 {
            q.enqueue(frame(&pool, 1000, 10), 1000).unwrap();
        }
        // The first ends at 10 ns + 1 ms and arrives 50 us later.
        assert_eq!(q.next_release_ns(), Some(10 + 1_000_000 + 50_000));
        assert!(q.dequeue_due(1_049_999).is_none());
        let mut starts = vec![];
        let mut qlens = vec![];
        let mut tx = vec![];
        let mut depths = vec![];
        while let Some(d) = q.dequeue_due(u64::MAX / 2000) {
            starts.push(d.start_ns);
            qlens.push(d.qlen);
            tx.push(d.tx_bytes_before);
            depths.push((d.enq_packets, d.deq_packets));
        }
        assert_eq!(starts, vec![10, 1_000_010, 2_000_010, 3_000_010]);
        assert_eq!(
            qlens,
            vec![3000, 2000, 1000, 0],
            "a burst steps down one frame at a time"
        );
        assert_eq!(tx, vec![0, 1000, 2000, 3000]);
        // In packets, as v1model counts: the first starts at once, so the second finds none
        // waiting; each later one finds the ones before it that have not started.
        assert_eq!(depths, vec![(0, 3), (0, 2), (1, 1), (2, 0)]);
    }

    #[test]
    fn qlen_counts_only_frames_that_had_arrived() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        q.enqueue(frame(&pool, 1000, 0), 1000).unwrap();
        // Arrives after the first started: queued behind it, but not counted in its qlen.
        q.enqueue(frame(&pool, 1000, 500_000), 1000).unwrap();
        let d = q.dequeue_due(1_000_000).unwrap();
        assert_eq!(d.qlen, 0);
        let d = q.dequeue_due(2_000_000).unwrap();
        assert_eq!((d.start_ns, d.qlen), (1_000_000, 0));
    }

    #[test]
    fn tail_drop_uses_occupancy_at_arrival() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(2500, 0);
        q.enqueue(frame(&pool, 1000, 0), 1000).unwrap(); // starts at once: on the wire
        q.enqueue(frame(&pool, 1000, 0), 1000).unwrap(); // waits: 1000 queued
        q.enqueue(frame(&pool, 1000, 0), 1000).unwrap(); // 2000 queued
        assert!(matches!(
            q.enqueue(frame(&pool, 1000, 0), 1000),
            Err(Rejected::BufferFull(_))
        ));
        assert_eq!(q.occupancy_at(0), 2000);
        // Once the first has ended and the second started, there is room again, even if the
        // worker has not released anything yet.
        assert_eq!(q.occupancy_at(1_000_000), 1000);
        q.enqueue(frame(&pool, 1000, 1_000_000), 1000).unwrap();
    }

    #[test]
    fn fractional_serialization_times_do_not_drift() {
        let pool = FramePool::new(2048, 16);
        // 64 B at 100 Gb/s = 5.12 ns each; 1000 of them end at exactly 5120 ns.
        let mut q = EgressQueue::new(Rate(100_000_000_000), Nanos(0), u64::MAX);
        for _ in 0..1000 {
            q.enqueue(frame(&pool, 64, 0), 64).unwrap();
        }
        let mut last = None;
        while let Some(d) = q.dequeue_due(1_000_000) {
            last = Some(d.start_ns);
        }
        assert_eq!(last, Some(5114)); // the 1000th starts at 999 × 5.12 = 5114.88 ns
        assert_eq!(q.tx_bytes(), 64_000);
    }
}
