//! A packet's state as its frame carries it from ingress to egress. Between the two the frame
//! usually changes worker, and what it carries crosses from one core's cache to the other's:
//! a whole [`PacketState`] is 16 bytes a slot (1.7 KB for `int_transit.p4`), touched line by
//! line as egress reads it. Slots travel in 8 bytes, the few wider values (IPv6 addresses)
//! beside them; each worker runs the program on its own [`PacketState`], which stays in its
//! cache. (Sending only the slots that are not 0 moved fewer bytes but cost more than it saved:
//! a branch per slot on data, which mispredicts.)

use super::PacketState;
use crate::ir::Slot;

/// The slots of a [`PacketState`], and what else egress needs of it.
#[derive(Debug, Clone, Default)]
pub struct CarriedState {
    /// Every slot's low 64 bits.
    low: Vec<u64>,
    /// Slots whose value does not fit 64 bits, with their values.
    wide: Vec<(Slot, u128)>,
    header_bytes: usize,
    truncate: Option<usize>,
    rid: u16,
    instance_type: u32,
}

impl CarriedState {
    /// Marks this state as a copy: its replication id and `instance_type` (1 ingress clone, 2
    /// egress clone, 5 multicast replica; 0 keeps the one it has), as egress will see them.
    pub fn mark_copy(&mut self, rid: u16, instance_type: u32) {
        self.rid = rid;
        if instance_type != 0 {
            self.instance_type = instance_type;
        }
    }
}

impl PacketState {
    /// Keeps what egress needs of this state in `to` (its buffers reused).
    pub fn save(&self, to: &mut CarriedState) {
        to.low.clear();
        to.wide.clear();
        to.low.extend(self.slots.iter().map(|&v| v as u64));
        for (i, &v) in self.slots.iter().enumerate() {
            if v >> 64 != 0 {
                to.wide.push((i as Slot, v));
            }
        }
        to.header_bytes = self.header_bytes;
        to.truncate = self.truncate;
        to.rid = self.rid;
        to.instance_type = self.instance_type;
    }

    /// Makes this state the one `from` was saved from (of the same program); false, and
    /// unchanged, when `from` has another program's number of slots.
    pub fn restore(&mut self, from: &CarriedState) -> bool {
        if from.low.len() != self.slots.len() {
            return false;
        }
        self.reset_flags();
        for (slot, &v) in self.slots.iter_mut().zip(&from.low) {
            *slot = u128::from(v);
        }
        for &(i, v) in &from.wide {
            self.slots[i as usize] = v;
        }
        self.header_bytes = from.header_bytes;
        self.truncate = from.truncate;
        self.rid = from.rid;
        self.instance_type = from.instance_type;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(slots: &[u128]) -> PacketState {
        PacketState {
            slots: slots.to_vec(),
            ..PacketState::default()
        }
    }

    #[test]
    fn a_restored_state_is_the_saved_one_whatever_the_state_held_before() {
        let wide = (1u128 << 100) | 7;
        let mut from = state(&[0, 5, wide, 0, u128::from(u64::MAX)]);
        from.header_bytes = 42;
        from.truncate = Some(60);
        from.mark_copy(3, 5);
        let mut carried = CarriedState::default();
        from.save(&mut carried);
        let mut to = state(&[9, 9, 9, 9, 9]);
        to.header_bytes = 1;
        assert!(to.restore(&carried));
        assert_eq!(to.slots, from.slots);
        assert_eq!(
            (to.header_bytes, to.truncate, to.rid, to.instance_type),
            (42, Some(60), 3, 5)
        );
        // Saved again into the same buffers, a state with fewer slots set forgets the others.
        state(&[0, 0, 0, 0, 1]).save(&mut carried);
        assert!(to.restore(&carried));
        assert_eq!(to.slots, [0, 0, 0, 0, 1]);
    }

    #[test]
    fn a_state_of_another_program_is_not_restored() {
        let mut carried = CarriedState::default();
        state(&[1, 2, 3]).save(&mut carried);
        let mut to = state(&[4, 4]);
        assert!(!to.restore(&carried));
        assert_eq!(to.slots, [4, 4]);
    }
}
