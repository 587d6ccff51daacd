//! Commands a program writes to its NIC's command file, and their answers.
//!
//! Every command is one `write()` of a header and a body, as libibverbs writes to
//! `/dev/infiniband/uverbsN`: a 32-bit command number, the request's and the answer's lengths
//! in 4-byte words, and the address in the caller's memory where the NIC writes the answer
//! before the `write()` returns. The NIC's own commands have bit 30 of the number set; the one
//! command of libibverbs' itself the NIC takes is `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`
//! (`ibv_create_comp_channel` writes it directly), and any other is refused with an errno. All
//! fields are little-endian.

use crate::device::PortInfo;
use crate::wire::{DecodeError, Reader, Writer};

/// Bit set in the number of the NIC's own commands.
pub const OWN: u32 = 0x4000_0000;
/// libibverbs' `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`.
pub const UVERBS_CREATE_COMP_CHANNEL: u32 = 17;
/// Bytes of the header.
pub const HEADER_LEN: usize = 16;
/// Bytes a command may have at most.
pub const MAX_COMMAND_LEN: usize = 1024;
/// Spare completion channels a program may offer in one command at most.
pub const MAX_SPARES: usize = 16;
/// No SRQ, no completion channel.
pub const NONE: u32 = u32::MAX;

/// The header every command starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The command number.
    pub command: u32,
    /// Bytes of the whole command, in 4-byte words.
    pub in_words: u16,
    /// Bytes the answer may have, in 4-byte words.
    pub out_words: u16,
    /// Where in the caller's memory the answer goes.
    pub response: u64,
}

/// What a QP's queues hold (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    /// Send requests.
    pub max_send_wr: u32,
    /// Receive requests.
    pub max_recv_wr: u32,
    /// Entries per send request.
    pub max_send_sge: u32,
    /// Entries per receive request.
    pub max_recv_sge: u32,
    /// Inline bytes per send request.
    pub max_inline_data: u32,
}

/// A QP's attributes as a modify carries them and a query answers them (the fields of
/// `struct ibv_qp_attr` the NIC uses; `path_mtu` as the verbs' enum, 1 to 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttrs {
    /// State (`enum ibv_qp_state`).
    pub state: u32,
    /// Path MTU (`enum ibv_mtu`).
    pub path_mtu: u32,
    /// Queue key.
    pub qkey: u32,
    /// First PSN expected.
    pub rq_psn: u32,
    /// First PSN sent.
    pub sq_psn: u32,
    /// The far QP.
    pub dest_qpn: u32,
    /// Access flags.
    pub access: u32,
    /// The far end's GID.
    pub dgid: [u8; 16],
    /// Flow label.
    pub flow_label: u32,
    /// Partition key index.
    pub pkey_index: u16,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// The address vector has a GRH.
    pub is_global: u8,
    /// Service level.
    pub sl: u8,
    /// Port.
    pub port_num: u8,
    /// READs and atomics outstanding, this side.
    pub max_rd_atomic: u8,
    /// READs and atomics outstanding, the far side.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Local ACK timeout code.
    pub timeout: u8,
    /// Retries after a timeout.
    pub retry_cnt: u8,
    /// Retries after an RNR NAK.
    pub rnr_retry: u8,
    /// SQD event wanted.
    pub en_sqd_async_notify: u8,
    /// The send queue is draining (query only).
    pub sq_draining: u8,
}

