//! A set of workers, one thread each, whatever the size of the lab: tasks are placed on them
//! and run until the runtime stops.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use crate::hiccup::LatestHiccup;
use crate::mailbox::{Message, Waker, WorkerShared};
use crate::poll::PollMode;
use crate::sys::eventfd::Doorbell;
use crate::task::Task;
use crate::worker::{Worker, WorkerStats};

/// How to run.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Worker threads (default: the machine's cores).
    pub workers: usize,
    /// How workers wait.
    pub poll: PollMode,
    /// Names the threads (`NAME-w0`, ...).
    pub name: String,
}

impl RuntimeConfig {
    /// One worker per core, adaptive polling.
    pub fn new(name: &str) -> RuntimeConfig {
        RuntimeConfig {
            workers: cores(),
            poll: PollMode::default(),
            name: name.to_owned(),
        }
    }
}

/// The machine's cores (those this process may run on).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPU each of `workers` workers is bound to: one each while there are enough, none when
/// there are more workers than CPUs (the scheduler shares them out).
///
/// Unbound, a worker polling for a deadline lost its core for 150-250 us at a time with no
/// other task of the lab running, most likely because the scheduler moves a worker woken by
/// the other (a frame handed over) next to its waker, so both share one core while the other
/// idles. On a PFC incast (testbed/tests/pfc.rs) at dilation 20 that held switch releases 12 %
/// of an RTT late at p99 in every run; bound, 1.1-2.0 %.
fn placement(workers: usize) -> io::Result<Vec<usize>> {
    let cpus = crate::sys::thread::allowed_cpus()?;
    if workers > cpus.len() {
        tracing::debug!(workers, cpus = cpus.len(), "more workers than CPUs: none bound");
        return Ok(Vec::new());
    }
    Ok(cpus)
}

struct WorkerHandle {
    shared: Arc<WorkerShared>,
    thread: Option<JoinHandle<WorkerStats>>,
    next_id: AtomicUsize,
}

/// Running workers. Dropping it stops them.
pub struct Runtime {
    workers: Vec<WorkerHandle>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Runtime({} workers)", self.workers.len())
    }
}

/// A task's place, reserved before the task exists (so tasks can hold each other's wakers).
#[derive(Debug, Clone)]
pub struct Reservation {
    waker: Waker,
}

impl Reservation {
    /// The waker of the task that will take this place.
    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// The worker it is on.
    pub fn worker(&self) -> usize {
        self.waker.worker()
    }
}

impl Runtime {
    /// Starts `cfg.workers` workers (at least one), each waiting for tasks.
    pub fn start(cfg: &RuntimeConfig) -> io::Result<Runtime> {
        let count = cfg.workers.max(1);
        let cpus = placement(count)?;
        let mut workers = Vec::new();
        let hiccup = Arc::new(LatestHiccup::default());
        for index in 0..count {
            let (tx, rx) = crossbeam_channel::unbounded();
            let shared = Arc::new(WorkerShared::new(index, tx, Doorbell::new()?, hiccup.clone()));
            let worker = Worker::new(shared.clone(), rx, cfg.poll)?;
            let cpu = cpus.get(index).copied();
            let thread = std::thread::Builder::new()
                .name(format!("{}-w{index}", cfg.name))
                .spawn(move || {
                    if let Err(e) = crate::sys::thread::precise_timers() {
                        tracing::warn!("worker {index}: timer slack stays at the default: {e}");
                    }
                    if let Some(cpu) = cpu
                        && let Err(e) = crate::sys::thread::pin_to(cpu)
                    {
                        tracing::warn!("worker {index}: not bound to CPU {cpu}, the scheduler places it: {e}");
                    }
                    worker.run()
                })?;
            workers.push(WorkerHandle {
                shared,
                thread: Some(thread),
                next_id: AtomicUsize::new(0),
            });
        }
        Ok(Runtime { workers })
    }

    /// Its workers.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Reserves a place for a task on `worker` (taken modulo the worker count).
    pub fn reserve(&self, worker: usize) -> Reservation {
        let w = &self.workers[worker % self.workers.len()];
        Reservation {
            waker: Waker {
                shared: w.shared.clone(),
                task: w.next_id.fetch_add(1, Ordering::Relaxed),
            },
        }
    }

    /// Starts `task` in its reserved place; it runs at once, then as its input, deadline and
    /// wakes say.
    pub fn install(&self, place: Reservation, task: Box<dyn Task>) {
        place.waker.shared.send(Message::Install(place.waker.task, task));
    }

