//! The P4Runtime server of a lab's P4 switches: one gRPC endpoint per switch (the tutorials'
//! numbering: the i-th P4 switch on 127.0.0.1:50051+i, device id i), all served by one thread
//! with a current-thread runtime, so the lab keeps its cores for its workers.

mod arbitration;
mod device;
mod digests;
mod entries;
mod error;
mod ids;
mod meters;
mod packet_io;
mod profiles;
mod replication;
mod service;
mod value_sets;

use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;

use intlab_p4::Datapath;
use tokio::sync::oneshot;

pub use device::Device;
pub use error::UpdateError;
pub use service::API_VERSION;

use crate::proto::p4::v1::p4_runtime_server::P4RuntimeServer;
use crate::proto::p4::v1::stream_message_response::Update;
use crate::proto::p4::v1::{IdleTimeoutNotification, StreamMessageResponse};

/// The first port of the tutorials' numbering.
pub const FIRST_PORT: u16 = 50051;

/// A switch to serve.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The switch's name.
    pub name: String,
    /// Where to listen.
    pub address: SocketAddr,
    /// Its device id.
    pub device_id: u64,
    /// What it runs.
    pub datapath: Arc<Datapath>,
    /// When `address` is taken, listen on a free port of the same host instead (for the
    /// default numbering: a second lab up at once must not fail for it).
    pub any_port_if_taken: bool,
    /// Its CPU port, if it has one: PacketIn and PacketOut go through it.
    pub cpu: Option<CpuPort>,
    /// Serve over TLS, if given.
    pub tls: Option<ServerTls>,
}

/// A P4Runtime server's TLS: its certificate and key, and the authority its clients'
/// certificates must come from (then a client without one is refused), all PEM.
#[derive(Clone)]
pub struct ServerTls {
    /// The certificate chain.
    pub cert_pem: Vec<u8>,
    /// The private key.
    pub key_pem: Vec<u8>,
    /// The clients' authority, for mutual TLS.
    pub client_ca_pem: Option<Vec<u8>>,
}

impl ServerTls {
    /// Reads the PEM files `cert`, `key` and `client_ca`.
    pub fn read(
        cert: &std::path::Path,
        key: &std::path::Path,
        client_ca: Option<&std::path::Path>,
    ) -> Result<ServerTls, ServerError> {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|source| ServerError::TlsFile {
                path: p.to_path_buf(),
                source,
            })
        };
        Ok(ServerTls {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            client_ca_pem: client_ca.map(read).transpose()?,
        })
    }
}

