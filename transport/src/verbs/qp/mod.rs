//! Queue pairs: their type, state and attributes, and the state machine programs drive with
//! modify (RESET, INIT, RTR, RTS, SQD, SQE, ERR), checked as the InfiniBand specification's
//! table of required and optional attributes per transition (the table the Linux kernel's
//! `ib_modify_qp_is_ok` keeps). The send side is in `requester.rs` and `completer.rs`, the
//! receive side in `responder.rs`.

pub(crate) mod requester;
pub(crate) mod responder;

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use int_format::roles::source::SourceConfig;

use super::Verbs;
use super::error::VerbsError;
use super::mr::Access;
use super::wr::RecvWr;
use crate::cc::Controller;
use crate::packet::Addressing;
use requester::{Requester, SenderTiming};
use responder::Responder;

/// The mask of the 24-bit PSN.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// The service of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpType {
    /// Reliable Connection.
    Rc,
    /// Unreliable Datagram.
    Ud,
}

/// A QP's state (`enum ibv_qp_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum QpState {
    /// Just created or reset: nothing is sent or received.
    Reset = 0,
    /// Receive requests may be posted; nothing is received yet.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained: requests in progress finish, new ones wait.
    Sqd = 4,
    /// Send queue error (UD): the receive side still works.
    Sqe = 5,
    /// Error: every request completes flushed.
    Err = 6,
}

impl QpState {
    /// The state of number `v`.
    pub fn from_u32(v: u32) -> Option<QpState> {
        Some(match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }

    /// Its name as the specification writes it (`RTS`).
    pub fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        }
    }
}

/// Which attributes a modify carries (`enum ibv_qp_attr_mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttrMask(pub u32);

impl AttrMask {
    /// `state`.
    pub const STATE: u32 = 1;
    /// `cur_state`.
    pub const CUR_STATE: u32 = 1 << 1;
    /// `en_sqd_async_notify`.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    /// `qp_access_flags`.
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    /// `pkey_index`.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// `port_num`.
    pub const PORT: u32 = 1 << 5;
    /// `qkey`.
    pub const QKEY: u32 = 1 << 6;
    /// `ah_attr`: the address vector.
    pub const AV: u32 = 1 << 7;
    /// `path_mtu`.
    pub const PATH_MTU: u32 = 1 << 8;
    /// `timeout`.
    pub const TIMEOUT: u32 = 1 << 9;
    /// `retry_cnt`.
    pub const RETRY_CNT: u32 = 1 << 10;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = 1 << 11;
    /// `rq_psn`.
    pub const RQ_PSN: u32 = 1 << 12;
    /// `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    /// `alt_ah_attr` and the rest of the alternate path.
    pub const ALT_PATH: u32 = 1 << 14;
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    /// `sq_psn`.
    pub const SQ_PSN: u32 = 1 << 16;
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    /// `path_mig_state`.
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    /// `cap`.
    pub const CAP: u32 = 1 << 19;
    /// `dest_qp_num`.
    pub const DEST_QPN: u32 = 1 << 20;
    /// `rate_limit`.
    pub const RATE_LIMIT: u32 = 1 << 25;

    /// True when `bit` is set.
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
}

/// What a QP's queues hold at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpCaps {
    /// Send requests outstanding.
    pub max_send_wr: u32,
    /// Receive requests outstanding.
    pub max_recv_wr: u32,
    /// Entries per send request.
    pub max_send_sge: u32,
    /// Entries per receive request.
    pub max_recv_sge: u32,
    /// Inline bytes per send request.
    pub max_inline_data: u32,
}

