//! The ingress pipeline in P4 terms: parse, then match-action tables decide the egress port;
//! or a P4 program ([`P4Pipeline`]) in its place.
//! Egress processing (INT transit, ECN) happens at dequeue, in [`crate::egress`].

mod arp;
mod ingress;
mod p4;
mod tables;

pub use ingress::{IngressNotes, Pipeline, Verdict};
pub use p4::{
    CPU_PORT_NAME, P4Egress, P4Ingress, P4LoadError, P4Pipeline, P4Scratch, P4Verdict, cpu_port_spec, load_datapath,
    replica_state,
};
pub use tables::{FlowKey, Lpm, MacTable};
