//! The control socket of a lab that is up, a Unix socket beside its record: the process
//! holding the lab serves `simple_switch_CLI` commands for its P4 switches and changes to its
//! links ([`serve`]); `intlab p4 cli SWITCH` and `intlab link` send them ([`ControlClient`]).
//! A P4 command's change reaches the switch's packet threads whole (see
//! `intlab_p4::Datapath::edit`); entry handles are kept per switch across clients, as
//! simple_switch keeps them.
//!
//! One request per line, one answer per line, both JSON: `{"switch": "s1", "command": "..."}`
//! or `{"link": {"do": "down", "target": "h1-s1"}}` → `{"output": "..."}` or
//! `{"error": "..."}`. An empty P4 command only checks the switch.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use intlab_p4::Datapath;
use intlab_p4::cli_commands::CliSession;
use serde::{Deserialize, Serialize};

use crate::lab_links::LabLinks;
use crate::topology::LinkKeys;

/// One request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Request {
    /// A `simple_switch_CLI` command for one P4 switch.
    P4 { switch: String, command: String },
    /// A change to the lab's links, or a look at them.
    Link { link: LinkRequest },
}

/// What `intlab link` asks of a lab.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum LinkRequest {
    /// Sets link keys (`KEY=VALUE` words) on a link.
    Set {
        /// The link (`h1-s1`).
        link: String,
        /// The keys, as `delay=50us`.
        keys: Vec<String>,
    },
    /// Takes a link, or every link of a switch, down.
    Down {
        /// The link or switch.
        target: String,
    },
    /// Brings a link, or every link of a switch, up.
    Up {
        /// The link or switch.
        target: String,
    },
    /// Every link with its state and properties.
    Show,
}

/// What a command printed, or why it failed.
#[derive(Debug, Serialize, Deserialize)]
struct Answer {
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl From<Result<Option<String>, String>> for Answer {
    fn from(done: Result<Option<String>, String>) -> Answer {
        match done {
            Ok(output) => Answer { output, error: None },
            Err(e) => Answer {
                output: None,
                error: Some(e),
            },
        }
    }
}

/// A P4 switch as the control plane sees it.
struct SwitchControl {
    name: String,
    datapath: Arc<Datapath>,
    session: Mutex<CliSession>,
}

/// Serves the control plane of `switches` on a Unix socket at `path` (replacing one a killed
/// holder left) until the process ends, each client on its own thread: clients are few and
/// mostly idle, so their threads cost nothing that matters.
pub fn serve(path: &Path, switches: Vec<(String, Arc<Datapath>)>, links: Option<Arc<LabLinks>>) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    let switches: Arc<Vec<SwitchControl>> = Arc::new(
        switches
            .into_iter()
            .map(|(name, datapath)| SwitchControl {
                session: Mutex::new(CliSession::for_datapath(&datapath)),
                name,
                datapath,
            })
            .collect(),
    );
    std::thread::Builder::new().name("lab-control".into()).spawn(move || {
        for client in listener.incoming() {
            let client = match client {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("control socket: accept failed: {e}");
                    continue;
                }
            };
            let switches = Arc::clone(&switches);
            let links = links.clone();
            let spawned = std::thread::Builder::new().name("lab-client".into()).spawn(move || {
                if let Err(e) = answer_client(client, &switches, links.as_ref()) {
                    tracing::debug!("control socket client: {e}");
                }
            });
            if let Err(e) = spawned {
                tracing::warn!("control socket: cannot serve a client: {e}");
            }
        }
    })?;
    Ok(())
}

