//! What the control plane writes while packets flow: table entries and defaults, multicast
//! groups and clone sessions. Packet threads read one snapshot per frame without locking; an
//! edit copies the snapshot, changes the copy and swaps it in whole, so a frame sees either
//! every change of a command (or of a whole file) or none.

use std::collections::HashMap;

use super::table::TableState;

/// The control plane's state of one program.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    /// Each table's entries and default action, in program order.
    pub tables: Vec<TableState>,
    /// Multicast groups: (egress port, replication id) of each copy.
    pub groups: HashMap<u16, Vec<(u16, u16)>>,
    /// Clone sessions: the egress port of each.
    pub sessions: HashMap<u32, u16>,
}

impl ControlPlane {
    /// The state a program starts with: its `const entries` and default actions.
    pub fn of(program: &crate::ir::Program) -> ControlPlane {
        ControlPlane {
            tables: program.tables.iter().map(TableState::new).collect(),
            groups: HashMap::new(),
            sessions: HashMap::new(),
        }
    }
}
