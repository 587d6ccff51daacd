//! Memory regions: what a program registered, with its access rights, found by key. A local key
//! gives the NIC the right to read (and, with local write, to write) the region for the QPs of
//! its protection domain; a remote key gives the far end of such a QP the rights the region
//! allows.

use std::collections::HashMap;

use super::memory::Backing;

/// Access rights of a memory region or QP (`enum ibv_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access(pub u32);

impl Access {
    /// The NIC may write the region (receives, READ results, atomic results).
    pub const LOCAL_WRITE: u32 = 1;
    /// Remote RDMA WRITEs may land in it.
    pub const REMOTE_WRITE: u32 = 1 << 1;
    /// Remote RDMA READs may read it.
    pub const REMOTE_READ: u32 = 1 << 2;
    /// Remote atomics may operate on it.
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    /// Remote addresses are offsets from the region's start.
    pub const ZERO_BASED: u32 = 1 << 5;
    /// Rights this device implements; memory windows, on-demand paging and the rest are refused.
    pub const SUPPORTED: u32 =
        Self::LOCAL_WRITE | Self::REMOTE_WRITE | Self::REMOTE_READ | Self::REMOTE_ATOMIC | Self::ZERO_BASED | (1 << 20);

    /// True when every bit of `bits` is set.
    pub fn allows(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
}

/// A registered memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRegion {
    /// The context that registered it.
    pub context: usize,
    /// Its protection domain.
    pub pd: u32,
    /// Start address.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
    /// Rights.
    pub access: Access,
    /// Its key (local and remote are the same number here, as in SoftRoCE).
    pub key: u32,
    /// Where its bytes are.
    pub backing: Backing,
}

/// Why a key did not give access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFault {
    /// No region has that key, or it is another domain's.
    NoRegion,
    /// The region does not allow that access.
    Rights,
    /// The bytes asked for are outside the region.
    Range,
}

/// Every memory region of a NIC, by key.
#[derive(Debug, Default)]
pub struct MrTable {
    by_key: HashMap<u32, MemoryRegion>,
    next: u32,
}

impl MrTable {
    /// Registers `mr` under a fresh key (its `key` field is overwritten) and returns the key.
    /// Keys have their high bit set (the lab's own flows key their regions by flow id, below
    /// 2^24) and are not reused soon: a stale key finds nothing.
    pub fn register(&mut self, mut mr: MemoryRegion) -> u32 {
        loop {
            self.next = self.next.wrapping_add(0x101);
            let key = self.next | 0x8000_0000;
            if key != 0 && !self.by_key.contains_key(&key) {
                mr.key = key;
                self.by_key.insert(key, mr);
                return key;
            }
        }
    }

    /// Registers `mr` under its own `key` (the lab's flows use their id); false when taken.
    pub fn register_with_key(&mut self, mr: MemoryRegion) -> bool {
        if self.by_key.contains_key(&mr.key) {
            return false;
        }
        self.by_key.insert(mr.key, mr);
        true
    }

    /// Removes the region of `key`.
    pub fn deregister(&mut self, key: u32) -> Option<MemoryRegion> {
        self.by_key.remove(&key)
    }

    /// The region of `key`.
    pub fn get(&self, key: u32) -> Option<&MemoryRegion> {
        self.by_key.get(&key)
    }

    /// Regions whose context `f` accepts.
    pub fn count_where(&self, f: impl Fn(usize) -> bool) -> usize {
        self.by_key.values().filter(|m| f(m.context)).count()
    }

    /// Removes every region of `context`.
    pub fn remove_context(&mut self, context: usize) {
        self.by_key.retain(|_, mr| mr.context != context);
    }

    /// True when any region of `pd` remains.
    pub fn uses_pd(&self, pd: u32) -> bool {
        self.by_key.values().any(|mr| mr.pd == pd)
    }

