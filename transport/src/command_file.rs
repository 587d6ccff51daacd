//! The command files of a lab's NICs: one FUSE mount with a file per host, which a program's
//! provider opens in place of the device node `/dev/infiniband/uverbsN` and writes its
//! commands to, as libibverbs writes to a kernel's uverbs device. A `write` is synchronous, so
//! the command is carried out (and its answer written into the caller's memory) before the
//! program's `write` returns; FUSE names the calling thread, so the NIC knows whose memory and
//! descriptors the command is about, and takes the descriptors it names (pidfd_getfd) while
//! the caller waits. There is no character device in userspace on this kernel (no CUSE), and
//! libibverbs' own `ibv_create_comp_channel` writes to the command file directly: a file that
//! answers is what it needs.
//!
//! The server is a thread of the lab's control side; it decodes, checks and hands each
//! command to the host's worker, which answers it.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, IoctlFlags, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyWrite,
    Request, SessionACL, WriteFlags,
};
use intlab_nic_channel::DecodeError;
use intlab_nic_channel::command::Command;
use intlab_runtime::sys::pidfd::PidFd;
use intlab_runtime::sys::process_memory::ProcessMemory;

use crate::host::ProgramPort;
use crate::programs::{Caller, ProgramRequest, RequestKind};

/// How long the kernel may keep what it learned of the files.
const TTL: Duration = Duration::from_secs(3600);

/// A lab's command files, served while this lives (dropping it unmounts them).
pub struct CommandFiles {
    dir: PathBuf,
    session: Option<fuser::BackgroundSession>,
    /// The mount's FUSE connection, aborted when it is dropped.
    connection: u32,
}

impl std::fmt::Debug for CommandFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CommandFiles({})", self.dir.display())
    }
}

impl CommandFiles {
    /// Mounts the command files of `hosts` in `dir` (an empty folder) and serves them.
    pub fn serve(dir: &Path, hosts: Vec<ProgramPort>) -> io::Result<CommandFiles> {
        let fs = Files {
            hosts,
            open: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            born: SystemTime::now(),
        };
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("intlab".into()),
            MountOption::Subtype("intlab-nic".into()),
            MountOption::NoExec,
            MountOption::NoSuid,
            MountOption::NoDev,
        ];
        // Programs may run as any user in a lab host.
        config.acl = SessionACL::All;
        let session = fuser::spawn_mount(fs, dir, &config).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("mounting the NICs' command files on {}: {e}", dir.display()),
            )
        })?;
        let connection = intlab_runtime::sys::mount::fuse_connection(dir)?;
        Ok(CommandFiles {
            dir: dir.to_owned(),
            session: Some(session),
            connection,
        })
    }

    /// The command file of host `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for CommandFiles {
    /// Aborts the connection first: the mount may live on in the mount namespaces of programs
    /// still running anywhere (each took a copy when it started), and the server's thread
    /// ends only when the connection does.
    fn drop(&mut self) {
        if let Err(e) = intlab_runtime::sys::mount::abort_fuse_connection(self.connection) {
            tracing::warn!(dir = %self.dir.display(), "aborting the NICs' command files: {e}");
        }
        if let Some(s) = self.session.take() {
            // Aborted, the mount is only a name: detached, it goes at once.
            if let Err(e) = intlab_runtime::sys::mount::detach(&self.dir) {
                tracing::warn!(dir = %self.dir.display(), "unmounting the NICs' command files: {e}");
            }
            if let Err(e) = s.join() {
                tracing::warn!(dir = %self.dir.display(), "the NICs' command file server: {e}");
            }
        }
    }
}

/// An open command file: the host it is, and the process that said hello through it.
struct OpenFile {
    host: usize,
    pidfd: Option<Arc<PidFd>>,
}

struct Files {
    hosts: Vec<ProgramPort>,
    open: Mutex<HashMap<u64, OpenFile>>,
    next_fh: AtomicU64,
    born: SystemTime,
}

fn ino_of_host(i: usize) -> INodeNo {
    INodeNo(2 + i as u64)
}

impl Files {
    fn host_of(&self, ino: INodeNo) -> Option<usize> {
        let i = ino.0.checked_sub(2)? as usize;
        (i < self.hosts.len()).then_some(i)
    }

