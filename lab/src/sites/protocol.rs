//! What a coordinator and a site say to each other over their TCP connection: messages as
//! JSON, each after its length (4 bytes, big-endian) and a kind byte, and files as raw bytes
//! announced by a message.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;

use intlab_runtime::WorkerStats;
use intlab_switch::SwitchSnapshot;
use intlab_transport::endpoint::EndpointReport;
use intlab_transport::flow::{FlowEvent, FlowPath};
use serde::{Deserialize, Serialize};

/// The protocol's version: a coordinator and a site of different versions do not talk.
pub const VERSION: u32 = 1;

/// The largest message or file a peer accepts (a site's report of a long run with time
/// series is tens of MB).
const MAX_LEN: usize = 1 << 30;

/// What a coordinator tells a site.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToSite {
    /// Who is there: the coordinator's version.
    Hello {
        /// [`VERSION`].
        version: u32,
    },
    /// A clock exchange: the coordinator's lab clock when it sent this.
    Clock {
        /// Coordinator lab time (ns).
        sent_ns: u64,
    },
    /// Shift the site's lab clock by this (ns) to read as the coordinator's.
    Align {
        /// The shift ([`intlab_runtime::clock::Clock::align`]).
        shift_ns: i64,
    },
    /// Build this site's part of the lab.
    Build(BuildOrder),
    /// Probe these flows (plan indices, each with its source here) and say what was found.
    Probe {
        /// Plan indices.
        flows: Vec<usize>,
    },
    /// Start the workload at lab time `t0_ns`: expect every flow whose destination is here,
    /// send these (plan index, lab start time, path), play the scenario's events.
    Start {
        /// The run's lab start time.
        t0_ns: u64,
        /// Flows to send.
        sends: Vec<(usize, u64, FlowPath)>,
    },
    /// Send one more flow (a later iteration of an application).
    Send {
        /// Plan index.
        flow: usize,
        /// Lab start time.
        start_ns: u64,
        /// Its path.
        path: FlowPath,
    },
    /// Stop, report, send the capture files and tear everything down.
    Stop,
}

/// What a site builds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildOrder {
    /// The scenario's text, overrides applied.
    pub scenario: String,
    /// The file it came from (relative paths in it are resolved against it, so files it names
    /// must be at the same place on every machine).
    pub file: PathBuf,
    /// The dilation to run at.
    pub dilation: f64,
    /// This site's name in the scenario's `sites:`.
    pub site: String,
    /// Every site's address on the machines' network (the tunnels' ends).
    pub addresses: BTreeMap<String, Ipv4Addr>,
    /// Capture every switch port.
    pub capture: bool,
}

/// What one flow's probes found: (plan index, smallest RTT in ns, links taken).
pub type FlowReach = (usize, u64, Vec<usize>);

/// What a site tells its coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FromSite {
    /// The answer to [`ToSite::Hello`].
    Hello {
        /// [`VERSION`].
        version: u32,
        /// The machine's host name, for messages.
        host: String,
    },
    /// A clock exchange's answer, in the site's unshifted lab clock.
    Clock {
        /// What the coordinator sent.
        sent_ns: u64,
        /// When the site received it.
        received_ns: u64,
        /// When it answered.
        answered_ns: u64,
    },
    /// Its part is built; the devices its tunnels leave the machine by.
    Built {
        /// One per tunnel.
        underlay: Vec<Underlay>,
    },
    /// What the probes of each flow found.
    Reached(Vec<FlowReach>),
    /// A sent flow completed or made no progress; for the latter, what the site sees of it.
    Event {
        /// The event.
        event: FlowEvent,
        /// For a stuck flow: where it was and what the site's switches dropped.
        diagnosis: Option<String>,
    },
    /// Flows finished at this site's hosts so far (each counts at both ends).
    Finished(usize),
    /// Its report once stopped.
    Report(Box<SiteReport>),
    /// A file follows as raw bytes: a capture, named as in the results folder.
    File {
        /// Its name under `capture/`.
        name: String,
    },
    /// Everything is sent and torn down.
    Done,
    /// What was asked failed.
    Failed(String),
}

/// The device a cut link's tunnel leaves a site's machine by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Underlay {
    /// The cut link.
    pub link: String,
    /// The machine's interface towards the other site.
    pub device: String,
    /// Its MTU.
    pub mtu: u32,
}

/// What one site's lab reports when stopped.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SiteReport {
    /// Its hosts' reports.
    pub hosts: Vec<EndpointReport>,
    /// Its switches' final counters.
    pub switches: Vec<SwitchSnapshot>,
    /// Hosts that failed (name, error).
    pub failed_hosts: Vec<(String, String)>,
    /// Its workers.
    pub workers: Vec<WorkerStats>,
    /// The worker of each host.
    pub host_worker: Vec<(String, usize)>,
    /// The worker of each switch port: (switch, port, worker).
    pub port_worker: Vec<(String, String, usize)>,
    /// Link changes made (lab ns, what).
    pub events: Vec<(u64, String)>,
}

/// Writes message `m`.
pub fn send<T: Serialize>(w: &mut impl Write, m: &T) -> io::Result<()> {
    let body = serde_json::to_vec(m).map_err(io::Error::other)?;
    write_frame(w, 0, &body)
}

/// Writes raw bytes (a file a [`FromSite::File`] announced).
pub fn send_bytes(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    write_frame(w, 1, bytes)
}

fn write_frame(w: &mut impl Write, kind: u8, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("message too long"))?;
    let mut head = [0; 5];
    head[..4].copy_from_slice(&len.to_be_bytes());
    head[4] = kind;
    w.write_all(&head)?;
    w.write_all(body)?;
    w.flush()
}

/// What was read: a message or raw bytes.
#[derive(Debug)]
pub enum Frame<T> {
    /// A message.
    Message(T),
    /// Raw bytes.
    Bytes(Vec<u8>),
}

/// Reads the next frame; None at a clean end of the stream.
pub fn receive<T: for<'de> Deserialize<'de>>(r: &mut impl Read) -> io::Result<Option<Frame<T>>> {
    let mut head = [0; 5];
    match r.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > MAX_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes"),
        ));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    match head[4] {
        0 => serde_json::from_slice(&body)
            .map(|m| Some(Frame::Message(m)))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        1 => Ok(Some(Frame::Bytes(body))),
        k => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of kind {k}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_bytes_cross_in_order() {
        let mut wire = Vec::new();
        send(&mut wire, &ToSite::Clock { sent_ns: 42 }).unwrap();
        send_bytes(&mut wire, &[1, 2, 3]).unwrap();
        let mut r = wire.as_slice();
        match receive::<ToSite>(&mut r).unwrap() {
            Some(Frame::Message(ToSite::Clock { sent_ns: 42 })) => {}
            other => panic!("{other:?}"),
        }
        match receive::<ToSite>(&mut r).unwrap() {
            Some(Frame::Bytes(b)) => assert_eq!(b, [1, 2, 3]),
            other => panic!("{other:?}"),
        }
        assert!(receive::<ToSite>(&mut r).unwrap().is_none(), "a clean end");
    }

    #[test]
    fn a_frame_cut_short_is_an_error_not_an_end() {
        let mut wire = Vec::new();
        send(&mut wire, &ToSite::Stop).unwrap();
        wire.truncate(wire.len() - 1);
        assert!(receive::<ToSite>(&mut wire.as_slice()).is_err());
    }
}
