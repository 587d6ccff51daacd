//! `events:` what a run does to its network at given scenario times: links (or every link of
//! a switch) going down and coming up, link keys set anew.

use serde_saphyr::Spanned;

use super::raw::RawEvent;
use crate::topology::{LinkKeys, Topology};

/// A change the run makes to the network.
#[derive(Debug, Clone)]
pub struct ScenarioEvent {
    /// When, from the start of the workload (scenario ns).
    pub at_ns: u64,
    /// What.
    pub action: EventAction,
}

/// What an event does.
#[derive(Debug, Clone)]
pub enum EventAction {
    /// Takes a link, or every link of a switch, down.
    Down(String),
    /// Brings a link, or every link of a switch, up.
    Up(String),
    /// Sets keys on a link.
    Set {
        /// The link.
        link: String,
        /// The keys (boxed: they are many, the other actions small).
        keys: Box<LinkKeys>,
    },
}

/// Checks `events:` against `topology`, each refusal with `events[i]` and where (`err` makes
/// the error at a position); returns them in time order.
pub(super) fn check<E>(
    raw: &[Spanned<RawEvent>],
    topology: &Topology,
    err: impl Fn(&serde_saphyr::Location, String) -> E,
) -> Result<Vec<ScenarioEvent>, E> {
    let mut events = Vec::new();
    for (i, e) in raw.iter().enumerate() {
        let at = &e.referenced;
        let v = &e.value;
        let action = match (&v.down, &v.up, &v.set) {
            (Some(t), None, None) | (None, Some(t), None) => {
                if let Some(k) = &v.keys {
                    return Err(err(
                        &k.referenced,
                        format!("events[{i}]: `keys` go with `set`, not down or up"),
                    ));
                }
                topology
                    .links_named(&t.value, true)
                    .map_err(|m| err(&t.referenced, format!("events[{i}]: {m}")))?;
                match v.down.is_some() {
                    true => EventAction::Down(t.value.clone()),
                    false => EventAction::Up(t.value.clone()),
                }
            }
            (None, None, Some(l)) => {
                let li = topology
                    .links_named(&l.value, false)
                    .map_err(|m| err(&l.referenced, format!("events[{i}]: {m}")))?[0];
                let keys = v.keys.as_ref().ok_or_else(|| {
                    err(
                        at,
                        format!("events[{i}]: `set` needs `keys: {{...}}`, e.g. keys: {{ delay: 50us }}"),
                    )
                })?;
                keys.value
                    .apply(&topology.links[li].props, topology.link_ends(li))
                    .map_err(|m| err(&keys.referenced, format!("events[{i}]: {}: {m}", l.value)))?;
                EventAction::Set {
                    link: l.value.clone(),
                    keys: Box::new(keys.value.clone()),
                }
            }
            _ => {
                return Err(err(
                    at,
                    format!("events[{i}]: expected one of `down: LINK`, `up: LINK` or `set: LINK` with `keys:`"),
                ));
            }
        };
        events.push(ScenarioEvent {
            at_ns: v.at.value.0,
            action,
        });
    }
    events.sort_by_key(|e| e.at_ns);
    Ok(events)
}
