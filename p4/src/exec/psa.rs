//! PSA's pipeline as BMv2's psa_switch runs it. Ingress: the parser, the ingress control with
//! its output metadata preset (drop true, clone and resubmit false), then in this order a clone
//! of the frame as it arrived, the drop, a resubmission of the frame as it arrived, the ingress
//! deparser, and multicast or unicast. Egress: its headers and metadata start empty and its
//! parser reads the frame again; then the egress control, the deparser, a clone, the drop, and
//! recirculation when the egress port is `PSA_PORT_RECIRCULATE`.
//!
//! A frame's kind travels as v1model's `instance_type` does (the switch and the in-memory
//! switch mark copies that way) and is turned into PSA's packet path at each block.

use super::control_plane::ControlPlane;
use super::run::Run;
use super::{
    Arrival, Carry, Datapath, Decision, Departure, EgressResult, INSTANCE_EGRESS_CLONE, INSTANCE_INGRESS_CLONE,
    INSTANCE_NORMAL, INSTANCE_RECIRCULATED, INSTANCE_REPLICATION, INSTANCE_RESUBMIT, IngressResult, MAX_RESUBMITS,
    PacketState,
};
use crate::ir::{BlockKind, PsaSlots};

/// `PSA_PORT_RECIRCULATE`.
const RECIRCULATE_PORT: u128 = 0xffff_fffa;

/// The P4 port the switch gives a frame sent to `PSA_PORT_RECIRCULATE` (ports are 16 bits
/// wide in the switch): its egress recirculates it.
pub const PSA_RECIRCULATE_PORT: u16 = 0xfffa;

/// `PSA_PacketPath_t`'s values, in its order.
mod path {
    pub const NORMAL: u128 = 0;
    pub const NORMAL_UNICAST: u128 = 1;
    pub const NORMAL_MULTICAST: u128 = 2;
    pub const CLONE_I2E: u128 = 3;
    pub const CLONE_E2E: u128 = 4;
    pub const RESUBMIT: u128 = 5;
    pub const RECIRCULATE: u128 = 6;
}

/// A PSA port (32 bits) as the switch's P4 port, if it has one.
fn switch_port(port: u128) -> Option<u16> {
    if port == RECIRCULATE_PORT {
        return Some(PSA_RECIRCULATE_PORT);
    }
    u16::try_from(port).ok().filter(|&p| p != PSA_RECIRCULATE_PORT)
}

/// The switch's P4 port as a PSA port.
fn psa_port(port: u16) -> u128 {
    if port == PSA_RECIRCULATE_PORT {
        RECIRCULATE_PORT
    } else {
        u128::from(port)
    }
}

impl Datapath {
    fn psa_slots(&self) -> &PsaSlots {
        self.program.psa.as_ref().expect("a PSA program")
    }

    /// [`Datapath::ingress_as`] for a PSA program.
    pub(super) fn psa_ingress(
        &self,
        control: &ControlPlane,
        st: &mut PacketState,
        buf: &mut [u8],
        len: &mut usize,
        arrival: Arrival,
        carry: Option<&Carry>,
    ) -> IngressResult {
        let p = *self.psa_slots();
        let std = self.program.std;
        let env = Departure {
            arrival_ns: arrival.now_ns,
            ..Departure::default()
        };
        let mut kind = carry.map_or(INSTANCE_NORMAL, |c| c.instance_type);
        let mut resubmits = 0;
        loop {
            st.reset(self.program.slots);
            let (port, packet_path) = match kind {
                INSTANCE_RESUBMIT => (u128::from(arrival.port), path::RESUBMIT),
                INSTANCE_RECIRCULATED => (RECIRCULATE_PORT, path::RECIRCULATE),
                _ => (u128::from(arrival.port), path::NORMAL),
            };
            let set = |st: &mut PacketState, slot: u32, v: u128| st.slots[slot as usize] = v;
            set(st, p.parser_in[0], port);
            set(st, p.parser_in[1], packet_path);
            set(st, std.packet_length, *len as u128);
            let mut r = Run::new(self, control, st, &buf[..*len], env);
            r.parse(BlockKind::Parser);
            let parser_error = st.slots[std.parser_error as usize];
            let now_us = u128::from(arrival.now_ns / 1000);
            for (slot, v) in p.ingress_in.into_iter().zip([port, packet_path, now_us, parser_error]) {
                set(st, slot, v);
            }
            // class_of_service, clone, clone_session_id, drop, resubmit, multicast_group,
            // egress_port: what psa_switch sets before ingress (the others stay 0).
            let [cos, clone, session, drop, resubmit, group, egress_port] = p.ingress_out;
            set(st, drop, 1);
            let mut r = Run::new(self, control, st, &buf[..*len], env);
            r.control(self.code.control(BlockKind::Ingress));
            let get = |st: &PacketState, slot: u32| st.slots[slot as usize];
            let clone_session = (get(st, clone) != 0)
                .then(|| control.sessions.get(&(get(st, session) as u32)).copied())
                .flatten();
            if clone_session.is_some() || get(st, resubmit) != 0 {
                // Clones and resubmissions start from the frame as it arrived.
                st.original.clear();
                st.original.extend_from_slice(&buf[..*len]);
            }
            let priority = (get(st, cos) & 7) as u8;
            let result = |decision| IngressResult {
                decision,
                clone_to: clone_session.and_then(|c| c.port),
                clone_session,
                priority,
            };
            if get(st, drop) != 0 {
                return result(Decision::Drop);
            }
            if get(st, resubmit) != 0 && resubmits < MAX_RESUBMITS {
                resubmits += 1;
                kind = INSTANCE_RESUBMIT;
                // The frame as it arrived goes round again.
                let original = std::mem::take(&mut st.original);
                buf[..original.len()].copy_from_slice(&original);
                *len = original.len();
                st.original = original;
                continue;
            }
            let mut r = Run::new(self, control, st, &buf[..*len], env);
            r.deparse_with(BlockKind::IngressDeparser);
            if st.write_headers(buf, len).is_none() {
                return result(Decision::Drop);
            }
            st.instance_type = INSTANCE_NORMAL;
            let group = get(st, group);
            if group != 0 {
                return result(u16::try_from(group).map_or(Decision::Drop, Decision::Multicast));
            }
            return result(switch_port(get(st, egress_port)).map_or(Decision::Drop, Decision::Unicast));
        }
    }

