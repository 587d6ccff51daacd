//! What a coordinator and a site say to each other over their TLS connection: messages as
//! JSON, each after its length (4 bytes, big-endian) and its kind (1 byte), and files as chunks
//! of raw bytes after a message announcing them. Every kind has its own size limit, checked
//! against the length before anything is allocated, and a message must be of the kind its
//! header says.

use std::collections::BTreeMap;
use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use intlab_runtime::WorkerStats;
use intlab_switch::SwitchSnapshot;
use intlab_transport::endpoint::EndpointReport;
use intlab_transport::flow::{FlowEvent, FlowPath};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::sites::KernelClock;

/// The protocol's version: a coordinator and a site of different versions do not talk.
pub const VERSION: u32 = 2;

/// The largest chunk of a file; a file is sent as many.
pub const CHUNK: usize = 1 << 20;

/// The kind byte of a file's chunk.
const CHUNK_KIND: u8 = 0xff;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

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
#[derive(Clone, Serialize, Deserialize)]
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
    /// The run's tunnel key: every tunnel frame carries a tag made with it, so a site takes
    /// frames only from its peers (made for each run, sent only over this TLS connection).
    pub tunnel_key: [u8; 16],
}

impl std::fmt::Debug for BuildOrder {
    // Never the tunnel key: messages are printed in errors and logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOrder")
            .field("file", &self.file)
            .field("dilation", &self.dilation)
            .field("site", &self.site)
            .field("addresses", &self.addresses)
            .field("capture", &self.capture)
            .finish_non_exhaustive()
    }
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
        /// The kernel clock its lab clock counts from.
        kernel: KernelClock,
    },
    /// A clock exchange's answer, in the site's unshifted lab clock.
    Clock {
        /// What the coordinator sent.
        sent_ns: u64,
        /// When the site received it.
        received_ns: u64,
        /// When it answered.
        answered_ns: u64,
        /// The shift its lab clock runs with now: what the coordinator checks the site's lab
        /// clock by, not the shift it asked for.
        shift_ns: i64,
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
    /// A file follows as chunks of raw bytes: a capture, named as in the results folder.
    File {
        /// Its name under `capture/`: a file name, never a path.
        name: String,
        /// Its length: the chunks that follow add up to it.
        size: u64,
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

/// A message of one direction: its kinds, each with a name and the most bytes it may take.
pub trait Message: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// (name, limit in bytes) of each kind, indexed by [`Message::kind`].
    const KINDS: &'static [(&'static str, usize)];
    /// This message's kind.
    fn kind(&self) -> u8;
    /// This message's kind's name.
    fn kind_name(&self) -> &'static str {
        Self::KINDS[usize::from(self.kind())].0
    }
    /// The file this message announces: (name, size); its chunks follow.
    fn announced_file(&self) -> Option<(&str, u64)> {
        None
    }
}

impl Message for ToSite {
    // A build order carries the scenario's text; a start, every flow this site sends with its
    // path; the rest are a few numbers.
    const KINDS: &'static [(&'static str, usize)] = &[
        ("Hello", KIB),
        ("Clock", KIB),
        ("Align", KIB),
        ("Build", 16 * MIB),
        ("Probe", 16 * MIB),
        ("Start", 64 * MIB),
        ("Send", 64 * KIB),
        ("Stop", KIB),
    ];

    fn kind(&self) -> u8 {
        match self {
            ToSite::Hello { .. } => 0,
            ToSite::Clock { .. } => 1,
            ToSite::Align { .. } => 2,
            ToSite::Build(_) => 3,
            ToSite::Probe { .. } => 4,
            ToSite::Start { .. } => 5,
            ToSite::Send { .. } => 6,
            ToSite::Stop => 7,
        }
    }
}

