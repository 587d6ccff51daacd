//! Running a lowered program on frames, as BMv2's simple_switch runs v1model: parser, verify
//! checksum and ingress when a frame arrives (again when ingress resubmits it); egress,
//! compute checksum and deparser when it starts transmission. Per-packet state is a reused
//! [`PacketState`], of which a frame carries from ingress to egress only the part that is not 0
//! ([`CarriedState`]); tables and extern state live in the [`Datapath`] shared by every worker.

mod carried;
mod code;
pub mod control_plane;
pub mod hash;
mod key_map;
mod layout;
pub mod meter;
mod plane_copies;
mod psa;
mod run;
mod step;
pub mod table;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use crossbeam_channel::TrySendError;

use crate::ir::{self, BlockKind, mask};
pub use carried::CarriedState;
pub use control_plane::{ControlPlane, QueueSettings, Session};
use control_plane::{ControlView, SharedControl};
use meter::{MeterArray, MeterCell};
use plane_copies::PlaneCopies;
pub use psa::PSA_RECIRCULATE_PORT;

/// The port number v1model reserves for "drop" (`egress_spec` 511).
pub const DROP_PORT: u16 = 511;

/// BMv2's `instance_type` of a frame that arrived on a port.
pub const INSTANCE_NORMAL: u32 = 0;

/// BMv2's `instance_type` of an ingress-to-egress clone.
pub const INSTANCE_INGRESS_CLONE: u32 = 1;

/// BMv2's `instance_type` of an egress-to-egress clone.
pub const INSTANCE_EGRESS_CLONE: u32 = 2;

/// BMv2's `instance_type` of a recirculated frame.
pub const INSTANCE_RECIRCULATED: u32 = 4;

/// BMv2's `instance_type` of a multicast replica.
pub const INSTANCE_REPLICATION: u32 = 5;

/// BMv2's `instance_type` of a resubmitted frame.
pub const INSTANCE_RESUBMIT: u32 = 6;

/// Most resubmissions of one frame: a program that resubmits every time would never end.
const MAX_RESUBMITS: usize = 64;

/// Digests kept for the control plane before the oldest are dropped.
const DIGEST_QUEUE: usize = 4096;

/// A program with its tables and extern state.
#[derive(Debug)]
pub struct Datapath {
    /// The program (read-only outside: `code` is compiled from it once).
    pub(crate) program: ir::Program,
    /// The program compiled to closures: what packets run.
    code: code::Code,
    /// Tables, groups and sessions as packets see them now.
    control: SharedControl,
    /// Held by an edit, so that two control-plane clients never lose each other's changes: the
    /// copies of the control plane edits change (see [`Datapath::edit`]).
    editing: Mutex<PlaneCopies>,
    /// Edits made so far: a switch that applies part of the control plane itself (the
    /// queues' settings) looks again when it moves.
    edits: AtomicU64,
    registers: Vec<RegisterArray>,
    counters: Vec<Box<[[AtomicU64; 2]]>>,
    meters: Vec<MeterArray>,
    digests: DigestQueue,
    /// Log every packet's way through the program (`tracing` at debug level, target `p4`).
    pub trace: bool,
    /// This switch's name in traces.
    pub name: String,
}

/// A register array: one 64-bit word a cell, two for cells wider than 64 bits.
#[derive(Debug)]
struct RegisterArray {
    width: u16,
    words: Box<[AtomicU64]>,
}

impl RegisterArray {
    fn wide(&self) -> bool {
        self.width > 64
    }

    fn len(&self) -> usize {
        if self.wide() {
            self.words.len() / 2
        } else {
            self.words.len()
        }
    }

    fn get(&self, i: usize) -> Option<u128> {
        if i >= self.len() {
            return None;
        }
        Some(if self.wide() {
            (u128::from(self.words[2 * i].load(Ordering::Relaxed)) << 64)
                | u128::from(self.words[2 * i + 1].load(Ordering::Relaxed))
        } else {
            u128::from(self.words[i].load(Ordering::Relaxed))
        })
    }