impl std::fmt::Debug for ServerTls {
    // Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mutual", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// The controller's end of a switch's CPU port.
#[derive(Debug, Clone)]
pub struct CpuPort {
    /// Frames the program sends to the CPU port are read here; frames written here arrive on it.
    pub socket: Arc<UnixDatagram>,
    /// The longest frame the switch takes.
    pub max_frame: usize,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// An address could not be bound.
    #[error("P4Runtime for switch {switch}: cannot listen on {address}: {source}")]
    Bind {
        /// The switch.
        switch: String,
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A program's ids could not be given.
    #[error("P4Runtime for switch {switch}: {source}")]
    Ids {
        /// The switch.
        switch: String,
        /// Why.
        source: crate::p4info::ids::IdError,
    },
    /// The server's thread or runtime could not be made.
    #[error("P4Runtime server: {0}")]
    Runtime(std::io::Error),
    /// A TLS file could not be read.
    #[error("P4Runtime TLS: {path}: {source}")]
    TlsFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Its TLS certificate or key was refused.
    #[error("P4Runtime for switch {switch}: TLS: {source}")]
    Tls {
        /// The switch.
        switch: String,
        /// Why.
        source: tonic::transport::Error,
    },
}

/// The running server; dropping it stops it.
pub struct Server {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Each switch's address and device id, in the order given.
    pub endpoints: Vec<(String, SocketAddr, u64)>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("endpoints", &self.endpoints).finish()
    }
}

/// Serves `endpoints` until the returned server is dropped. Every address is bound before
/// this returns, so a port in use is an error here, naming the switch.
pub fn start(endpoints: Vec<Endpoint>) -> Result<Server, ServerError> {
    let mut listeners = Vec::new();
    let mut devices = Vec::new();
    let mut bound = Vec::new();
    let mut tls_configs = Vec::new();
    for e in endpoints {
        let tls = e.tls.as_ref().map(|t| {
            let identity = tonic::transport::Identity::from_pem(&t.cert_pem, &t.key_pem);
            let config = tonic::transport::ServerTlsConfig::new().identity(identity);
            match &t.client_ca_pem {
                Some(ca) => config.client_ca_root(tonic::transport::Certificate::from_pem(ca)),
                None => config,
            }
        });
        // Checked here, where the switch can be named, not when the first client comes.
        if let Some(config) = &tls {
            tonic::transport::Server::builder()
                .tls_config(config.clone())
                .map_err(|source| ServerError::Tls {
                    switch: e.name.clone(),
                    source,
                })?;
        }
        tls_configs.push(tls);
        let listener = match std::net::TcpListener::bind(e.address) {
            Err(err) if err.kind() == std::io::ErrorKind::AddrInUse && e.any_port_if_taken => {
                let free = SocketAddr::new(e.address.ip(), 0);
                let l = std::net::TcpListener::bind(free);
                if let Ok(l) = &l {
                    tracing::warn!(
                        switch = %e.name,
                        "{} is taken (another lab?): P4Runtime on {} instead",
                        e.address,
                        l.local_addr().unwrap_or(free)
                    );
                }
                l
            }
            other => other,
        }
        .map_err(|source| ServerError::Bind {
            switch: e.name.clone(),
            address: e.address,
            source,
        })?;
        listener.set_nonblocking(true).map_err(ServerError::Runtime)?;
        let address = listener.local_addr().map_err(ServerError::Runtime)?;
        let device = Device::new(&e.name, e.device_id, e.datapath, e.cpu).map_err(|source| ServerError::Ids {
            switch: e.name.clone(),
            source,
        })?;
        bound.push((e.name, address, e.device_id));
        listeners.push(listener);
        devices.push(Arc::new(device));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServerError::Runtime)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("p4runtime".into())
        .spawn(move || {
            runtime.block_on(async move {
                let mut servers = Vec::new();
                for ((listener, device), tls) in listeners.into_iter().zip(devices).zip(tls_configs) {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!(switch = %device.name, "P4Runtime: listener lost: {e}");
                            continue;
                        }
                    };
                    let name = device.name.clone();
                    servers.push(tokio::spawn(send_digests(Arc::clone(&device))));
                    servers.push(tokio::spawn(send_idle_notifications(Arc::clone(&device))));
                    if device.cpu_port().is_some() {
                        servers.push(tokio::spawn(send_packet_ins(Arc::clone(&device))));
                    }
                    let service = P4RuntimeServer::new(service::Service::new(device));
                    servers.push(tokio::spawn(async move {
                        let mut builder = tonic::transport::Server::builder();
                        if let Some(config) = tls {
                            builder = match builder.tls_config(config) {
                                Ok(b) => b,
                                Err(e) => {
                                    tracing::error!(switch = %name, "P4Runtime TLS: {e}");
                                    return;
                                }
                            };
                        }
                        // Without TCP_NODELAY a reply written after another small write (an
                        // HTTP/2 window update) waited for the client's delayed ACK: 40 ms, the
                        // p99 of Writes in `--bench p4runtime`.
                        let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
                        let served = builder.add_service(service).serve_with_incoming(incoming).await;
                        if let Err(e) = served {
                            tracing::error!(switch = %name, "P4Runtime server failed: {e}");
                        }
                    }));
                }
                let _stop_or_dropped = stopped.await;
                // Not a graceful shutdown: a controller's open stream would hold the lab up.
                // Aborting drops every connection; clients see the switch go away.
                for s in &servers {
                    s.abort();
                }
                for s in servers {
                    if let Err(e) = s.await
                        && !e.is_cancelled()
                    {
                        tracing::error!("P4Runtime server task: {e}");
                    }
                }
            });
        })
        .map_err(ServerError::Runtime)?;
    Ok(Server {
        stop: Some(stop),
        thread: Some(thread),
        endpoints: bound,
    })
}

