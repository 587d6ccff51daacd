//! Workloads: which flows a run starts, between which hosts, of what size and when.

mod application;
pub mod cdf;
mod import;

pub use application::{Application, Exchange, Iterations, Release, Step};
pub use cdf::{FB_HADOOP, SizeCdf, WEB_SEARCH};
pub use import::Format;

/// Reads a flow file of another simulator (see [`Format`]); node k is `hosts[k]`. Errors name
/// the line.
pub fn import(format: Format, text: &str, hosts: &[usize]) -> Result<Vec<PlannedFlow>, (usize, String)> {
    import::parse(format, text, hosts)
}

use std::collections::HashMap;

use intlab_transport::flow::MessageKind;

/// The flows a run starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// `senders` each start `flows_per_sender` flows of `size` bytes to `receiver`; flow k
    /// (in sender order, then flow order) starts at k × `stagger_ns`.
    Incast {
        /// Sending hosts (node indices).
        senders: Vec<usize>,
        /// The receiving host.
        receiver: usize,
        /// Flows per sender.
        flows_per_sender: u32,
        /// Bytes per flow.
        size: u64,
        /// Start spacing between consecutive flows (ns); 0: all together.
        stagger_ns: u64,
        /// WRITE or SEND.
        kind: MessageKind,
    },
    /// Every host of `hosts` sends `flows_per_pair` flows of `size` bytes to every other.
    AllToAll {
        /// Hosts taking part (node indices).
        hosts: Vec<usize>,
        /// Flows per ordered pair.
        flows_per_pair: u32,
        /// Bytes per flow.
        size: u64,
        /// Start spacing between consecutive flows (ns); 0: all together.
        stagger_ns: u64,
        /// WRITE or SEND.
        kind: MessageKind,
    },
    /// Flows given one by one.
    Flows(Vec<PlannedFlow>),
    /// Iterative jobs sharing the network.
    Applications(Vec<Application>),
    /// Every host of `hosts` sends one flow of `size` to another, each receiving one: a random
    /// permutation without fixed points (Sattolo's algorithm, one cycle).
    Permutation {
        /// Hosts taking part (node indices).
        hosts: Vec<usize>,
        /// Flows (queue pairs) from each host to its partner.
        flows_per_pair: u32,
        /// Bytes per flow.
        size: u64,
        /// Seed of the permutation.
        seed: u64,
    },
    /// `long` flows of `long_size` start at 0 and `short` flows of `short_size` at uniformly
    /// random times before `window_ns`, all to `receiver`, senders taken in turn.
    LongShort {
        /// Sending hosts.
        senders: Vec<usize>,
        /// The receiving host.
        receiver: usize,
        /// Long flows.
        long: u32,
        /// Bytes of a long flow.
        long_size: u64,
        /// Short flows.
        short: u32,
        /// Bytes of a short flow.
        short_size: u64,
        /// Short flows start before this (ns).
        window_ns: u64,
        /// Seed of the start times.
        seed: u64,
    },
    /// Sizes from a CDF, Poisson arrivals at a target load (see [`SizeCdf`]).
    Poisson {
        /// The flow-size distribution.
        cdf: SizeCdf,
        /// Hosts taking part (node indices).
        hosts: Vec<usize>,
        /// Rate of a host's link (b/s): the load is a fraction of it.
        link_bps: u64,
        /// Offered load per host, a fraction of its link.
        load: f64,
        /// Flows start within this time (ns).
        window_ns: u64,
        /// Seed of the draws.
        seed: u64,
    },
}

/// One flow of a run, in the scenario's time (not dilated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFlow {
    /// Flow id, unique in the run (1, 2, ...): the QP number at both ends.
    pub id: u32,
    /// Sending host (node index).
    pub src: usize,
    /// Receiving host (node index).
    pub dst: usize,
    /// Message bytes.
    pub size: u64,
    /// Start time after the run begins (ns).
    pub start_ns: u64,
    /// WRITE or SEND.
    pub kind: MessageKind,
    /// The application iteration it belongs to, if any: it starts when the iteration before
    /// has completed (see [`Iterations`]), not at `start_ns`.
    pub step: Option<Step>,
}

/// Each planned flow's UDP source port: a host's flows take the dynamic range in turn, in the
/// order they start, so its flows in flight differ unless it starts 16,384 more while one runs
/// (ports counted per flow id, as before, repeated for flows 16,384 ids apart).
pub fn source_ports(plan: &[PlannedFlow]) -> Vec<u16> {
    let mut order: Vec<usize> = (0..plan.len()).collect();
    order.sort_by_key(|&k| (plan[k].src, plan[k].start_ns, plan[k].id));
    let mut ports = vec![0; plan.len()];
    let mut next: HashMap<usize, usize> = HashMap::new();
    for k in order {
        let n = next.entry(plan[k].src).or_insert(0);
        ports[k] = intlab_transport::flow::source_port(*n);
        *n += 1;
    }
    ports
}

impl Workload {
    /// The applications of the workload (none unless it is made of them).
    pub fn applications(&self) -> &[Application] {
        match self {
            Workload::Applications(apps) => apps,
            _ => &[],
        }
    }

