//! Which priority (802.1p, 0 to 7) a frame travels in: from the PCP of its VLAN tag if it has
//! one, else from its IP DSCP through a map, as a switch port that trusts DSCP does.

use int_format::ethernet::ethertype;

use super::{PRIORITIES, Scheduler};

/// A switch's classes: which priority a frame travels in, and how its ports choose between
/// priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrioritySpec {
    /// DSCP → priority.
    pub map: PriorityMap,
    /// Strict priority (default) or DWRR.
    pub scheduler: Scheduler,
}

/// DSCP → priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityMap {
    by_dscp: [u8; 64],
}

impl Default for PriorityMap {
    /// The class-selector map switches ship with (priority = DSCP / 8): RoCE data at DSCP 26
    /// travels in priority 3 and CNPs at DSCP 48 in priority 6, the classes RoCE deployments
    /// give them; best effort (DSCP 0) and non-IP frames in priority 0.
    fn default() -> PriorityMap {
        PriorityMap {
            by_dscp: std::array::from_fn(|d| (d >> 3) as u8),
        }
    }
}

impl PriorityMap {
    /// Maps `dscp` (0 to 63) to `priority` (0 to 7); out-of-range values are clamped.
    pub fn set(&mut self, dscp: u8, priority: u8) {
        self.by_dscp[usize::from(dscp.min(63))] = priority.min(PRIORITIES as u8 - 1);
    }

    /// The priority of IP traffic marked `dscp`.
    pub fn of_dscp(&self, dscp: u8) -> u8 {
        self.by_dscp[usize::from(dscp.min(63))]
    }

    /// The priority of the Ethernet frame `bytes`.
    pub fn of(&self, bytes: &[u8]) -> u8 {
        let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let ethertype = u16::from_be_bytes([at(12), at(13)]);
        match ethertype {
            ethertype::VLAN => at(14) >> 5,
            ethertype::IPV4 => self.by_dscp[usize::from(at(15) >> 2)],
            // The traffic class straddles the first two bytes.
            ethertype::IPV6 => self.by_dscp[usize::from(((at(14) & 0x0f) << 2) | (at(15) >> 6))],
            _ => 0,
        }
        .min(PRIORITIES as u8 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(dscp: u8) -> Vec<u8> {
        let mut f = vec![0u8; 34];
        f[12..14].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        f[14] = 0x45;
        f[15] = (dscp << 2) | 2;
        f
    }

    #[test]
    fn roce_data_cnps_best_effort_and_tagged_frames_get_their_classes() {
        let map = PriorityMap::default();
        assert_eq!(map.of(&ipv4(26)), 3, "RoCE data");
        assert_eq!(map.of(&ipv4(48)), 6, "CNP");
        assert_eq!(map.of(&ipv4(0)), 0);
        let mut v6 = vec![0u8; 54];
        v6[12..14].copy_from_slice(&ethertype::IPV6.to_be_bytes());
        v6[14] = 0x60 | (26 >> 2);
        v6[15] = (26 & 3) << 6;
        assert_eq!(map.of(&v6), 3);
        let mut tagged = vec![0u8; 18];
        tagged[12..14].copy_from_slice(&ethertype::VLAN.to_be_bytes());
        tagged[14] = 5 << 5;
        assert_eq!(map.of(&tagged), 5, "the PCP");
        assert_eq!(map.of(&[0u8; 10]), 0, "a runt");
        let mut moved = map;
        moved.set(26, 5);
        assert_eq!((moved.of(&ipv4(26)), moved.of_dscp(26), moved.of(&ipv4(48))), (5, 5, 6));
    }
}
