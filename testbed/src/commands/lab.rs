//! `intlab up`, `exec` and `down`: labs left up to work in by hand.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use std::net::SocketAddr;

use anyhow::{Context, Result};
use intlab_lab::nic_device::DEVICE_NAME;
use intlab_lab::scenario::{LabScenario, Scenario};
use intlab_lab::standing_lab::{self, Served, StandingLab};

use super::signals::stop_on_signals_saying;

/// `intlab up`: checks the scenario and the name, then holds the lab here (`--foreground`) or
/// in a background copy of this command, returning once that copy has recorded the lab.
pub(crate) fn run_up(
    scenario: Option<&Path>,
    name: Option<String>,
    foreground: bool,
    (metrics, web): (Option<SocketAddr>, Option<SocketAddr>),
    capture: Option<PathBuf>,
) -> Result<ExitCode> {
    let lab = match scenario {
        Some(file) => Scenario::load_lab(file)?,
        None => Scenario::builtin_lab()?,
    };
    // The background copy runs elsewhere: it is given the folder by its full path.
    let capture = match capture {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("--capture: creating {}", dir.display()))?;
            Some(
                dir.canonicalize()
                    .with_context(|| format!("--capture: {}", dir.display()))?,
            )
        }
        None => None,
    };
    let name = name.unwrap_or_else(|| lab.topology.name.clone());
    intlab_lab::topology::check_name(&name).map_err(|m| anyhow::anyhow!("--name {m}"))?;
    StandingLab::claim(&name)?;
    if foreground {
        return hold_lab(scenario, &lab, &name, (metrics, web), capture);
    }
    std::fs::create_dir_all(standing_lab::STATE_DIR)
        .with_context(|| format!("creating {}", standing_lab::STATE_DIR))?;
    let log_path = StandingLab::log_path(&name);
    let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let exe = std::env::current_exe().context("finding the intlab executable")?;
    // Its own process group: a Ctrl-C meant for this terminal does not reach the lab.
    let mut child = std::process::Command::new(exe)
        .arg("up")
        .args(scenario)
        .args(["--name", &name, "--foreground"])
        .args(metrics.map(|m| format!("--metrics={m}")))
        .args(web.map(|w| format!("--web={w}")))
        .args(capture.map(|c| {
            let mut arg = std::ffi::OsString::from("--capture=");
            arg.push(c);
            arg
        }))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().context("opening the lab's log")?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("starting the lab's background process")?;
    eprintln!("intlab: building lab {name} (log: {})", log_path.display());
    loop {
        if let Some(status) = child.try_wait().context("watching the lab's process")? {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            anyhow::bail!("lab {name} did not come up ({status}); its log:\n{}", log.trim_end());
        }
        if let Some(lab) = StandingLab::read(&name)?
            && lab.pid == child.id()
        {
            println!("lab {name} is up (process {}, log {})", lab.pid, log_path.display());
            for (host, h) in &lab.hosts {
                println!("  {host}  {}", h.address);
            }
            if lab.hosts.values().any(|h| h.device.is_some()) {
                match intlab_lab::nic_device::provider_path() {
                    Some(_) => {
                        println!("  every host has the RDMA device {DEVICE_NAME} (`intlab exec HOST -- ibv_devinfo`)")
                    }
                    None => eprintln!(
                        "intlab: warning: no {} beside this binary (`cargo build --release` builds it): RDMA programs in the hosts will find no device",
                        intlab_lab::nic_device::PROVIDER_FILE
                    ),
                }
            }
            if let Some(m) = lab.metrics {
                println!("  metrics at http://{m}/metrics");
            }
            if let Some(w) = lab.web {
                println!("  live page at http://{w}/");
            }
            for p in &lab.p4runtime {
                println!("  {}  P4Runtime on {} (device id {})", p.switch, p.address, p.device_id);
            }
            println!("run commands in a host with `intlab exec HOST -- CMD`; stop with `intlab down {name}`");
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Builds the lab, records it, and keeps it up until SIGINT or SIGTERM.
pub(crate) fn hold_lab(
    scenario: Option<&Path>,
    s: &LabScenario,
    name: &str,
    (metrics, web): (Option<SocketAddr>, Option<SocketAddr>),
    capture: Option<PathBuf>,
) -> Result<ExitCode> {
    let stop = stop_on_signals_saying("tearing the lab down")?;
    standing_lab::hold(
        scenario,
        s,
        name,
        Served { metrics, web },
        capture,
        &stop,
        &mut |line| eprintln!("intlab: {line}"),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `intlab exec`: enters the host's namespace and becomes the command, below the lab's
/// scheduling priority unless `normal_priority`: the emulated network is the hardware of the
/// hosts, and a program spinning on a core (as RDMA benchmarks poll) must not hold it up.
pub(crate) fn run_exec(node: &str, lab: Option<&str>, normal_priority: bool, command: &[String]) -> Result<ExitCode> {
    let lab = StandingLab::find(lab)?;
    let host = lab.host(node)?;
    let (program, args) = command.split_first().context("no command given after `--`")?;
    intlab_runtime::sys::netns::enter(&Path::new("/var/run/netns").join(&host.namespace))
        .with_context(|| format!("entering host {node} of lab {}", lab.name))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    if let Some(device) = &host.device {
        let env = device
            .enter()
            .with_context(|| format!("giving host {node}'s programs its RDMA device {DEVICE_NAME}"))?;
        cmd.envs(env);
    }
    if !normal_priority {
        intlab_runtime::sys::thread::idle_policy().context("lowering the command's scheduling priority")?;
    }
    let e = cmd.exec();
    Err(anyhow::anyhow!("running `{program}` in host {node}: {e}"))
}

/// `intlab down`: takes lab `name` (or the only one up) down.
pub(crate) fn down(name: Option<String>) -> Result<ExitCode> {
    let lab = match name {
        Some(n) => StandingLab::read(&n)?.ok_or_else(|| anyhow::anyhow!("no lab named `{n}` is up"))?,
        None => StandingLab::find(None)?,
    };
    lab.stop(Duration::from_secs(60))?;
    println!("lab {} is down", lab.name);
    Ok(ExitCode::SUCCESS)
}
