//! A change to a port's link while the switch runs: its rate, delay, buffer, ECN marking or
//! impairments set anew, or the link taken down or brought up (`intlab link`, a scenario's
//! `events:`). The worker that owns the port applies it at its next run.

use crate::config::EcnSpec;
use crate::impair::ImpairmentSpec;
use crate::units::{Bytes, Nanos, Rate};

/// What changes on one port's link (`None`: stays as it is).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkChange {
    /// The line rate, from the next frame the port starts sending.
    pub rate: Option<Rate>,
    /// The one-way delay, for frames that start from now on (those on the link keep theirs).
    pub delay: Option<Nanos>,
    /// The port's own buffer (refused on a switch with a shared buffer).
    pub buffer: Option<Bytes>,
    /// ECN marking (`Some(None)`: off).
    pub ecn: Option<Option<EcnSpec>>,
    /// What the link does to the frames the port sends, replacing what it did.
    pub impair: Option<ImpairmentSpec>,
    /// What a host's link does to the frames the host sends the port, replacing what it did.
    pub impair_inbound: Option<ImpairmentSpec>,
    /// Up (true) or down (false). A link that goes down loses the frames on it and every frame
    /// queued for it or arriving over it until it comes up, each counted as `link_down`.
    pub up: Option<bool>,
}

impl LinkChange {
    /// Takes the link down.
    pub fn down() -> LinkChange {
        LinkChange {
            up: Some(false),
            ..LinkChange::default()
        }
    }

    /// Brings the link up.
    pub fn up() -> LinkChange {
        LinkChange {
            up: Some(true),
            ..LinkChange::default()
        }
    }
}