/// A command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// The program attaches: the descriptors (numbers in the program) of its doorbell
    /// (an eventfd), its attention area (shared memory), the socket its asynchronous events
    /// come on, and spare sockets that become completion channels.
    Hello {
        /// Protocol version ([`crate::device::PROTOCOL_VERSION`]).
        version: u32,
        /// The doorbell eventfd.
        doorbell_fd: i32,
        /// The attention area's memfd.
        area_fd: i32,
        /// The NIC's end of the asynchronous event socket.
        async_fd: i32,
        /// The NIC's ends of spare completion channel sockets, each with the program's end.
        spares: Vec<(i32, i32)>,
    },
    /// More spare completion channels (the NIC's ends, each with the program's end).
    AddSpares {
        /// The spares.
        spares: Vec<(i32, i32)>,
    },
    /// The program detaches.
    Goodbye,
    /// `ibv_alloc_pd`.
    AllocPd,
    /// `ibv_dealloc_pd`.
    DeallocPd {
        /// Its handle.
        pd: u32,
    },
    /// `ibv_reg_mr`.
    RegMr {
        /// Protection domain.
        pd: u32,
        /// Start address in the program.
        addr: u64,
        /// Bytes.
        len: u64,
        /// Access flags.
        access: u32,
    },
    /// `ibv_dereg_mr`.
    DeregMr {
        /// Its key.
        key: u32,
    },
    /// `ibv_create_cq`: its queue is `entries` completions in shared memory `ring_fd`.
    CreateCq {
        /// Completions asked for.
        cqe: u32,
        /// The queue's memfd.
        ring_fd: i32,
        /// Entries of the queue (a power of two).
        entries: u32,
        /// The program's `struct ibv_cq *`, sent back with each event.
        user_handle: u64,
        /// The program's end of its completion channel ([`NONE`]: none).
        channel_fd: u32,
    },
    /// `ibv_destroy_cq`.
    DestroyCq {
        /// Its handle.
        cq: u32,
    },
    /// `ibv_create_srq`.
    CreateSrq {
        /// Protection domain.
        pd: u32,
        /// Requests.
        max_wr: u32,
        /// Entries per request.
        max_sge: u32,
        /// Limit event threshold (0: none).
        limit: u32,
        /// The queue's memfd.
        ring_fd: i32,
        /// Entries of the queue (a power of two).
        entries: u32,
        /// The program's `struct ibv_srq *`, sent back with its events.
        user_handle: u64,
    },
    /// `ibv_modify_srq`.
    ModifySrq {
        /// Its handle.
        srq: u32,
        /// `enum ibv_srq_attr_mask`.
        mask: u32,
        /// New size.
        max_wr: u32,
        /// New limit.
        limit: u32,
    },
    /// `ibv_query_srq`.
    QuerySrq {
        /// Its handle.
        srq: u32,
    },
    /// `ibv_destroy_srq`.
    DestroySrq {
        /// Its handle.
        srq: u32,
    },
    /// `ibv_create_qp`: its queues are `sq_entries` send and `rq_entries` receive requests in
    /// shared memory `ring_fd`.
    CreateQp {
        /// `enum ibv_qp_type` (2: RC, 4: UD).
        qp_type: u32,
        /// Protection domain.
        pd: u32,
        /// Send completion queue.
        send_cq: u32,
        /// Receive completion queue.
        recv_cq: u32,
        /// Shared receive queue ([`NONE`]: none).
        srq: u32,
        /// Every send request completes.
        sig_all: bool,
        /// Queue sizes asked for.
        caps: Caps,
        /// The queues' memfd.
        ring_fd: i32,
        /// Send queue entries (a power of two).
        sq_entries: u32,
        /// Receive queue entries (a power of two, or 0 with an SRQ).
        rq_entries: u32,
        /// The program's `struct ibv_qp *`, sent back with its events.
        user_handle: u64,
    },
    /// `ibv_modify_qp`.
    ModifyQp {
        /// QP number.
        qpn: u32,
        /// `enum ibv_qp_attr_mask`.
        mask: u32,
        /// The values.
        attr: QpAttrs,
    },
    /// `ibv_query_qp`.
    QueryQp {
        /// QP number.
        qpn: u32,
    },
    /// `ibv_destroy_qp`.
    DestroyQp {
        /// QP number.
        qpn: u32,
    },
    /// libibverbs' `ibv_create_comp_channel`.
    CreateCompChannel,
}

/// The NIC's answer to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Attached: the port as the program sees it.
    Hello {
        /// The port.
        port: PortInfo,
    },
    /// Done, nothing to say.
    Done,
    /// A new object's handle (PD).
    Handle(u32),
    /// A memory region's key.
    Key(u32),
    /// A new queue's handle and its doorbell index in the attention area.
    Queue {
        /// Its handle (CQ, SRQ) or number (QP).
        handle: u32,
        /// Its bit in the attention area.
        doorbell: u32,
    },
    /// A shared receive queue's attributes.
    SrqAttr {
        /// Requests.
        max_wr: u32,
        /// Entries per request.
        max_sge: u32,
        /// Limit.
        limit: u32,
    },
    /// A QP's attributes.
    QpAttr {
        /// Its attributes.
        attr: QpAttrs,
        /// Its queues.
        caps: Caps,
        /// Every send request completes.
        sig_all: bool,
    },
    /// Detached: the program's ends of the spares that became completion channels (the
    /// program closes the others).
    Goodbye {
        /// Program descriptors handed out as channels.
        used: Vec<i32>,
    },
    /// A completion channel: its descriptor in the program.
    CompChannel {
        /// The descriptor.
        fd: u32,
    },
}

