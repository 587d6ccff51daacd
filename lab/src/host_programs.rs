//! The programs a run starts in its hosts (`programs:`): each in its host's network namespace
//! with the host's RDMA device in view (as `intlab exec` gives it), below the lab's scheduling
//! priority, its output kept in the results folder; started at their times, watched until they
//! exit, and stopped (their whole process group) when the run ends without them.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::lab::Lab;
use crate::results::program_outcome::{ProgramEnd, ProgramOutcome};
use crate::scenario::ProgramSpec;

/// The results folder's subfolder with each program's output (`NAME.log`).
pub const OUTPUT_FOLDER: &str = "programs";

/// How long a program told to stop (SIGTERM) has before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Why a program could not be started.
#[derive(Debug, thiserror::Error)]
#[error("starting program `{name}` ({command}) in host {host}: {cause}")]
pub struct StartError {
    /// The program's name.
    pub name: String,
    /// Its command line.
    pub command: String,
    /// Its host.
    pub host: String,
    /// What failed.
    pub cause: io::Error,
}

/// One program's place in the run.
#[derive(Debug)]
enum State {
    Waiting,
    Running { child: Child, since: Instant },
    Ended { end: ProgramEnd, ran: Duration },
}

/// The programs of one run.
#[derive(Debug)]
pub struct HostPrograms {
    specs: Vec<ProgramSpec>,
    hosts: Vec<String>,
    states: Vec<State>,
    dir: PathBuf,
    /// Where they start (the scenario's folder).
    cwd: PathBuf,
    /// What their environment gets besides the device's (see [`RunLabRecord`]).
    env: Vec<(String, OsString)>,
}

/// A run's lab recorded as a lab that is up while its programs run (named `run-PID-TAG`), so
/// that `intlab exec --lab NAME HOST -- CMD` starts a process in another of its hosts, as
/// MPI's launcher starts its daemons; forgotten when dropped.
#[derive(Debug)]
pub struct RunLabRecord {
    name: String,
}

impl RunLabRecord {
    /// Records `lab` (of `topology`, built from `scenario` with namespaces `prefix`) under a
    /// name made of this process and `tag`.
    pub fn write(
        lab: &Lab,
        topology: &crate::topology::Topology,
        scenario: &Path,
        prefix: &str,
        tag: &str,
    ) -> Result<RunLabRecord, crate::standing_lab::StandingLabError> {
        let name = format!("run-{}-{tag}", std::process::id());
        let record = crate::standing_lab::StandingLab::of(lab, topology, &name, scenario.to_owned(), prefix);
        record.write()?;
        Ok(RunLabRecord { name })
    }

    /// The environment programs of the run get: `INTLAB_LAB` (this record's name), `INTLAB`
    /// (the running `intlab`), `INTLAB_OUT` (the results folder).
    pub fn environment(&self, out: &Path) -> Vec<(String, OsString)> {
        let mut env = vec![
            ("INTLAB_LAB".to_owned(), OsString::from(&self.name)),
            ("INTLAB_OUT".to_owned(), out.as_os_str().to_owned()),
        ];
        if let Ok(exe) = std::env::current_exe() {
            env.push(("INTLAB".to_owned(), exe.into_os_string()));
        }
        env
    }
}

impl Drop for RunLabRecord {
    fn drop(&mut self) {
        if let Err(e) = crate::standing_lab::StandingLab::forget(&self.name) {
            tracing::warn!(lab = %self.name, error = %e, "forgetting a run's lab record");
        }
    }
}

