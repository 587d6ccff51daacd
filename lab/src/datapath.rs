//! Before any flow starts, the lab checks its own data path: each flow's source sends probes
//! from the flow's own UDP source port (so ECMP takes them the flow's way) to its
//! destination, whose transport answers with the probes' INT (see
//! [`intlab_transport::endpoint::PROBE_QP`]). Every flow must be answered within a deadline.
//! When one is not, the lab sends a few more probes on that flow alone and reads what every
//! switch port and both hosts' kernels counted meanwhile, so the report names the hop that
//! dropped them and why. The answers also time each path's round trip, from which the lab
//! learns its hosts' overhead (see [`crate::base_rtt`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use intlab_switch::SwitchSnapshot;
use intlab_transport::endpoint::{Probe, ProbeReply};

use crate::lab::Lab;
use crate::netns::KernelCounters;
use crate::topology::Topology;

/// Probe rounds sent to every flow at the start, spaced by [`ROUND_GAP`]: the smallest round
/// trip of them times the path.
const ROUNDS: u32 = 4;
const ROUND_GAP: Duration = Duration::from_millis(10);
/// How often an unanswered flow is probed again until the deadline.
const RETRY_EVERY: Duration = Duration::from_millis(100);
/// A probe's bytes on the wire at most (headers, INT of every field for the hops): what a round
/// costs a host's link.
const PROBE_WIRE_BYTES: u64 = 400;
/// Probes sent again on one failed flow to see where they go.
const DIAGNOSIS_PROBES: u32 = 3;
/// Flows diagnosed at most (with distinct source and destination).
const DIAGNOSED_AT_MOST: usize = 3;

/// One flow to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTarget {
    /// Flow id.
    pub flow: u32,
    /// Source host (node index).
    pub src: usize,
    /// Destination host (node index).
    pub dst: usize,
    /// The flow's UDP source port.
    pub src_port: u16,
}

/// What the probes of one flow found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// Smallest round trip of its probes (ns, lab clock).
    pub rtt_min_ns: u64,
    /// The links the probes took from source to destination, in order (from their INT).
    pub links: Vec<usize>,
}

/// The data path does not carry some flows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{report}")]
pub struct DataPathError {
    /// What failed and where, several lines.
    pub report: String,
}

/// Probes every target until each is answered or `limit` passes.
pub fn check(lab: &Lab, targets: &[ProbeTarget], limit: Duration) -> Result<Vec<Reach>, DataPathError> {
    let t = lab.topology();
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut found: Vec<Option<Reach>> = vec![None; targets.len()];
    let started = Instant::now();
    let mut round = 0;
    let mut next_send = started;
    // A host with many flows sends a probe per flow each round: rounds are spaced so that
    // twice a round's probes fit in its link (an oversubscribed uplink takes them at half
    // that), or the probes queue behind each other and a full buffer drops them.
    let gap = ROUND_GAP.max(busiest_round(t, targets) * 2);
    let limit = limit.max(gap * (ROUNDS + 4));
    loop {
        let now = Instant::now();
        if now >= next_send {
            for (i, target) in targets.iter().enumerate() {
                if round < ROUNDS || found[i].is_none() {
                    send(lab, target, i as u32, &tx).map_err(|report| DataPathError { report })?;
                }
            }
            round += 1;
            next_send = now + if round < ROUNDS { gap } else { RETRY_EVERY.max(gap) };
        }
        let wait = next_send.saturating_duration_since(Instant::now());
        if let Ok(reply) = rx.recv_timeout(wait) {
            for reply in std::iter::once(reply).chain(rx.try_iter()) {
                record(t, &targets[reply.tag as usize], &reply, &mut found[reply.tag as usize]);
            }
        }
        let answered = found.iter().all(Option::is_some);
        if (answered && round >= ROUNDS) || started.elapsed() > limit {
            break;
        }
    }
    // Replies still on their way from the last round count too.
    std::thread::sleep(ROUND_GAP);
    for reply in rx.try_iter() {
        record(t, &targets[reply.tag as usize], &reply, &mut found[reply.tag as usize]);
    }
    let failed: Vec<&ProbeTarget> = targets
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(t, _)| t)
        .collect();
    if failed.is_empty() {
        return Ok(found.into_iter().flatten().collect());
    }
    Err(DataPathError {
        report: diagnose(lab, &failed, targets.len(), limit),
    })
}

