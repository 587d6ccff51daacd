//! What the control plane writes while packets flow: table entries and defaults, action
//! profile members and groups, multicast groups, clone sessions and parser value sets.
//! Packet threads read one snapshot per frame without locking; an edit changes a copy packets
//! do not read and swaps it in whole (see `Datapath::edit`), so a frame sees either every
//! change of a command (or of a whole file) or none.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arc_swap::ArcSwap;
use arc_swap::cache::Cache;

use super::table::{Journal, TableState};
use crate::ir::KeySet;

/// Where a clone session sends its copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Session {
    /// To this port.
    pub port: Option<u16>,
    /// To the ports of this multicast group.
    pub group: Option<u16>,
    /// The replica instance a P4Runtime client gave its one copy (read back as written).
    pub rid: u16,
}

/// A node of the packet replication engine: a replication id and the ports it copies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McNode {
    /// The replication id its copies carry.
    pub rid: u16,
    /// Its ports.
    pub ports: Vec<u16>,
}

/// The members and groups of an action profile or selector.
#[derive(Debug, Clone, Default)]
pub struct ProfileState {
    /// Members by handle: an action (its index in the program) and its arguments.
    pub members: BTreeMap<u32, (usize, Vec<u128>)>,
    /// Groups by handle: their members' handles.
    pub groups: BTreeMap<u32, Vec<u32>>,
}

/// The control plane's state of one program.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    /// Each table's entries and default action, in program order.
    pub tables: Vec<TableState>,
    /// Multicast groups: (egress port, replication id) of each copy, as packets read them
    /// (made from `mc_groups` and `mc_nodes` by [`ControlPlane::rebuild_groups`]).
    pub groups: HashMap<u16, Vec<(u16, u16)>>,
    /// Multicast groups: their nodes' handles, in the order associated.
    pub mc_groups: BTreeMap<u16, Vec<u32>>,
    /// Multicast nodes by handle.
    pub mc_nodes: BTreeMap<u32, McNode>,
    /// Clone sessions.
    pub sessions: HashMap<u32, Session>,
    /// Action profiles and selectors, in program order.
    pub profiles: Vec<ProfileState>,
    /// Each value set's members (one key set per field).
    pub value_sets: Vec<Vec<Vec<KeySet>>>,
    /// The egress queues' packet rates and depths (`set_queue_rate`, `set_queue_depth`).
    pub queues: QueueSettings,
}

/// What `set_queue_rate` and `set_queue_depth` set, by (port, priority); `None` stands for
/// every port, or every priority. The most specific setting applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSettings {
    /// Packets per second.
    pub rates: BTreeMap<(Option<u16>, Option<u8>), u64>,
    /// Packets.
    pub depths: BTreeMap<(Option<u16>, Option<u8>), u64>,
}

impl QueueSettings {
    /// The rate of priority `priority` of port `port`, if one was set.
    pub fn rate(&self, port: u16, priority: u8) -> Option<u64> {
        most_specific(&self.rates, port, priority)
    }

    /// The depth of priority `priority` of port `port`, if one was set.
    pub fn depth(&self, port: u16, priority: u8) -> Option<u64> {
        most_specific(&self.depths, port, priority)
    }
}

fn most_specific(m: &BTreeMap<(Option<u16>, Option<u8>), u64>, port: u16, priority: u8) -> Option<u64> {
    [
        (Some(port), Some(priority)),
        (Some(port), None),
        (None, Some(priority)),
        (None, None),
    ]
    .iter()
    .find_map(|k| m.get(k).copied())
}

impl ControlPlane {
    /// The state a program starts with: its entries and default actions.
    pub fn of(program: &crate::ir::Program) -> ControlPlane {
        ControlPlane {
            tables: program.tables.iter().map(TableState::new).collect(),
            groups: HashMap::new(),
            mc_groups: BTreeMap::new(),
            mc_nodes: BTreeMap::new(),
            sessions: HashMap::new(),
            profiles: vec![ProfileState::default(); program.profiles.len()],
            value_sets: vec![Vec::new(); program.value_sets.len()],
            queues: QueueSettings::default(),
        }
    }

    /// Sets group `g` to `replicas` (port, replication id), one node a replica (as a runtime
    /// file's `multicast_group_entries` give them).
    pub fn set_group(&mut self, g: u16, replicas: &[(u16, u16)]) {
        let mut nodes = Vec::new();
        for &(port, rid) in replicas {
            let h = free_handle(&self.mc_nodes);
            self.mc_nodes.insert(h, McNode { rid, ports: vec![port] });
            nodes.push(h);
        }
        if let Some(old) = self.mc_groups.insert(g, nodes) {
            for h in old {
                self.mc_nodes.remove(&h);
            }
        }
        self.rebuild_groups();
    }

    /// Makes this copy what `live` is, where their tables differ in no slot but `journals`'
    /// (one a table, from the copies `Datapath::edit` keeps). The rest is small and copied whole.
    pub(crate) fn follow(&mut self, live: &ControlPlane, journals: &[Journal]) {
        for ((mine, theirs), journal) in self.tables.iter_mut().zip(&live.tables).zip(journals) {
            mine.follow(theirs, journal);
        }
        self.groups.clone_from(&live.groups);
        self.mc_groups.clone_from(&live.mc_groups);
        self.mc_nodes.clone_from(&live.mc_nodes);
        self.sessions.clone_from(&live.sessions);
        self.profiles.clone_from(&live.profiles);
        self.value_sets.clone_from(&live.value_sets);
        self.queues.clone_from(&live.queues);
    }

    /// Makes `groups` (what packets read) again from the groups' nodes.
    pub fn rebuild_groups(&mut self) {
        self.groups = self
            .mc_groups
            .iter()
            .map(|(g, nodes)| {
                let copies = nodes
                    .iter()
                    .filter_map(|n| self.mc_nodes.get(n))
                    .flat_map(|n| n.ports.iter().map(move |&p| (p, n.rid)))
                    .collect();
                (*g, copies)
            })
            .collect();
    }
}

/// The lowest handle not in `used`.
pub fn free_handle<V>(used: &BTreeMap<u32, V>) -> u32 {
    let mut h = 0;
    for k in used.keys() {
        if *k != h {
            break;
        }
        h += 1;
    }
    h
}

/// The control plane as it is shared: swapped whole by an edit.
pub(crate) type SharedControl = Arc<ArcSwap<ControlPlane>>;

/// A packet thread's reference to the current control plane. Reading it costs one atomic
/// load; `ArcSwap::load` costs a locked read-modify-write on the way in and out, a tenth of a
/// small program's time per frame.
#[derive(Default)]
pub(crate) struct ControlView(Option<Cache<SharedControl, Arc<ControlPlane>>>);

impl ControlView {
    /// Takes the cache out (so that the snapshot can be borrowed while the packet state is
    /// written), renewed if it was made for another datapath.
    pub(crate) fn take(&mut self, shared: &SharedControl) -> Cache<SharedControl, Arc<ControlPlane>> {
        match self.0.take() {
            Some(cache) if std::ptr::eq(cache.arc_swap(), Arc::as_ptr(shared)) => cache,
            _ => Cache::new(Arc::clone(shared)),
        }
    }

    /// Puts back what [`ControlView::take`] took.
    pub(crate) fn put(&mut self, cache: Cache<SharedControl, Arc<ControlPlane>>) {
        self.0 = Some(cache);
    }
}

impl Clone for ControlView {
    /// A copy of a packet's state makes its own view when it runs.
    fn clone(&self) -> ControlView {
        ControlView(None)
    }
}

impl std::fmt::Debug for ControlView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlView")
    }
}