impl Header {
    /// Reads the header at the front of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(bytes, "command header");
        Ok(Header {
            command: r.u32()?,
            in_words: r.u16()?,
            out_words: r.u16()?,
            response: r.u64()?,
        })
    }
}

fn spares(r: &mut Reader<'_>) -> Result<Vec<(i32, i32)>, DecodeError> {
    let n = r.u32()?;
    if n as usize > MAX_SPARES {
        return Err(DecodeError::Range {
            what: "spare channels",
            value: n.into(),
        });
    }
    (0..n).map(|_| Ok((r.i32()?, r.i32()?))).collect()
}

fn write_spares(w: &mut Writer<'_>, spares: &[(i32, i32)]) {
    w.u32(spares.len().min(MAX_SPARES) as u32);
    for &(nic, program) in spares.iter().take(MAX_SPARES) {
        w.i32(nic).i32(program);
    }
}

impl Caps {
    fn read(r: &mut Reader<'_>) -> Result<Caps, DecodeError> {
        Ok(Caps {
            max_send_wr: r.u32()?,
            max_recv_wr: r.u32()?,
            max_send_sge: r.u32()?,
            max_recv_sge: r.u32()?,
            max_inline_data: r.u32()?,
        })
    }

    fn write(&self, w: &mut Writer<'_>) {
        w.u32(self.max_send_wr)
            .u32(self.max_recv_wr)
            .u32(self.max_send_sge)
            .u32(self.max_recv_sge)
            .u32(self.max_inline_data);
    }
}

impl QpAttrs {
    fn read(r: &mut Reader<'_>) -> Result<QpAttrs, DecodeError> {
        Ok(QpAttrs {
            state: r.u32()?,
            path_mtu: r.u32()?,
            qkey: r.u32()?,
            rq_psn: r.u32()?,
            sq_psn: r.u32()?,
            dest_qpn: r.u32()?,
            access: r.u32()?,
            dgid: r.bytes::<16>()?,
            flow_label: r.u32()?,
            pkey_index: r.u16()?,
            sgid_index: r.u8()?,
            hop_limit: r.u8()?,
            traffic_class: r.u8()?,
            is_global: r.u8()?,
            sl: r.u8()?,
            port_num: r.u8()?,
            max_rd_atomic: r.u8()?,
            max_dest_rd_atomic: r.u8()?,
            min_rnr_timer: r.u8()?,
            timeout: r.u8()?,
            retry_cnt: r.u8()?,
            rnr_retry: r.u8()?,
            en_sqd_async_notify: r.u8()?,
            sq_draining: r.u8()?,
        })
    }

    fn write(&self, w: &mut Writer<'_>) {
        w.u32(self.state)
            .u32(self.path_mtu)
            .u32(self.qkey)
            .u32(self.rq_psn)
            .u32(self.sq_psn)
            .u32(self.dest_qpn)
            .u32(self.access)
            .bytes(&self.dgid)
            .u32(self.flow_label)
            .u16(self.pkey_index)
            .u8(self.sgid_index)
            .u8(self.hop_limit)
            .u8(self.traffic_class)
            .u8(self.is_global)
            .u8(self.sl)
            .u8(self.port_num)
            .u8(self.max_rd_atomic)
            .u8(self.max_dest_rd_atomic)
            .u8(self.min_rnr_timer)
            .u8(self.timeout)
            .u8(self.retry_cnt)
            .u8(self.rnr_retry)
            .u8(self.en_sqd_async_notify)
            .u8(self.sq_draining);
    }
}

/// The number of each of the NIC's own commands.
mod number {
    use super::OWN;

