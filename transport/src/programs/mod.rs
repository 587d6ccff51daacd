//! The programs using a host's NIC: the NIC's end of the program channel (`nic-channel`). A
//! program attaches through the host's command file (the crate's `command_file` module, one file per host in
//! the lab's FUSE mount, which the provider opens in place of `/dev/infiniband/uverbsN`); its
//! commands create and destroy objects in the host's verbs engine (`commands.rs`); its work
//! requests come through queues both sides map, taken when it rings the doorbell, and its
//! completions go back the same way, with completion channel and asynchronous events on
//! sockets it reads (`queues.rs`). The NIC reaches the program's registered memory itself, in
//! the program's address space (`context.rs`).
//!
//! All of it runs on the host's worker, inside the host task: the command file only decodes
//! what a program wrote and takes the descriptors it names while the program waits, then hands
//! the command over. A program that exits (its pidfd becomes readable) or closes its device
//! has everything it made removed; its peers' QPs then hear nothing more, as from a NIC whose
//! QPs were destroyed.

mod commands;
mod context;
mod queues;

use std::collections::HashMap;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

use intlab_nic_channel::command::{Command, Header};
use intlab_nic_channel::device::PortInfo;
use intlab_runtime::sys::epoll::{Epoll, empty_event};
use intlab_runtime::sys::pidfd::PidFd;
use intlab_runtime::sys::process_memory::ProcessMemory;

use crate::stack::{HostStack, Wire};
use context::ProgramContext;

/// How a request ends: bytes of the command taken, or the errno the program's `write` fails
/// with.
pub type Reply = Box<dyn FnOnce(Result<usize, i32>) + Send>;

/// What the command file hands a host.
pub struct ProgramRequest {
    /// The open command file it came through: one per context.
    pub key: u64,
    /// What it asks.
    pub kind: RequestKind,
    /// Where the answer goes.
    pub reply: Reply,
}

impl std::fmt::Debug for ProgramRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgramRequest({}, {:?})", self.key, self.kind)
    }
}

/// A request through a command file.
#[derive(Debug)]
pub enum RequestKind {
    /// A command, decoded, with what was taken from the caller while it waited.
    Command {
        /// Its header.
        header: Header,
        /// What it asks.
        command: Command,
        /// The caller.
        caller: Caller,
    },
    /// The command file was closed: the context goes, if it has not already.
    Closed,
}

/// What the command file took from a caller while it waited in its `write`.
#[derive(Debug)]
pub struct Caller {
    /// Its process.
    pub pidfd: Arc<PidFd>,
    /// Its memory (for a hello: the context keeps it).
    pub memory: Option<Arc<ProcessMemory>>,
    /// Copies of the descriptors the command names, by the number the caller knows them by.
    pub fds: Vec<(RawFd, OwnedFd)>,
    /// Bytes the caller wrote.
    pub len: usize,
}

impl Caller {
    /// The copy of the caller's descriptor `fd`.
    fn take(&mut self, fd: RawFd) -> Option<OwnedFd> {
        let i = self.fds.iter().position(|(n, _)| *n == fd)?;
        Some(self.fds.swap_remove(i).1)
    }
}

/// Epoll tokens: context key and what became readable.
const DOORBELL: u64 = 0;
const EXITED: u64 = 1;

/// The programs attached to one host's NIC.
pub struct Programs {
    port: PortInfo,
    epoll: Epoll,
    contexts: HashMap<u64, ProgramContext>,
}

impl std::fmt::Debug for Programs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Programs({} attached)", self.contexts.len())
    }
}

impl Programs {
    /// No program yet, on a port described by `port`.
    pub fn new(port: PortInfo) -> io::Result<Programs> {
        Ok(Programs {
            port,
            epoll: Epoll::new()?,
            contexts: HashMap::new(),
        })
    }

    /// The descriptor the host task watches: readable when a doorbell rang or a program exited.
    pub fn fd(&self) -> RawFd {
        self.epoll.fd()
    }

    /// Programs attached.
    pub fn len(&self) -> usize {
        self.contexts.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.contexts.is_empty()
    }

    /// Carries out `req` at `now`.
    pub fn request<W: Wire>(&mut self, req: ProgramRequest, stack: &mut HostStack<W>, now: u64) {
        let ProgramRequest { key, kind, reply } = req;
        match kind {
            RequestKind::Closed => {
                self.close(key, stack);
                reply(Ok(0));
            }
            RequestKind::Command {
                header,
                command,
                caller,
            } => {
                let result = self.command(key, &header, command, caller, stack, now);
                reply(result);
            }
        }
    }

    /// Takes what rang doorbells and buries the programs that exited.
    pub fn service<W: Wire>(&mut self, stack: &mut HostStack<W>, now: u64) {
        let mut events = [empty_event(); 64];
        let n = match self.epoll.wait(&mut events, Some(0)) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("watching the programs' doorbells: {e}");
                return;
            }
        };
        for ev in &events[..n] {
            let key = ev.u64 >> 1;
            if ev.u64 & 1 == EXITED {
                tracing::debug!(key, "a program exited: its context goes");
                self.close(key, stack);
                continue;
            }
            if let Some(ctx) = self.contexts.get_mut(&key) {
                ctx.take_doorbell();
                queues::attend(ctx, stack, now);
            }
        }
    }

    /// Moves completions and events to the programs after the host ran at `now`, and takes
    /// the requests that waited for room.
    pub fn deliver<W: Wire>(&mut self, stack: &mut HostStack<W>, now: u64) {
        if self.contexts.is_empty() {
            return;
        }
        queues::deliver(&mut self.contexts, stack, now);
    }

    /// Removes the context of `key` and everything it made.
    fn close<W: Wire>(&mut self, key: u64, stack: &mut HostStack<W>) {
        if let Some(ctx) = self.contexts.remove(&key) {
            // The program may still hold its doorbell: unwatched explicitly, or its next ring
            // would wake this epoll for a context that is gone, forever (level-triggered).
            for fd in [ctx.doorbell_fd(), ctx.pidfd_fd()] {
                if let Err(e) = self.epoll.remove(fd) {
                    tracing::warn!(key, "unwatching a closed program's descriptor: {e}");
                }
            }
            stack.close_context(ctx.engine);
        }
    }

    /// Removes every context (the host stops).
    pub fn close_all<W: Wire>(&mut self, stack: &mut HostStack<W>) {
        let keys: Vec<u64> = self.contexts.keys().copied().collect();
        for k in keys {
            self.close(k, stack);
        }
    }
}
