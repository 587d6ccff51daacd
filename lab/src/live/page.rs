//! The live page (`--web`): one HTML file with its script inline (it works offline: no CDN),
//! the topology as `intlab graph` draws it, and the lab's state as JSON, polled by the page.

use serde::Serialize;

use super::view::LabNow;

/// The page.
pub const PAGE: &str = include_str!("page.html");

#[derive(Serialize)]
struct State<'a> {
    lab: &'a str,
    dilation: f64,
    /// Lab clock (ns).
    time_ns: u64,
    links: Vec<LinkState>,
    ports: Vec<PortState<'a>>,
    flows: Vec<FlowState<'a>>,
    qps: Vec<QpState<'a>>,
    events: Vec<EventState<'a>>,
    silent_hosts: &'a [String],
}

#[derive(Serialize)]
struct LinkState {
    /// Its index: the SVG line `link-{id}`.
    id: usize,
    name: String,
    /// Scenario rate.
    rate_bps: u64,
    up: bool,
    /// Its switch ends as `switch:port`.
    ports: Vec<String>,
}

#[derive(Serialize)]
struct PortState<'a> {
    /// `switch:port`.
    name: String,
    switch: &'a str,
    port: &'a str,
    /// Lab clock when its switch's counters were taken (ns): rates are measured over these
    /// times, not over the page's, which also waits for the hosts' answers.
    time_ns: u64,
    tx_bytes: u64,
    rx_bytes: u64,
    queue_bytes: u64,
    drops: u64,
}

#[derive(Serialize)]
struct FlowState<'a> {
    id: u32,
    src: &'a str,
    dst: &'a str,
    size: u64,
    acked_bytes: u64,
    /// Scenario rate (b/s).
    rate_bps: f64,
    /// Latest RTT sample, scenario time (us).
    rtt_us: Option<f64>,
    done: bool,
}

#[derive(Serialize)]
struct QpState<'a> {
    host: &'a str,
    qpn: u32,
    transport: &'a str,
    peer: Option<&'a str>,
    program: &'a str,
    pid: u32,
    state: &'a str,
    bytes_sent: u64,
    bytes_received: u64,
    /// Scenario rate (b/s).
    rate_bps: f64,
    /// Mean RTT sample, scenario time (us).
    rtt_us: Option<f64>,
}

#[derive(Serialize)]
struct EventState<'a> {
    /// Scenario seconds from now (negative: past).
    in_s: f64,
    what: &'a str,
}

/// The state the page polls, in the scenario's units where it is a rate or a time (byte
/// counts are the same in both).
pub fn state_json(now: &LabNow) -> String {
    let d = now.dilation;
    let t = &now.topology;
    let links = t
        .links
        .iter()
        .enumerate()
        .map(|(li, l)| LinkState {
            id: li,
            name: t.link_name(li),
            rate_bps: l.props.rate.bps(),
            up: !now.down.contains(&li),
            ports: l
                .ends
                .iter()
                .filter(|e| t.nodes[e.node].kind == crate::topology::NodeKind::Switch)
                .map(|e| format!("{}:{}", t.nodes[e.node].name, e.interface))
                .collect(),
        })
        .collect();
    let ports = now
        .switches
        .iter()
        .flat_map(|s| {
            s.ports.iter().map(|p| PortState {
                name: format!("{}:{}", s.switch, p.name),
                switch: &s.switch,
                port: &p.name,
                time_ns: s.time_ns,
                tx_bytes: p.totals.tx_bytes,
                rx_bytes: p.totals.rx_bytes,
                queue_bytes: p.queue_now,
                drops: p.drops.values().sum(),
            })
        })
        .collect();
    let flows = now
        .flows
        .iter()
        .map(|(f, src, dst)| FlowState {
            id: f.id,
            src,
            dst,
            size: f.size,
            acked_bytes: f.acked_bytes,
            rate_bps: f.rate_bps as f64 * d,
            rtt_us: f.rtt_ns.map(|r| r as f64 / d / 1e3),
            done: f.done,
        })
        .collect();
    let qps = now
        .qps
        .iter()
        .map(|(q, host, peer)| QpState {
            host,
            qpn: q.qpn,
            transport: &q.transport,
            peer: peer.as_deref(),
            program: &q.owner.command,
            pid: q.owner.pid,
            state: &q.state,
            bytes_sent: q.bytes_sent,
            bytes_received: q.bytes_received,
            rate_bps: q.rate_bps as f64 * d,
            rtt_us: q.rtt_mean_ns.map(|r| r as f64 / d / 1e3),
        })
        .collect();
    let events = now
        .events
        .iter()
        .map(|e| EventState {
            in_s: (e.at_ns as f64 - now.time_ns as f64) / d / 1e9,
            what: &e.what,
        })
        .collect();
    let state = State {
        lab: &now.name,
        dilation: d,
        time_ns: now.time_ns,
        links,
        ports,
        flows,
        qps,
        events,
        silent_hosts: &now.silent_hosts,
    };
    serde_json::to_string(&state).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