/// The attributes of a QP that a modify sets (the fields of `struct ibv_qp_attr` this NIC
/// uses; the rest are accepted where the table allows them and kept for query).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// State.
    pub state: QpState,
    /// Payload bytes per packet (256 to 4096).
    pub path_mtu: u32,
    /// Queue key (UD).
    pub qkey: u32,
    /// First PSN expected from the far end.
    pub rq_psn: u32,
    /// First PSN sent.
    pub sq_psn: u32,
    /// The far end's QP.
    pub dest_qpn: u32,
    /// What the far end may do to this side's memory through this QP.
    pub access: Access,
    /// Partition key index (kept).
    pub pkey_index: u16,
    /// Port (1).
    pub port_num: u8,
    /// Local ACK timeout: 4.096 us * 2^timeout (0: infinite).
    pub timeout: u8,
    /// Retries after a timeout before the request fails (0-7).
    pub retry_cnt: u8,
    /// Retries after an RNR NAK before the request fails (7: forever).
    pub rnr_retry: u8,
    /// The RNR NAK timer this side asks the far end to wait (a 5-bit code).
    pub min_rnr_timer: u8,
    /// READs and atomics this side has outstanding at most.
    pub max_rd_atomic: u8,
    /// READs and atomics the far end may have outstanding here.
    pub max_dest_rd_atomic: u8,
    /// The far end's address (from the address vector's GID).
    pub dest: Option<Ipv4Addr>,
    /// Hop limit of the address vector (kept).
    pub hop_limit: u8,
    /// Traffic class of the address vector (kept).
    pub traffic_class: u8,
    /// Source GID index of the address vector (kept).
    pub sgid_index: u8,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            state: QpState::Reset,
            path_mtu: 1024,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qpn: 0,
            access: Access::default(),
            pkey_index: 0,
            port_num: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            dest: None,
            hop_limit: 64,
            traffic_class: 0,
            sgid_index: 0,
        }
    }
}

/// READs and atomics a QP may have outstanding at most, either way (the device's
/// `max_qp_rd_atom` and `max_qp_init_rd_atom`).
pub const MAX_RD_ATOMIC: u8 = 16;

/// The path MTUs a QP may use, by the verbs' enum value (1: 256 ... 5: 4096).
pub fn mtu_bytes(code: u32) -> Option<u32> {
    match code {
        1..=5 => Some(128 << code),
        _ => None,
    }
}

/// The enum value of a path MTU of `bytes`.
pub fn mtu_code(bytes: u32) -> u32 {
    match bytes {
        ..=256 => 1,
        257..=512 => 2,
        513..=1024 => 3,
        1025..=2048 => 4,
        _ => 5,
    }
}

/// The RNR NAK timer of a 5-bit code, in ns (the InfiniBand specification's table 45, kept here
/// in units of 10 us; code 0 is the longest, 655.36 ms).
pub fn rnr_timer_ns(code: u8) -> u64 {
    const US_TENTHS: [u64; 32] = [
        65_536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1_024, 1_536, 2_048, 3_072,
        4_096, 6_144, 8_192, 12_288, 16_384, 24_576, 32_768, 49_152,
    ];
    US_TENTHS[usize::from(code & 31)] * 10_000
}

/// The local ACK timeout of a 5-bit code, in ns: 4.096 us * 2^code (0: none).
pub fn ack_timeout_ns(code: u8) -> Option<u64> {
    (code != 0).then(|| 4_096u64 << (code & 31))
}

/// Attributes a transition from `cur` to `new` requires, and those it may also carry, for a
/// QP of `kind` (None: the transition is not allowed).
fn transition(kind: QpType, cur: QpState, new: QpState) -> Option<(u32, u32)> {
    use QpState::*;
    let rc = kind == QpType::Rc;
    let m = |bits: &[u32]| bits.iter().fold(0, |a, b| a | b);
    let a = AttrMask::ACCESS_FLAGS;
    let (pk, port, qk) = (AttrMask::PKEY_INDEX, AttrMask::PORT, AttrMask::QKEY);
    let rts_optional_rc = m(&[
        AttrMask::CUR_STATE,
        a,
        AttrMask::ALT_PATH,
        AttrMask::PATH_MIG_STATE,
        AttrMask::MIN_RNR_TIMER,
        AttrMask::RATE_LIMIT,
    ]);
    let rts_optional_ud = m(&[AttrMask::CUR_STATE, qk, AttrMask::RATE_LIMIT]);
    Some(match (cur, new) {
        (_, Reset) | (_, Err) => (0, 0),
        (Reset, Init) => {
            if rc {
                (m(&[pk, port, a]), 0)
            } else {
                (m(&[pk, port, qk]), 0)
            }
        }
        (Init, Init) => (0, if rc { m(&[pk, port, a]) } else { m(&[pk, port, qk]) }),
        (Init, Rtr) => {
            if rc {
                (
                    m(&[
                        AttrMask::AV,
                        AttrMask::PATH_MTU,
                        AttrMask::DEST_QPN,
                        AttrMask::RQ_PSN,
                        AttrMask::MAX_DEST_RD_ATOMIC,
                        AttrMask::MIN_RNR_TIMER,
                    ]),
                    m(&[AttrMask::ALT_PATH, a, pk]),
                )
            } else {
                (0, m(&[pk, qk]))
            }
        }
        (Rtr, Rts) => {
            if rc {
                (
                    m(&[
                        AttrMask::SQ_PSN,
                        AttrMask::TIMEOUT,
                        AttrMask::RETRY_CNT,
                        AttrMask::RNR_RETRY,
                        AttrMask::MAX_QP_RD_ATOMIC,
                    ]),
                    rts_optional_rc,
                )
            } else {
                (AttrMask::SQ_PSN, rts_optional_ud)
            }
        }
        (Rts, Rts) | (Sqd, Rts) => (0, if rc { rts_optional_rc } else { rts_optional_ud }),
        (Rts, Sqd) => (0, AttrMask::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd) => (
            0,
            if rc {
                rts_optional_rc
                    | m(&[
                        AttrMask::AV,
                        AttrMask::TIMEOUT,
                        AttrMask::RETRY_CNT,
                        AttrMask::RNR_RETRY,
                        AttrMask::MAX_QP_RD_ATOMIC,
                        AttrMask::MAX_DEST_RD_ATOMIC,
                        pk,
                        port,
                    ])
            } else {
                m(&[pk, qk])
            },
        ),
        (Sqe, Rts) if !rc => (0, m(&[AttrMask::CUR_STATE, qk])),
        _ => return None,
    })
}