    /// Every flow, numbered from 1 in start order within each kind's natural order.
    pub fn flows(&self) -> Vec<PlannedFlow> {
        let mut out = Vec::new();
        let mut push = |src, dst, size, start_ns, kind| {
            out.push(PlannedFlow {
                id: out.len() as u32 + 1,
                src,
                dst,
                size,
                start_ns,
                kind,
                step: None,
            });
        };
        match self {
            Workload::Incast {
                senders,
                receiver,
                flows_per_sender,
                size,
                stagger_ns,
                kind,
            } => {
                let mut k = 0;
                for &s in senders {
                    for _ in 0..*flows_per_sender {
                        push(s, *receiver, *size, k * stagger_ns, *kind);
                        k += 1;
                    }
                }
            }
            Workload::AllToAll {
                hosts,
                flows_per_pair,
                size,
                stagger_ns,
                kind,
            } => {
                let mut k = 0;
                for &s in hosts {
                    for &d in hosts.iter().filter(|&&d| d != s) {
                        for _ in 0..*flows_per_pair {
                            push(s, d, *size, k * stagger_ns, *kind);
                            k += 1;
                        }
                    }
                }
            }
            Workload::Flows(list) => {
                for f in list {
                    push(f.src, f.dst, f.size, f.start_ns, f.kind);
                }
            }
            Workload::Applications(apps) => out = application::plan(apps, 1),
            Workload::Permutation {
                hosts,
                flows_per_pair,
                size,
                seed,
            } => {
                let mut rng = fastrand::Rng::with_seed(*seed);
                let mut to = hosts.clone();
                // Sattolo: a uniformly random single cycle, so nobody sends to itself.
                for i in (1..to.len()).rev() {
                    to.swap(i, rng.usize(..i));
                }
                for _ in 0..*flows_per_pair {
                    for (&s, &d) in hosts.iter().zip(&to) {
                        push(s, d, *size, 0, MessageKind::Write);
                    }
                }
            }
            Workload::LongShort {
                senders,
                receiver,
                long,
                long_size,
                short,
                short_size,
                window_ns,
                seed,
            } => {
                let mut rng = fastrand::Rng::with_seed(*seed);
                let mut turn = senders.iter().cycle();
                for _ in 0..*long {
                    if let Some(&s) = turn.next() {
                        push(s, *receiver, *long_size, 0, MessageKind::Write);
                    }
                }
                let mut starts: Vec<u64> = (0..*short).map(|_| rng.u64(..(*window_ns).max(1))).collect();
                starts.sort_unstable();
                for t in starts {
                    if let Some(&s) = turn.next() {
                        push(s, *receiver, *short_size, t, MessageKind::Write);
                    }
                }
            }
            Workload::Poisson {
                cdf,
                hosts,
                link_bps,
                load,
                window_ns,
                seed,
            } => out = cdf::plan(cdf, hosts, *link_bps, *load, *window_ns, *seed, 1),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incast_numbers_and_staggers_its_flows() {
        let w = Workload::Incast {
            senders: vec![1, 2],
            receiver: 3,
            flows_per_sender: 2,
            size: 1000,
            stagger_ns: 10,
            kind: MessageKind::Write,
        };
        let f = w.flows();
        let got: Vec<(u32, usize, usize, u64)> = f.iter().map(|f| (f.id, f.src, f.dst, f.start_ns)).collect();
        assert_eq!(got, [(1, 1, 3, 0), (2, 1, 3, 10), (3, 2, 3, 20), (4, 2, 3, 30)]);
    }

    #[test]
    fn a_host_s_flows_take_source_ports_in_turn_in_start_order() {
        // Host 1 sends flows 1, 3 (starting first) and 16,386 more; host 2 sends flow 2.
        let flow = |id: u32, src: usize, start_ns: u64| PlannedFlow {
            id,
            src,
            dst: 9,
            size: 1,
            start_ns,
            kind: MessageKind::Write,
            step: None,
        };
        let mut plan = vec![flow(1, 1, 50), flow(2, 2, 0), flow(3, 1, 10)];
        plan.extend((0..16_386).map(|k| flow(4 + k, 1, 100 + u64::from(k))));
        let ports = source_ports(&plan);
        assert_eq!((ports[2], ports[0]), (49152, 49153), "host 1 in start order");
        assert_eq!(ports[1], 49152, "host 2 counts its own");
        let host1: Vec<u16> = plan
            .iter()
            .zip(&ports)
            .filter(|(f, _)| f.src == 1)
            .map(|(_, &p)| p)
            .collect();
        let distinct: std::collections::HashSet<u16> = host1[..16_384].iter().copied().collect();
        assert_eq!(distinct.len(), 16_384, "a host's first 16,384 flows never share a port");
        // Flows 16,384 apart in id once shared one whatever their host; now only a host's
        // 16,385th flow comes back to its first port.
        // (flow 4 + k is at index 3 + k and is host 1's flow number 2 + k.)
        assert_eq!(ports[16_384], 65535, "host 1's 16,384th flow");
        assert_eq!(ports[16_385], 49152, "its 16,385th");
    }

    #[test]
    fn all_to_all_covers_every_ordered_pair_once() {
        let w = Workload::AllToAll {
            hosts: vec![0, 1, 2],
            flows_per_pair: 1,
            size: 5,
            stagger_ns: 0,
            kind: MessageKind::Send,
        };
        let mut pairs: Vec<(usize, usize)> = w.flows().iter().map(|f| (f.src, f.dst)).collect();
        pairs.sort_unstable();
        assert_eq!(pairs, [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]);
    }
}
