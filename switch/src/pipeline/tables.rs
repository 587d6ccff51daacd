//! Match-action tables: exact destination MAC, longest-prefix IPv4, and ECMP by 5-tuple hash.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use int_format::ethernet::MacAddress;

use crate::config::{NextHop, Route};

/// Exact match on the destination MAC.
#[derive(Debug, Clone, Default)]
pub struct MacTable {
    entries: HashMap<MacAddress, usize>,
}

impl MacTable {
    /// A table from (MAC, port) pairs.
    pub fn new(entries: &[(MacAddress, usize)]) -> MacTable {
        MacTable {
            entries: entries.iter().copied().collect(),
        }
    }

    /// The port for `mac`.
    pub fn lookup(&self, mac: &MacAddress) -> Option<usize> {
        self.entries.get(mac).copied()
    }
}

/// The fields ECMP hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// IP protocol.
    pub protocol: u8,
    /// Source port (0 when not TCP/UDP).
    pub src_port: u16,
    /// Destination port (0 when not TCP/UDP).
    pub dst_port: u16,
}

impl FlowKey {
    /// A well-mixed 64-bit hash of the key under `seed` (splitmix64 finalizer).
    pub fn hash(&self, seed: u64) -> u64 {
        let mut x = seed
            ^ (u64::from(u32::from(self.src)) << 32 | u64::from(u32::from(self.dst)))
            ^ (u64::from(self.protocol) << 32 | u64::from(self.src_port) << 16 | u64::from(self.dst_port))
                .rotate_left(17);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }
}

/// Longest-prefix match on IPv4 destinations, one hash table per prefix length.
#[derive(Debug, Clone, Default)]
pub struct Lpm {
    /// (prefix length, network → next hop), longest first.
    by_len: Vec<(u8, HashMap<u32, NextHop>)>,
}

impl Lpm {
    /// A table from routes; a later route for the same prefix replaces an earlier one.
    pub fn new(routes: &[Route]) -> Lpm {
        let mut by_len: Vec<(u8, HashMap<u32, NextHop>)> = Vec::new();
        for r in routes {
            let net = u32::from(r.prefix) & mask(r.len);
            match by_len.iter_mut().find(|(l, _)| *l == r.len) {
                Some((_, t)) => {
                    t.insert(net, r.next.clone());
                }
                None => by_len.push((r.len, HashMap::from([(net, r.next.clone())]))),
            }
        }
        by_len.sort_by_key(|(len, _)| std::cmp::Reverse(*len));
        Lpm { by_len }
    }

    /// The next hop of the longest prefix containing `dst`.
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<&NextHop> {
        let d = u32::from(dst);
        self.by_len.iter().find_map(|(len, t)| t.get(&(d & mask(*len))))
    }

    /// The egress port for `key`: the route's port, or an ECMP member chosen by hash among
    /// those `up` says are up. A flow whose member is up stays on it; one whose member is down
    /// is spread over the others, as a group that drops a dead member at once does. A single
    /// next hop is returned up or down (its port drops what it cannot send).
    pub fn select(&self, key: &FlowKey, seed: u64, up: impl Fn(usize) -> bool) -> Option<usize> {
        match self.lookup(key.dst)? {
            NextHop::Port(p) => Some(*p),
            NextHop::Ecmp(members) => {
                let h = key.hash(seed);
                let chosen = members[(h % members.len() as u64) as usize];
                if up(chosen) {
                    return Some(chosen);
                }
                let live = members.iter().filter(|&&m| up(m)).count() as u64;
                match live {
                    0 => Some(chosen),
                    _ => members
                        .iter()
                        .copied()
                        .filter(|&m| up(m))
                        .nth(((h >> 32) % live) as usize),
                }
            }
        }
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RoCE flow's key from `sport`.
    fn key(sport: u16) -> FlowKey {
        FlowKey {
            src: "198.18.0.1".parse().unwrap(),
            dst: "198.18.1.1".parse().unwrap(),
            protocol: 17,
            src_port: sport,
            dst_port: 4791,
        }
    }

    fn route(p: &str, len: u8, next: NextHop) -> Route {
        Route {
            prefix: p.parse().unwrap(),
            len,
            next,
        }
    }

    #[test]
    fn longest_prefix_wins() {
        let t = Lpm::new(&[
            route("0.0.0.0", 0, NextHop::Port(9)),
            route("198.18.0.0", 15, NextHop::Port(1)),
            route("198.18.0.2", 32, NextHop::Port(2)),
        ]);
        assert_eq!(t.lookup("198.18.0.2".parse().unwrap()), Some(&NextHop::Port(2)));
        assert_eq!(t.lookup("198.19.3.4".parse().unwrap()), Some(&NextHop::Port(1)));
        assert_eq!(t.lookup("10.0.0.1".parse().unwrap()), Some(&NextHop::Port(9)));
    }

    #[test]
    fn ecmp_spreads_source_ports_and_keeps_a_flow_on_one_path() {
        let t = Lpm::new(&[route("198.18.0.0", 16, NextHop::Ecmp(vec![3, 4, 5, 6]))]);
        let mut hits = [0usize; 7];
        for sport in 49152..49152 + 4000 {
            hits[t.select(&key(sport), 1, |_| true).unwrap()] += 1;
        }
        for (port, &n) in hits.iter().enumerate().skip(3) {
            assert!((800..1200).contains(&n), "port {port} got {n} of 4000 flows");
        }
        assert_eq!(t.select(&key(50000), 1, |_| true), t.select(&key(50000), 1, |_| true));
    }

    #[test]
    fn a_dead_member_loses_only_its_own_flows_and_they_spread_over_the_rest() {
        let t = Lpm::new(&[route("198.18.0.0", 16, NextHop::Ecmp(vec![3, 4, 5, 6]))]);
        let mut moved = [0usize; 7];
        for sport in 49152..49152 + 4000 {
            let before = t.select(&key(sport), 1, |_| true).unwrap();
            let after = t.select(&key(sport), 1, |p| p != 4).unwrap();
            assert_ne!(after, 4, "a flow went to the dead member");
            if before != 4 {
                assert_eq!(before, after, "a flow on a live member moved");
            } else {
                moved[after] += 1;
            }
        }
        // About 1,000 flows were on port 4: a third each to the others.
        for p in [3, 5, 6] {
            assert!(
                (250..420).contains(&moved[p]),
                "port {p} took {} of port 4's flows",
                moved[p]
            );
        }
        assert_eq!(
            t.select(&key(50000), 1, |_| false),
            t.select(&key(50000), 1, |_| true),
            "none up: as it was"
        );
    }
}