    pub(super) const HELLO: u32 = OWN | 1;
    pub(super) const ADD_SPARES: u32 = OWN | 2;
    pub(super) const GOODBYE: u32 = OWN | 3;
    pub(super) const ALLOC_PD: u32 = OWN | 4;
    pub(super) const DEALLOC_PD: u32 = OWN | 5;
    pub(super) const REG_MR: u32 = OWN | 6;
    pub(super) const DEREG_MR: u32 = OWN | 7;
    pub(super) const CREATE_CQ: u32 = OWN | 8;
    pub(super) const DESTROY_CQ: u32 = OWN | 9;
    pub(super) const CREATE_SRQ: u32 = OWN | 10;
    pub(super) const MODIFY_SRQ: u32 = OWN | 11;
    pub(super) const QUERY_SRQ: u32 = OWN | 12;
    pub(super) const DESTROY_SRQ: u32 = OWN | 13;
    pub(super) const CREATE_QP: u32 = OWN | 14;
    pub(super) const MODIFY_QP: u32 = OWN | 15;
    pub(super) const QUERY_QP: u32 = OWN | 16;
    pub(super) const DESTROY_QP: u32 = OWN | 17;
}

impl Command {
    /// Its command number.
    pub fn number(&self) -> u32 {
        use number::*;
        match self {
            Command::Hello { .. } => HELLO,
            Command::AddSpares { .. } => ADD_SPARES,
            Command::Goodbye => GOODBYE,
            Command::AllocPd => ALLOC_PD,
            Command::DeallocPd { .. } => DEALLOC_PD,
            Command::RegMr { .. } => REG_MR,
            Command::DeregMr { .. } => DEREG_MR,
            Command::CreateCq { .. } => CREATE_CQ,
            Command::DestroyCq { .. } => DESTROY_CQ,
            Command::CreateSrq { .. } => CREATE_SRQ,
            Command::ModifySrq { .. } => MODIFY_SRQ,
            Command::QuerySrq { .. } => QUERY_SRQ,
            Command::DestroySrq { .. } => DESTROY_SRQ,
            Command::CreateQp { .. } => CREATE_QP,
            Command::ModifyQp { .. } => MODIFY_QP,
            Command::QueryQp { .. } => QUERY_QP,
            Command::DestroyQp { .. } => DESTROY_QP,
            Command::CreateCompChannel => UVERBS_CREATE_COMP_CHANNEL,
        }
    }

    /// Reads a whole command as written: its header and what it asks.
    pub fn decode(bytes: &[u8]) -> Result<(Header, Command), DecodeError> {
        use number::*;
        if bytes.len() > MAX_COMMAND_LEN {
            return Err(DecodeError::Range {
                what: "command length",
                value: bytes.len() as u64,
            });
        }
        let h = Header::decode(bytes)?;
        let declared = usize::from(h.in_words) * 4;
        if declared != bytes.len() {
            return Err(DecodeError::Length {
                declared,
                written: bytes.len(),
            });
        }
        let mut r = Reader::new(&bytes[HEADER_LEN..], "command body");
        let c = match h.command {
            UVERBS_CREATE_COMP_CHANNEL => Command::CreateCompChannel,
            HELLO => Command::Hello {
                version: r.u32()?,
                doorbell_fd: r.i32()?,
                area_fd: r.i32()?,
                async_fd: r.i32()?,
                spares: spares(&mut r)?,
            },
            ADD_SPARES => Command::AddSpares {
                spares: spares(&mut r)?,
            },
            GOODBYE => Command::Goodbye,
            ALLOC_PD => Command::AllocPd,
            DEALLOC_PD => Command::DeallocPd { pd: r.u32()? },
            REG_MR => Command::RegMr {
                pd: r.u32()?,
                access: r.u32()?,
                addr: r.u64()?,
                len: r.u64()?,
            },
            DEREG_MR => Command::DeregMr { key: r.u32()? },
            CREATE_CQ => Command::CreateCq {
                cqe: r.u32()?,
                ring_fd: r.i32()?,
                entries: r.u32()?,
                channel_fd: r.u32()?,
                user_handle: r.u64()?,
            },
            DESTROY_CQ => Command::DestroyCq { cq: r.u32()? },
            CREATE_SRQ => Command::CreateSrq {
                pd: r.u32()?,
                max_wr: r.u32()?,
                max_sge: r.u32()?,
                limit: r.u32()?,
                ring_fd: r.i32()?,
                entries: r.u32()?,
                user_handle: r.u64()?,
            },
            MODIFY_SRQ => Command::ModifySrq {
                srq: r.u32()?,
                mask: r.u32()?,
                max_wr: r.u32()?,
                limit: r.u32()?,
            },
            QUERY_SRQ => Command::QuerySrq { srq: r.u32()? },
            DESTROY_SRQ => Command::DestroySrq { srq: r.u32()? },
            CREATE_QP => {
                let qp_type = r.u32()?;
                let pd = r.u32()?;
                let send_cq = r.u32()?;
                let recv_cq = r.u32()?;
                let srq = r.u32()?;
                let sig_all = r.u32()? != 0;
                let caps = Caps::read(&mut r)?;
                let ring_fd = r.i32()?;
                let sq_entries = r.u32()?;
                let rq_entries = r.u32()?;
                r.skip(4)?;
                Command::CreateQp {
                    qp_type,
                    pd,
                    send_cq,
                    recv_cq,
                    srq,
                    sig_all,
                    caps,
                    ring_fd,
                    sq_entries,
                    rq_entries,
                    user_handle: r.u64()?,
                }
            }
            MODIFY_QP => Command::ModifyQp {
                qpn: r.u32()?,
                mask: r.u32()?,
                attr: QpAttrs::read(&mut r)?,
            },
            QUERY_QP => Command::QueryQp { qpn: r.u32()? },
            DESTROY_QP => Command::DestroyQp { qpn: r.u32()? },
            other => return Err(DecodeError::UnknownCommand(other)),
        };
        Ok((h, c))
    }