/// How long the host with the most probes per round takes to put them on its link.
fn busiest_round(t: &Topology, targets: &[ProbeTarget]) -> Duration {
    let mut per_host = std::collections::HashMap::new();
    for target in targets {
        *per_host.entry(target.src).or_insert(0u64) += 1;
    }
    per_host
        .iter()
        .filter_map(|(&h, &n)| {
            let (l, _) = t.links_of(h).next()?;
            let bps = t.links[l].props.rate.bps().max(1);
            Some(Duration::from_nanos(n * PROBE_WIRE_BYTES * 8 * 1_000_000_000 / bps))
        })
        .max()
        .unwrap_or_default()
}

fn send(lab: &Lab, target: &ProbeTarget, tag: u32, reply: &Sender<ProbeReply>) -> Result<(), String> {
    let t = lab.topology();
    let dst = t.nodes[target.dst].address.expect("hosts have addresses");
    lab.probe(
        target.src,
        Probe {
            dst,
            src_port: target.src_port,
            tag,
            reply: reply.clone(),
        },
    )
    .map_err(|e| format!("host {} could not send a probe: {e}", t.nodes[target.src].name))
}

fn record(t: &Topology, target: &ProbeTarget, reply: &ProbeReply, slot: &mut Option<Reach>) {
    match slot {
        Some(r) => r.rtt_min_ns = r.rtt_min_ns.min(reply.rtt_ns),
        None => {
            *slot = Some(Reach {
                rtt_min_ns: reply.rtt_ns,
                links: links_of(t, target, reply),
            })
        }
    }
}

/// The links a probe took: the source's link, then each switch's egress link from its INT hop
/// (node ID k + 1 is the k-th switch, the egress port its k-th link, as the lab numbers them).
fn links_of(t: &Topology, target: &ProbeTarget, reply: &ProbeReply) -> Vec<usize> {
    let mut links: Vec<usize> = t.links_of(target.src).map(|(l, _)| l).take(1).collect();
    for hop in &reply.hops {
        let (Some(node), Some(port)) = (hop.node_id, hop.egress_port) else {
            continue;
        };
        let link = switch_of_node_id(t, node).and_then(|s| t.links_of(s).nth(usize::from(port)));
        if let Some((l, _)) = link {
            links.push(l);
        }
    }
    links
}

/// What the switches' ports and the two hosts' kernels counted around a few probes.
struct Counts {
    switches: Vec<SwitchSnapshot>,
    src: Option<KernelCounters>,
    dst: Option<KernelCounters>,
}

fn counts(lab: &Lab, target: &ProbeTarget) -> Counts {
    Counts {
        switches: lab.switch_counters(),
        // A lab spread over sites has only some of the hosts here.
        src: lab.host_namespace(target.src).and_then(|ns| ns.kernel_counters().ok()),
        dst: lab.host_namespace(target.dst).and_then(|ns| ns.kernel_counters().ok()),
    }
}

/// The report: which flows failed, then for a few of them, what probing them alone showed.
fn diagnose(lab: &Lab, failed: &[&ProbeTarget], total: usize, limit: Duration) -> String {
    let t = lab.topology();
    let name = |n: usize| t.nodes[n].name.as_str();
    let label = |f: &ProbeTarget| format!("{} -> {} (flow {})", name(f.src), name(f.dst), f.flow);
    let mut out = String::new();
    let listed: Vec<String> = failed.iter().take(8).map(|f| label(f)).collect();
    let _ = writeln!(
        out,
        "the lab's data path check failed: {} of {total} flows got no answer to their probes within {:.1} s: {}{}",
        failed.len(),
        limit.as_secs_f64(),
        listed.join(", "),
        if failed.len() > listed.len() { ", ..." } else { "" }
    );
    let mut pairs = Vec::new();
    for f in failed {
        if pairs.len() == DIAGNOSED_AT_MOST {
            break;
        }
        if pairs.iter().any(|p: &&ProbeTarget| p.src == f.src && p.dst == f.dst) {
            continue;
        }
        pairs.push(f);
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    for f in pairs {
        let before = counts(lab, f);
        let mut sent = 0;
        for k in 0..DIAGNOSIS_PROBES {
            if send(lab, f, u32::MAX - k, &tx).is_ok() {
                sent += 1;
            }
        }
        let answered = wait_replies(&rx, sent, Duration::from_millis(500));
        let after = counts(lab, f);
        let _ = writeln!(
            out,
            "{}: {sent} probes sent again alone, {answered} answered. Meanwhile:",
            label(f)
        );
        out.push_str(&explain(t, f, &before, &after));
    }
    out.push_str("nothing was run; the lab has been torn down");
    out
}

fn wait_replies(rx: &Receiver<ProbeReply>, want: u32, limit: Duration) -> u32 {
    let until = Instant::now() + limit;
    let mut got = 0;
    while got < want {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(_) => got += 1,
            Err(_) => break,
        }
    }
    // Late replies of a lab this slow are not answers.
    while rx.try_recv().is_ok() {}
    got
}

