//! A switch's shared buffer (its MMU), modelled on the Broadcom-style MMU of the ns-3 HPCC
//! simulator: one buffer for all ports, a reserve and a headroom per ingress port, the rest
//! shared under dynamic thresholds (Choudhury and Hahne: a queue may hold `alpha` times the
//! shared space still free).
//!
//! Frames are counted against the ingress port and priority they came through. For a lossless
//! priority (PFC on), a frame is always admitted while that ingress has headroom: crossing the
//! XOFF threshold (its share of the shared space, dynamic or static) pauses the upstream, and
//! frames that keep arriving while the pause travels go into the headroom; XON once its use is
//! `xon_offset` below the threshold and the headroom is empty. A lossy priority is admitted by
//! its egress queue's dynamic threshold and tail-dropped above it.

use int_format::pfc::pause_ps;

use super::PRIORITIES;

/// The shared buffer's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MmuSpec {
    /// Bytes of the whole buffer (`None`: the sum of the ports' `buffer`).
    pub shared: Option<u64>,
    /// Dynamic threshold: a queue may use this fraction of the free shared space (ns-3 HPCC
    /// simulator: 1/8, `pfc_a_shift` 3).
    pub alpha: f64,
    /// Bytes reserved per ingress port and priority, outside the shared space (ns-3: 4 KiB).
    pub reserve: u64,
}

impl Default for MmuSpec {
    fn default() -> MmuSpec {
        MmuSpec {
            shared: None,
            alpha: 0.125,
            reserve: 4 * 1024,
        }
    }
}

/// PFC (802.1Qbb) settings of a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcSpec {
    /// Lossless priorities: bit n for priority n (default: 3, RoCE data).
    pub priorities: u8,
    /// XOFF at this many shared bytes per ingress port and priority; `None`: dynamic, at the
    /// MMU's `alpha` times the free shared space (as the ns-3 HPCC simulator).
    pub xoff: Option<u64>,
    /// XON once the ingress's shared use is this far below the XOFF threshold (ns-3: 3 KiB).
    pub xon_offset: u64,
    /// Headroom per ingress port; `None`: from its link, 3 × rate × delay (ns-3 HPCC
    /// simulator) plus two largest frames (one in transmission at each end, as 802.1Qbb's
    /// headroom budget counts them) plus what the link carries during `response_ns`.
    pub headroom: Option<u64>,
    /// How long the upstream may take to act on a pause once it arrives (ns, real time): an
    /// ASIC's is under a microsecond; an emulated host's is its wake-up lateness and its NIC
    /// model's burst credit, which the lab sets.
    pub response_ns: u64,
    /// The PFC watchdog on every port (default: on, SONiC's and Junos' 200 ms / 200 ms).
    pub watchdog: Option<super::PfcWatchdog>,
}

impl Default for PfcSpec {
    fn default() -> PfcSpec {
        PfcSpec {
            priorities: 1 << 3,
            xoff: None,
            xon_offset: 3 * 1024,
            headroom: None,
            response_ns: 0,
            watchdog: Some(super::PfcWatchdog::default()),
        }
    }
}

/// What an ingress port has to tell its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcSignal {
    /// The ingress port (index in the switch).
    pub port: usize,
    /// The priority.
    pub priority: u8,
    /// XOFF (pause) or XON (resume).
    pub pause: bool,
}

/// One port of the MMU.
#[derive(Debug, Clone)]
pub struct MmuPort {
    /// Its headroom (bytes).
    pub headroom: u64,
    /// How long an XOFF it sends pauses (ns): its link's 65535 quanta.
    pub pause_ns: u64,
}

/// Per ingress port and priority.
#[derive(Debug, Clone, Copy, Default)]
struct IngressUse {
    /// Bytes counted in the reserve and the shared space.
    bytes: u64,
    /// Bytes counted in the headroom.
    headroom: u64,
    /// XOFF sent and not yet XON: when it was last sent (ns).
    xoff_sent_ns: Option<u64>,
}

/// Whether a frame may enter the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Queue it; tell the upstream to pause if asked.
    Admit(Option<PfcSignal>),
    /// Queue it, though its lossless ingress is out of headroom: its sender went on sending
    /// longer after the pause than the headroom allows. On time, only a sender that ignores
    /// pauses does that; in the lab, a sender or switch running late can (a worker lost its
    /// CPU), and the modelled switch, whose pause would have stopped the sender in time, would
    /// not have lost the frame. So it is kept while the buffer has room, and counted: the lab
    /// calls an overrun late emulation when lateness at the time explains it, and a fault of
    /// the MMU or PFC path when nothing does (`results`).
    Overrun,
    /// Drop it: its lossy queue is over its threshold, or the whole buffer is full.
    Drop,
}

