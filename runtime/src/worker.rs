//! One worker: a thread with one event loop over the tasks it owns. It waits on one epoll for
//! every task's descriptors and its doorbell, keeps one timer heap for every task's deadline,
//! and runs each task when its input, its deadline or a wake comes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossbeam_channel::Receiver;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::clock::Clock;
use crate::hiccup::Hiccup;
use crate::mailbox::{Message, WorkerShared};
use crate::poll::PollMode;
use crate::sys::epoll::{Epoll, empty_event};
use crate::task::{Context, Task, TaskId};

/// The token of the doorbell in a worker's epoll (no task has this id).
const BELL: u64 = u64::MAX;

/// What one worker measured of itself over its life.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct WorkerStats {
    /// The worker's index.
    pub worker: usize,
    /// Tasks it ran.
    pub tasks: usize,
    /// Task runs in all.
    pub runs: u64,
    /// Task runs started by a deadline.
    pub timer_runs: u64,
    /// How late a deadline's run started after it (ns): median.
    pub timer_late_p50_ns: u64,
    /// Its 99th percentile (ns).
    pub timer_late_p99_ns: u64,
    /// The latest (ns).
    pub timer_late_max_ns: u64,
    /// Share of its life (since it was told to measure) spent running tasks; the rest it
    /// waited or polled.
    pub busy: f64,
    /// Deadlines whose run started [`HICCUP_NS`] or more late, as (deadline, lateness) in ns
    /// (at most [`MAX_HICCUPS_KEPT`]): when the worker lost its core, so everything it owns
    /// (ports, hosts) was held up at once.
    pub hiccups: Vec<(u64, u64)>,
}

/// A deadline run this late (ns) is a hiccup: the endpoints' stall threshold, several times
/// the usual wake-up lateness on the reference machine.
pub const HICCUP_NS: u64 = 250_000;

/// Hiccups a worker keeps the times of.
pub const MAX_HICCUPS_KEPT: usize = 100_000;

struct Slot {
    task: Box<dyn Task>,
    /// Bumped at every run: heap entries of an older generation are stale.
    generation: u64,
    woken: bool,
}

pub(crate) struct Worker {
    shared: Arc<WorkerShared>,
    rx: Receiver<Message>,
    poll: PollMode,
    clock: &'static Clock,
    epoll: Epoll,
    tasks: Vec<Option<Slot>>,
    /// (deadline, task, generation), earliest first.
    timers: BinaryHeap<Reverse<(u64, TaskId, u64)>>,
    woken: Vec<TaskId>,
    late: Histogram<u64>,
    hiccups: Vec<(u64, u64)>,
    runs: u64,
    timer_runs: u64,
    busy_ns: u64,
    /// Deadlines before this and runs started before it are not measured (lab ns).
    measure_from: u64,
    /// Since when it has run no task (lab ns), while it sleeps between runs.
    idle_start: Option<u64>,
    /// When epoll last told which descriptors have input (lab ns).
    polled_ns: u64,
}

impl Worker {
    pub(crate) fn new(shared: Arc<WorkerShared>, rx: Receiver<Message>, poll: PollMode) -> std::io::Result<Worker> {
        let epoll = Epoll::new()?;
        epoll.add(shared.bell.fd(), BELL)?;
        Ok(Worker {
            shared,
            rx,
            poll,
            clock: Clock::get(),
            epoll,
            tasks: Vec::new(),
            timers: BinaryHeap::new(),
            woken: Vec::new(),
            // Up to about 18 minutes late at 2 significant digits.
            late: Histogram::new_with_max(1 << 40, 2).map_err(std::io::Error::other)?,
            hiccups: Vec::new(),
            runs: 0,
            timer_runs: 0,
            busy_ns: 0,
            measure_from: 0,
            idle_start: None,
            polled_ns: 0,
        })
    }

    fn install(&mut self, id: TaskId, task: Box<dyn Task>) {
        for (fd, token) in task.sources() {
            if let Err(e) = self.epoll.add(fd, (id as u64) << 32 | u64::from(token)) {
                tracing::warn!(task = task.name(), fd, "descriptor not watched: {e}");
            }
        }
        if self.tasks.len() <= id {
            self.tasks.resize_with(id + 1, || None);
        }
        self.tasks[id] = Some(Slot {
            task,
            generation: 0,
            woken: false,
        });
        // Its first run: now.
        self.timers.push(Reverse((0, id, 0)));
    }

    /// Takes every message waiting; false once told to stop.
    fn mail(&mut self) -> bool {
        while let Ok(m) = self.rx.try_recv() {
            match m {
                Message::Install(id, task) => self.install(id, task),
                Message::Wake(id) => {
                    if let Some(Some(slot)) = self.tasks.get_mut(id)
                        && !slot.woken
                    {
                        slot.woken = true;
                        self.woken.push(id);
                    }
                }
                Message::MeasureFrom(t) => {
                    self.measure_from = t;
                    self.busy_ns = 0;
                }
                Message::Stop => return false,
            }
        }
        true
    }

