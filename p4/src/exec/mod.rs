//! Running a lowered program on frames, as BMv2's simple_switch runs v1model: parser, verify
//! checksum and ingress when a frame arrives; egress, compute checksum and deparser when it
//! starts transmission. Per-packet state is a reused [`PacketState`], of which a frame carries
//! from ingress to egress only the part that is not 0 ([`CarriedState`]); tables and extern
//! state live in the [`Datapath`] shared by every worker.

mod carried;
mod code;
pub mod control_plane;
pub mod eval;
pub mod hash;
mod layout;
mod run;
pub mod table;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use crate::ir;
pub use carried::CarriedState;
pub use control_plane::ControlPlane;

/// The port number v1model reserves for "drop" (`egress_spec` 511).
pub const DROP_PORT: u16 = 511;

/// BMv2's `instance_type` of an ingress-to-egress clone.
pub const INSTANCE_INGRESS_CLONE: u32 = 1;

/// BMv2's `instance_type` of a multicast replica.
pub const INSTANCE_REPLICATION: u32 = 5;

/// A program with its tables and extern state.
#[derive(Debug)]
pub struct Datapath {
    /// The program (read-only outside: `code` is compiled from it once).
    pub(crate) program: ir::Program,
    /// The program compiled to closures: what packets run.
    code: code::Code,
    /// Tables, groups and sessions as packets see them now.
    control: ArcSwap<ControlPlane>,
    /// Held by an edit, so that two control-plane clients never lose each other's changes.
    editing: Mutex<()>,
    registers: Vec<Box<[AtomicU64]>>,
    counters: Vec<Box<[[AtomicU64; 2]]>>,
    /// Log every packet's way through the program (`tracing` at debug level, target `p4`).
    pub trace: bool,
    /// This switch's name in traces.
    pub name: String,
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
    /// The `@field_list` a clone keeps (`clone_preserving_field_list`).
    clone_field_list: Option<u128>,
    /// The frame as it arrived, kept when ingress asked for a clone: BMv2 clones that.
    original: Vec<u8>,
    truncate: Option<usize>,
    random: u64,
    rid: u16,
    instance_type: u32,
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
}

