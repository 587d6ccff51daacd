//! One end of a coordinator–site connection. Its frames are read and written by tasks on an
//! I/O runtime, so a clock exchange is answered the moment it arrives, whatever the program is
//! busy with; the program itself sends and receives from ordinary threads. Files a peer
//! announces are written to a folder chunk by chunk as they arrive: neither end ever holds a
//! whole file in memory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use intlab_runtime::clock::Clock;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::sites::protocol::{self, CHUNK, Frame, Message, ProtocolError};

/// Frames queued to send at most: with file chunks of [`CHUNK`], what a sender holds in memory.
const QUEUED: usize = 8;

/// What the reading side hands the program.
#[derive(Debug)]
pub enum Received<M> {
    /// A message, with the lab time it came off the connection.
    Message(M, u64),
    /// The connection ended: cleanly (None) or why not.
    Ended(Option<String>),
}

/// How a connection reads.
#[derive(Debug, Clone)]
pub struct ReadLimits {
    /// The longest wait for a frame to begin.
    pub idle: Duration,
    /// The longest a begun frame may take to arrive whole (and a frame to be written).
    pub whole: Duration,
    /// Where announced files are written; None refuses every file.
    pub files: Option<PathBuf>,
}

/// A peer's message answered on the reading task itself, never reaching the program.
pub type Answer<In, Out> = Box<dyn Fn(&In) -> Option<Out> + Send + Sync>;

/// Where received messages go; false once nobody listens.
pub type Deliver<In> = Box<dyn Fn(Received<In>) -> bool + Send + Sync>;

enum Outgoing<M> {
    Message(M),
    Chunk(Vec<u8>),
}

/// One end of a connection: sends `Out`, receives `In`.
pub struct ControlConnection<Out: Message> {
    outgoing: Option<mpsc::Sender<Outgoing<Out>>>,
    runtime: Handle,
    writer: Option<JoinHandle<()>>,
    reader: JoinHandle<()>,
}

impl<Out: Message> ControlConnection<Out> {
    /// Starts reading and writing `stream` on `runtime`. Each message read goes to `answer`
    /// first; what it does not answer goes to `deliver`.
    pub fn start<In: Message, S: AsyncRead + AsyncWrite + Send + 'static>(
        stream: S,
        runtime: &Handle,
        limits: ReadLimits,
        answer: Answer<In, Out>,
        deliver: Deliver<In>,
    ) -> ControlConnection<Out> {
        let (r, w) = tokio::io::split(stream);
        let (tx, rx) = mpsc::channel(QUEUED);
        let whole = limits.whole;
        let writer = runtime.spawn(write_loop(w, rx, whole));
        let answers = tx.clone();
        let reader = runtime.spawn(async move {
            let why = read_loop(r, &limits, &answer, &deliver, &answers).await;
            deliver(Received::Ended(why));
        });
        ControlConnection {
            outgoing: Some(tx),
            runtime: runtime.clone(),
            writer: Some(writer),
            reader,
        }
    }

    /// Queues `m` to send (waits while [`QUEUED`] frames are queued).
    pub fn send(&self, m: Out) -> std::io::Result<()> {
        self.queue(Outgoing::Message(m))
    }

    /// Sends the file at `path` as chunks, after `announce` (the message that names it).
    pub fn send_file(&self, announce: Out, path: &Path) -> std::io::Result<()> {
        use std::io::Read;
        let mut f = std::fs::File::open(path)?;
        self.send(announce)?;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            let n = (&mut f).take(CHUNK as u64).read_to_end(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            self.queue(Outgoing::Chunk(chunk))?;
        }
    }

    fn queue(&self, o: Outgoing<Out>) -> std::io::Result<()> {
        let closed = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the connection is closed");
        self.outgoing
            .as_ref()
            .ok_or_else(closed)?
            .blocking_send(o)
            .map_err(|_| closed())
    }

    /// Sends what is queued, ends the connection cleanly (within `wait`) and stops reading.
    pub fn close(mut self, wait: Duration) {
        // The reader holds a sender for its answers: the writer ends once both are gone.
        self.reader.abort();
        drop(self.outgoing.take());
        if let Some(w) = self.writer.take() {
            // A writer that cannot finish in time is dropped with the connection.
            self.runtime
                .block_on(async { tokio::time::timeout(wait, w).await.ok() });
        }
    }
}

impl<Out: Message> Drop for ControlConnection<Out> {
    fn drop(&mut self) {
        if let Some(w) = &self.writer {
            w.abort();
        }
        self.reader.abort();
    }
}