    fn run_task(&mut self, id: TaskId, ready: &[u32], deadline: Option<u64>, woken: bool) {
        let Some(Some(slot)) = self.tasks.get_mut(id) else {
            return;
        };
        let start = self.clock.now_ns();
        self.idle_start = None;
        slot.woken = false;
        let mut cx = Context {
            clock: self.clock,
            ready,
            deadline,
            woken,
            polled_ns: self.polled_ns,
            hiccup: &self.shared.hiccup,
        };
        let next = slot.task.run(&mut cx);
        slot.generation += 1;
        if let Some(d) = next {
            self.timers.push(Reverse((d, id, slot.generation)));
        }
        self.runs += 1;
        let took = self.clock.now_ns().saturating_sub(start);
        if start >= self.measure_from {
            self.busy_ns += took;
        }
        // A task's run is short (microseconds); one that lasted a hiccup lost its core while
        // running, and what it sent before that left late (a sender's packets, stamped when
        // built, sent when the run flushes them).
        self.note_hiccup(start, took);
    }

    /// Keeps `(at, late)` when it is a hiccup (see [`HICCUP_NS`]) after measuring began.
    /// Every hiccup, measured or not, is the runtime's latest when it is (see [`Hiccup`]).
    fn note_hiccup(&mut self, at: u64, late: u64) {
        if late < HICCUP_NS {
            return;
        }
        self.shared.hiccup.record(Hiccup {
            start_ns: at,
            end_ns: at + late,
        });
        if at >= self.measure_from && self.hiccups.len() < MAX_HICCUPS_KEPT {
            self.hiccups.push((at, late));
        }
    }

    /// The next live deadline, stale heap entries dropped.
    fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse((d, id, generation))) = self.timers.peek() {
            match self.tasks.get(id) {
                Some(Some(slot)) if slot.generation == generation => return Some(d),
                _ => {
                    self.timers.pop();
                }
            }
        }
        None
    }

    pub(crate) fn run(mut self) -> WorkerStats {
        let born = self.clock.now_ns();
        let mut events = vec![empty_event(); 256];
        let mut ready: Vec<(TaskId, u32)> = Vec::with_capacity(256);
        let mut tokens: Vec<u32> = Vec::with_capacity(256);
        loop {
            if !self.mail() {
                break;
            }
            while let Some(id) = self.woken.pop() {
                self.run_task(id, &[], None, true);
            }
            let mut now = self.clock.now_ns();
            while let Some(d) = self.next_deadline().filter(|&d| d <= now) {
                let Some(Reverse((_, id, _))) = self.timers.pop() else {
                    break;
                };
                let late = now - d;
                if d > 0 && d >= self.measure_from {
                    self.timer_runs += 1;
                    let _counted = self.late.record(late.min(self.late.high()));
                    self.note_hiccup(d, late);
                }
                // Deadline 0 is a task's first run on install, which nothing scheduled.
                self.run_task(id, &[], (d > 0).then_some(d), false);
                now = self.clock.now_ns();
            }
            let mut timeout = self.poll.timeout(now, self.next_deadline());
            self.shared.sleeping.store(true, Ordering::SeqCst);
            if !self.rx.is_empty() {
                timeout = 0;
            }
            let idle_since = if timeout > 0 {
                *self.idle_start.get_or_insert(now)
            } else {
                u64::MAX
            };
            self.shared.idle_since.store(idle_since, Ordering::Relaxed);
            let n = match self.epoll.wait(&mut events, Some(timeout)) {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(worker = self.shared.index, "epoll failed: {e}");
                    0
                }
            };
            self.polled_ns = self.clock.now_ns();
            // A wait that overslept by a hiccup: the worker had no core when it was due (input
            // may have come meanwhile, and been as late to be read).
            let due = now + timeout;
            self.note_hiccup(due, self.polled_ns.saturating_sub(due));
            self.shared.idle_since.store(u64::MAX, Ordering::Relaxed);
            self.shared.sleeping.store(false, Ordering::SeqCst);
            ready.clear();
            for ev in &events[..n] {
                let token = ev.u64;
                if token == BELL {
                    self.shared.bell.drain();
                } else {
                    ready.push(((token >> 32) as TaskId, token as u32));
                }
            }
            ready.sort_unstable();
            let mut i = 0;
            while i < ready.len() {
                let id = ready[i].0;
                tokens.clear();
                while i < ready.len() && ready[i].0 == id {
                    tokens.push(ready[i].1);
                    i += 1;
                }
                let t = std::mem::take(&mut tokens);
                self.run_task(id, &t, None, false);
                tokens = t;
            }
        }
        let life = self.clock.now_ns().saturating_sub(born.max(self.measure_from)).max(1);
        let mut installed = 0;
        for slot in self.tasks.iter_mut().flatten() {
            slot.task.stop();
            installed += 1;
        }
        WorkerStats {
            worker: self.shared.index,
            tasks: installed,
            runs: self.runs,
            timer_runs: self.timer_runs,
            timer_late_p50_ns: self.late.value_at_quantile(0.5),
            timer_late_p99_ns: self.late.value_at_quantile(0.99),
            timer_late_max_ns: self.late.max(),
            busy: self.busy_ns as f64 / life as f64,
            hiccups: self.hiccups,
        }
    }
}
