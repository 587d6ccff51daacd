//! The ingress pipeline in P4 terms: parse, then match-action tables decide the egress port.
//! Egress processing (INT transit, ECN) happens at dequeue, in [`crate::egress`].

mod arp;
mod ingress;
mod tables;

pub use ingress::{IngressNotes, Pipeline, Verdict};
pub use tables::{FlowKey, Lpm, MacTable};