impl Message for FromSite {
    // A report holds every host's time series of a long run: tens of MB.
    const KINDS: &'static [(&'static str, usize)] = &[
        ("Hello", 4 * KIB),
        ("Clock", KIB),
        ("Built", MIB),
        ("Reached", 64 * MIB),
        ("Event", MIB),
        ("Finished", KIB),
        ("Report", 512 * MIB),
        ("File", 4 * KIB),
        ("Done", KIB),
        ("Failed", MIB),
    ];

    fn kind(&self) -> u8 {
        match self {
            FromSite::Hello { .. } => 0,
            FromSite::Clock { .. } => 1,
            FromSite::Built { .. } => 2,
            FromSite::Reached(_) => 3,
            FromSite::Event { .. } => 4,
            FromSite::Finished(_) => 5,
            FromSite::Report(_) => 6,
            FromSite::File { .. } => 7,
            FromSite::Done => 8,
            FromSite::Failed(_) => 9,
        }
    }

    fn announced_file(&self) -> Option<(&str, u64)> {
        match self {
            FromSite::File { name, size } => Some((name, *size)),
            _ => None,
        }
    }
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The connection failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Nothing arrived for this long.
    #[error("nothing received for {0} s")]
    Idle(u64),
    /// A frame started and did not finish in time.
    #[error("a {kind} frame of {len} B started and did not arrive whole within {secs} s")]
    Cut {
        /// Its kind's name.
        kind: &'static str,
        /// Its announced length.
        len: usize,
        /// The time allowed.
        secs: u64,
    },
    /// A header names no kind of this direction.
    #[error("a frame of unknown kind {0}")]
    UnknownKind(u8),
    /// A header announces more than its kind may take.
    #[error("a {kind} message of {len} B, more than its limit of {limit} B")]
    TooLong {
        /// Its kind's name.
        kind: &'static str,
        /// Its announced length.
        len: usize,
        /// Its kind's limit.
        limit: usize,
    },
    /// The body is no message of the kind its header says.
    #[error("a {kind} message that does not parse: {cause}")]
    Malformed {
        /// The header's kind.
        kind: &'static str,
        /// What the parser said.
        cause: String,
    },
    /// A message too long to send (a bug here, not the peer's).
    #[error("a {kind} message of {len} B, more than its limit of {limit} B, not sent")]
    TooLongToSend {
        /// Its kind's name.
        kind: &'static str,
        /// Its length.
        len: usize,
        /// Its kind's limit.
        limit: usize,
    },
}

/// What was read: a message or a chunk of a file.
#[derive(Debug)]
pub enum Frame<T> {
    /// A message.
    Message(T),
    /// Raw bytes of the file last announced.
    Chunk(Vec<u8>),
}

/// Writes message `m`.
pub async fn write_message<M: Message>(w: &mut (impl AsyncWrite + Unpin), m: &M) -> Result<(), ProtocolError> {
    let body = serde_json::to_vec(m).map_err(io::Error::other)?;
    let (kind, limit) = M::KINDS[usize::from(m.kind())];
    if body.len() > limit {
        return Err(ProtocolError::TooLongToSend {
            kind,
            len: body.len(),
            limit,
        });
    }
    write_frame(w, m.kind(), &body).await
}

/// Writes a chunk of a file (at most [`CHUNK`] bytes).
pub async fn write_chunk(w: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> Result<(), ProtocolError> {
    if bytes.len() > CHUNK {
        return Err(ProtocolError::TooLongToSend {
            kind: "chunk",
            len: bytes.len(),
            limit: CHUNK,
        });
    }
    write_frame(w, CHUNK_KIND, bytes).await
}

async fn write_frame(w: &mut (impl AsyncWrite + Unpin), kind: u8, body: &[u8]) -> Result<(), ProtocolError> {
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("message too long"))?;
    let mut head = [0; 5];
    head[..4].copy_from_slice(&len.to_be_bytes());
    head[4] = kind;
    w.write_all(&head).await?;
    w.write_all(body).await?;
    w.flush().await?;
    Ok(())
}