/// Per port that counted anything: what it received, sent and dropped; per host kernel what
/// grew; then the verdict: the first place the probes were lost.
fn explain(t: &Topology, f: &ProbeTarget, before: &Counts, after: &Counts) -> String {
    let mut out = String::new();
    let mut drops_at: Vec<String> = Vec::new();
    let mut received_anywhere = false;
    for (b, a) in before.switches.iter().zip(&after.switches) {
        for (pb, pa) in b.ports.iter().zip(&a.ports) {
            let rx = pa.totals.rx_frames.saturating_sub(pb.totals.rx_frames);
            let tx = pa.totals.tx_frames.saturating_sub(pb.totals.tx_frames);
            let drops: BTreeMap<&str, u64> = pa
                .drops
                .iter()
                .map(|(why, &n)| (why.as_str(), n.saturating_sub(pb.drops.get(why).copied().unwrap_or(0))))
                .filter(|&(_, n)| n > 0)
                .collect();
            if rx == 0 && tx == 0 && drops.is_empty() {
                continue;
            }
            received_anywhere |= rx > 0;
            let dropped: Vec<String> = drops.iter().map(|(why, n)| format!("{n} ({why})")).collect();
            let _ = writeln!(
                out,
                "  switch {} port {}: received {rx}, sent {tx}{}",
                a.switch,
                pa.name,
                if dropped.is_empty() {
                    String::new()
                } else {
                    format!(", dropped {}", dropped.join(", "))
                }
            );
            if !dropped.is_empty() {
                drops_at.push(format!("switch {} port {}: {}", a.switch, pa.name, dropped.join(", ")));
            }
        }
    }
    let mut grown = [Vec::new(), Vec::new()];
    for (k, (who, b, a)) in [(f.src, &before.src, &after.src), (f.dst, &before.dst, &after.dst)]
        .into_iter()
        .enumerate()
    {
        let host = &t.nodes[who].name;
        let (Some(b), Some(a)) = (b, a) else {
            let _ = writeln!(out, "  host {host}'s kernel: counters unreadable");
            continue;
        };
        grown[k] = a.growth(b);
        let g: Vec<String> = grown[k].iter().map(|(n, v)| format!("{n} +{v}")).collect();
        let _ = writeln!(
            out,
            "  host {host}'s kernel: {}",
            if g.is_empty() {
                "nothing counted".to_owned()
            } else {
                g.join(", ")
            }
        );
    }
    let grew = |k: usize, name: &str| grown[k].iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v);
    let (src, dst) = (&t.nodes[f.src].name, &t.nodes[f.dst].name);
    let verdict = if let Some(d) = drops_at.first() {
        format!("dropped at {d}")
    } else if !received_anywhere {
        format!("no switch received them: {src}'s link to its switch carries nothing")
    } else if grew(1, "UDP checksum errors") > 0 {
        format!("{dst}'s kernel dropped the probes for bad UDP checksums: transmit checksum offload is on at {src}")
    } else if grew(1, "IP packets for another address") > 0 {
        format!("{dst}'s kernel got packets for another address: a route sends them to the wrong host")
    } else if grew(1, "UDP datagrams to a closed port") > 0 {
        format!("{dst} has no transport listening on the port")
    } else if grew(0, "UDP checksum errors") > 0 {
        format!("{src}'s kernel dropped the answers for bad UDP checksums: transmit checksum offload is on at {dst}")
    } else if grew(1, "UDP datagrams delivered") > 0 {
        format!("{dst} received them; its answers were lost on the way back (see the ports above)")
    } else {
        format!("the switches forwarded them, but {dst}'s kernel counted nothing")
    };
    let _ = writeln!(out, "  => {verdict}");
    out
}

/// The switch (node index) behind INT node ID `node_id`: the lab numbers switches from 1 in
/// file order.
pub fn switch_of_node_id(t: &Topology, node_id: u32) -> Option<usize> {
    t.switches().nth((node_id as usize).checked_sub(1)?)
}