    fn set(&self, i: usize, v: u128) -> bool {
        if i >= self.len() {
            return false;
        }
        let v = v & mask(self.width);
        if self.wide() {
            self.words[2 * i].store((v >> 64) as u64, Ordering::Relaxed);
            self.words[2 * i + 1].store(v as u64, Ordering::Relaxed);
        } else {
            self.words[i].store(v as u64, Ordering::Relaxed);
        }
        true
    }
}

/// A digest a program sent, waiting for the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestMessage {
    /// The digest type (index into the program's digests).
    pub digest: usize,
    /// Its fields' values.
    pub values: Vec<u128>,
}

/// Digests on their way to the control plane: a bounded lock-free queue, since any worker may
/// send one from a frame's pass while the control plane takes them.
#[derive(Debug)]
struct DigestQueue {
    send: crossbeam_channel::Sender<DigestMessage>,
    take: crossbeam_channel::Receiver<DigestMessage>,
    dropped: AtomicU64,
}

impl Default for DigestQueue {
    fn default() -> DigestQueue {
        let (send, take) = crossbeam_channel::bounded(DIGEST_QUEUE);
        DigestQueue {
            send,
            take,
            dropped: AtomicU64::new(0),
        }
    }
}

/// One packet's values while it is in the switch.
#[derive(Debug, Clone, Default)]
pub struct PacketState {
    slots: Vec<u128>,
    /// Bytes of headers at the front of the frame that the state stands for (the parser's
    /// cursor; after a deparse, the headers written).
    header_bytes: usize,
    /// Bits the parser has consumed.
    cursor: usize,
    out: Vec<u8>,
    list: Vec<u8>,
    key: Vec<u128>,
    scratch: Vec<u128>,
    clone_session: Option<u32>,
    /// The field list a clone keeps.
    clone_field_list: Option<u128>,
    /// `resubmit` was called: with this field list.
    resubmit: Option<Option<u128>>,
    /// `recirculate` was called: with this field list.
    recirculate: Option<Option<u128>>,
    /// The frame as it arrived, kept when ingress asked for a clone or a resubmit.
    original: Vec<u8>,
    truncate: Option<usize>,
    random: u64,
    rid: u16,
    instance_type: u32,
    /// The control plane, as this thread last read it.
    view: ControlView,
}

/// What the switch knows when a frame arrives.
#[derive(Debug, Clone, Copy, Default)]
pub struct Arrival {
    /// Its P4 ingress port.
    pub port: u16,
    /// When it arrived (ns, lab clock).
    pub now_ns: u64,
}

/// What the switch knows when a frame starts transmission.
#[derive(Debug, Clone, Copy, Default)]
pub struct Departure {
    /// P4 egress port.
    pub port: u16,
    /// When it arrived (ns).
    pub arrival_ns: u64,
    /// When it was queued (ns).
    pub enqueued_ns: u64,
    /// When it starts transmission (ns).
    pub departure_ns: u64,
    /// Packets queued when it was queued.
    pub enq_packets: u32,
    /// Packets queued when it left.
    pub deq_packets: u32,
    /// Bytes queued when it left.
    pub queue_bytes: u64,
    /// Bytes sent on the port before it.
    pub tx_bytes: u64,
    /// Line rate (kb/s).
    pub rate_kbps: u32,
    /// INT node id of the switch.
    pub node_id: u32,
    /// Largest IP packet the egress link takes (bytes).
    pub mtu: u32,
    /// The queue it was in (its priority).
    pub qid: u8,
}

/// Where ingress sends a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Dropped (`mark_to_drop`, or `egress_spec` 511).
    Drop,
    /// To one P4 port.
    Unicast(u16),
    /// To the ports of a multicast group.
    Multicast(u16),
}

/// What ingress decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressResult {
    /// Where the frame goes.
    pub decision: Decision,
    /// A clone (ingress to egress) to this P4 port, if one was asked for.
    pub clone_to: Option<u16>,
    /// The clone's session, when it also multicasts.
    pub clone_session: Option<Session>,
    /// The queue (priority) it goes to at its egress port.
    pub priority: u8,
}