/// Reads the next frame; None at a clean end of the stream. Waits at most `idle` for a frame
/// to begin and `whole` for the rest of it once begun.
pub async fn read_frame<M: Message>(
    r: &mut (impl AsyncRead + Unpin),
    idle: std::time::Duration,
    whole: std::time::Duration,
) -> Result<Option<Frame<M>>, ProtocolError> {
    let mut head = [0; 5];
    // The first byte alone tells a clean end from a header cut short.
    match tokio::time::timeout(idle, r.read(&mut head[..1])).await {
        Err(_) => return Err(ProtocolError::Idle(idle.as_secs())),
        Ok(Ok(0)) => return Ok(None),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e.into()),
    }
    let cut = |kind, len| ProtocolError::Cut {
        kind,
        len,
        secs: whole.as_secs(),
    };
    tokio::time::timeout(whole, r.read_exact(&mut head[1..]))
        .await
        .map_err(|_| cut("header", 5))??;
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let (name, limit) = match head[4] {
        CHUNK_KIND => ("chunk", CHUNK),
        k => *M::KINDS.get(usize::from(k)).ok_or(ProtocolError::UnknownKind(k))?,
    };
    if len > limit {
        return Err(ProtocolError::TooLong { kind: name, len, limit });
    }
    let mut body = vec![0; len];
    tokio::time::timeout(whole, r.read_exact(&mut body))
        .await
        .map_err(|_| cut(name, len))??;
    if head[4] == CHUNK_KIND {
        return Ok(Some(Frame::Chunk(body)));
    }
    let malformed = |cause: String| ProtocolError::Malformed { kind: name, cause };
    let m: M = serde_json::from_slice(&body).map_err(|e| malformed(e.to_string()))?;
    if m.kind() != head[4] {
        return Err(malformed(format!("it is a {}", m.kind_name())));
    }
    Ok(Some(Frame::Message(m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const LONG: Duration = Duration::from_secs(5);

    fn read<M: Message>(wire: &[u8]) -> Result<Option<Frame<M>>, ProtocolError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut r = wire;
        rt.block_on(read_frame::<M>(&mut r, LONG, LONG))
    }

    fn wire(messages: &[ToSite], chunk: Option<&[u8]>) -> Vec<u8> {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut wire = Vec::new();
        rt.block_on(async {
            for m in messages {
                write_message(&mut wire, m).await.unwrap();
            }
            if let Some(c) = chunk {
                write_chunk(&mut wire, c).await.unwrap();
            }
        });
        wire
    }

    #[test]
    fn messages_and_chunks_cross_in_order_and_a_clean_end_is_none() {
        let w = wire(&[ToSite::Clock { sent_ns: 42 }], Some(&[1, 2, 3]));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut r = w.as_slice();
        rt.block_on(async {
            match read_frame::<ToSite>(&mut r, LONG, LONG).await.unwrap() {
                Some(Frame::Message(ToSite::Clock { sent_ns: 42 })) => {}
                other => panic!("{other:?}"),
            }
            match read_frame::<ToSite>(&mut r, LONG, LONG).await.unwrap() {
                Some(Frame::Chunk(b)) => assert_eq!(b, [1, 2, 3]),
                other => panic!("{other:?}"),
            }
            assert!(read_frame::<ToSite>(&mut r, LONG, LONG).await.unwrap().is_none());
        });
    }

    #[test]
    fn a_frame_cut_short_is_an_error_not_an_end() {
        let mut w = wire(&[ToSite::Stop], None);
        w.truncate(w.len() - 1);
        assert!(read::<ToSite>(&w).is_err());
        assert!(read::<ToSite>(&w[..3]).is_err(), "a header cut short");
    }

    #[test]
    fn a_length_past_its_kinds_limit_is_refused_by_name_before_allocating() {
        let mut head = (1u32 << 30).to_be_bytes().to_vec();
        head.push(0);
        match read::<ToSite>(&head) {
            Err(ProtocolError::TooLong {
                kind: "Hello",
                len,
                limit,
            }) => {
                assert_eq!((len, limit), (1 << 30, KIB));
            }
            other => panic!("{other:?}"),
        }
        let mut head = 2_000_000u32.to_be_bytes().to_vec();
        head.push(CHUNK_KIND);
        assert!(matches!(
            read::<ToSite>(&head),
            Err(ProtocolError::TooLong { kind: "chunk", .. })
        ));
        let mut head = 2u32.to_be_bytes().to_vec();
        head.push(200);
        assert!(matches!(read::<ToSite>(&head), Err(ProtocolError::UnknownKind(200))));
    }

    #[test]
    fn a_message_of_another_kind_than_its_header_says_is_refused() {
        let mut w = wire(&[ToSite::Stop], None);
        w[4] = 3; // "Build"
        let e = read::<ToSite>(&w).unwrap_err().to_string();
        assert!(e.contains("Build") && e.contains("Stop"), "{e}");
    }

    #[test]
    fn every_kind_is_named_and_within_the_table() {
        let all = [
            ToSite::Hello { version: 1 },
            ToSite::Clock { sent_ns: 0 },
            ToSite::Align { shift_ns: 0 },
            ToSite::Probe { flows: vec![] },
            ToSite::Start {
                t0_ns: 0,
                sends: vec![],
            },
            ToSite::Stop,
        ];
        for m in &all {
            let name = format!("{m:?}");
            assert!(name.starts_with(m.kind_name()), "{name} is named {}", m.kind_name());
        }
        assert_eq!(FromSite::Failed(String::new()).kind_name(), "Failed");
        assert_eq!(FromSite::Done.kind_name(), "Done");
    }

    #[test]
    fn a_build_order_never_prints_its_tunnel_key() {
        let order = BuildOrder {
            scenario: String::new(),
            file: "/x.yaml".into(),
            dilation: 1.0,
            site: "east".into(),
            addresses: BTreeMap::new(),
            capture: false,
            tunnel_key: [0xab; 16],
        };
        let printed = format!("{:?}", ToSite::Build(order));
        assert!(printed.contains("east") && !printed.contains("171"), "{printed}");
    }

    #[test]
    fn an_idle_peer_times_out() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut a, _b) = tokio::io::duplex(64);
            let r = read_frame::<ToSite>(&mut a, Duration::from_millis(50), LONG).await;
            assert!(matches!(r, Err(ProtocolError::Idle(_))), "{r:?}");
        });
    }
}
