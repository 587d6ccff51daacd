//! A device context: the program attached to its NIC. Opening one opens the NIC's command file
//! in place of the device node libibverbs opened, makes the doorbell and the attention area,
//! the asynchronous event socket and a few spare sockets that `ibv_create_comp_channel` hands
//! out, and says hello; every later command goes through [`Context::command`].

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use intlab_nic_channel::command::{Answer, Command};
use intlab_nic_channel::device::{PROTOCOL_VERSION, PortInfo};
use intlab_nic_channel::queue::{AREA_LEN, Area};

use crate::abi::{IbvContext, IbvDevice, VerbsContext};
use crate::device::Device;
use crate::memory::Shared;

/// Spare completion channels a context keeps ready.
const SPARES: usize = 4;

/// A context of this provider: libibverbs' part first, then the provider's.
#[repr(C)]
pub(crate) struct Context {
    pub(crate) vctx: VerbsContext,
    state: State,
}

struct State {
    port: PortInfo,
    node_guid: u64,
    doorbell: OwnedFd,
    area: Area<Arc<Shared>>,
    /// One command at a time: the NIC answers them in order anyway, and the spares' list
    /// changes with some.
    commands: Mutex<()>,
    /// The program's ends of the spare channels not yet known to be handed out.
    spares: Mutex<Vec<OwnedFd>>,
}

/// A connected pair of sequenced-packet sockets: (the program's end, the NIC's end).
fn socket_pair() -> Result<(OwnedFd, OwnedFd), i32> {
    let mut fds = [0 as c_int; 2];
    // socketpair fills both on success.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(crate::errno());
    }
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes `c` to `cmd_fd` and reads its answer, which the NIC writes into this process before
/// the write returns; the errno when it refuses.
fn exchange(cmd_fd: RawFd, c: &Command) -> Result<Answer, i32> {
    let mut answer = vec![0u8; Answer::room_for(c)];
    let mut buf = Vec::with_capacity(256);
    c.encode(answer.as_mut_ptr() as u64, answer.len(), &mut buf);
    // A plain write of our own buffer.
    let n = unsafe { libc::write(cmd_fd, buf.as_ptr() as *const c_void, buf.len()) };
    if n < 0 {
        return Err(crate::errno());
    }
    if n as usize != buf.len() {
        return Err(libc::EIO);
    }
    Answer::decode(c, &answer).map_err(|_| libc::EIO)
}

impl Context {
    /// The provider's context behind libibverbs' `context`.
    ///
    /// # Safety
    /// `context` must be null or a context this provider made.
    pub(crate) unsafe fn from_ibv<'a>(context: *mut IbvContext) -> Option<&'a Context> {
        if context.is_null() {
            return None;
        }
        let offset = std::mem::offset_of!(VerbsContext, context);
        // Every context of this provider is a `Context` whose `vctx.context` this points at.
        let ctx = unsafe { (context as *mut u8).sub(offset) } as *const Context;
        unsafe { ctx.as_ref() }
    }

    /// The command file (libibverbs' `cmd_fd`).
    fn cmd_fd(&self) -> RawFd {
        self.vctx.context.cmd_fd
    }

    /// Sends `c` and returns the NIC's answer, or the errno it refused with.
    pub(crate) fn command(&self, c: &Command) -> Result<Answer, i32> {
        let _one_at_a_time = self.state.commands.lock().unwrap_or_else(|p| p.into_inner());
        exchange(self.cmd_fd(), c)
    }

    /// Marks object `doorbell` for the NIC's attention and rings if nobody has since it last
    /// looked.
    pub(crate) fn ring(&self, doorbell: u32) {
        if self.state.area.mark(doorbell) {
            let one = 1u64;
            // An eventfd write of 8 bytes; a full counter (2^64 - 2 rings) cannot happen.
            let _rung = unsafe { libc::write(self.state.doorbell.as_raw_fd(), &one as *const u64 as *const c_void, 8) };
        }
    }

    /// The port, as the NIC described it.
    pub(crate) fn port(&self) -> PortInfo {
        self.state.port
    }

    /// The device's GUID.
    pub(crate) fn node_guid(&self) -> u64 {
        self.state.node_guid
    }

    /// A completion channel with descriptor `fd` is about to be used: if it was one of the
    /// spares, it is the program's now, and a new spare takes its place.
    pub(crate) fn claim_spare(&self, fd: RawFd) {
        let claimed = {
            let mut spares = self.state.spares.lock().unwrap_or_else(|p| p.into_inner());
            match spares.iter().position(|s| s.as_raw_fd() == fd) {
                // The descriptor is libibverbs' channel now: forget it without closing it.
                Some(i) => {
                    let owned = spares.swap_remove(i);
                    std::mem::forget(owned);
                    true
                }
                None => false,
            }
        };
        if claimed && let Ok((program, nic)) = socket_pair() {
            let c = Command::AddSpares {
                spares: vec![(nic.as_raw_fd(), program.as_raw_fd())],
            };
            if self.command(&c).is_ok() {
                self.state
                    .spares
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(program);
            }
        }
    }
}