impl Datapath {
    /// A datapath for `program` with its source's entries and defaults.
    pub fn new(program: ir::Program, name: &str) -> Datapath {
        let control = ArcSwap::from_pointee(ControlPlane::of(&program));
        let registers = program
            .registers
            .iter()
            .map(|r| (0..r.size).map(|_| AtomicU64::new(0)).collect())
            .collect();
        let counters = program
            .counters
            .iter()
            .map(|c| (0..c.size).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect())
            .collect();
        Datapath {
            code: code::Code::of(&program),
            program,
            control,
            editing: Mutex::new(()),
            registers,
            counters,
            trace: false,
            name: name.to_owned(),
        }
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
    /// frames see all of the change or none of it. Edits run one at a time.
    pub fn edit<R, E>(&self, change: impl FnOnce(&mut ControlPlane) -> Result<R, E>) -> Result<R, E> {
        let _one_at_a_time = self.editing.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = ControlPlane::clone(&self.control.load());
        let r = change(&mut next)?;
        self.control.store(Arc::new(next));
        Ok(r)
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
            table.actions.iter().map(|&a| self.program.actions[a].name.as_str()),
            name,
            "action",
            &format!("table `{}`", table.name),
        )?;
        Ok(table.actions[i])
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

    /// Counter `name`.
    pub fn counter_id(&self, name: &str) -> Result<usize, String> {
        resolve(
            self.program.counters.iter().map(|c| c.name.as_str()),
            name,
            "counter",
            "the program",
        )
    }

    /// Refused when the control plane may not add entries to table `t` (it has `const entries`).
    pub fn check_entries_allowed(&self, t: usize) -> Result<(), String> {
        let table = &self.program.tables[t];
        match table.const_entries {
            Some(_) => Err(format!("table `{}` has const entries and takes no others", table.name)),
            None => Ok(()),
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
    pub fn register_read(&self, r: usize, i: usize) -> Option<u64> {
        self.registers.get(r)?.get(i).map(|c| c.load(Ordering::Relaxed))
    }

    /// Sets cell `i` of register `r`; false if out of range.
    pub fn register_write(&self, r: usize, i: usize, v: u64) -> bool {
        let w = self.program.registers[r].width;
        match self.registers.get(r).and_then(|x| x.get(i)) {
            Some(c) => {
                c.store(v & crate::lower::mask(w) as u64, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Packets and bytes of cell `i` of counter `c`.
    pub fn counter_read(&self, c: usize, i: usize) -> Option<(u64, u64)> {
        let cell = self.counters.get(c)?.get(i)?;
        Some((cell[0].load(Ordering::Relaxed), cell[1].load(Ordering::Relaxed)))
    }

    /// Runs the parser, verify checksum and ingress on the frame in `buf[..*len]`, then writes
    /// the headers back (the frame may grow or shrink; `buf` must have room).
    pub fn ingress(&self, st: &mut PacketState, buf: &mut [u8], len: &mut usize, arrival: Arrival) -> IngressResult {
        let s = self.program.std;
        let env = Departure {
            arrival_ns: arrival.now_ns,
            ..Departure::default()
        };
        let control = self.control.load();
        let port = u128::from(arrival.port);
        let mut r = self.arrive(&control, st, &buf[..*len], port, u128::from(arrival.now_ns / 1000), env);
        r.control(&self.code.ingress);
        let clone_to =
            r.st.clone_session
                .take()
                .and_then(|c| control.sessions.get(&c).copied());
        if clone_to.is_some() {
            // The deparser below rewrites the frame; the clone starts from it as it arrived.
            r.st.original.clear();
            r.st.original.extend_from_slice(&buf[..*len]);
        }
        let mcast = r.st.slots[s.mcast_grp as usize] as u16;
        let spec = r.st.slots[s.egress_spec as usize] as u16;
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
        if decision != Decision::Drop {
            r.deparse();
            if st.write_headers(buf, len).is_none() {
                tracing::debug!(target: "p4", switch = %self.name, "frame grew past its buffer: dropped");
                return IngressResult {
                    decision: Decision::Drop,
                    clone_to: None,
                };
            }
        }
        IngressResult { decision, clone_to }
    }

    /// Starts a frame's pass as it arrives on P4 port `port` at `timestamp_us`: the state reset,
    /// the arrival's standard metadata set, the parser and verify checksum run.
    fn arrive<'r>(
        &'r self,
        control: &'r ControlPlane,
        st: &'r mut PacketState,
        packet: &'r [u8],
        port: u128,
        timestamp_us: u128,
        env: Departure,
    ) -> run::Run<'r> {
        st.reset(self.program.slots);
        let s = self.program.std;
        st.slots[s.ingress_port as usize] = port;
        st.slots[s.packet_length as usize] = packet.len() as u128;
        st.slots[s.ingress_global_timestamp as usize] = timestamp_us;
        let mut r = run::Run::new(self, control, st, packet, env);
        r.parse();
        r.control(&self.code.verify);
        r
    }

    /// Makes the ingress-to-egress clone of a frame whose ingress (state `from`) asked for one, as
    /// BMv2's simple_switch makes it: the frame as it arrived (into `buf[..*len]`), parsed again
    /// (parser and verify checksum), its metadata reset but for the user metadata fields of the
    /// field list the clone named, `instance_type` 1. False if the frame does not fit `buf`.
    pub fn ingress_clone(&self, from: &PacketState, st: &mut PacketState, buf: &mut [u8], len: &mut usize) -> bool {
        let original = &from.original;
        let Some(room) = buf.get_mut(..original.len()) else {
            return false;
        };
        room.copy_from_slice(original);
        *len = original.len();
        let s = self.program.std;
        let (port, at) = (
            from.slots[s.ingress_port as usize],
            from.slots[s.ingress_global_timestamp as usize],
        );
        let control = self.control.load();
        self.arrive(&control, st, &buf[..*len], port, at, Departure::default());
        let kept = self
            .program
            .field_lists
            .iter()
            .find(|l| Some(l.index) == from.clone_field_list);
        for &(first, n) in kept.map(|l| l.fields.as_slice()).unwrap_or_default() {
            let range = first as usize..(first + n) as usize;
            st.slots[range.clone()].copy_from_slice(&from.slots[range]);
        }
        st.mark_copy(0, INSTANCE_INGRESS_CLONE);
        true
    }

    /// Runs egress, compute checksum and the deparser on a frame that starts transmission;
    /// false if egress dropped it.
    pub fn egress(&self, st: &mut PacketState, buf: &mut [u8], len: &mut usize, d: Departure) -> bool {
        if st.slots.len() != self.program.slots {
            return false;
        }
        let s = self.program.std;
        let set = |st: &mut PacketState, slot: ir::Slot, v: u128| st.slots[slot as usize] = v;
        set(st, s.egress_port, u128::from(d.port));
        set(st, s.egress_rid, u128::from(st.rid));
        set(st, s.instance_type, u128::from(st.instance_type));
        set(st, s.packet_length, *len as u128);
        set(st, s.enq_timestamp, u128::from((d.enqueued_ns / 1000) as u32));
        set(st, s.enq_qdepth, u128::from(d.enq_packets.min((1 << 19) - 1)));
        set(st, s.deq_qdepth, u128::from(d.deq_packets.min((1 << 19) - 1)));
        set(
            st,
            s.deq_timedelta,
            u128::from(((d.departure_ns.saturating_sub(d.enqueued_ns)) / 1000) as u32),
        );
        set(st, s.egress_global_timestamp, u128::from(d.departure_ns / 1000));
        // egress_spec keeps ingress's choice; mark_to_drop in egress sets it to 511.
        set(st, s.egress_spec, u128::from(d.port));
        let control = self.control.load();
        let mut r = run::Run::new(self, &control, st, &buf[..*len], d);
        r.cursor_to_headers();
        r.control(&self.code.egress);
        if r.st.slots[s.egress_spec as usize] as u16 == DROP_PORT {
            if self.trace {
                tracing::debug!(target: "p4", switch = %self.name, "egress dropped the frame");
            }
            return false;
        }
        r.control(&self.code.compute);
        r.deparse();
        st.write_headers(buf, len).is_some()
    }
}

/// The one name among `names` (the `what`s of `owner`) that is `wanted` or ends with
/// `.wanted`; else what exists.
fn resolve<'a>(
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
        self.header_bytes = 0;
        self.cursor = 0;
        self.clone_session = None;
        self.clone_field_list = None;
        self.truncate = None;
        // An arrival is an original frame until it is marked as a copy.
        self.rid = 0;
        self.instance_type = 0;
    }

    /// Marks this state as a copy: its replication id and `instance_type` (0 normal, 1 ingress
    /// clone, 5 multicast replica), as egress will see them.
    fn mark_copy(&mut self, rid: u16, instance_type: u32) {
        self.rid = rid;
        self.instance_type = instance_type;
    }
}
