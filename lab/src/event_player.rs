//! Plays a scenario's `events:` on a running lab: each is handed to the switches a little
//! before its time, with that time, and they make it on their own schedule, as exactly as
//! they send frames. A thread of its own sleeps in between; it may wait for a core for
//! milliseconds when the lab's workers are busy, which [`LEAD`] covers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use intlab_runtime::clock::Clock;

use crate::dilation::Dilation;
use crate::lab_links::LabLinks;
use crate::scenario::{EventAction, ScenarioEvent};

/// The longest sleep between looks at the stop flag.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// How long before its time an event is handed to the switches (real ns).
pub const LEAD_NS: u64 = 50_000_000;

/// Events being played; stops when dropped.
#[derive(Debug)]
pub struct EventPlayer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EventPlayer {
    /// Plays `events` on `links`, each at lab time `t0_ns` plus its time dilated by `d`.
    pub fn start(
        links: Arc<LabLinks>,
        events: Vec<ScenarioEvent>,
        t0_ns: u64,
        d: Dilation,
    ) -> std::io::Result<EventPlayer> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("events".into()).spawn(move || {
            let clock = Clock::get();
            for e in events {
                let due = t0_ns + d.lab_ns(e.at_ns);
                loop {
                    if stopped.load(Ordering::Relaxed) {
                        return;
                    }
                    let now = clock.now_ns();
                    if now + LEAD_NS >= due {
                        break;
                    }
                    std::thread::sleep(Duration::from_nanos(due - LEAD_NS - now).min(LOOK_EVERY));
                }
                let done = match &e.action {
                    EventAction::Down(target) => links.set_up(target, false, Some(due)),
                    EventAction::Up(target) => links.set_up(target, true, Some(due)),
                    EventAction::Set { link, keys } => links.set(link, keys, Some(due)),
                };
                // Checked against the topology when the scenario loaded: a refusal here is a
                // switch's, which the results' events then lack.
                match done {
                    Ok(what) => tracing::info!(at_ns = e.at_ns, "event: {what}"),
                    Err(err) => tracing::error!(at_ns = e.at_ns, "event refused: {err}"),
                }
            }
        })?;
        Ok(EventPlayer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EventPlayer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the events thread panicked");
        }
    }
}