/// Opens a context on `device`: `cmd_fd` is the device node libibverbs opened, replaced here
/// by the NIC's command file.
pub(crate) unsafe extern "C" fn alloc_context(
    device: *mut IbvDevice,
    cmd_fd: c_int,
    _private: *mut c_void,
) -> *mut VerbsContext {
    // Our devices are `Device`s (alloc_device), whose first field holds the ibv_device.
    let Some(dev) = (unsafe { (device as *const Device).as_ref() }) else {
        unsafe { libc::close(cmd_fd) };
        crate::set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    match open(dev, device, cmd_fd) {
        Ok(ctx) => ctx,
        Err(e) => {
            crate::set_errno(e);
            std::ptr::null_mut()
        }
    }
}

fn open(dev: &Device, device: *mut IbvDevice, cmd_fd: c_int) -> Result<*mut VerbsContext, i32> {
    // The command file takes the device node's place as `cmd_fd`, so that libibverbs' own
    // commands (ibv_create_comp_channel) reach the NIC too.
    let file = unsafe { libc::open(dev.command_file.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if file < 0 {
        let e = crate::errno();
        unsafe { libc::close(cmd_fd) };
        return Err(e);
    }
    let replaced = unsafe { libc::dup3(file, cmd_fd, libc::O_CLOEXEC) };
    unsafe { libc::close(file) };
    if replaced < 0 {
        let e = crate::errno();
        unsafe { libc::close(cmd_fd) };
        return Err(e);
    }
    let prepared = prepare(cmd_fd).inspect_err(|_| unsafe {
        libc::close(cmd_fd);
    })?;
    let (state, async_fd) = prepared;
    // libibverbs allocates the context (zeroed) and initialises its part, the first field.
    // Takes cmd_fd; closes it on failure.
    let Some(lib) = crate::abi::libibverbs() else {
        // SAFETY: cmd_fd is ours to close until libibverbs takes it.
        unsafe { libc::close(cmd_fd) };
        return Err(libc::ENOSYS);
    };
    let raw = unsafe {
        (lib.init_and_alloc_context)(
            device,
            cmd_fd,
            std::mem::size_of::<Context>(),
            std::mem::offset_of!(Context, vctx),
            0,
        )
    } as *mut Context;
    if raw.is_null() {
        return Err(crate::errno());
    }
    // The allocation is a Context's size and alignment (malloc's is 16); its state is
    // written once here, before anything reads it.
    unsafe {
        std::ptr::addr_of_mut!((*raw).state).write(State {
            node_guid: dev.node_guid,
            ..state
        })
    };
    let ctx = unsafe { &mut *raw };
    ctx.vctx.context.async_fd = async_fd.into_raw_fd();
    ctx.vctx.context.num_comp_vectors = 1;
    let ops = crate::context_ops();
    unsafe { (lib.set_ops)(&mut ctx.vctx, &ops) };
    Ok(&mut ctx.vctx)
}

// malloc aligns to 16 bytes on this platform.
const _: () = assert!(std::mem::align_of::<Context>() <= 16);

/// Makes the doorbell, the attention area, the event socket and the spares, and attaches to the
/// NIC through `cmd_fd`; returns the context's state and the program's end of the event socket.
fn prepare(cmd_fd: RawFd) -> Result<(State, OwnedFd), i32> {
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if raw < 0 {
        return Err(crate::errno());
    }
    let doorbell = unsafe { OwnedFd::from_raw_fd(raw) };
    let area_memory = Arc::new(Shared::new(c"intlab-attention", AREA_LEN)?);
    let (async_program, async_nic) = socket_pair()?;
    let mut pairs = Vec::new();
    for _ in 0..SPARES {
        pairs.push(socket_pair()?);
    }
    let hello = Command::Hello {
        version: PROTOCOL_VERSION,
        doorbell_fd: doorbell.as_raw_fd(),
        area_fd: area_memory.fd(),
        async_fd: async_nic.as_raw_fd(),
        spares: pairs.iter().map(|(p, n)| (n.as_raw_fd(), p.as_raw_fd())).collect(),
    };
    let port = match exchange(cmd_fd, &hello)? {
        Answer::Hello { port } => port,
        _ => return Err(libc::EIO),
    };
    // The NIC has its own copies of its ends now.
    drop(async_nic);
    let spares = pairs.into_iter().map(|(p, _nic)| p).collect();
    let area = Area::new(area_memory).ok_or(libc::EIO)?;
    Ok((
        State {
            port,
            node_guid: 0,
            doorbell,
            area,
            commands: Mutex::new(()),
            spares: Mutex::new(spares),
        },
        async_program,
    ))
}

/// Closes a context: detaches from the NIC (which forgets everything the context made) and
/// lets libibverbs close the command file and the event socket.
pub(crate) unsafe extern "C" fn free_context(context: *mut IbvContext) {
    let Some(ctx) = (unsafe { Context::from_ibv(context) }) else {
        return;
    };
    let used = match ctx.command(&Command::Goodbye) {
        Ok(Answer::Goodbye { used }) => used,
        _ => Vec::new(),
    };
    {
        let mut spares = ctx.state.spares.lock().unwrap_or_else(|p| p.into_inner());
        for s in spares.drain(..) {
            // A spare the NIC handed out is a channel libibverbs owns: not ours to close.
            if used.contains(&s.as_raw_fd()) {
                std::mem::forget(s);
            }
        }
    }
    let raw = ctx as *const Context as *mut Context;
    // Allocated by libibverbs with malloc in `open`, our state written there; libibverbs
    // calls this once, last.
    unsafe {
        std::ptr::drop_in_place(std::ptr::addr_of_mut!((*raw).state));
        // A context exists only where libibverbs was found to make it.
        if let Some(lib) = crate::abi::libibverbs() {
            (lib.uninit_context)(&mut (*raw).vctx);
        }
        libc::free(raw as *mut c_void);
    }
}

/// An asynchronous event was read (libibverbs already filled it in): nothing more to do.
pub(crate) unsafe extern "C" fn async_event(_context: *mut IbvContext, _event: *mut c_void) {}