/// Answers one client's requests until it hangs up.
fn answer_client(client: UnixStream, switches: &[SwitchControl], links: Option<&Arc<LabLinks>>) -> io::Result<()> {
    let mut out = client.try_clone()?;
    for line in BufReader::new(client).lines() {
        let answer = Answer::from(match serde_json::from_str::<Request>(&line?) {
            Ok(Request::P4 { switch, command }) => run(switches, &switch, &command),
            Ok(Request::Link { link }) => match links {
                Some(links) => change_links(links, &link),
                None => Err("this lab's links cannot be changed".into()),
            },
            Err(e) => Err(format!("not a request: {e}")),
        });
        let mut text = serde_json::to_string(&answer).map_err(io::Error::other)?;
        text.push('\n');
        out.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// Does what `r` asks of the lab's links.
fn change_links(links: &Arc<LabLinks>, r: &LinkRequest) -> Result<Option<String>, String> {
    let done = match r {
        LinkRequest::Set { link, keys } => LinkKeys::from_words(keys, Path::new("intlab link set"))
            .map_err(|e| e.message)
            .and_then(|k| links.set(link, &k, None).map_err(|e| e.to_string())),
        LinkRequest::Down { target } => links.set_up(target, false, None).map_err(|e| e.to_string()),
        LinkRequest::Up { target } => links.set_up(target, true, None).map_err(|e| e.to_string()),
        LinkRequest::Show => Ok(links.show().trim_end().to_owned()),
    };
    done.map(Some)
}

/// Runs a `simple_switch_CLI` command on P4 switch `switch`.
fn run(switches: &[SwitchControl], switch: &str, command: &str) -> Result<Option<String>, String> {
    let Some(sw) = switches.iter().find(|s| s.name == switch) else {
        let names: Vec<&str> = switches.iter().map(|s| s.name.as_str()).collect();
        let known = match names.is_empty() {
            true => "none of its switches runs a P4 program".to_owned(),
            false => format!("P4 switches: {}", names.join(", ")),
        };
        return Err(format!("no P4 switch `{switch}` in this lab ({known})"));
    };
    if command.trim().is_empty() {
        return Ok(None);
    }
    let mut session = sw.session.lock().unwrap_or_else(PoisonError::into_inner);
    session.run(&sw.datapath, command)
}

/// Why a command could not be sent or failed.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The socket could not be reached or broke.
    #[error("control socket {path}: {cause}")]
    Socket {
        /// The socket.
        path: PathBuf,
        /// What the system said.
        cause: io::Error,
    },
    /// The switch refused the command.
    #[error("{0}")]
    Refused(String),
}

/// A connection to a lab's control socket.
#[derive(Debug)]
pub struct ControlClient {
    path: PathBuf,
    switch: String,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl ControlClient {
    /// Connects to the socket at `path` and checks that the lab has P4 switch `switch`, which
    /// [`ControlClient::send`] then commands.
    pub fn connect(path: &Path, switch: &str) -> Result<ControlClient, ControlError> {
        let mut client = ControlClient::open(path)?;
        client.switch = switch.to_owned();
        client.send("")?;
        Ok(client)
    }

    /// Connects to the socket at `path`.
    pub fn open(path: &Path) -> Result<ControlClient, ControlError> {
        let fail = |cause| ControlError::Socket {
            path: path.to_owned(),
            cause,
        };
        let writer = UnixStream::connect(path).map_err(fail)?;
        let reader = BufReader::new(writer.try_clone().map_err(fail)?);
        Ok(ControlClient {
            path: path.to_owned(),
            switch: String::new(),
            reader,
            writer,
        })
    }

    /// Runs one P4 command on its switch; returns what it printed, if anything.
    pub fn send(&mut self, command: &str) -> Result<Option<String>, ControlError> {
        self.exchange(&Request::P4 {
            switch: self.switch.clone(),
            command: command.to_owned(),
        })
    }

    /// Asks `request` of the lab's links; returns what the lab did or showed.
    pub fn link(&mut self, request: LinkRequest) -> Result<Option<String>, ControlError> {
        self.exchange(&Request::Link { link: request })
    }

    fn exchange(&mut self, request: &Request) -> Result<Option<String>, ControlError> {
        let fail = |cause| ControlError::Socket {
            path: self.path.clone(),
            cause,
        };
        let mut text = serde_json::to_string(request).map_err(|e| fail(io::Error::other(e)))?;
        text.push('\n');
        self.writer.write_all(text.as_bytes()).map_err(fail)?;
        let mut line = String::new();
        if self.reader.read_line(&mut line).map_err(fail)? == 0 {
            return Err(fail(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the lab closed the connection (is it going down?)",
            )));
        }
        let answer: Answer = serde_json::from_str(&line).map_err(|e| fail(io::Error::other(e)))?;
        match answer.error {
            Some(e) => Err(ControlError::Refused(e)),
            None => Ok(answer.output),
        }
    }
}