/// How often the program's digests are gathered into lists for the primary controller.
const DIGEST_PERIOD: std::time::Duration = std::time::Duration::from_millis(10);

/// Sends what `make` gives to `device`'s primary controller, if it has one; with none, `make`
/// is not called, so what it would take stays for the next primary.
fn to_primary(device: &Device, make: impl FnOnce() -> Vec<Update>) {
    let arbitration = device
        .arbitration
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(outbox) = arbitration.primary_outbox() else {
        return;
    };
    for update in make() {
        let msg = StreamMessageResponse { update: Some(update) };
        // A primary that just went away misses it, as it would on a real switch.
        if outbox.send(Ok(msg)).is_err() {
            break;
        }
    }
}

/// Sends `device`'s digest lists to its primary controller every [`DIGEST_PERIOD`].
async fn send_digests(device: Arc<Device>) {
    let mut tick = tokio::time::interval(DIGEST_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        to_primary(&device, || {
            device
                .digest_lists(epoch_ns())
                .into_iter()
                .map(Update::Digest)
                .collect()
        });
    }
}

/// How often entries are checked for idle timeouts: BMv2's ageing sweep is as often.
const IDLE_SWEEP: std::time::Duration = std::time::Duration::from_millis(100);

/// Tells `device`'s primary controller which entries went idle, every [`IDLE_SWEEP`], in one
/// notification a sweep.
async fn send_idle_notifications(device: Arc<Device>) {
    let mut tick = tokio::time::interval(IDLE_SWEEP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        to_primary(&device, || {
            let idle = device.idle_entries(intlab_runtime::clock::Clock::get().now_ns());
            if idle.is_empty() {
                return Vec::new();
            }
            vec![Update::IdleTimeoutNotification(IdleTimeoutNotification {
                table_entry: idle,
                timestamp: epoch_ns(),
            })]
        });
    }
}

/// Now since the Unix epoch (ns), as P4Runtime stamps notifications.
fn epoch_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Sends what `device`'s program sends to its CPU port to its primary controller as PacketIn;
/// with no primary the frames are dropped, as BMv2 drops them.
async fn send_packet_ins(device: Arc<Device>) {
    let Some(cpu) = device.cpu_port() else { return };
    let socket = match cpu
        .socket
        .try_clone()
        .and_then(|s| s.set_nonblocking(true).map(|()| s))
        .and_then(tokio::net::UnixDatagram::from_std)
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(switch = %device.name, "P4Runtime: the CPU port cannot be read: {e}");
            return;
        }
    };
    let mut frame = vec![0u8; cpu.max_frame];
    loop {
        let len = match socket.recv(&mut frame).await {
            Ok(len) => len,
            Err(e) => {
                tracing::error!(switch = %device.name, "P4Runtime: reading the CPU port: {e}");
                return;
            }
        };
        let Some(packet) = device.packet_in(&frame[..len]) else {
            tracing::warn!(
                switch = %device.name,
                "a {len}-byte frame to the CPU port is shorter than the program's packet_in header: dropped"
            );
            continue;
        };
        to_primary(&device, || vec![Update::Packet(packet)]);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may have ended already; then there is nothing to stop.
            let _ended = stop.send(());
        }
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the P4Runtime server's thread panicked");
        }
    }
}