/// Checks a modify of a QP of `kind` in state `cur` carrying `mask` (whose `state` is `new`,
/// or `cur` when the mask has no state).
pub fn check_modify(kind: QpType, cur: QpState, new: QpState, mask: AttrMask) -> Result<(), VerbsError> {
    let Some((required, optional)) = transition(kind, cur, new) else {
        return Err(VerbsError::invalid(format!("no transition from {cur:?} to {new:?}")));
    };
    let given = mask.0 & !AttrMask::STATE;
    if given & required != required {
        return Err(VerbsError::invalid(format!(
            "{cur:?} to {new:?} requires attribute mask {required:#x}, got {given:#x}"
        )));
    }
    let extra = given & !(required | optional);
    if extra != 0 {
        return Err(VerbsError::invalid(format!(
            "{cur:?} to {new:?} does not take attribute mask bits {extra:#x}"
        )));
    }
    if mask.has(AttrMask::RATE_LIMIT) {
        return Err(VerbsError::NotSupported(
            "rate_limit: a QP's rate is its congestion controller's".into(),
        ));
    }
    Ok(())
}

/// How a QP's sender retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// The lab's own flows: a timeout doubles up to a ceiling and the flow never gives up (a
    /// flow without progress through several is reported stuck).
    Backoff,
    /// A program's QP, as the verbs give it: a fixed local ACK timeout and a count of retries,
    /// after which the request completes with an error.
    Counted,
}

/// A QP.
pub struct Qp {
    /// Its number.
    pub qpn: u32,
    /// Its service.
    pub kind: QpType,
    /// The context that created it.
    pub context: usize,
    /// Its protection domain.
    pub pd: u32,
    /// Where its send requests complete.
    pub send_cq: u32,
    /// Where its receive requests complete.
    pub recv_cq: u32,
    /// The shared receive queue it takes receive requests from, if any.
    pub srq: Option<u32>,
    /// Every send request completes (otherwise only those that ask, and failures).
    pub sig_all: bool,
    /// What its queues hold.
    pub caps: QpCaps,
    /// Its attributes.
    pub attr: QpAttr,
    /// How its sender retries.
    pub retry: RetryPolicy,
    /// The addresses and ports of what it sends (set when it learns its far end).
    pub addressing: Addressing,
    /// The UDP port its packets go to (the INT port when they carry INT).
    pub dst_port: u16,
    /// INT on what it sends, as a source.
    pub int: Option<SourceConfig>,
    /// Its congestion controller.
    pub cc: Box<dyn Controller>,
    /// The send side.
    pub(crate) req: Requester,
    /// The receive side.
    pub(crate) resp: Responder,
    /// Its own receive queue (without an SRQ).
    pub(crate) rq: VecDeque<RecvWr>,
}

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Qp({:#x}, {:?}, {:?})", self.qpn, self.kind, self.attr.state)
    }
}