/// The shared buffer of one switch.
#[derive(Debug)]
pub struct Mmu {
    buffer: u64,
    alpha: f64,
    reserve: u64,
    pfc: Option<PfcSpec>,
    ports: Vec<MmuPort>,
    /// Headroom and reserve of every port, kept out of the shared space.
    set_aside: u64,
    /// Shared bytes in use.
    shared_used: u64,
    ingress: Vec<[IngressUse; PRIORITIES]>,
    /// Bytes queued per egress port and priority.
    egress: Vec<[u64; PRIORITIES]>,
    /// Bytes held past the headrooms of their ingress (overruns): they take shared space.
    overrun: u64,
}

impl Mmu {
    /// A buffer of `buffer` bytes over `ports`, with PFC when `pfc` is given.
    pub fn new(buffer: u64, spec: &MmuSpec, pfc: Option<PfcSpec>, ports: Vec<MmuPort>) -> Mmu {
        let lossless = pfc.is_some_and(|p| p.priorities != 0);
        let per_port = |p: &MmuPort| spec.reserve + if lossless { p.headroom } else { 0 };
        let set_aside = ports.iter().map(per_port).sum();
        let n = ports.len();
        Mmu {
            buffer,
            alpha: spec.alpha,
            reserve: spec.reserve,
            pfc,
            ports,
            set_aside,
            shared_used: 0,
            ingress: vec![[IngressUse::default(); PRIORITIES]; n],
            egress: vec![[0; PRIORITIES]; n],
            overrun: 0,
        }
    }

    fn lossless(&self, priority: usize) -> bool {
        self.pfc.is_some_and(|p| p.priorities & (1 << priority) != 0)
    }

    /// `alpha` times the shared space still free.
    fn dynamic_threshold(&self) -> u64 {
        let free = self
            .buffer
            .saturating_sub(self.set_aside + self.shared_used + self.overrun);
        (free as f64 * self.alpha) as u64
    }

    /// The XOFF threshold of an ingress (shared bytes).
    fn xoff_threshold(&self) -> u64 {
        match self.pfc.and_then(|p| p.xoff) {
            Some(fixed) => fixed,
            None => self.dynamic_threshold(),
        }
    }

    fn shared_use(&self, u: &IngressUse) -> u64 {
        u.bytes.saturating_sub(self.reserve)
    }

    /// A frame of `len` bytes that came in on `input` for egress `output` in `priority`,
    /// arriving at `at_ns`.
    pub fn admit(&mut self, input: usize, output: usize, priority: u8, len: u64, at_ns: u64) -> Admission {
        let p = usize::from(priority) % PRIORITIES;
        if !self.lossless(p) {
            if self.egress[output][p] + len > self.dynamic_threshold() {
                return Admission::Drop;
            }
            self.shared_used += len;
            self.egress[output][p] += len;
            return Admission::Admit(None);
        }
        let threshold = self.xoff_threshold();
        let u = self.ingress[input][p];
        let headroom = self.ports[input].headroom;
        if u.headroom + len > headroom && self.shared_use(&u) + len > threshold {
            if self.shared_used + self.overrun + len > self.buffer.saturating_sub(self.set_aside) {
                return Admission::Drop;
            }
            self.ingress[input][p].headroom += len;
            self.egress[output][p] += len;
            self.overrun += len;
            return Admission::Overrun;
        }
        let after = u.bytes + len;
        let u = &mut self.ingress[input][p];
        if after <= self.reserve {
            u.bytes = after;
        } else if after - self.reserve > threshold {
            u.headroom += len;
        } else {
            u.bytes = after;
            self.shared_used += len.min(after - self.reserve);
        }
        self.egress[output][p] += len;
        let u = self.ingress[input][p];
        let over = u.headroom > 0 || self.shared_use(&u) >= self.xoff_threshold();
        if u.xoff_sent_ns.is_none() && over {
            self.ingress[input][p].xoff_sent_ns = Some(at_ns);
            return Admission::Admit(Some(PfcSignal {
                port: input,
                priority,
                pause: true,
            }));
        }
        Admission::Admit(None)
    }

