//! The lab in Prometheus' text exposition format (version 0.0.4), named by Prometheus'
//! conventions: `intlab_` first, base units (bytes, seconds), `_total` on counters. Every
//! figure is in the lab's own time, as the wire runs: a lab at dilation d runs d times slower
//! than its scenario, which `intlab_lab_dilation` gives to scale by.
//!
//! Written here rather than through a client library: those keep registries of live values
//! to update, where this turns one snapshot into text at each scrape.

use std::fmt::Display;

use intlab_switch::counters::{DropReason, PortSnapshot};
use intlab_switch::tm::PRIORITIES;

use intlab_transport::program_qp::ProgramQp;

use super::view::LabNow;

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a metric family is.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// Text being written, one family at a time (a family's samples must be contiguous).
#[derive(Debug, Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, help: &str, kind: Kind) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        self.text
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                self.text.push_str(&format!("{k}=\"{v}\""));
            }
            self.text.push('}');
        }
        self.text.push_str(&format!(" {value}\n"));
    }

    /// One family with a sample per port of every switch.
    fn per_port(&mut self, now: &LabNow, name: &str, help: &str, kind: Kind, value: impl Fn(&PortSnapshot) -> f64) {
        self.family(name, help, kind);
        for sw in &now.switches {
            for p in &sw.ports {
                self.sample(name, &[("switch", &sw.switch), ("port", &p.name)], value(p));
            }
        }
    }

    /// One family with a sample per port and priority.
    fn per_priority(
        &mut self,
        now: &LabNow,
        name: &str,
        help: &str,
        kind: Kind,
        value: impl Fn(&PortSnapshot, usize) -> f64,
    ) {
        self.family(name, help, kind);
        for sw in &now.switches {
            for p in &sw.ports {
                for prio in 0..PRIORITIES {
                    let label = prio.to_string();
                    let labels = [("switch", sw.switch.as_str()), ("port", &p.name), ("priority", &label)];
                    self.sample(name, &labels, value(p, prio));
                }
            }
        }
    }

    /// One family with a sample per sent flow (`value` None: the flow has none).
    fn per_flow(
        &mut self,
        now: &LabNow,
        name: &str,
        help: &str,
        kind: Kind,
        value: impl Fn(&intlab_transport::flow::FlowNow) -> Option<f64>,
    ) {
        self.family(name, help, kind);
        for (f, src, dst) in &now.flows {
            if let Some(v) = value(f) {
                let id = f.id.to_string();
                self.sample(name, &[("flow", &id), ("src", src), ("dst", dst)], v);
            }
        }
    }

    /// One family with a sample per QP of the programs in the hosts (`value` None: the QP
    /// has none).
    fn per_qp(&mut self, now: &LabNow, name: &str, help: &str, kind: Kind, value: impl Fn(&ProgramQp) -> Option<f64>) {
        self.family(name, help, kind);
        for (q, host, peer) in &now.qps {
            if let Some(v) = value(q) {
                let (qpn, pid) = (q.qpn.to_string(), q.owner.pid.to_string());
                let labels = [
                    ("host", host.as_str()),
                    ("qpn", &qpn),
                    ("pid", &pid),
                    ("program", &q.owner.command),
                    ("transport", &q.transport),
                    ("peer", peer.as_deref().unwrap_or("")),
                ];
                self.sample(name, &labels, v);
            }
        }
    }
}

/// The lab `now` in Prometheus text (`None`: no lab is running at the moment, as between the
/// runs of `dilation: auto`).
pub fn render(now: Option<&LabNow>) -> String {
    let mut e = Exposition::default();
    e.family("intlab_lab_up", "Whether a lab is running.", Kind::Gauge);
    e.sample("intlab_lab_up", &[], u8::from(now.is_some()));
    let Some(now) = now else { return e.text };
    e.family(
        "intlab_lab_dilation",
        "Time dilation: the lab runs this many times slower than its scenario.",
        Kind::Gauge,
    );
    e.sample("intlab_lab_dilation", &[("lab", &now.name)], now.dilation);
    e.family(
        "intlab_lab_silent_hosts",
        "Hosts that did not answer this scrape in time (their flows are missing from it).",
        Kind::Gauge,
    );
    e.sample("intlab_lab_silent_hosts", &[("lab", &now.name)], now.silent_hosts.len());
    ports(&mut e, now);
    flows(&mut e, now);
    qps(&mut e, now);
    nic_objects(&mut e, now);
    e.text
}