/// What a new QP is made of.
#[derive(Debug, Clone, Copy)]
pub struct QpInit {
    /// Its number.
    pub qpn: u32,
    /// Its service.
    pub kind: QpType,
    /// The context creating it.
    pub context: usize,
    /// Its protection domain.
    pub pd: u32,
    /// Where its send requests complete.
    pub send_cq: u32,
    /// Where its receive requests complete.
    pub recv_cq: u32,
    /// Its shared receive queue, if any.
    pub srq: Option<u32>,
    /// Every send request completes.
    pub sig_all: bool,
    /// What its queues hold.
    pub caps: QpCaps,
    /// How its sender retries.
    pub retry: RetryPolicy,
    /// Its sender's timers.
    pub timing: SenderTiming,
    /// Payload bytes per packet until a modify sets the path MTU.
    pub mtu: u32,
    /// The local address and UDP source port of what it sends.
    pub local: Addressing,
}

impl Qp {
    /// A QP in RESET, sending at `cc`'s rate once it sends.
    pub fn new(init: QpInit, cc: Box<dyn Controller>) -> Qp {
        Qp {
            qpn: init.qpn,
            kind: init.kind,
            context: init.context,
            pd: init.pd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq: init.srq,
            sig_all: init.sig_all,
            caps: init.caps,
            attr: QpAttr {
                path_mtu: init.mtu,
                ..QpAttr::default()
            },
            retry: init.retry,
            addressing: init.local,
            dst_port: int_format::roce::ROCEV2_PORT,
            int: None,
            cc,
            req: Requester::new(init.timing, init.mtu.max(4096)),
            resp: Responder::default(),
            rq: VecDeque::new(),
        }
    }