    /// Writes the command, asking for its answer at `response` (`out_len` bytes there at
    /// most), padded to whole words.
    pub fn encode(&self, response: u64, out_len: usize, out: &mut Vec<u8>) {
        out.clear();
        let mut w = Writer { out };
        w.u32(self.number()).u16(0).u16((out_len / 4) as u16).u64(response);
        match self {
            Command::Hello {
                version,
                doorbell_fd,
                area_fd,
                async_fd,
                spares,
            } => {
                w.u32(*version).i32(*doorbell_fd).i32(*area_fd).i32(*async_fd);
                write_spares(&mut w, spares);
            }
            Command::AddSpares { spares } => write_spares(&mut w, spares),
            Command::Goodbye | Command::AllocPd | Command::CreateCompChannel => {}
            Command::DeallocPd { pd } => {
                w.u32(*pd);
            }
            Command::RegMr { pd, addr, len, access } => {
                w.u32(*pd).u32(*access).u64(*addr).u64(*len);
            }
            Command::DeregMr { key } => {
                w.u32(*key);
            }
            Command::CreateCq {
                cqe,
                ring_fd,
                entries,
                user_handle,
                channel_fd,
            } => {
                w.u32(*cqe)
                    .i32(*ring_fd)
                    .u32(*entries)
                    .u32(*channel_fd)
                    .u64(*user_handle);
            }
            Command::DestroyCq { cq } => {
                w.u32(*cq);
            }
            Command::CreateSrq {
                pd,
                max_wr,
                max_sge,
                limit,
                ring_fd,
                entries,
                user_handle,
            } => {
                w.u32(*pd)
                    .u32(*max_wr)
                    .u32(*max_sge)
                    .u32(*limit)
                    .i32(*ring_fd)
                    .u32(*entries)
                    .u64(*user_handle);
            }
            Command::ModifySrq {
                srq,
                mask,
                max_wr,
                limit,
            } => {
                w.u32(*srq).u32(*mask).u32(*max_wr).u32(*limit);
            }
            Command::QuerySrq { srq } | Command::DestroySrq { srq } => {
                w.u32(*srq);
            }
            Command::CreateQp {
                qp_type,
                pd,
                send_cq,
                recv_cq,
                srq,
                sig_all,
                caps,
                ring_fd,
                sq_entries,
                rq_entries,
                user_handle,
            } => {
                w.u32(*qp_type)
                    .u32(*pd)
                    .u32(*send_cq)
                    .u32(*recv_cq)
                    .u32(*srq)
                    .u32(u32::from(*sig_all));
                caps.write(&mut w);
                w.i32(*ring_fd)
                    .u32(*sq_entries)
                    .u32(*rq_entries)
                    .u32(0)
                    .u64(*user_handle);
            }
            Command::ModifyQp { qpn, mask, attr } => {
                w.u32(*qpn).u32(*mask);
                attr.write(&mut w);
            }
            Command::QueryQp { qpn } | Command::DestroyQp { qpn } => {
                w.u32(*qpn);
            }
        }
        let padded = out.len().div_ceil(4) * 4;
        out.resize(padded, 0);
        let words = (padded / 4) as u16;
        out[4..6].copy_from_slice(&words.to_le_bytes());
    }
}