fn ports(e: &mut Exposition, now: &LabNow) {
    let c = Kind::Counter;
    let t = |p: &PortSnapshot| p.totals;
    e.per_port(now, "intlab_port_rx_frames_total", "Frames received.", c, |p| {
        t(p).rx_frames as f64
    });
    e.per_port(now, "intlab_port_rx_bytes_total", "Bytes received.", c, |p| {
        t(p).rx_bytes as f64
    });
    e.per_port(now, "intlab_port_tx_frames_total", "Frames transmitted.", c, |p| {
        t(p).tx_frames as f64
    });
    e.per_port(
        now,
        "intlab_port_tx_bytes_total",
        "Bytes transmitted, INT included.",
        c,
        |p| t(p).tx_bytes as f64,
    );
    e.per_port(
        now,
        "intlab_port_ecn_marks_total",
        "Frames marked CE at egress.",
        c,
        |p| t(p).ecn_marks as f64,
    );
    e.per_port(
        now,
        "intlab_port_queue_bytes",
        "Bytes waiting in the egress queue.",
        Kind::Gauge,
        |p| p.queue_now as f64,
    );
    e.per_port(
        now,
        "intlab_port_queue_max_bytes",
        "Largest egress queue seen so far.",
        Kind::Gauge,
        |p| t(p).queue_max as f64,
    );
    let name = "intlab_port_drops_total";
    e.family(name, "Frames dropped, by cause.", c);
    for sw in &now.switches {
        for p in &sw.ports {
            for cause in DropReason::ALL.map(DropReason::name) {
                let n = p.drops.get(cause).copied().unwrap_or(0);
                e.sample(name, &[("switch", &sw.switch), ("port", &p.name), ("cause", cause)], n);
            }
        }
    }
    let name = "intlab_port_impaired_frames_total";
    e.family(name, "Frames the port's link duplicated, corrupted or reordered.", c);
    for sw in &now.switches {
        for p in &sw.ports {
            let t = p.totals;
            for (what, n) in [
                ("duplicate", t.link_duplicated),
                ("corrupt", t.link_corrupted),
                ("reorder", t.link_reordered),
            ] {
                e.sample(
                    name,
                    &[("switch", &sw.switch), ("port", &p.name), ("impairment", what)],
                    n,
                );
            }
        }
    }
    e.per_priority(
        now,
        "intlab_port_pfc_pauses_received_total",
        "PFC frames received naming the priority: pauses (or resumes) of the port's transmitter.",
        c,
        |p, i| p.totals.pfc_rx_priority[i] as f64,
    );
    e.per_priority(
        now,
        "intlab_port_pfc_pauses_sent_total",
        "PFC frames sent naming the priority: XOFFs, their refreshes and XONs to the upstream.",
        c,
        |p, i| p.totals.pfc_tx_priority[i] as f64,
    );
    e.per_priority(
        now,
        "intlab_port_pfc_paused_seconds_total",
        "Time the port's transmitter was paused for the priority.",
        c,
        |p, i| p.totals.pfc_paused_ns[i] as f64 / 1e9,
    );
}

fn flows(e: &mut Exposition, now: &LabNow) {
    let (c, g) = (Kind::Counter, Kind::Gauge);
    e.per_flow(now, "intlab_flow_size_bytes", "The flow's message size.", g, |f| {
        Some(f.size as f64)
    });
    e.per_flow(
        now,
        "intlab_flow_acked_bytes_total",
        "Message bytes acknowledged.",
        c,
        |f| Some(f.acked_bytes as f64),
    );
    e.per_flow(
        now,
        "intlab_flow_wire_bytes_total",
        "Bytes the flow put on the wire, headers and retransmissions included.",
        c,
        |f| Some(f.wire_bytes as f64),
    );
    e.per_flow(
        now,
        "intlab_flow_retransmissions_total",
        "Packets sent again.",
        c,
        |f| Some(f.retransmissions as f64),
    );
    e.per_flow(
        now,
        "intlab_flow_rate_bytes_per_second",
        "The congestion controller's sending rate (0 once the flow is done).",
        g,
        |f| Some(f.rate_bps as f64 / 8.0),
    );
    e.per_flow(
        now,
        "intlab_flow_window_bytes",
        "The congestion controller's window, for controllers that keep one.",
        g,
        |f| f.window_bytes.map(|w| w as f64),
    );
    e.per_flow(now, "intlab_flow_rtt_seconds", "The latest RTT sample.", g, |f| {
        f.rtt_ns.map(|r| r as f64 / 1e9)
    });
    e.per_flow(
        now,
        "intlab_flow_completed",
        "1 once every byte is acknowledged.",
        g,
        |f| Some(f64::from(u8::from(f.done))),
    );
}