    /// The region a local access of `len` bytes at `addr` with key `lkey` by a QP of `pd`
    /// goes through (`write`: the NIC writes it).
    pub fn local(&self, lkey: u32, pd: u32, addr: u64, len: u64, write: bool) -> Result<&MemoryRegion, KeyFault> {
        let mr = self
            .by_key
            .get(&lkey)
            .filter(|mr| mr.pd == pd)
            .ok_or(KeyFault::NoRegion)?;
        if write && !mr.access.allows(Access::LOCAL_WRITE) {
            return Err(KeyFault::Rights);
        }
        in_range(mr, addr, len)?;
        Ok(mr)
    }

    /// The region a remote access of `len` bytes at `addr` with key `rkey` to a QP of `pd`
    /// needing `rights` goes through, and the address in its backing (zero-based regions take
    /// offsets).
    pub fn remote(
        &self,
        rkey: u32,
        pd: u32,
        addr: u64,
        len: u64,
        rights: u32,
    ) -> Result<(MemoryRegion, u64), KeyFault> {
        let mr = self
            .by_key
            .get(&rkey)
            .filter(|mr| mr.pd == pd)
            .ok_or(KeyFault::NoRegion)?;
        if !mr.access.allows(rights) {
            return Err(KeyFault::Rights);
        }
        let at = if mr.access.allows(Access::ZERO_BASED) {
            mr.addr.checked_add(addr).ok_or(KeyFault::Range)?
        } else {
            addr
        };
        in_range(mr, at, len)?;
        Ok((*mr, at))
    }

    /// Regions registered.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

fn in_range(mr: &MemoryRegion, addr: u64, len: u64) -> Result<(), KeyFault> {
    let end = addr.checked_add(len).ok_or(KeyFault::Range)?;
    if addr < mr.addr || end > mr.addr.saturating_add(mr.len) {
        return Err(KeyFault::Range);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(access: u32) -> MemoryRegion {
        MemoryRegion {
            context: 1,
            pd: 3,
            addr: 0x1000,
            len: 0x100,
            access: Access(access),
            key: 0,
            backing: Backing::Context(1),
        }
    }

    #[test]
    fn keys_check_domain_rights_and_range() {
        let mut t = MrTable::default();
        let k = t.register(region(Access::LOCAL_WRITE | Access::REMOTE_READ));
        assert!(t.local(k, 3, 0x1000, 0x100, true).is_ok());
        assert_eq!(
            t.local(k, 4, 0x1000, 1, false),
            Err(KeyFault::NoRegion),
            "another domain"
        );
        assert_eq!(t.local(k, 3, 0x10ff, 2, false), Err(KeyFault::Range));
        assert!(t.remote(k, 3, 0x1010, 8, Access::REMOTE_READ).is_ok());
        assert_eq!(
            t.remote(k, 3, 0x1010, 8, Access::REMOTE_WRITE).map(|_| ()),
            Err(KeyFault::Rights)
        );
        assert_eq!(
            t.remote(k, 3, u64::MAX, 8, Access::REMOTE_READ).map(|_| ()),
            Err(KeyFault::Range)
        );
        let k2 = t.register(region(0));
        assert_ne!(k, k2);
        assert_eq!(t.local(k2, 3, 0x1000, 1, true), Err(KeyFault::Rights), "no local write");
        t.deregister(k);
        assert_eq!(
            t.local(k, 3, 0x1000, 1, false),
            Err(KeyFault::NoRegion),
            "a stale key finds nothing"
        );
    }

    #[test]
    fn a_zero_based_region_takes_offsets() {
        let mut t = MrTable::default();
        let k = t.register(region(Access::REMOTE_WRITE | Access::ZERO_BASED));
        assert_eq!(
            t.remote(k, 3, 0x10, 8, Access::REMOTE_WRITE).map(|(_, a)| a),
            Ok(0x1010)
        );
        assert_eq!(
            t.remote(k, 3, 0xf9, 8, Access::REMOTE_WRITE).map(|_| ()),
            Err(KeyFault::Range)
        );
    }
}
