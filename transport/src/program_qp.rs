//! The QPs of programs as the lab counts them: what the results of a run and the live views
//! (`--metrics`, `--web`) show of each, as they show the lab's own flows.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// The program that made a device context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramOwner {
    /// Its process.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub command: String,
}

/// One QP of a program, at one moment or as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramQp {
    /// The program.
    pub owner: ProgramOwner,
    /// Its number.
    pub qpn: u32,
    /// `RC` or `UD`.
    pub transport: String,
    /// Its state (`RESET` ... `ERR`; `DESTROYED` once gone).
    pub state: String,
    /// The far end's address (RC, once connected).
    pub peer: Option<Ipv4Addr>,
    /// The far end's QP (RC, once connected).
    pub peer_qpn: Option<u32>,
    /// The controller it runs.
    pub controller: String,
    /// The controller's pacing rate now (b/s).
    pub rate_bps: u64,
    /// The controller's window now (bytes), for those that keep one.
    pub window_bytes: Option<u64>,
    /// Messages it sent (or read, or carried out as atomics) and saw completed.
    pub messages_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Messages it received whole (SENDs, WRITEs), or READs and atomics it answered.
    pub messages_received: u64,
    /// Payload bytes it accepted in order.
    pub bytes_received: u64,
    /// Data packets it sent, retransmissions included.
    pub packets_sent: u64,
    /// Bytes those packets took on the wire.
    pub wire_bytes: u64,
    /// Packets sent again.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// NAKs and RNR NAKs received.
    pub naks: u64,
    /// CNPs received.
    pub cnps: u64,
    /// Smallest RTT sample (ns).
    pub rtt_min_ns: Option<u64>,
    /// Mean RTT sample (ns).
    pub rtt_mean_ns: Option<u64>,
    /// When its first data packet went out (lab ns).
    pub first_sent_ns: Option<u64>,
    /// When the far end last acknowledged progress (lab ns).
    pub last_progress_ns: Option<u64>,
    /// When it first accepted a packet (lab ns).
    pub first_received_ns: Option<u64>,
    /// When it last received a message whole (lab ns).
    pub last_received_ns: Option<u64>,
}

impl ProgramQp {
    /// The rate at which its sent messages completed, from its first packet to the last
    /// progress (b/s): what a bandwidth benchmark on the sending side measures. None before
    /// two moments apart were seen.
    pub fn send_bps(&self) -> Option<f64> {
        rate(self.bytes_sent, self.first_sent_ns?, self.last_progress_ns?)
    }

    /// The rate at which it received payload, from its first packet to the last message
    /// whole (b/s): what a bandwidth benchmark on the receiving side measures.
    pub fn receive_bps(&self) -> Option<f64> {
        rate(self.bytes_received, self.first_received_ns?, self.last_received_ns?)
    }
}

fn rate(bytes: u64, from: u64, to: u64) -> Option<f64> {
    (to > from && bytes > 0).then(|| bytes as f64 * 8e9 / (to - from) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_needs_bytes_and_an_interval() {
        assert_eq!(rate(1_000, 0, 8_000), Some(1e9));
        assert_eq!(rate(0, 0, 8_000), None, "no byte, no rate");
        assert_eq!(rate(1_000, 5, 5), None, "no interval, no rate");
    }
}