    /// A frame admitted by [`Mmu::admit`] left the buffer (its transmission started); returns
    /// the XON its ingress is due, if any.
    pub fn release(&mut self, input: usize, output: usize, priority: u8, len: u64) -> Option<PfcSignal> {
        let p = usize::from(priority) % PRIORITIES;
        self.egress[output][p] = self.egress[output][p].saturating_sub(len);
        if !self.lossless(p) {
            self.shared_used = self.shared_used.saturating_sub(len);
            return None;
        }
        let reserve = self.reserve;
        let allotted = self.ports[input].headroom;
        let u = &mut self.ingress[input][p];
        let from_headroom = u.headroom.min(len);
        // Bytes past the headroom (an overrun) leave first.
        self.overrun -= u.headroom.saturating_sub(allotted).min(from_headroom);
        let from_shared = (len - from_headroom).min(u.bytes.saturating_sub(reserve));
        u.headroom -= from_headroom;
        u.bytes = u.bytes.saturating_sub(len - from_headroom);
        self.shared_used = self.shared_used.saturating_sub(from_shared);
        let u = self.ingress[input][p];
        let offset = self.pfc.map_or(0, |c| c.xon_offset);
        let used = self.shared_use(&u);
        let below = used == 0 || used + offset <= self.xoff_threshold();
        if u.xoff_sent_ns.is_some() && u.headroom == 0 && below {
            self.ingress[input][p].xoff_sent_ns = None;
            return Some(PfcSignal {
                port: input,
                priority,
                pause: false,
            });
        }
        None
    }

    /// The XOFFs to send again at `now_ns` because half of the last one's pause has passed
    /// with the ingress still over its threshold (a pause must not run out while it is);
    /// returns when the next such refresh is due, found in the same pass.
    pub fn refresh(&mut self, now_ns: u64, out: &mut Vec<PfcSignal>) -> Option<u64> {
        let mut next = None;
        for (port, uses) in self.ingress.iter_mut().enumerate() {
            let half = self.ports[port].pause_ns / 2;
            for (p, u) in uses.iter_mut().enumerate() {
                let Some(mut sent) = u.xoff_sent_ns else { continue };
                if now_ns >= sent + half {
                    sent = now_ns;
                    u.xoff_sent_ns = Some(sent);
                    out.push(PfcSignal {
                        port,
                        priority: p as u8,
                        pause: true,
                    });
                }
                next = [next, Some(sent + half)].into_iter().flatten().min();
            }
        }
        next
    }

    /// Shared bytes in use.
    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }
}