fn nic_objects(e: &mut Exposition, now: &LabNow) {
    let name = "intlab_nic_objects";
    e.family(
        name,
        "Objects the programs in a host hold on its NIC now, by kind (contexts are programs attached).",
        Kind::Gauge,
    );
    for (host, o, qps) in &now.nic_objects {
        for (kind, n) in [
            ("contexts", o.contexts),
            ("pds", o.pds),
            ("mrs", o.mrs),
            ("cqs", o.cqs),
            ("srqs", o.srqs),
            ("qps", *qps),
        ] {
            e.sample(name, &[("host", host), ("kind", kind)], n);
        }
    }
}

fn qps(e: &mut Exposition, now: &LabNow) {
    let (c, g) = (Kind::Counter, Kind::Gauge);
    let n = |v: u64| Some(v as f64);
    e.per_qp(
        now,
        "intlab_qp_sent_messages_total",
        "Messages the QP sent (or read, or carried out as atomics) and saw completed.",
        c,
        |q| n(q.messages_sent),
    );
    e.per_qp(now, "intlab_qp_sent_bytes_total", "Bytes of those messages.", c, |q| {
        n(q.bytes_sent)
    });
    e.per_qp(
        now,
        "intlab_qp_received_messages_total",
        "Messages the QP received whole, or READs and atomics it answered.",
        c,
        |q| n(q.messages_received),
    );
    e.per_qp(
        now,
        "intlab_qp_received_bytes_total",
        "Payload bytes the QP accepted in order.",
        c,
        |q| n(q.bytes_received),
    );
    e.per_qp(
        now,
        "intlab_qp_wire_bytes_total",
        "Bytes the QP's data packets took on the wire, headers and retransmissions included.",
        c,
        |q| n(q.wire_bytes),
    );
    e.per_qp(now, "intlab_qp_retransmissions_total", "Packets sent again.", c, |q| {
        n(q.retransmissions)
    });
    e.per_qp(now, "intlab_qp_timeouts_total", "Retransmission timeouts.", c, |q| {
        n(q.timeouts)
    });
    e.per_qp(now, "intlab_qp_cnps_total", "CNPs received.", c, |q| n(q.cnps));
    e.per_qp(
        now,
        "intlab_qp_send_bits_per_second",
        "The rate its sent messages completed at, from its first packet to the far end's last acknowledgement.",
        g,
        ProgramQp::send_bps,
    );
    e.per_qp(
        now,
        "intlab_qp_receive_bits_per_second",
        "The rate it received payload at, from its first packet to its last message whole.",
        g,
        ProgramQp::receive_bps,
    );
    e.per_qp(
        now,
        "intlab_qp_rate_bytes_per_second",
        "The congestion controller's sending rate.",
        g,
        |q| Some(q.rate_bps as f64 / 8.0),
    );
    e.per_qp(
        now,
        "intlab_qp_window_bytes",
        "The congestion controller's window, for controllers that keep one.",
        g,
        |q| q.window_bytes.map(|w| w as f64),
    );
    e.per_qp(now, "intlab_qp_rtt_seconds", "The mean RTT sample.", g, |q| {
        q.rtt_mean_ns.map(|r| r as f64 / 1e9)
    });
    e.per_qp(
        now,
        "intlab_qp_alive",
        "1 while the QP exists, 0 once its program destroyed it (or exited).",
        g,
        |q| Some(f64::from(u8::from(q.state != "DESTROYED"))),
    );
}