impl Answer {
    /// Writes the answer.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        let mut w = Writer { out };
        match self {
            Answer::Hello { port } => {
                w.u32(port.mtu).u32(0).u64(port.rate_bps).bytes(&port.gid);
            }
            Answer::Done => {}
            Answer::Handle(h) | Answer::Key(h) => {
                w.u32(*h);
            }
            Answer::Queue { handle, doorbell } => {
                w.u32(*handle).u32(*doorbell);
            }
            Answer::SrqAttr { max_wr, max_sge, limit } => {
                w.u32(*max_wr).u32(*max_sge).u32(*limit);
            }
            Answer::QpAttr { attr, caps, sig_all } => {
                attr.write(&mut w);
                caps.write(&mut w);
                w.u32(u32::from(*sig_all));
            }
            Answer::Goodbye { used } => {
                w.u32(used.len().min(MAX_SPARES * 64) as u32);
                for &fd in used.iter().take(MAX_SPARES * 64) {
                    w.i32(fd);
                }
            }
            Answer::CompChannel { fd } => {
                w.u32(*fd);
            }
        }
    }

    /// Reads the answer to `command` from `bytes`.
    pub fn decode(command: &Command, bytes: &[u8]) -> Result<Answer, DecodeError> {
        let mut r = Reader::new(bytes, "answer");
        Ok(match command {
            Command::Hello { .. } => {
                let mtu = r.u32()?;
                r.skip(4)?;
                Answer::Hello {
                    port: PortInfo {
                        mtu,
                        rate_bps: r.u64()?,
                        gid: r.bytes::<16>()?,
                    },
                }
            }
            Command::AllocPd => Answer::Handle(r.u32()?),
            Command::RegMr { .. } => Answer::Key(r.u32()?),
            Command::CreateCq { .. } | Command::CreateSrq { .. } | Command::CreateQp { .. } => Answer::Queue {
                handle: r.u32()?,
                doorbell: r.u32()?,
            },
            Command::QuerySrq { .. } => Answer::SrqAttr {
                max_wr: r.u32()?,
                max_sge: r.u32()?,
                limit: r.u32()?,
            },
            Command::QueryQp { .. } => Answer::QpAttr {
                attr: QpAttrs::read(&mut r)?,
                caps: Caps::read(&mut r)?,
                sig_all: r.u32()? != 0,
            },
            Command::Goodbye => {
                let n = r.u32()?;
                if n as usize > MAX_SPARES * 64 {
                    return Err(DecodeError::Range {
                        what: "channels handed out",
                        value: n.into(),
                    });
                }
                Answer::Goodbye {
                    used: (0..n).map(|_| r.i32()).collect::<Result<_, _>>()?,
                }
            }
            Command::CreateCompChannel => Answer::CompChannel { fd: r.u32()? },
            // The other commands answer nothing but success.
            _ => Answer::Done,
        })
    }

    /// Bytes the answer to `command` has at most (what the caller leaves room for).
    pub fn room_for(command: &Command) -> usize {
        match command {
            Command::Goodbye => 4 + 4 * MAX_SPARES * 64,
            _ => 128,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_command() -> Vec<Command> {
        vec![
            Command::Hello {
                version: 1,
                doorbell_fd: 5,
                area_fd: 6,
                async_fd: 7,
                spares: vec![(8, 9), (10, 11)],
            },
            Command::AddSpares { spares: vec![(3, 4)] },
            Command::Goodbye,
            Command::AllocPd,
            Command::DeallocPd { pd: 3 },
            Command::RegMr {
                pd: 1,
                addr: 0x7f00_0000_1000,
                len: 1 << 20,
                access: 15,
            },
            Command::DeregMr { key: 0x8000_0101 },
            Command::CreateCq {
                cqe: 100,
                ring_fd: 9,
                entries: 128,
                user_handle: 0xdead_beef,
                channel_fd: NONE,
            },
            Command::DestroyCq { cq: 2 },
            Command::CreateSrq {
                pd: 1,
                max_wr: 64,
                max_sge: 2,
                limit: 4,
                ring_fd: 12,
                entries: 64,
                user_handle: 7,
            },
            Command::ModifySrq {
                srq: 1,
                mask: 2,
                max_wr: 0,
                limit: 9,
            },
            Command::QuerySrq { srq: 1 },
            Command::DestroySrq { srq: 1 },
            Command::CreateQp {
                qp_type: 2,
                pd: 1,
                send_cq: 2,
                recv_cq: 3,
                srq: NONE,
                sig_all: true,
                caps: Caps {
                    max_send_wr: 128,
                    max_recv_wr: 512,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 220,
                },
                ring_fd: 13,
                sq_entries: 128,
                rq_entries: 512,
                user_handle: 0x55,
            },
            Command::ModifyQp {
                qpn: 0x80_0001,
                mask: 0x1f,
                attr: QpAttrs {
                    state: 3,
                    path_mtu: 3,
                    dgid: [9; 16],
                    retry_cnt: 7,
                    ..QpAttrs::default()
                },
            },
            Command::QueryQp { qpn: 0x80_0001 },
            Command::DestroyQp { qpn: 0x80_0001 },
            Command::CreateCompChannel,
        ]
    }

    #[test]
    fn every_command_round_trips_and_its_header_says_its_length() {
        let mut buf = Vec::new();
        for c in every_command() {
            c.encode(0x1000, 64, &mut buf);
            let (h, back) = Command::decode(&buf).expect("decodes");
            assert_eq!(back, c);
            assert_eq!(
                (h.response, h.out_words, usize::from(h.in_words) * 4),
                (0x1000, 16, buf.len())
            );
        }
    }

    #[test]
    fn a_short_long_or_unknown_command_is_refused() {
        let mut buf = Vec::new();
        Command::RegMr {
            pd: 1,
            addr: 2,
            len: 3,
            access: 4,
        }
        .encode(0, 4, &mut buf);
        assert!(matches!(
            Command::decode(&buf[..buf.len() - 4]),
            Err(DecodeError::Length { .. })
        ));
        let mut extra = buf.clone();
        extra.extend_from_slice(&[0; 4]);
        assert!(Command::decode(&extra).is_err());
        let mut unknown = buf.clone();
        unknown[..4].copy_from_slice(&(OWN | 999).to_le_bytes());
        assert!(matches!(Command::decode(&unknown), Err(DecodeError::UnknownCommand(_))));
        let mut many = Vec::new();
        Command::AddSpares {
            spares: vec![(1, 2); MAX_SPARES],
        }
        .encode(0, 4, &mut many);
        many[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(Command::decode(&many).is_err(), "a count beyond the bound");
        assert!(Command::decode(&vec![0u8; MAX_COMMAND_LEN + 4]).is_err());
    }

    #[test]
    fn answers_round_trip() {
        let cases = [
            (
                Command::Hello {
                    version: 1,
                    doorbell_fd: 1,
                    area_fd: 2,
                    async_fd: 3,
                    spares: vec![],
                },
                Answer::Hello {
                    port: PortInfo {
                        mtu: 1024,
                        rate_bps: 100_000_000,
                        gid: [1; 16],
                    },
                },
            ),
            (Command::AllocPd, Answer::Handle(4)),
            (
                Command::QueryQp { qpn: 1 },
                Answer::QpAttr {
                    attr: QpAttrs {
                        state: 3,
                        ..QpAttrs::default()
                    },
                    caps: Caps::default(),
                    sig_all: true,
                },
            ),
            (Command::Goodbye, Answer::Goodbye { used: vec![9, 10] }),
            (Command::CreateCompChannel, Answer::CompChannel { fd: 12 }),
        ];
        let mut buf = Vec::new();
        for (c, a) in cases {
            a.encode(&mut buf);
            assert!(buf.len() <= Answer::room_for(&c));
            assert_eq!(Answer::decode(&c, &buf).expect("decodes"), a);
        }
    }
}