/// The port settings of the MMU for a link of `rate_bps` and `delay_ns` carrying frames of up
/// to `max_frame` bytes, with the headroom `pfc` sets or implies.
pub fn mmu_port(rate_bps: u64, delay_ns: u64, max_frame: u64, pfc: Option<&PfcSpec>) -> MmuPort {
    let bytes_in = |ns: u64| (u128::from(rate_bps) * u128::from(ns) / 8 / 1_000_000_000) as u64;
    let response = pfc.map_or(0, |p| bytes_in(p.response_ns));
    let implied = 3 * bytes_in(delay_ns) + 2 * max_frame + response;
    MmuPort {
        headroom: pfc.and_then(|p| p.headroom).unwrap_or(implied),
        pause_ns: pause_ps(u16::MAX, rate_bps) / 1000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(headroom: u64) -> MmuPort {
        MmuPort {
            headroom,
            pause_ns: 1_000_000,
        }
    }

    fn pfc_mmu(buffer: u64) -> Mmu {
        let spec = MmuSpec {
            shared: Some(buffer),
            alpha: 0.125,
            reserve: 4000,
        };
        Mmu::new(
            buffer,
            &spec,
            Some(PfcSpec::default()),
            vec![port(10_000), port(10_000), port(10_000)],
        )
    }

    #[test]
    fn a_lossless_ingress_is_paused_at_its_dynamic_threshold_and_resumed_below_it() {
        // 1 MB less 3 × (4 KB reserve + 10 KB headroom): 958,000 shared; XOFF at 1/8 of
        // what is free, i.e. at s = (958,000 - s) / 8, s = 106,444.
        let mut m = pfc_mmu(1_000_000);
        let mut paused_at = None;
        for i in 0..200u64 {
            match m.admit(0, 2, 3, 1000, i) {
                Admission::Admit(Some(sig)) => {
                    assert_eq!((sig.port, sig.priority, sig.pause), (0, 3, true));
                    paused_at = Some(i);
                    break;
                }
                Admission::Admit(None) => {}
                Admission::Overrun | Admission::Drop => panic!("no room at {i}"),
            }
        }
        // 4 frames in the reserve, then 1,000 B each into the shared space; the 107th would
        // take shared use past the threshold (107,000 > (958,000 - 106,000) / 8): it goes into
        // the headroom and the upstream is paused.
        assert_eq!(paused_at, Some(4 + 107 - 1));
        assert_eq!(m.shared_used(), 106_000);
        // What arrives while the pause travels goes into the headroom, up to it; past it, a
        // late pause's overrun is kept while the buffer has room, then frames drop.
        for _ in 0..9 {
            assert_eq!(m.admit(0, 2, 3, 1000, 200), Admission::Admit(None));
        }
        // 106 KB of the 958 KB shared space in use: 852 more frames fit.
        for _ in 0..852 {
            assert_eq!(m.admit(0, 2, 3, 1000, 201), Admission::Overrun, "headroom full");
        }
        assert_eq!(m.admit(0, 2, 3, 1000, 202), Admission::Drop, "the buffer is full");
        for _ in 0..852 {
            assert_eq!(m.release(0, 2, 3, 1000), None, "the overrun drains first");
        }
        // Another ingress is not paused by this one's use.
        assert_eq!(m.admit(1, 2, 3, 1000, 202), Admission::Admit(None));
        assert_eq!(m.release(1, 2, 3, 1000), None);
        // Draining: the headroom first, then XON once 3 KiB below the threshold.
        let mut resumed = None;
        for i in 0..200u64 {
            if let Some(sig) = m.release(0, 2, 3, 1000) {
                assert!(!sig.pause);
                resumed = Some(i);
                break;
            }
        }
        // 10 from the headroom, then shared use falls from 106,000 by 1,000 a frame while the
        // threshold rises by 125: XON at 103,000 + 3,072 <= (958,000 - 103,000) / 8.
        assert_eq!(resumed, Some(10 + 3 - 1));
    }

    #[test]
    fn a_lossy_queue_is_tail_dropped_at_alpha_times_the_free_space() {
        let spec = MmuSpec {
            shared: Some(90_000),
            alpha: 0.5,
            reserve: 0,
        };
        let mut m = Mmu::new(90_000, &spec, None, vec![port(0), port(0)]);
        // q <= (90,000 - q) / 2: 30,000.
        let admitted = (0..100)
            .take_while(|_| m.admit(0, 1, 0, 1000, 0) != Admission::Drop)
            .count();
        assert_eq!(admitted, 30);
        assert_eq!(m.release(0, 1, 0, 1000), None, "lossy queues send no PFC");
        assert_eq!(m.shared_used(), 29_000);
    }

    #[test]
    fn a_pause_is_sent_again_before_it_runs_out_while_the_ingress_stays_over() {
        let mut m = pfc_mmu(100_000);
        let mut at = 0;
        while m.admit(0, 1, 3, 1000, at) == Admission::Admit(None) {
            at += 1;
        }
        let mut out = vec![];
        assert_eq!(m.refresh(at + 499_999, &mut out), Some(at + 500_000));
        assert!(out.is_empty());
        assert_eq!(m.refresh(at + 500_000, &mut out), Some(at + 1_000_000));
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn headroom_from_the_link_is_three_bandwidth_delay_products_two_frames_and_the_response() {
        // 10 Gb/s × 2 us = 2,500 B.
        let pfc = PfcSpec::default();
        let p = mmu_port(10_000_000_000, 2_000, 1514, Some(&pfc));
        assert_eq!(p.headroom, 7_500 + 3_028);
        let slow = PfcSpec {
            response_ns: 1_000,
            ..pfc
        };
        assert_eq!(
            mmu_port(10_000_000_000, 2_000, 1514, Some(&slow)).headroom,
            7_500 + 3_028 + 1_250
        );
        let set = PfcSpec {
            headroom: Some(20_000),
            ..slow
        };
        assert_eq!(mmu_port(10_000_000_000, 2_000, 1514, Some(&set)).headroom, 20_000);
        // 65535 × 512 bits at 10 Gb/s.
        assert_eq!(p.pause_ns, 3_355_392);
    }
}