    /// Applies a modify carrying `mask` with the values of `new` (the state machine's table
    /// checked, values in range); the caller has checked what depends on the host (the port's
    /// MTU, the far end being a lab host).
    pub fn modify(&mut self, mask: AttrMask, new: &QpAttr, verbs: &mut Verbs) -> Result<(), VerbsError> {
        let cur = self.attr.state;
        let target = if mask.has(AttrMask::STATE) { new.state } else { cur };
        check_modify(self.kind, cur, target, mask)?;
        let bad = |what: &str, v: u32| Err(VerbsError::invalid(format!("{what} {v} is out of range")));
        if mask.has(AttrMask::PATH_MTU) && !matches!(new.path_mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return bad("path_mtu (bytes)", new.path_mtu);
        }
        if mask.has(AttrMask::MAX_QP_RD_ATOMIC) && new.max_rd_atomic > MAX_RD_ATOMIC {
            return bad("max_rd_atomic", new.max_rd_atomic.into());
        }
        if mask.has(AttrMask::MAX_DEST_RD_ATOMIC) && new.max_dest_rd_atomic > MAX_RD_ATOMIC {
            return bad("max_dest_rd_atomic", new.max_dest_rd_atomic.into());
        }
        if mask.has(AttrMask::RETRY_CNT) && new.retry_cnt > 7 {
            return bad("retry_cnt", new.retry_cnt.into());
        }
        if mask.has(AttrMask::RNR_RETRY) && new.rnr_retry > 7 {
            return bad("rnr_retry", new.rnr_retry.into());
        }
        if mask.has(AttrMask::TIMEOUT) && new.timeout > 31 {
            return bad("timeout", new.timeout.into());
        }
        if mask.has(AttrMask::MIN_RNR_TIMER) && new.min_rnr_timer > 31 {
            return bad("min_rnr_timer", new.min_rnr_timer.into());
        }
        if mask.has(AttrMask::PORT) && new.port_num != 1 {
            return bad("port_num", new.port_num.into());
        }
        if mask.has(AttrMask::PKEY_INDEX) && new.pkey_index != 0 {
            return bad("pkey_index", new.pkey_index.into());
        }
        let qp_access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
        if mask.has(AttrMask::ACCESS_FLAGS) && new.access.0 & !qp_access != 0 {
            return bad("qp_access_flags", new.access.0);
        }
        if mask.has(AttrMask::AV) && new.dest.is_none() {
            return Err(VerbsError::invalid("the address vector's GID is not an IPv4 address"));
        }
        if mask.has(AttrMask::DEST_QPN) && new.dest_qpn > PSN_MASK {
            return bad("dest_qp_num", new.dest_qpn);
        }
        let a = &mut self.attr;
        let copy = |bit: u32| mask.has(bit);
        if copy(AttrMask::PATH_MTU) {
            a.path_mtu = new.path_mtu;
        }
        if copy(AttrMask::QKEY) {
            a.qkey = new.qkey;
        }
        if copy(AttrMask::RQ_PSN) {
            a.rq_psn = new.rq_psn & PSN_MASK;
        }
        if copy(AttrMask::SQ_PSN) {
            a.sq_psn = new.sq_psn & PSN_MASK;
        }
        if copy(AttrMask::DEST_QPN) {
            a.dest_qpn = new.dest_qpn;
        }
        if copy(AttrMask::ACCESS_FLAGS) {
            a.access = new.access;
        }
        if copy(AttrMask::TIMEOUT) {
            a.timeout = new.timeout;
        }
        if copy(AttrMask::RETRY_CNT) {
            a.retry_cnt = new.retry_cnt;
        }
        if copy(AttrMask::RNR_RETRY) {
            a.rnr_retry = new.rnr_retry;
        }
        if copy(AttrMask::MIN_RNR_TIMER) {
            a.min_rnr_timer = new.min_rnr_timer;
        }
        if copy(AttrMask::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = new.max_rd_atomic;
        }
        if copy(AttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = new.max_dest_rd_atomic;
        }
        if copy(AttrMask::AV) {
            a.dest = new.dest;
            a.hop_limit = new.hop_limit;
            a.traffic_class = new.traffic_class;
            a.sgid_index = new.sgid_index;
            if let Some(d) = new.dest {
                self.addressing.dst = d;
            }
        }
        match (cur, target) {
            (_, QpState::Reset) => {
                // RESET forgets everything, completing nothing.
                let timing = self.req.timing;
                self.req = Requester::new(timing, self.attr.path_mtu.max(4096));
                self.resp = Responder::default();
                self.rq.clear();
                self.attr.state = QpState::Reset;
            }
            (_, QpState::Err) => self.enter_error_as_asked(verbs),
            (QpState::Init, QpState::Rtr) => {
                self.attr.state = target;
                self.arm_responder();
            }
            (QpState::Rtr, QpState::Rts) => {
                self.attr.state = target;
                self.arm_requester();
            }
            _ => self.attr.state = target,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_rc_bring_up_passes_and_shortcuts_do_not() {
        let rc = QpType::Rc;
        let init = AttrMask(AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS);
        assert!(check_modify(rc, QpState::Reset, QpState::Init, init).is_ok());
        let rtr = AttrMask(
            AttrMask::STATE
                | AttrMask::AV
                | AttrMask::PATH_MTU
                | AttrMask::DEST_QPN
                | AttrMask::RQ_PSN
                | AttrMask::MAX_DEST_RD_ATOMIC
                | AttrMask::MIN_RNR_TIMER,
        );
        assert!(check_modify(rc, QpState::Init, QpState::Rtr, rtr).is_ok());
        let missing = AttrMask(rtr.0 & !AttrMask::DEST_QPN);
        assert_eq!(
            check_modify(rc, QpState::Init, QpState::Rtr, missing).map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        assert!(check_modify(rc, QpState::Reset, QpState::Rts, AttrMask(AttrMask::STATE)).is_err());
        let extra = AttrMask(init.0 | AttrMask::SQ_PSN);
        assert!(check_modify(rc, QpState::Reset, QpState::Init, extra).is_err());
        assert!(check_modify(rc, QpState::Rts, QpState::Err, AttrMask(AttrMask::STATE)).is_ok());
        let ud_init = AttrMask(AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY);
        assert!(check_modify(QpType::Ud, QpState::Reset, QpState::Init, ud_init).is_ok());
        assert!(check_modify(QpType::Ud, QpState::Init, QpState::Rtr, AttrMask(AttrMask::STATE)).is_ok());
    }

    #[test]
    fn timers_follow_the_specification() {
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(31), 491_520_000);
        assert_eq!(ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(mtu_bytes(3), Some(1024));
        assert_eq!(mtu_bytes(6), None);
        assert_eq!(mtu_code(4096), 5);
    }
}