/// What egress decided, before the deparser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressResult {
    /// The frame goes on (not dropped by egress).
    pub sent: bool,
    /// An egress-to-egress clone was asked for, to this session.
    pub clone: Option<Session>,
    /// The clone is of the frame as the deparser writes it, made whether or not egress dropped
    /// the frame (PSA); else of the headers before the deparser (v1model).
    pub clone_deparsed: bool,
    /// The frame goes back to ingress after the deparser (`recirculate`).
    pub recirculate: bool,
}

impl Datapath {
    /// A datapath for `program` with its source's entries and defaults.
    pub fn new(program: ir::Program, name: &str) -> Datapath {
        let control = Arc::new(ArcSwap::from_pointee(ControlPlane::of(&program)));
        let registers = program
            .registers
            .iter()
            .map(|r| {
                let n = if r.width > 64 { 2 * r.size } else { r.size };
                RegisterArray {
                    width: r.width,
                    words: (0..n).map(|_| AtomicU64::new(0)).collect(),
                }
            })
            .collect();
        let counters = program
            .counters
            .iter()
            .map(|c| (0..c.size).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect())
            .collect();
        let meters = program
            .meters
            .iter()
            .map(|m| MeterArray {
                bytes: m.bytes,
                cells: (0..m.size).map(|_| MeterCell::default()).collect(),
            })
            .collect();
        let dp = Datapath {
            code: code::Code::of(&program),
            program,
            control,
            editing: Mutex::new(PlaneCopies::default()),
            edits: AtomicU64::new(0),
            registers,
            counters,
            meters,
            digests: DigestQueue::default(),
            trace: false,
            name: name.to_owned(),
        };
        for r in 0..dp.registers.len() {
            dp.register_reset(r);
        }
        dp
    }

    /// A fresh packet state sized for this program.
    pub fn packet_state(&self) -> PacketState {
        PacketState {
            slots: vec![0; self.program.slots],
            ..PacketState::default()
        }
    }

    /// The program it runs.
    pub fn program(&self) -> &ir::Program {
        &self.program
    }

    /// The control plane's state as packets see it now.
    pub fn control(&self) -> arc_swap::Guard<Arc<ControlPlane>> {
        self.control.load()
    }

    /// Applies `change` to a copy of the control plane and, if it succeeds, swaps the copy in:
    /// frames see all of the change or none of it. Edits run one at a time; one costs what it
    /// changes, not what the tables hold (see [`plane_copies`]).
    ///
    /// A state packets no longer read is freed here, never by the last packet thread to let go
    /// of it: the packet threads would pay for edits (measured, when they did: frames through
    /// ingress at 0.23x their rate beside full-rate writes).
    pub fn edit<R, E>(&self, change: impl FnOnce(&mut ControlPlane) -> Result<R, E>) -> Result<R, E> {
        let mut copies = self.editing.lock().unwrap_or_else(PoisonError::into_inner);
        let live = self.control.load_full();
        let (next, r) = copies.edit(&live, change)?;
        drop(live);
        copies.swapped(self.control.swap(next));
        self.edits.fetch_add(1, Ordering::Release);
        Ok(r)
    }

    /// How many edits the control plane has had (see [`Datapath::edit`]).
    pub fn edits(&self) -> u64 {
        self.edits.load(Ordering::Acquire)
    }

    /// The table the control plane calls `name`: its full name, or a suffix after a `.` that
    /// only one table has.
    pub fn table_id(&self, name: &str) -> Result<usize, String> {
        resolve(
            self.program.tables.iter().map(|t| t.name.as_str()),
            name,
            "table",
            "the program",
        )
    }

    /// Action `name` of table `t`, named as [`Datapath::table_id`] names tables.
    pub fn action_of(&self, t: usize, name: &str) -> Result<usize, String> {
        let table = &self.program.tables[t];
        let i = resolve(
            table
                .actions
                .iter()
                .map(|a| self.program.actions[a.action].name.as_str()),
            name,
            "action",
            &format!("table `{}`", table.name),
        )?;
        Ok(table.actions[i].action)
    }

