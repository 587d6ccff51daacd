//! The bpf() system call, for the one job the lab gives it: load a small XDP program, make the
//! map of AF_XDP sockets it redirects to, and attach the program to an interface through a BPF
//! link (so it is detached when the link's descriptor closes, whatever way the process ends).
//! Programs are a few instructions written with the encoders below; no compiler, no ELF.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// Commands, types and attach points from linux/bpf.h.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// linux/if_link.h: run the program in the driver (veth supports it), not on a socket buffer.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    /// Destination register in the low nibble, source in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

/// A register, r0 to r10.
pub type Reg = u8;

// Instruction classes and fields (linux/bpf_common.h, linux/bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const STX: u8 = 0x03;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const W: u8 = 0x00;
const DW: u8 = 0x18;
const IMM: u8 = 0x00;
const MEM: u8 = 0x60;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const MOV: u8 = 0xb0;
const JGT: u8 = 0x20;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
/// `src` of a 64-bit immediate load that names a map by descriptor.
const PSEUDO_MAP_FD: u8 = 1;

const fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (dst & 0xf) | (src << 4),
        off,
        imm,
    }
}

/// `dst = src`.
pub const fn mov(dst: Reg, src: Reg) -> Insn {
    insn(ALU64 | MOV | X, dst, src, 0, 0)
}

/// `dst = imm`.
pub const fn mov_imm(dst: Reg, imm: i32) -> Insn {
    insn(ALU64 | MOV | K, dst, 0, 0, imm)
}

/// `dst += imm`.
pub const fn add_imm(dst: Reg, imm: i32) -> Insn {
    insn(ALU64 | ADD | K, dst, 0, 0, imm)
}

/// `dst = *(u32 *)(src + off)`.
pub const fn load_u32(dst: Reg, src: Reg, off: i16) -> Insn {
    insn(LDX | MEM | W, dst, src, off, 0)
}

/// `*(u64 *)(dst + off) = src`.
pub const fn store_u64(dst: Reg, off: i16, src: Reg) -> Insn {
    insn(STX | MEM | DW, dst, src, off, 0)
}

/// `if dst != imm goto +off`.
pub const fn jump_ne_imm(dst: Reg, imm: i32, off: i16) -> Insn {
    insn(JMP | JNE | K, dst, 0, off, imm)
}

/// `if dst > src goto +off` (unsigned).
pub const fn jump_gt(dst: Reg, src: Reg, off: i16) -> Insn {
    insn(JMP | JGT | X, dst, src, off, 0)
}

/// Calls helper number `helper`: arguments in r1 to r5, result in r0, r1 to r5 clobbered.
pub const fn call(helper: i32) -> Insn {
    insn(JMP | CALL, 0, 0, 0, helper)
}

/// Returns r0.
pub const fn exit() -> Insn {
    insn(JMP | EXIT, 0, 0, 0, 0)
}

/// `dst = map` (two instruction slots).
pub fn load_map(dst: Reg, map: &XskMap) -> [Insn; 2] {
    [
        insn(LD | DW | IMM, dst, PSEUDO_MAP_FD, 0, map.0.as_raw_fd()),
        insn(0, 0, 0, 0, 0),
    ]
}

/// Helper numbers (linux/bpf.h `__BPF_FUNC_MAPPER`).
pub mod helper {
    /// `u64 bpf_ktime_get_ns(void)`: CLOCK_MONOTONIC.
    pub const KTIME_GET_NS: i32 = 5;
    /// `long bpf_redirect_map(map, u64 key, u64 flags)`.
    pub const REDIRECT_MAP: i32 = 51;
    /// `long bpf_xdp_adjust_meta(xdp_md *ctx, int delta)`.
    pub const XDP_ADJUST_META: i32 = 54;
}

/// The bpf() system call with attributes `attr`.
fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: attr is a live, fully initialised #[repr(C)] prefix of `union bpf_attr` of the
    // size passed; the kernel zero-extends a shorter one.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            size_of::<T>(),
        )
    };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: bpf() returned a fresh descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// A map from queue index to AF_XDP socket (BPF_MAP_TYPE_XSKMAP).
#[derive(Debug)]
pub struct XskMap(OwnedFd);

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

impl XskMap {
    /// A map with room for queues 0 to `queues - 1`.
    pub fn new(queues: u32) -> io::Result<XskMap> {
        let mut attr = MapCreate {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: queues,
            ..MapCreate::default()
        };
        bpf(BPF_MAP_CREATE, &mut attr)
            .map(|fd| XskMap(owned(fd)))
            .map_err(|e| io::Error::new(e.kind(), format!("creating an XSK map: {e}")))
    }

    /// Frames received on queue `queue` go to socket `socket`.
    pub fn insert(&self, queue: u32, socket: RawFd) -> io::Result<()> {
        let value = socket as u32;
        let mut attr = MapUpdate {
            map_fd: self.0.as_raw_fd() as u32,
            key: (&queue as *const u32) as u64,
            value: (&value as *const u32) as u64,
            ..MapUpdate::default()
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr)
            .map(|_| ())
            .map_err(|e| io::Error::new(e.kind(), format!("putting an AF_XDP socket in its map: {e}")))
    }
}

#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// Loads XDP program `insns` named `name` (at most 15 bytes shown); a refusal carries the
/// verifier's log.
pub fn load_xdp(name: &str, insns: &[Insn]) -> io::Result<OwnedFd> {
    // The helpers used are not GPL-only; the kernel still wants a GPL-compatible licence string.
    const LICENSE: &[u8] = b"Dual MIT/GPL\0";
    let mut log = vec![0u8; 64 * 1024];
    let mut prog_name = [0u8; 16];
    for (d, s) in prog_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        kern_version: 0,
        prog_flags: 0,
        prog_name,
        prog_ifindex: 0,
        expected_attach_type: BPF_XDP,
    };
    bpf(BPF_PROG_LOAD, &mut attr).map(owned).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        io::Error::new(
            e.kind(),
            format!("loading XDP program {name}: {e}; verifier: {}", text.trim()),
        )
    })
}

#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Attaches XDP program `prog` to interface `ifindex` (native mode) through a link: the program
/// stays attached while the returned descriptor is open.
pub fn attach_xdp(prog: &OwnedFd, ifindex: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: XDP_FLAGS_DRV_MODE,
    };
    bpf(BPF_LINK_CREATE, &mut attr).map(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        // `r2 = *(u32 *)(r6 + 16)`: opcode 0x61, dst 2, src 6.
        assert_eq!(
            load_u32(2, 6, 16),
            Insn {
                code: 0x61,
                regs: 0x62,
                off: 16,
                imm: 0
            }
        );
        assert_eq!(store_u64(2, 0, 7).code, 0x7b);
        assert_eq!(mov(6, 1).code, 0xbf);
        assert_eq!(mov_imm(2, -8).imm, -8);
        assert_eq!(call(helper::REDIRECT_MAP).code, 0x85);
        assert_eq!(exit().code, 0x95);
        assert_eq!(jump_gt(4, 3, 1).code, 0x2d);
        assert_eq!(jump_ne_imm(0, 0, 6).code, 0x55);
        assert_eq!(size_of::<Insn>(), 8);
    }
}