    /// [`Datapath::ingress_clone`] for a PSA program: the frame as it arrived, its metadata
    /// empty; egress parses it.
    pub(super) fn psa_ingress_clone(
        &self,
        from: &PacketState,
        st: &mut PacketState,
        buf: &mut [u8],
        len: &mut usize,
    ) -> bool {
        let Some(room) = buf.get_mut(..from.original.len()) else {
            return false;
        };
        room.copy_from_slice(&from.original);
        *len = from.original.len();
        st.reset(self.program.slots);
        st.mark_copy(0, INSTANCE_INGRESS_CLONE);
        true
    }

    /// [`Datapath::egress_control`] for a PSA program.
    pub(super) fn psa_egress_control(
        &self,
        control: &ControlPlane,
        st: &mut PacketState,
        frame: &[u8],
        d: Departure,
    ) -> EgressResult {
        let p = *self.psa_slots();
        let std = self.program.std;
        let (first, n) = p.egress_state;
        st.slots[first as usize..(first + n) as usize].fill(0);
        st.header_bytes = 0;
        st.cursor = 0;
        let packet_path = match st.instance_type {
            INSTANCE_REPLICATION => path::NORMAL_MULTICAST,
            INSTANCE_INGRESS_CLONE => path::CLONE_I2E,
            INSTANCE_EGRESS_CLONE => path::CLONE_E2E,
            _ => path::NORMAL_UNICAST,
        };
        let port = psa_port(d.port);
        let set = |st: &mut PacketState, slot: u32, v: u128| st.slots[slot as usize] = v;
        set(st, p.egress_parser_in[0], port);
        set(st, p.egress_parser_in[1], packet_path);
        set(st, std.packet_length, frame.len() as u128);
        set(st, std.parser_error, 0);
        let mut r = Run::new(self, control, st, frame, d);
        r.parse(BlockKind::EgressParser);
        let parser_error = st.slots[std.parser_error as usize];
        let values = [
            u128::from(d.qid),
            port,
            packet_path,
            u128::from(st.rid),
            u128::from(d.departure_ns / 1000),
            parser_error,
        ];
        for (slot, v) in p.egress_in.into_iter().zip(values) {
            set(st, slot, v);
        }
        let [clone, session, drop] = p.egress_out;
        for slot in [clone, session, drop] {
            set(st, slot, 0);
        }
        let mut r = Run::new(self, control, st, frame, d);
        r.control(self.code.control(BlockKind::Egress));
        set(st, p.deparser_in, port);
        let get = |st: &PacketState, slot: u32| st.slots[slot as usize];
        let clone = (get(st, clone) != 0)
            .then(|| control.sessions.get(&(get(st, session) as u32)).copied())
            .flatten();
        let dropped = get(st, drop) != 0;
        if dropped && self.trace {
            tracing::debug!(target: "p4", switch = %self.name, "egress dropped the frame");
        }
        EgressResult {
            sent: !dropped,
            clone,
            clone_deparsed: true,
            recirculate: !dropped && port == RECIRCULATE_PORT,
        }
    }

    /// [`Datapath::egress_clone`] for a PSA program: its metadata empty; egress parses it.
    pub(super) fn psa_egress_clone(&self, st: &mut PacketState) {
        st.reset(self.program.slots);
        st.mark_copy(0, INSTANCE_EGRESS_CLONE);
    }

    /// [`Datapath::recirculation`] for a PSA program: a recirculated frame keeps nothing but
    /// its kind.
    pub(super) fn psa_recirculation(&self) -> Carry {
        Carry {
            fields: Vec::new(),
            instance_type: INSTANCE_RECIRCULATED,
        }
    }
}