    /// Register `name`.
    pub fn register_id(&self, name: &str) -> Result<usize, String> {
        resolve(
            self.program.registers.iter().map(|r| r.name.as_str()),
            name,
            "register",
            "the program",
        )
    }

    /// Counter `name` (indexed or direct).
    pub fn counter_id(&self, name: &str) -> Result<usize, String> {
        resolve(
            self.program.counters.iter().map(|c| c.name.as_str()),
            name,
            "counter",
            "the program",
        )
    }

    /// Meter `name` (indexed or direct).
    pub fn meter_id(&self, name: &str) -> Result<usize, String> {
        resolve(
            self.program.meters.iter().map(|m| m.name.as_str()),
            name,
            "meter",
            "the program",
        )
    }

    /// Action profile or selector `name`.
    pub fn profile_id(&self, name: &str) -> Result<usize, String> {
        resolve(
            self.program.profiles.iter().map(|p| p.name.as_str()),
            name,
            "action profile",
            "the program",
        )
    }

    /// Refused when the control plane may not add entries to table `t` (it has `const entries`).
    pub fn check_entries_allowed(&self, t: usize) -> Result<(), String> {
        let table = &self.program.tables[t];
        match table.entries {
            Some((_, false)) => Err(format!("table `{}` has const entries and takes no others", table.name)),
            _ => Ok(()),
        }
    }

    /// Refused when the control plane may not change table `t`'s default action.
    pub fn check_default_allowed(&self, t: usize) -> Result<(), String> {
        let table = &self.program.tables[t];
        match table.const_default {
            true => Err(format!("table `{}` has a const default action", table.name)),
            false => Ok(()),
        }
    }

    /// Cell `i` of register `r`.
    pub fn register_read(&self, r: usize, i: usize) -> Option<u128> {
        self.registers.get(r)?.get(i)
    }

    /// Sets cell `i` of register `r`; false if out of range.
    pub fn register_write(&self, r: usize, i: usize, v: u128) -> bool {
        self.registers.get(r).is_some_and(|a| a.set(i, v))
    }

    /// Sets every cell of register `r` to its initial value (0 but for PSA's registers
    /// declared with one).
    pub fn register_reset(&self, r: usize) {
        let (Some(a), Some(def)) = (self.registers.get(r), self.program.registers.get(r)) else {
            return;
        };
        for w in a.words.iter() {
            w.store(0, Ordering::Relaxed);
        }
        if def.init != 0 {
            for i in 0..def.size {
                a.set(i, def.init);
            }
        }
    }

    /// Packets and bytes of cell `i` of counter `c`.
    pub fn counter_read(&self, c: usize, i: usize) -> Option<(u64, u64)> {
        let cell = self.counters.get(c)?.get(i)?;
        Some((cell[0].load(Ordering::Relaxed), cell[1].load(Ordering::Relaxed)))
    }