impl HostPrograms {
    /// The programs of `specs` (hosts named by `host_name`), their output written into
    /// `out`/[`OUTPUT_FOLDER`], started in `cwd` with `env` added; none started yet.
    pub fn new(
        specs: &[ProgramSpec],
        host_name: impl Fn(usize) -> String,
        out: &Path,
        cwd: &Path,
        env: Vec<(String, OsString)>,
    ) -> io::Result<HostPrograms> {
        let dir = out.join(OUTPUT_FOLDER);
        if !specs.is_empty() {
            std::fs::create_dir_all(&dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        }
        Ok(HostPrograms {
            hosts: specs.iter().map(|s| host_name(s.host)).collect(),
            states: specs.iter().map(|_| State::Waiting).collect(),
            specs: specs.to_vec(),
            dir,
            cwd: cwd.to_owned(),
            env,
        })
    }

    /// Starts every program whose start (lab ns from the workload's start, `lab_start_ns`
    /// each) has come at `elapsed_ns`; returns when the next one is due (lab ns), if any.
    pub fn start_due(
        &mut self,
        lab: &Lab,
        elapsed_ns: u64,
        lab_start_ns: impl Fn(u64) -> u64,
    ) -> Result<Option<u64>, StartError> {
        let mut next: Option<u64> = None;
        for k in 0..self.specs.len() {
            if !matches!(self.states[k], State::Waiting) {
                continue;
            }
            let at = lab_start_ns(self.specs[k].start_ns);
            if at > elapsed_ns {
                next = Some(next.map_or(at, |n| n.min(at)));
                continue;
            }
            let spec = &self.specs[k];
            let child = self.spawn(lab, spec).map_err(|cause| StartError {
                name: spec.name.clone(),
                command: spec.argv.join(" "),
                host: self.hosts[k].clone(),
                cause,
            })?;
            tracing::info!(program = %spec.name, host = %self.hosts[k], pid = child.id(), "program started");
            self.states[k] = State::Running {
                child,
                since: Instant::now(),
            };
        }
        Ok(next)
    }

    /// Starts `spec` in its host: a thread enters the host's network namespace and a mount
    /// namespace with the host's device (both the thread's own, so the lab's threads keep
    /// theirs), lowers its priority, and forks the program, which inherits all three.
    fn spawn(&self, lab: &Lab, spec: &ProgramSpec) -> io::Result<Child> {
        let log_path = self.dir.join(format!("{}.log", spec.name));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", log_path.display())))?;
        let err = log.try_clone()?;
        let device = lab.device(spec.host).cloned();
        let argv = spec.argv.clone();
        let normal_priority = spec.normal_priority;
        let (cwd, env) = (self.cwd.clone(), self.env.clone());
        lab.namespace(spec.host).run(move || {
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..])
                .current_dir(cwd)
                .envs(env)
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                // Its own group, so that stopping it stops what it started (a shell's children).
                .process_group(0);
            if let Some(device) = device {
                cmd.envs(device.enter()?);
            }
            if !normal_priority {
                intlab_runtime::sys::thread::idle_policy()?;
            }
            cmd.spawn()
        })
    }

    /// Notes the programs that have exited since the last look.
    pub fn reap(&mut self) {
        for k in 0..self.states.len() {
            let State::Running { child, since } = &mut self.states[k] else {
                continue;
            };
            match child.try_wait() {
                Ok(Some(status)) => {
                    let end = end_of(status);
                    tracing::info!(program = %self.specs[k].name, %end, "program ended");
                    self.states[k] = State::Ended {
                        end,
                        ran: since.elapsed(),
                    };
                }
                Ok(None) => {}
                // Only a child that is not ours fails here: it can no longer be waited for.
                Err(e) => {
                    tracing::warn!(program = %self.specs[k].name, error = %e, "program could not be waited for");
                    self.states[k] = State::Ended {
                        end: ProgramEnd::Signalled(0),
                        ran: since.elapsed(),
                    };
                }
            }
        }
    }

    /// True while a program the run waits for has not ended (started or not).
    pub fn holding_the_run(&self) -> bool {
        self.specs
            .iter()
            .zip(&self.states)
            .any(|(s, st)| s.wait && !matches!(st, State::Ended { .. }))
    }

    /// Stops every program still running (SIGTERM to its group, SIGKILL after
    /// [`STOP_GRACE`]) and returns what became of each, its figures read from its output.
    pub fn finish(&mut self) -> Vec<ProgramOutcome> {
        self.reap();
        let stopping: Vec<usize> = (0..self.states.len())
            .filter(|&k| matches!(self.states[k], State::Running { .. }))
            .collect();
        for &k in &stopping {
            if let State::Running { child, .. } = &self.states[k] {
                signal_group(child, libc::SIGTERM, &self.specs[k].name);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for &k in &stopping {
            let State::Running { child, since } = &mut self.states[k] else {
                continue;
            };
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) {
                signal_group(child, libc::SIGKILL, &self.specs[k].name);
            }
            if let Err(e) = child.wait() {
                tracing::warn!(program = %self.specs[k].name, error = %e, "waiting for a stopped program");
            }
            self.states[k] = State::Ended {
                end: ProgramEnd::StoppedAtEnd,
                ran: since.elapsed(),
            };
        }
        let dir = &self.dir;
        std::mem::take(&mut self.specs)
            .into_iter()
            .zip(std::mem::take(&mut self.hosts))
            .zip(std::mem::take(&mut self.states))
            .map(|((spec, host), state)| {
                let output = dir.join(format!("{}.log", spec.name));
                let (end, ran) = match state {
                    State::Ended { end, ran } => (end, ran),
                    _ => (ProgramEnd::NotStarted, Duration::ZERO),
                };
                let figures = std::fs::read_to_string(&output)
                    .map(|text| crate::results::program_figures::of_output(&text))
                    .unwrap_or_default();
                ProgramOutcome {
                    spec,
                    host,
                    end,
                    ran_s: ran.as_secs_f64(),
                    output,
                    figures,
                }
            })
            .collect()
    }
}

impl Drop for HostPrograms {
    /// A run that fails half way still leaves no program behind.
    fn drop(&mut self) {
        for (k, state) in self.states.iter_mut().enumerate() {
            if let State::Running { child, .. } = state {
                signal_group(child, libc::SIGKILL, &self.specs[k].name);
                if let Err(e) = child.wait() {
                    tracing::warn!(program = %self.specs[k].name, error = %e, "waiting for a killed program");
                }
            }
        }
    }
}

/// Sends `signal` to the process group `child` leads.
fn signal_group(child: &Child, signal: libc::c_int, name: &str) {
    if let Err(e) = intlab_runtime::sys::process::signal_group(child.id(), signal) {
        tracing::warn!(program = %name, error = %e, signal, "signalling a program");
    }
}

/// A wait status as a [`ProgramEnd`].
fn end_of(status: std::process::ExitStatus) -> ProgramEnd {
    match (status.code(), status.signal()) {
        (Some(c), _) => ProgramEnd::Exited(c),
        (None, Some(s)) => ProgramEnd::Signalled(s),
        (None, None) => ProgramEnd::Signalled(0),
    }
}