    fn attr(&self, ino: INodeNo) -> FileAttr {
        let dir = ino == INodeNo::ROOT;
        FileAttr {
            ino,
            size: 0,
            blocks: 0,
            atime: self.born,
            mtime: self.born,
            ctime: self.born,
            crtime: self.born,
            kind: if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if dir { 0o755 } else { 0o666 },
            nlink: if dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Decodes and checks a command from thread `tid` on open file `fh`, takes what it names
    /// from the caller, and hands it to the host; the errno when refused here.
    fn command(&self, fh: u64, tid: u32, data: &[u8], reply: ReplyWrite) -> Result<(), (i32, ReplyWrite)> {
        let (header, command) = match Command::decode(data) {
            Ok(c) => c,
            Err(DecodeError::UnknownCommand(c)) => {
                tracing::debug!("command {c:#x} is not one the NIC carries out");
                return Err((libc::EOPNOTSUPP, reply));
            }
            Err(e) => {
                tracing::debug!("a malformed command: {e}");
                return Err((libc::EINVAL, reply));
            }
        };
        let (host, pidfd, memory) = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let Some(file) = open.get_mut(&fh) else {
                return Err((libc::EBADF, reply));
            };
            if let Command::Hello { .. } = command {
                if file.pidfd.is_some() {
                    return Err((libc::EINVAL, reply));
                }
                match attach(tid) {
                    Ok((pidfd, memory)) => {
                        file.pidfd = Some(pidfd.clone());
                        (file.host, pidfd, Some(memory))
                    }
                    Err(e) => {
                        tracing::warn!("a program could not attach: {e}");
                        return Err((e.raw_os_error().unwrap_or(libc::EPERM), reply));
                    }
                }
            } else {
                let Some(pidfd) = file.pidfd.clone() else {
                    return Err((libc::EINVAL, reply));
                };
                (file.host, pidfd, None)
            }
        };
        // Only the process that attached may command its context (a forked child has other
        // memory behind the same addresses).
        if PidFd::of_thread(tid).map(|p| p.pid()).ok() != Some(pidfd.pid()) {
            return Err((libc::EPERM, reply));
        }
        let mut fds = Vec::new();
        for n in named_fds(&command) {
            match pidfd.take_fd(n) {
                Ok(fd) => fds.push((n, fd)),
                Err(e) => {
                    tracing::debug!("descriptor {n} of a program could not be taken: {e}");
                    return Err((libc::EBADF, reply));
                }
            }
        }
        let caller = Caller {
            pidfd,
            memory,
            fds,
            len: data.len(),
        };
        let req = ProgramRequest {
            key: fh,
            kind: RequestKind::Command {
                header,
                command,
                caller,
            },
            reply: Box::new(move |r| match r {
                Ok(n) => reply.written(n as u32),
                Err(e) => reply.error(Errno::from_i32(e)),
            }),
        };
        if let Err(e) = self.hosts[host].send(req) {
            tracing::debug!("a command for a host that stopped: {e}");
        }
        Ok(())
    }
}

/// The process of thread `tid` and its memory, checked to be the same process after opening.
fn attach(tid: u32) -> io::Result<(Arc<PidFd>, Arc<ProcessMemory>)> {
    let pidfd = PidFd::of_thread(tid)?;
    let memory = ProcessMemory::open(pidfd.pid())?;
    // The process was alive after /proc/PID/mem was opened: the file is its memory.
    if !pidfd.is_alive() {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok((Arc::new(pidfd), Arc::new(memory)))
}

/// The caller's descriptors a command names, which the NIC takes copies of.
fn named_fds(c: &Command) -> Vec<RawFd> {
    match c {
        Command::Hello {
            doorbell_fd,
            area_fd,
            async_fd,
            spares,
            ..
        } => {
            let mut v = vec![*doorbell_fd, *area_fd, *async_fd];
            v.extend(spares.iter().map(|(nic, _)| *nic));
            v
        }
        Command::AddSpares { spares } => spares.iter().map(|(nic, _)| *nic).collect(),
        Command::CreateCq { ring_fd, .. } | Command::CreateSrq { ring_fd, .. } | Command::CreateQp { ring_fd, .. } => {
            vec![*ring_fd]
        }
        _ => Vec::new(),
    }
}

impl Filesystem for Files {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent != INodeNo::ROOT {
            return reply.error(Errno::ENOENT);
        }
        match self.hosts.iter().position(|h| OsStr::new(h.name()) == name) {
            Some(i) => reply.entry(&TTL, &self.attr(ino_of_host(i)), Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino == INodeNo::ROOT || self.host_of(ino).is_some() {
            reply.attr(&TTL, &self.attr(ino));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let mut entries = vec![
            (INodeNo::ROOT, FileType::Directory, ".".to_owned()),
            (INodeNo::ROOT, FileType::Directory, "..".to_owned()),
        ];
        entries.extend(
            self.hosts
                .iter()
                .enumerate()
                .map(|(i, h)| (ino_of_host(i), FileType::RegularFile, h.name().to_owned())),
        );
        for (k, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(ino, (k + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let Some(host) = self.host_of(ino) else {
            return reply.error(Errno::EISDIR);
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fh, OpenFile { host, pidfd: None });
        // Each write reaches the NIC as written, not through a cache.
        reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if let Err((errno, reply)) = self.command(fh.0, req.pid(), data, reply) {
            reply.error(Errno::from_i32(errno));
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let file = self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&fh.0);
        if let Some(f) = file
            && f.pidfd.is_some()
        {
            let req = ProgramRequest {
                key: fh.0,
                kind: RequestKind::Closed,
                reply: Box::new(|_| {}),
            };
            // A host that has stopped has closed its contexts already.
            if let Err(e) = self.hosts[f.host].send(req) {
                tracing::debug!("a context closed after its host: {e}");
            }
        }
        reply.ok();
    }

    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        // No ioctl interface: libibverbs then uses the write interface, as with an old kernel.
        reply.error(Errno::from_i32(libc::ENOTTY));
    }
}
