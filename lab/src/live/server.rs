//! The HTTP server of a lab's live view: `/metrics` (Prometheus text), and the live page at `/`
//! with what it polls (`/topology.svg`, `/state.json`). It runs on a thread of its own with a
//! single-threaded async runtime: requests are rare and small, and the lab's cores belong to
//! its workers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, PoisonError, RwLock};
use std::thread::JoinHandle;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::view::LabView;
use super::{metrics, page};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("listening on {address}: {cause}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// What the system said.
        cause: std::io::Error,
    },
    /// Its thread or runtime could not start.
    #[error("starting the live view's server: {0}")]
    Start(std::io::Error),
}

/// The lab shown, if one is running.
type Shown = Arc<RwLock<Option<LabView>>>;

/// A running server; stops when dropped.
#[derive(Debug)]
pub struct LiveServer {
    /// The address asked for (port 0 for any).
    asked: SocketAddr,
    address: SocketAddr,
    shown: Shown,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Starts a server for each distinct address of `metrics` and `web` (one serves both when they
/// are the same); says on standard error where each is.
pub fn serve_where_asked(metrics: Option<SocketAddr>, web: Option<SocketAddr>) -> Result<Vec<LiveServer>, ServeError> {
    let mut servers: Vec<LiveServer> = Vec::new();
    for (address, what) in [(metrics, "metrics"), (web, "web")] {
        let Some(address) = address else { continue };
        let server = match servers.iter().position(|s| s.asked == address) {
            Some(k) => &servers[k],
            None => {
                servers.push(LiveServer::start(address)?);
                &servers[servers.len() - 1]
            }
        };
        match what {
            "metrics" => eprintln!("intlab: metrics at http://{}/metrics", server.address()),
            _ => eprintln!("intlab: live page at http://{}/", server.address()),
        }
    }
    Ok(servers)
}

/// The address `--metrics` means by `text`: a port alone listens on 127.0.0.1, an address
/// with its port where it says (another than loopback only when a user names it).
pub fn listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().map_err(|_| {
        format!("`{text}` is neither a port (9464) nor an address with its port (127.0.0.1:9464, [::1]:9464)")
    })
}

impl LiveServer {
    /// Listens on `address` (bound before this returns, so a taken port fails here) and serves
    /// until dropped; shows no lab until [`LiveServer::show`].
    pub fn start(asked: SocketAddr) -> Result<LiveServer, ServeError> {
        let listener =
            std::net::TcpListener::bind(asked).map_err(|cause| ServeError::Bind { address: asked, cause })?;
        let address = listener.local_addr().map_err(ServeError::Start)?;
        listener.set_nonblocking(true).map_err(ServeError::Start)?;
        // One thread for blocking work: a scrape waits on the lab's workers, and scrapes
        // queue behind each other rather than add threads.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .max_blocking_threads(1)
            .build()
            .map_err(ServeError::Start)?;
        let shown: Shown = Arc::new(RwLock::new(None));
        let app = Router::new()
            .route("/metrics", get(serve_metrics))
            .route("/", get(serve_page))
            .route("/topology.svg", get(serve_topology))
            .route("/state.json", get(serve_state))
            .with_state(Arc::clone(&shown));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("live-view".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => return tracing::error!("live view on {address}: {e}"),
                    };
                    let served = axum::serve(listener, app).with_graceful_shutdown(async {
                        // A dropped sender stops it too.
                        let _stopped = stopped.await;
                    });
                    if let Err(e) = served.await {
                        tracing::error!("live view on {address}: {e}");
                    }
                });
            })
            .map_err(ServeError::Start)?;
        tracing::info!(%address, "serving the live view");
        Ok(LiveServer {
            asked,
            address,
            shown,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it was asked to listen on (port 0: any).
    pub fn asked(&self) -> SocketAddr {
        self.asked
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Shows `view` from now on.
    pub fn show(&self, view: LabView) {
        *self.shown.write().unwrap_or_else(PoisonError::into_inner) = Some(view);
    }

    /// Shows no lab (it is stopping, or between runs).
    pub fn hide(&self) {
        *self.shown.write().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The server may have ended already (its error logged): nothing left to stop.
            let _already_ended = stop.send(());
        }
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the live view's server panicked");
        }
    }
}

async fn serve_metrics(State(shown): State<Shown>) -> impl IntoResponse {
    let view = shown.read().unwrap_or_else(PoisonError::into_inner).clone();
    let text = tokio::task::spawn_blocking(move || metrics::render(view.map(|v| v.now()).as_ref()))
        .await
        .unwrap_or_else(|e| format!("# the scrape failed: {e}\n"));
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text)
}

async fn serve_page() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page::PAGE)
}

async fn serve_topology(State(shown): State<Shown>) -> Response {
    match shown.read().unwrap_or_else(PoisonError::into_inner).as_ref() {
        Some(view) => ([(header::CONTENT_TYPE, "image/svg+xml")], view.topology_svg()).into_response(),
        None => no_lab(),
    }
}

async fn serve_state(State(shown): State<Shown>) -> Response {
    let view = shown.read().unwrap_or_else(PoisonError::into_inner).clone();
    let Some(view) = view else { return no_lab() };
    match tokio::task::spawn_blocking(move || page::state_json(&view.now())).await {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("the lab's state: {e}")).into_response(),
    }
}

/// No lab is running at the moment: the page says so and asks again.
fn no_lab() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, "no lab is running").into_response()
}