    /// Sets cell `i` of counter `c`; false if out of range.
    pub fn counter_write(&self, c: usize, i: usize, packets: u64, bytes: u64) -> bool {
        match self.counters.get(c).and_then(|a| a.get(i)) {
            Some(cell) => {
                cell[0].store(packets, Ordering::Relaxed);
                cell[1].store(bytes, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Sets every cell of counter `c` to 0.
    pub fn counter_reset(&self, c: usize) {
        for cell in self.counters.get(c).into_iter().flatten() {
            cell[0].store(0, Ordering::Relaxed);
            cell[1].store(0, Ordering::Relaxed);
        }
    }

    /// Cell `i` of indexed meter `m`.
    pub fn meter_cell(&self, m: usize, i: usize) -> Option<&MeterCell> {
        self.meters.get(m)?.cells.get(i)
    }

    /// Cells of indexed meter `m`.
    pub fn meter_cells(&self, m: usize) -> usize {
        self.meters.get(m).map_or(0, |a| a.cells.len())
    }

    /// The digests waiting for the control plane, oldest first (taken), and how many were
    /// dropped because nobody took them.
    pub fn take_digests(&self) -> (Vec<DigestMessage>, u64) {
        let q = &self.digests;
        (q.take.try_iter().collect(), q.dropped.load(Ordering::Relaxed))
    }

    fn push_digest(&self, m: DigestMessage) {
        let q = &self.digests;
        let Err(TrySendError::Full(m)) = q.send.try_send(m) else {
            return;
        };
        // Full: the oldest makes room (another worker may take the room first; then this one
        // is the digest dropped).
        if q.take.try_recv().is_ok() {
            q.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if q.send.try_send(m).is_err() {
            q.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs the parser, verify checksum and ingress on the frame in `buf[..*len]` (again for
    /// each resubmission), then writes the headers back (the frame may grow or shrink; `buf`
    /// must have room).
    pub fn ingress(&self, st: &mut PacketState, buf: &mut [u8], len: &mut usize, arrival: Arrival) -> IngressResult {
        self.ingress_as(st, buf, len, arrival, None)
    }

    /// [`Datapath::ingress`] for a frame that comes back (recirculated): the metadata `from`
    /// kept (its field list) and its `instance_type`.
    pub fn ingress_as(
        &self,
        st: &mut PacketState,
        buf: &mut [u8],
        len: &mut usize,
        arrival: Arrival,
        carry: Option<&Carry>,
    ) -> IngressResult {
        let mut view = st.view.take(&self.control);
        let result = match self.program.arch {
            ir::Arch::V1Model => self.ingress_with(view.load(), st, buf, len, arrival, carry),
            ir::Arch::Psa => self.psa_ingress(view.load(), st, buf, len, arrival, carry),
        };
        st.view.put(view);
        result
    }

    /// [`Datapath::ingress_as`] with the control plane `control`.
    fn ingress_with(
        &self,
        control: &ControlPlane,
        st: &mut PacketState,
        buf: &mut [u8],
        len: &mut usize,
        arrival: Arrival,
        carry: Option<&Carry>,
    ) -> IngressResult {
        let s = self.program.std;
        let env = Departure {
            arrival_ns: arrival.now_ns,
            ..Departure::default()
        };
        let mut carry = carry.cloned();
        let mut resubmits = 0;
        loop {
            let port = u128::from(arrival.port);
            let mut r = self.arrive(control, st, &buf[..*len], port, arrival.now_ns, env, carry.as_ref());
            r.control(self.code.control(BlockKind::Ingress));
            let clone_session =
                r.st.clone_session
                    .take()
                    .and_then(|c| control.sessions.get(&(c & 0x7fff)).copied());
            if clone_session.is_some() || r.st.resubmit.is_some() {
                // The deparser below rewrites the frame; clones and resubmissions start from it
                // as it arrived.
                r.st.original.clear();
                r.st.original.extend_from_slice(&buf[..*len]);
            }
            if let Some(list) = r.st.resubmit.take()
                && resubmits < MAX_RESUBMITS
            {
                resubmits += 1;
                if self.trace {
                    tracing::debug!(target: "p4", switch = %self.name, "resubmitted");
                }
                carry = Some(self.carry(st, list, INSTANCE_RESUBMIT));
                continue;
            }
            let mcast = st.slots[s.mcast_grp as usize] as u16;
            let spec = st.slots[s.egress_spec as usize] as u16;
            let decision = if mcast != 0 {
                Decision::Multicast(mcast)
            } else if spec == DROP_PORT {
                Decision::Drop
            } else {
                Decision::Unicast(spec)
            };
            if self.trace {
                tracing::debug!(target: "p4", switch = %self.name, "ingress decided {decision:?}");
            }
            let priority = (st.slots[s.priority as usize] & 7) as u8;
            // As simple_switch: what leaves ingress for one port is a normal packet, whatever it
            // was when it came in (resubmitted, recirculated); replicas are marked as they go.
            st.instance_type = INSTANCE_NORMAL;
            let mut r = run::Run::new(self, control, st, &buf[..*len], env);
            if decision != Decision::Drop {
                r.deparse();
                if st.write_headers(buf, len).is_none() {
                    tracing::debug!(target: "p4", switch = %self.name, "frame grew past its buffer: dropped");
                    return IngressResult {
                        decision: Decision::Drop,
                        clone_to: None,
                        clone_session: None,
                        priority,
                    };
                }
            }
            return IngressResult {
                decision,
                clone_to: clone_session.and_then(|c| c.port),
                clone_session,
                priority,
            };
        }
    }

    /// What a resubmitted or recirculated frame keeps of `st`: its field list's values.
    fn carry(&self, st: &PacketState, list: Option<u128>, instance_type: u32) -> Carry {
        let fields = self
            .program
            .field_lists
            .iter()
            .find(|l| Some(l.index) == list)
            .map(|l| {
                l.fields
                    .iter()
                    .map(|&(first, n)| (first, st.slots[first as usize..(first + n) as usize].to_vec()))
                    .collect()
            })
            .unwrap_or_default();
        Carry { fields, instance_type }
    }

    /// Starts a frame's pass as it arrives on P4 port `port` at `now_ns`: the state reset, the
    /// arrival's standard metadata set (with what a carried frame kept), the parser and verify
    /// checksum run.
    #[allow(clippy::too_many_arguments)]
    fn arrive<'r>(
        &'r self,
        control: &'r ControlPlane,
        st: &'r mut PacketState,
        packet: &'r [u8],
        port: u128,
        now_ns: u64,
        env: Departure,
        carry: Option<&Carry>,
    ) -> run::Run<'r> {
        st.reset(self.program.slots);
        let s = self.program.std;
        // A resubmitted or recirculated frame's metadata is reset but for its field list (as
        // BMv2's are: its ingress port too).
        let fresh = carry.is_none();
        if fresh {
            st.slots[s.ingress_port as usize] = port;
        }
        st.slots[s.packet_length as usize] = packet.len() as u128;
        st.slots[s.ingress_global_timestamp as usize] = u128::from(now_ns / 1000);
        if let Some(c) = carry {
            for (first, values) in &c.fields {
                st.slots[*first as usize..*first as usize + values.len()].copy_from_slice(values);
            }
            st.instance_type = c.instance_type;
            st.slots[s.instance_type as usize] = u128::from(c.instance_type);
        }
        let mut r = run::Run::new(self, control, st, packet, env);
        r.parse(BlockKind::Parser);
        r.control(self.code.control(BlockKind::Verify));
        r
    }

    /// Makes the ingress-to-egress clone of a frame whose ingress (state `from`) asked for one, as
    /// BMv2's simple_switch makes it: the frame as it arrived (into `buf[..*len]`), parsed again
    /// (parser and verify checksum, with only its ingress port kept), its metadata reset but
    /// for the user metadata fields of the field list the clone named, `instance_type` 1.
    /// False if the frame does not fit `buf`.
    pub fn ingress_clone(&self, from: &PacketState, st: &mut PacketState, buf: &mut [u8], len: &mut usize) -> bool {
        if self.program.arch == ir::Arch::Psa {
            return self.psa_ingress_clone(from, st, buf, len);
        }
        let original = &from.original;
        let Some(room) = buf.get_mut(..original.len()) else {
            return false;
        };
        room.copy_from_slice(original);
        *len = original.len();
        let s = self.program.std;
        let port = from.slots[s.ingress_port as usize];
        let mut view = st.view.take(&self.control);
        self.arrive(view.load(), st, &buf[..*len], port, 0, Departure::default(), None);
        st.view.put(view);
        st.slots[s.ingress_global_timestamp as usize] = 0;
        self.keep_field_list(from, st, from.clone_field_list);
        st.mark_copy(0, INSTANCE_INGRESS_CLONE);
        st.slots[s.instance_type as usize] = u128::from(INSTANCE_INGRESS_CLONE);
        true
    }

    /// Copies the fields of field list `list` from `from` to `st`.
    fn keep_field_list(&self, from: &PacketState, st: &mut PacketState, list: Option<u128>) {
        let kept = self.program.field_lists.iter().find(|l| Some(l.index) == list);
        for &(first, n) in kept.map(|l| l.fields.as_slice()).unwrap_or_default() {
            let range = first as usize..(first + n) as usize;
            st.slots[range.clone()].copy_from_slice(&from.slots[range]);
        }
    }

    /// Runs egress, compute checksum and the deparser on a frame that starts transmission;
    /// false if egress dropped it. (Clones and recirculation: [`Datapath::egress_control`].)
    pub fn egress(&self, st: &mut PacketState, buf: &mut [u8], len: &mut usize, d: Departure) -> bool {
        let e = self.egress_control(st, &buf[..*len], d);
        e.sent && self.egress_finish(st, buf, len, d)
    }

    /// Runs the egress control on a frame that starts transmission, and says what it asked
    /// for. Then, if it was not dropped, [`Datapath::egress_finish`]; before it, an
    /// egress-to-egress clone is made with [`Datapath::egress_clone`].
    pub fn egress_control(&self, st: &mut PacketState, frame: &[u8], d: Departure) -> EgressResult {
        if st.slots.len() != self.program.slots {
            return EgressResult {
                sent: false,
                clone: None,
                clone_deparsed: false,
                recirculate: false,
            };
        }
        let s = self.program.std;
        let set = |st: &mut PacketState, slot: ir::Slot, v: u128| st.slots[slot as usize] = v;
        set(st, s.egress_port, u128::from(d.port));
        set(st, s.egress_rid, u128::from(st.rid));
        set(st, s.instance_type, u128::from(st.instance_type));
        set(st, s.packet_length, frame.len() as u128);
        set(st, s.enq_timestamp, u128::from((d.enqueued_ns / 1000) as u32));
        set(st, s.enq_qdepth, u128::from(d.enq_packets.min((1 << 19) - 1)));
        set(st, s.deq_qdepth, u128::from(d.deq_packets.min((1 << 19) - 1)));
        set(
            st,
            s.deq_timedelta,
            u128::from(((d.departure_ns.saturating_sub(d.enqueued_ns)) / 1000) as u32),
        );
        set(st, s.egress_global_timestamp, u128::from(d.departure_ns / 1000));
        set(st, s.qid, u128::from(d.qid));
        // As simple_switch: egress_spec starts as a port that is not the drop port, so that
        // only `mark_to_drop` (or a write of 511) in egress drops the frame.
        set(st, s.egress_spec, u128::from(DROP_PORT + 1));
        let mut view = st.view.take(&self.control);
        let control = view.load();
        if self.program.arch == ir::Arch::Psa {
            let result = self.psa_egress_control(control, st, frame, d);
            st.view.put(view);
            return result;
        }
        let mut r = run::Run::new(self, control, st, frame, d);
        r.cursor_to_headers();
        r.control(self.code.control(BlockKind::Egress));
        let clone =
            r.st.clone_session
                .take()
                .and_then(|c| control.sessions.get(&(c & 0x7fff)).copied());
        st.view.put(view);
        let dropped = st.slots[s.egress_spec as usize] as u16 == DROP_PORT;
        if dropped && self.trace {
            tracing::debug!(target: "p4", switch = %self.name, "egress dropped the frame");
        }
        EgressResult {
            sent: !dropped,
            clone,
            clone_deparsed: false,
            recirculate: st.recirculate.is_some() && !dropped,
        }
    }

    /// Makes the egress-to-egress clone of a frame whose egress (state `from`, not yet
    /// deparsed) asked for one: its headers as egress left them (those inside the user metadata
    /// too, as BMv2 keeps them), its metadata reset but for the field list the clone named,
    /// `instance_type` 2. The caller copies the frame's bytes.
    pub fn egress_clone(&self, from: &PacketState, st: &mut PacketState) {
        if self.program.arch == ir::Arch::Psa {
            return self.psa_egress_clone(st);
        }
        st.reset(self.program.slots);
        st.slots.copy_from_slice(&from.slots);
        // Metadata reset: everything but the headers.
        let mut keep = vec![false; st.slots.len()];
        self.mark_headers(&mut keep);
        for (i, k) in keep.iter().enumerate() {
            if !k {
                st.slots[i] = 0;
            }
        }
        self.keep_field_list(from, st, from.clone_field_list);
        st.header_bytes = from.header_bytes;
        st.truncate = from.truncate;
        st.mark_copy(0, INSTANCE_EGRESS_CLONE);
    }

    /// Marks the slots of the program's headers: the parsed ones (the shared `hdr` of the
    /// pipeline) and those inside the user metadata.
    fn mark_headers(&self, keep: &mut [bool]) {
        for &(first, n) in std::iter::once(&self.program.hdr).chain(&self.program.meta_headers) {
            for k in keep.iter_mut().skip(first as usize).take(n as usize) {
                *k = true;
            }
        }
    }

    /// Runs compute checksum and the deparser on a frame egress kept; false if it no longer
    /// fits `buf`.
    pub fn egress_finish(&self, st: &mut PacketState, buf: &mut [u8], len: &mut usize, d: Departure) -> bool {
        let mut view = st.view.take(&self.control);
        let mut r = run::Run::new(self, view.load(), st, &buf[..*len], d);
        r.control(self.code.control(BlockKind::Compute));
        r.deparse();
        st.view.put(view);
        st.write_headers(buf, len).is_some()
    }

    /// What a recirculated frame keeps of its egress state `st` (the field list of its
    /// `recirculate`).
    pub fn recirculation(&self, st: &PacketState) -> Carry {
        if self.program.arch == ir::Arch::Psa {
            return self.psa_recirculation();
        }
        self.carry(st, st.recirculate.flatten(), INSTANCE_RECIRCULATED)
    }
}

/// What a resubmitted or recirculated frame keeps: its field list's values, and its
/// `instance_type`.
#[derive(Debug, Clone, Default)]
pub struct Carry {
    fields: Vec<(ir::Slot, Vec<u128>)>,
    instance_type: u32,
}

/// The one name among `names` (the `what`s of `owner`) that is `wanted` or ends with
/// `.wanted`; else what exists.
pub fn resolve<'a>(
    names: impl Iterator<Item = &'a str> + Clone,
    wanted: &str,
    what: &str,
    owner: &str,
) -> Result<usize, String> {
    if let Some(i) = names.clone().position(|n| n == wanted) {
        return Ok(i);
    }
    let suffix = format!(".{wanted}");
    let found: Vec<usize> = names
        .clone()
        .enumerate()
        .filter(|(_, n)| n.ends_with(&suffix))
        .map(|(i, _)| i)
        .collect();
    match found.as_slice() {
        [i] => Ok(*i),
        [] => {
            let known: Vec<&str> = names.collect();
            Err(format!(
                "{owner} has no {what} `{wanted}` (it has {})",
                known.join(", ")
            ))
        }
        many => {
            let names: Vec<&str> = names.collect();
            let fits: Vec<&str> = many.iter().map(|&i| names[i]).collect();
            Err(format!(
                "`{wanted}` fits more than one {what} of {owner} ({}); write the full name",
                fits.join(", ")
            ))
        }
    }
}

impl PacketState {
    fn reset(&mut self, slots: usize) {
        self.slots.clear();
        self.slots.resize(slots, 0);
        self.reset_flags();
    }

    /// Resets everything but the slots.
    fn reset_flags(&mut self) {
        self.header_bytes = 0;
        self.cursor = 0;
        self.clone_session = None;
        self.clone_field_list = None;
        self.resubmit = None;
        self.recirculate = None;
        self.truncate = None;
        // An arrival is an original frame until it is marked as a copy.
        self.rid = 0;
        self.instance_type = 0;
    }

    /// Marks this state as a copy: its replication id and `instance_type` (0 normal, 1 ingress
    /// clone, 2 egress clone, 5 multicast replica), as egress will see them.
    pub(crate) fn mark_copy(&mut self, rid: u16, instance_type: u32) {
        self.rid = rid;
        self.instance_type = instance_type;
    }

    /// Sets the replication id egress sees (a clone's copy to a multicast group keeps its kind).
    pub(crate) fn set_rid(&mut self, rid: u16) {
        self.rid = rid;
    }

    /// Whether egress asked for the frame to come back (`recirculate`).
    pub fn recirculates(&self) -> bool {
        self.recirculate.is_some()
    }
}