    /// Starts `task` on `worker`; returns its waker.
    pub fn spawn(&self, worker: usize, task: Box<dyn Task>) -> Waker {
        let place = self.reserve(worker);
        let waker = place.waker();
        self.install(place, task);
        waker
    }

    /// Workers measure their timers' lateness and their busy time only from lab time `t_ns` on
    /// (ns; a run's start, so that setting up does not count).
    pub fn measure_from(&self, t_ns: u64) {
        for w in &self.workers {
            w.shared.send(Message::MeasureFrom(t_ns));
        }
    }

    /// Stops every worker (each task's `stop` runs on its worker first) and returns what each
    /// measured; a worker that panicked is reported by its index.
    pub fn stop(mut self) -> Result<Vec<WorkerStats>, Vec<usize>> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<Vec<WorkerStats>, Vec<usize>> {
        for w in &self.workers {
            w.shared.send(Message::Stop);
        }
        let mut stats = Vec::new();
        let mut failed = Vec::new();
        for (i, w) in self.workers.iter_mut().enumerate() {
            if let Some(t) = w.thread.take() {
                match t.join() {
                    Ok(s) => stats.push(s),
                    Err(_) => failed.push(i),
                }
            }
        }
        if failed.is_empty() { Ok(stats) } else { Err(failed) }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.workers.iter().any(|w| w.thread.is_some())
            && let Err(failed) = self.shutdown()
        {
            tracing::error!("runtime workers {failed:?} panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::task::Context;
    use std::os::fd::RawFd;
    use std::sync::Mutex;

    /// Fires every `period` ns `count` times, recording when it ran; another task wakes it too.
    struct Ticker {
        period: u64,
        next: u64,
        fired: Arc<Mutex<Vec<(u64, u64, bool)>>>,
        left: u32,
    }

    impl Task for Ticker {
        fn name(&self) -> &str {
            "ticker"
        }
        fn sources(&self) -> Vec<(RawFd, u32)> {
            vec![]
        }
        fn run(&mut self, cx: &mut Context<'_>) -> Option<u64> {
            let now = cx.now();
            // A wake sent before the worker took the task may come with its first run.
            if cx.woken {
                self.fired.lock().unwrap().push((now, 0, true));
            }
            if self.next == 0 {
                self.next = now + self.period;
                return Some(self.next);
            }
            if now >= self.next && self.left > 0 {
                self.fired.lock().unwrap().push((now, self.next, false));
                self.left -= 1;
                self.next += self.period;
            }
            (self.left > 0).then_some(self.next)
        }
        fn stop(&mut self) {}
    }

    #[test]
    fn deadlines_fire_in_order_on_time_and_wakes_arrive() {
        for poll in [PollMode::Spin, PollMode::Sleep, PollMode::Adaptive] {
            let rt = Runtime::start(&RuntimeConfig {
                workers: 2,
                poll,
                name: "t".into(),
            })
            .unwrap();
            let fired = Arc::new(Mutex::new(Vec::new()));
            let w = rt.spawn(
                1,
                Box::new(Ticker {
                    period: 200_000,
                    next: 0,
                    fired: fired.clone(),
                    left: 20,
                }),
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
            w.wake();
            // Wait for both (a loaded machine may hold the worker off its core for a while).
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::time::Instant::now() < until {
                let f = fired.lock().unwrap();
                if f.iter().any(|x| x.2) && f.iter().filter(|x| !x.2).count() == 20 {
                    break;
                }
                drop(f);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let stats = rt.stop().expect("no worker panicked");
            let f = fired.lock().unwrap().clone();
            let ticks: Vec<&(u64, u64, bool)> = f.iter().filter(|x| !x.2).collect();
            assert_eq!(ticks.len(), 20, "{poll:?}: {f:?}");
            assert!(ticks.iter().all(|(now, due, _)| now >= due), "never early");
            assert!(f.iter().any(|x| x.2), "{poll:?}: the wake arrived: {f:?}");
            assert!(Clock::get().now_ns() > 0);
            assert_eq!(stats.len(), 2);
            // A tick due when the wake ran fires in that run, not on its timer.
            assert!(stats[1].timer_runs >= 19, "{stats:?}");
        }
    }

    /// Runs once for `hold` of real time (as if it lost its core meanwhile), then reports the
    /// runtime's latest hiccup to a task on the other worker, which records it.
    struct Holder {
        hold: std::time::Duration,
        /// The holder's run; the watcher's every hiccup seen.
        at: Arc<Mutex<Vec<(u64, u64)>>>,
        then: Option<crate::mailbox::Waker>,
        /// Hiccups it has read so far.
        seen: u64,
    }

    impl Task for Holder {
        fn name(&self) -> &str {
            "holder"
        }
        fn sources(&self) -> Vec<(RawFd, u32)> {
            Vec::new()
        }
        fn run(&mut self, cx: &mut Context<'_>) -> Option<u64> {
            match self.then.take() {
                Some(w) => {
                    let start = cx.now();
                    let until = std::time::Instant::now() + self.hold;
                    while std::time::Instant::now() < until {}
                    self.at.lock().unwrap().push((start, cx.now()));
                    w.wake();
                }
                None => {
                    // The hold-up is recorded once the holder's run returns, maybe after this
                    // looks: look again for a while.
                    let new = cx.hiccups_since(&mut self.seen);
                    self.at
                        .lock()
                        .unwrap()
                        .extend(new.iter().map(|h| (h.start_ns, h.end_ns)));
                    return Some(cx.now() + 1_000_000);
                }
            }
            None
        }
        fn stop(&mut self) {}
    }

    #[test]
    fn a_run_that_lasts_a_hiccup_is_one_for_every_task() {
        let rt = Runtime::start(&RuntimeConfig {
            workers: 2,
            poll: PollMode::Sleep,
            name: "h".into(),
        })
        .unwrap();
        let (held, seen) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let watcher = rt.spawn(
            0,
            Box::new(Holder {
                hold: std::time::Duration::ZERO,
                at: seen.clone(),
                then: None,
                seen: 0,
            }),
        );
        let _holder = rt.spawn(
            1,
            Box::new(Holder {
                hold: std::time::Duration::from_nanos(2 * crate::HICCUP_NS),
                at: held.clone(),
                then: Some(watcher),
                seen: 0,
            }),
        );
        // The watcher looks every millisecond: a few of its looks after the hold-up.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while held.lock().unwrap().is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        rt.stop().expect("no worker panicked");
        let (start, end) = *held.lock().unwrap().first().expect("the holder ran");
        let seen = seen.lock().unwrap();
        assert!(
            seen.iter().any(|&(h_start, h_end)| h_start <= start && h_end >= end),
            "hiccups seen {seen:?}, the long run {start}-{end}"
        );
    }

    /// Records the CPUs its worker may run on, at its first run.
    struct Affinity(Arc<Mutex<Vec<Vec<usize>>>>);

    impl Task for Affinity {
        fn name(&self) -> &str {
            "affinity"
        }
        fn sources(&self) -> Vec<(RawFd, u32)> {
            Vec::new()
        }
        fn run(&mut self, _cx: &mut Context<'_>) -> Option<u64> {
            let cpus = crate::sys::thread::allowed_cpus().expect("sched_getaffinity");
            self.0.lock().unwrap().push(cpus);
            None
        }
        fn stop(&mut self) {}
    }

    /// The CPUs each worker of a runtime of `workers` may run on, in worker order.
    fn worker_affinities(workers: usize) -> Vec<Vec<usize>> {
        let rt = Runtime::start(&RuntimeConfig {
            workers,
            poll: PollMode::Sleep,
            name: "aff".into(),
        })
        .unwrap();
        let seen: Vec<_> = (0..workers).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        for (w, s) in seen.iter().enumerate() {
            rt.spawn(w, Box::new(Affinity(s.clone())));
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while seen.iter().any(|s| s.lock().unwrap().is_empty()) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        rt.stop().expect("no worker panicked");
        seen.iter()
            .map(|s| s.lock().unwrap().first().cloned().expect("the task ran"))
            .collect()
    }

    #[test]
    fn workers_are_bound_one_per_cpu_unless_there_are_more_workers_than_cpus() {
        let cpus = crate::sys::thread::allowed_cpus().unwrap();
        let bound = worker_affinities(cpus.len());
        let expected: Vec<Vec<usize>> = cpus.iter().map(|&c| vec![c]).collect();
        assert_eq!(bound, expected, "each worker on its own CPU");
        let free = worker_affinities(cpus.len() + 1);
        assert!(
            free.iter().all(|a| *a == cpus),
            "oversubscribed: the scheduler places them: {free:?}"
        );
    }
}