async fn write_loop<Out: Message, S: AsyncWrite>(
    mut w: WriteHalf<S>,
    mut rx: mpsc::Receiver<Outgoing<Out>>,
    whole: Duration,
) {
    while let Some(o) = rx.recv().await {
        let written = match &o {
            Outgoing::Message(m) => tokio::time::timeout(whole, protocol::write_message(&mut w, m)).await,
            Outgoing::Chunk(b) => tokio::time::timeout(whole, protocol::write_chunk(&mut w, b)).await,
        };
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!("control connection: writing: {e}");
                return;
            }
            Err(_) => {
                tracing::debug!("control connection: the peer took nothing for {} s", whole.as_secs());
                return;
            }
        }
    }
    // Closing the TLS session tells the peer the end is clean, not cut.
    tokio::time::timeout(whole, w.shutdown()).await.ok();
}

/// Reads until the end; why it ended when not cleanly.
async fn read_loop<In: Message, Out: Message, S: AsyncRead>(
    mut r: ReadHalf<S>,
    limits: &ReadLimits,
    answer: &Answer<In, Out>,
    deliver: &Deliver<In>,
    answers: &mpsc::Sender<Outgoing<Out>>,
) -> Option<String> {
    loop {
        let frame = match protocol::read_frame::<In>(&mut r, limits.idle, limits.whole).await {
            Ok(Some(f)) => f,
            Ok(None) => return None,
            Err(e) => return Some(e.to_string()),
        };
        let at = Clock::get().now_ns();
        let m = match frame {
            Frame::Message(m) => m,
            Frame::Chunk(_) => return Some("a file's bytes that no message announced".into()),
        };
        if let Some(reply) = answer(&m) {
            if answers.send(Outgoing::Message(reply)).await.is_err() {
                return None;
            }
            continue;
        }
        if let Some((name, size)) = m.announced_file()
            && let Err(e) = receive_file::<In, S>(&mut r, limits, name, size).await
        {
            return Some(e);
        }
        if !deliver(Received::Message(m, at)) {
            return None;
        }
    }
}

/// Writes the `size` bytes of file `name` that follow into the files folder.
async fn receive_file<In: Message, S: AsyncRead>(
    r: &mut ReadHalf<S>,
    limits: &ReadLimits,
    name: &str,
    size: u64,
) -> Result<(), String> {
    let folder = limits
        .files
        .as_ref()
        .ok_or_else(|| format!("file `{name}` announced, but this end takes no files"))?;
    let file = plain_file_name(name).ok_or_else(|| format!("`{name}` is no plain file name"))?;
    let path = folder.join(file);
    let mut out = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut written = 0u64;
    while written < size {
        let cut = |why: String| format!("file `{name}` cut short at {written} of {size} B: {why}");
        let bytes = match protocol::read_frame::<In>(r, limits.idle, limits.whole).await {
            Ok(Some(Frame::Chunk(b))) => b,
            Ok(Some(Frame::Message(m))) => return Err(cut(format!("a {} message came first", m.kind_name()))),
            Ok(None) => return Err(cut("the connection ended".into())),
            Err(ProtocolError::Malformed { .. } | ProtocolError::UnknownKind(_)) => {
                return Err(cut("a message came first".into()));
            }
            Err(e) => return Err(cut(e.to_string())),
        };
        if written + bytes.len() as u64 > size {
            return Err(format!("file `{name}`: more than the {size} B announced"));
        }
        // A blocking write on the I/O task: the disk, not the peer, sets the pace here.
        out.write_all(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        written += bytes.len() as u64;
    }
    Ok(())
}

/// A coordinator's connection to a site server.
pub type SiteStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// Opens a TLS connection to the site server at `addr` as the coordinator holding `keys`.
pub async fn dial(addr: std::net::SocketAddr, keys: &intlab_keys::LabKeys) -> Result<SiteStream, String> {
    let tls = tokio_rustls::TlsConnector::from(keys.coordinator_config().map_err(|e| format!("the lab's keys: {e}"))?);
    let tcp = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    tokio::time::timeout(
        Duration::from_secs(10),
        tls.connect(intlab_keys::site_server_name(), tcp),
    )
    .await
    .map_err(|_| "no TLS handshake within 10 s".to_owned())?
    .map_err(|e| format!("TLS: {e} (do both machines hold the same lab's keys?)"))
}

/// `name` when it names a file in a folder and nothing else: no path, no `..`.
pub fn plain_file_name(name: &str) -> Option<&str> {
    let ok = !name.is_empty() && name.len() <= 255 && name != "." && name != ".." && !name.contains(['/', '\\', '\0']);
    ok.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_name_files() {
        assert_eq!(plain_file_name("s1-p2.pcapng"), Some("s1-p2.pcapng"));
        for bad in ["", ".", "..", "../x", "/etc/passwd", "a/b", "a\0b"] {
            assert_eq!(plain_file_name(bad), None, "{bad:?}");
        }
        assert_eq!(plain_file_name(&"x".repeat(256)), None);
    }
}
