//! `intlab`: the command-line front of the lab.

use std::io::{self, BufRead, BufWriter, IsTerminal, Write};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use int_format::int::DEFAULT_INT_PORT;
use intlab_p4runtime::format::Form;
use intlab_testbed::inspect;
use intlab_testbed::p4_offline::StfTarget;
use intlab_testbed::results::{Ending, summary_table};
use intlab_testbed::run::{self as lab_run, RunOptions};
use intlab_testbed::scenario::{Overrides, Scenario};
use intlab_testbed::standing_lab::{self, StandingLab};

mod progress;

/// A real-packet emulation lab for datacenter congestion control.
#[derive(Debug, Parser)]
#[command(name = "intlab", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario end to end: build the lab, run the workload, tear it down, and write the
    /// results folder (see docs/results.md). With no file: 4-to-1 incast under HPCC.
    Run {
        /// The scenario (a topology file with controller, workload, ...; see docs/scenarios.md).
        scenario: Option<PathBuf>,
        /// Run this controller instead of the scenario's (hpcc, hpcc++, dcqcn, swift, timely, dctcp,
        /// netscope, rlcc, line_rate).
        #[arg(long)]
        cc: Option<String>,
        /// Change one scenario key, as `key.path=value` (repeatable): `--set links.0.rate=1Gbps`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Run only this application of the workload: its isolated runtime, to compare with its
        /// runtime next to the others.
        #[arg(long, value_name = "APP")]
        only: Option<String>,
        /// The results folder [default: results/SCENARIO-CONTROLLER, numbered if it exists].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write a pcapng per switch port into the results folder.
        #[arg(long)]
        capture: bool,
        /// Write into a results folder that holds an earlier run's files, replacing them.
        #[arg(long)]
        force: bool,
    },
    /// Run one scenario once per controller (same seed) and put them side by side: a table
    /// (compare.txt, .csv), overlaid plots and report.md, each run in its own folder.
    Compare {
        /// The scenario (default: the built-in 4-to-1 incast).
        scenario: Option<PathBuf>,
        /// The controllers, comma-separated: `--cc hpcc,dcqcn,swift`.
        #[arg(long, value_delimiter = ',', required = true)]
        cc: Vec<String>,
        /// Change one scenario key for every run, as `key.path=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// The folder [default: results/compare-SCENARIO, numbered if it exists].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run one scenario over a grid of parameter values (every combination): sweep.csv and,
    /// for two parameters, heatmaps of p99 and max FCT; each run in its own folder.
    Sweep {
        /// The scenario (default: the built-in 4-to-1 incast).
        scenario: Option<PathBuf>,
        /// Run this controller instead of the scenario's.
        #[arg(long)]
        cc: Option<String>,
        /// One axis, `key=v1,v2,...` (repeatable); a key without a dot is a controller
        /// parameter; `zeta` sets HPCC++'s β to ζ·α/2. Default: the scenario's `sweep:`.
        #[arg(long, value_name = "KEY=VALUES")]
        grid: Vec<String>,
        /// Change one scenario key for every run, as `key.path=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// The folder [default: results/sweep-SCENARIO, numbered if it exists].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Estimate an application's delay sensitivity c_a (Netscope): run it under several levels
    /// of congestion and fit its runtime against its mean message time.
    Sensitivity {
        /// The scenario, with an `applications` workload.
        scenario: PathBuf,
        /// The application to estimate.
        #[arg(long)]
        app: String,
        /// The congestion levels, as one sweep axis `key=v1,v2,...` (a background
        /// application's message size, say: `workload.applications.1.message=1MB,2MB,4MB`).
        #[arg(long, value_name = "KEY=VALUES")]
        congestion: String,
        /// Change one scenario key for every run, as `key.path=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// The folder [default: results/sensitivity-APP, numbered if it exists].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Measure this machine (thread wake-up lateness, packet rate) and suggest the smallest time
    /// dilation at which a scenario stays faithful (default: the built-in scenario).
    Doctor {
        /// The scenario.
        scenario: Option<PathBuf>,
        /// Change one scenario key, as `key.path=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Decode a pcap or pcapng capture: Ethernet/IPv4/UDP, every INT hop, RoCEv2 and its ICRC.
    Inspect {
        /// The capture file.
        file: PathBuf,
        /// One JSON object per frame instead of one line.
        #[arg(long)]
        json: bool,
        /// UDP destination port that signals INT.
        #[arg(long, default_value_t = DEFAULT_INT_PORT)]
        int_port: u16,
    },
    /// Remove what a killed run left behind: every lab network namespace (and the interfaces in
    /// it) whose intlab process no longer runs.
    Clean {
        /// Only namespaces whose name starts with this (default: every intlab namespace).
        #[arg(long, default_value = intlab_testbed::netns::PREFIX)]
        prefix: String,
        /// Also remove the labs of intlab processes that are still running.
        #[arg(long)]
        force: bool,
    },
    /// RL-CC policies: train, distil to trees, explain (see docs/rlcc.md).
    #[command(subcommand)]
    Rlcc(RlccCommand),
    /// Run a switch alone from a YAML configuration (see docs/switch.md) until Ctrl-C.
    Switch {
        /// The switch configuration.
        #[arg(long)]
        config: PathBuf,
    },
    /// P4_16 programs for the v1model architecture (see docs/p4.md).
    #[command(subcommand)]
    P4(P4Command),
    /// Build a scenario's lab and leave it up for interactive use (its run keys are ignored):
    /// returns once the lab is up, its switches running in the background (see
    /// docs/scenarios.md). Then `intlab exec` runs commands in its hosts; `intlab down` stops it.
    Up {
        /// The scenario (or a topology).
        scenario: PathBuf,
        /// The lab's name [default: the scenario's `name`]. Two labs may be up at once if their
        /// names differ.
        #[arg(long)]
        name: Option<String>,
        /// Keep the lab in this terminal until Ctrl-C instead of in the background.
        #[arg(long)]
        foreground: bool,
    },
    /// Run a command inside a host of a lab that is up: `intlab exec h1 -- ping -c 3 198.18.0.2`.
    /// Exits with the command's status.
    Exec {
        /// The host.
        node: String,
        /// The lab [default: the only one up].
        #[arg(long)]
        lab: Option<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Stop a lab that is up and tear it down (also the remains of one whose process was killed).
    Down {
        /// The lab [default: the only one up].
        name: Option<String>,
    },
    /// Convert another tool's files into intlab's.
    #[command(subcommand)]
    Import(ImportCommand),
}

#[derive(Debug, Subcommand)]
enum ImportCommand {
    /// A p4lang tutorials topology.json (hosts with ip, mac and commands; switches with their
    /// runtime JSON or CLI file; links with latency and Mb/s; `sN-pK` ports) as a scenario
    /// whose switches run PROGRAM. Addresses outside the lab move into 198.18.0.0/15, the
    /// table files with them (copies written beside the scenario).
    P4Topology {
        /// The tutorials' topology.json.
        topology: PathBuf,
        /// The P4 program the switches run (the one the exercise's Makefile names).
        #[arg(long)]
        program: PathBuf,
        /// `SWITCH=FILE.p4`: the program one switch runs instead (where topology.json gives it
        /// its own compiled program, as the firewall exercise's s2 to s4 run basic); repeatable.
        #[arg(long = "switch-program", value_name = "SWITCH=FILE.p4", value_parser = switch_program)]
        switch_programs: Vec<(String, PathBuf)>,
        /// The scenario file to write.
        #[arg(long)]
        out: PathBuf,
        /// The scenario's name [default: OUT's file stem].
        #[arg(long)]
        name: Option<String>,
        /// Keep the hosts' private addresses (10.0.1.1 stays 10.0.1.1), so that a controller
        /// that writes them (the p4runtime and flowcache exercises) runs unchanged.
        #[arg(long)]
        keep_addresses: bool,
    },
}

#[derive(Debug, Subcommand)]
enum P4Command {
    /// Parse and check a program and list what its control plane sees: the pipeline, the
    /// parser's states, every table with its keys and actions, and the actions' parameters.
    /// Every problem is reported at once.
    Check {
        /// The program.
        file: PathBuf,
    },
    /// The program's P4Info as p4c writes it (`--p4runtime-files`): the same ids, names,
    /// aliases, match fields and widths, for P4Runtime controllers; to standard output or a file.
    Info {
        /// The program.
        program: PathBuf,
        /// text (p4c's .p4info.txtpb), json, or binary (.p4info.bin).
        #[arg(long, value_enum, default_value_t = InfoFormat::Text)]
        format: InfoFormat,
        /// Write it here instead of standard output.
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Run p4c's STF test of a program in memory, through the executor the switch runs (frames
    /// of any length): prints each expectation not met with the bytes that differ; exits 0 only
    /// if every one is met.
    Test {
        /// The program.
        program: PathBuf,
        /// The STF file.
        stf: PathBuf,
        /// Run it through the lab's switch instead, on veth pairs in a namespace of its own
        /// (root; frames of 14 to 9,014 bytes).
        #[arg(long)]
        veth: bool,
        /// Print every verdict, not only the failures.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Run a program in memory on frames read from pcap files, one per P4 port, and write what
    /// leaves each port to DIR/portN_out.pcap (as simple_switch's --use-files).
    Run {
        /// The program.
        program: PathBuf,
        /// `PORT=FILE.pcap`: the frames that arrive on P4 port PORT (repeatable).
        #[arg(long = "in", value_name = "PORT=FILE.pcap", value_parser = port_file, required = true)]
        inputs: Vec<(u16, PathBuf)>,
        /// Where the output pcap files go.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// A tutorials-style runtime JSON file to fill the tables first.
        #[arg(long)]
        runtime: Option<PathBuf>,
        /// A simple_switch_CLI command file to apply first (after --runtime).
        #[arg(long, value_name = "FILE")]
        commands: Option<PathBuf>,
    },
    /// simple_switch_CLI commands for a P4 switch of a lab that is up (`intlab up`), applied
    /// while traffic flows: the command given, else one per line from standard input (with a
    /// prompt on a terminal). Exits 1 if any was refused.
    Cli {
        /// The switch.
        switch: String,
        /// The lab [default: the only one up].
        #[arg(long)]
        lab: Option<String>,
        /// One command, e.g. `table_add MyIngress.ipv4_lpm ipv4_forward 198.18.1.1/32 => 08:00:00:00:01:11 1`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

/// The form `intlab p4 info` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum InfoFormat {
    /// Protobuf text format.
    Text,
    /// Protobuf's JSON mapping.
    Json,
    /// Protobuf binary.
    Binary,
}

#[derive(Debug, Subcommand)]
enum RlccCommand {
    /// Train the policy network (ADPG) against a fluid model of a shared bottleneck; writes the
    /// weights and the training curve (NAME-training.csv and .svg) beside them.
    Train {
        /// The weights file to write.
        #[arg(long, default_value = "policies/rlcc-mlp.json")]
        out: PathBuf,
        /// Weight updates.
        #[arg(long, default_value_t = 1000)]
        updates: usize,
        /// Seed of the initial weights and of the model.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// γ, the discount of later reward terms in an action's weight (0: eq. 3 as printed).
        #[arg(long, default_value_t = 0.9)]
        discount: f64,
        /// Noise of the RTT inflation the model's flows measure (scale of a triangular draw).
        #[arg(long, default_value_t = 0.05)]
        noise: f64,
        /// Models (bottlenecks with their own flow counts) each update averages over.
        #[arg(long, default_value_t = 8)]
        models: usize,
    },
    /// Distil an MLP (ours or a PyTorch checkpoint in the public RL-CC layout) into at most 20
    /// trees of depth 4; prints the RMSE against the MLP.
    Distill {
        /// The MLP.
        mlp: PathBuf,
        /// The trees file to write.
        #[arg(long, default_value = "policies/rlcc-trees.json")]
        out: PathBuf,
        /// Trees (at most 20).
        #[arg(long, default_value_t = 20)]
        trees: usize,
        /// Seed of the sampled observations.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Print RL-CC's Table VI for a policy: the multiplier for each previous and current
    /// condition, for an MLP and its trees side by side.
    Explain {
        /// The policy (MLP or trees JSON, or a PyTorch checkpoint).
        policy: PathBuf,
        /// The MLP's trees (default: distilled now).
        #[arg(long)]
        trees: Option<PathBuf>,
    },
}

/// Reads `PORT=FILE.pcap` of `intlab p4 run --in`.
fn port_file(arg: &str) -> Result<(u16, PathBuf), String> {
    match arg.split_once('=') {
        Some((p, f)) if !f.is_empty() => match p.parse::<u16>() {
            Ok(p) if p < 511 => Ok((p, PathBuf::from(f))),
            _ => Err(format!("`{p}`: a P4 port number below 511 expected")),
        },
        _ => Err(format!("`{arg}`: expected PORT=FILE.pcap, e.g. 1=in.pcap")),
    }
}

/// Reads `SWITCH=FILE.p4` of `--switch-program`.
fn switch_program(arg: &str) -> Result<(String, PathBuf), String> {
    match arg.split_once('=') {
        Some((switch, file)) if !switch.is_empty() && !file.is_empty() => Ok((switch.to_owned(), file.into())),
        _ => Err(format!("`{arg}`: expected SWITCH=FILE.p4, e.g. s2=basic.p4")),
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(io::stderr)
        // Colours only on a terminal: a file or a pipe gets plain text.
        .with_ansi(io::stderr().is_terminal())
        .init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("intlab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Run {
            scenario,
            cc,
            set,
            only,
            out,
            capture,
            force,
        } => run_scenario(
            scenario.as_deref(),
            Overrides {
                controller: cc,
                set,
                only,
            },
            out,
            capture,
            force,
        ),
        Command::Inspect { file, json, int_port } => {
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            let summary = match inspect::inspect(&file, int_port, json, &mut out) {
                Err(e) if is_broken_pipe(&e) => return Ok(ExitCode::SUCCESS),
                r => r?,
            };
            match out.flush() {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
                r => r.context("writing to standard output")?,
            }
            eprintln!(
                "{}: {} frames, {} RoCEv2, {} with INT, {} with a bad ICRC, {} undecodable",
                file.display(),
                summary.frames,
                summary.roce,
                summary.with_int,
                summary.bad_icrc,
                summary.errors
            );
            if let Some(cut) = &summary.cut {
                eprintln!("intlab: {cut}: the rest is lost (was the run that wrote it killed?)");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Switch { config } => run_switch(&config),
        Command::Doctor { scenario, set } => run_doctor(scenario.as_deref(), set),
        Command::Sensitivity {
            scenario,
            app,
            congestion,
            set,
            out,
        } => run_sensitivity(&scenario, &app, &congestion, &set, out),
        Command::Compare { scenario, cc, set, out } => run_compare(scenario.as_deref(), &cc, &set, out),
        Command::Sweep {
            scenario,
            cc,
            grid,
            set,
            out,
        } => run_sweep(scenario.as_deref(), cc.as_deref(), &grid, &set, out),
        Command::Rlcc(cmd) => run_rlcc(cmd),
        Command::Up {
            scenario,
            name,
            foreground,
        } => run_up(&scenario, name, foreground),
        Command::Exec { node, lab, command } => run_exec(&node, lab.as_deref(), &command),
        Command::Down { name } => {
            let lab = match name {
                Some(n) => StandingLab::read(&n)?.ok_or_else(|| anyhow::anyhow!("no lab named `{n}` is up"))?,
                None => StandingLab::find(None)?,
            };
            lab.stop(Duration::from_secs(60))?;
            println!("lab {} is down", lab.name);
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(ImportCommand::P4Topology {
            topology,
            program,
            switch_programs,
            out,
            name,
            keep_addresses,
        }) => {
            let per_switch = switch_programs.into_iter().collect();
            let done = intlab_testbed::topology::tutorial_json::import(
                &topology,
                &program,
                &per_switch,
                &out,
                name.as_deref(),
                keep_addresses,
            )?;
            for w in &done.warnings {
                eprintln!("intlab: not converted: {w}");
            }
            for t in &done.tables {
                println!("wrote {}", t.display());
            }
            println!("wrote {}", done.scenario.display());
            println!("next: intlab up {}", done.scenario.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::P4(P4Command::Check { file }) => {
            let loaded = intlab_p4::load(&file)?;
            print!("{}", loaded.info);
            Ok(ExitCode::SUCCESS)
        }
        Command::P4(P4Command::Info { program, format, out }) => {
            let loaded = intlab_p4::load(&program)?;
            let described = intlab_p4runtime::p4info::p4info(&loaded.ir)
                .with_context(|| format!("{}: P4Runtime ids", program.display()))?;
            let form = match format {
                InfoFormat::Text => Form::Text,
                InfoFormat::Json => Form::Json,
                InfoFormat::Binary => Form::Binary,
            };
            let bytes = intlab_p4runtime::format::write(&described.info, "p4.config.v1.P4Info", form)?;
            match out {
                Some(path) => {
                    std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
                    eprintln!("wrote {}", path.display());
                }
                None => io::stdout().write_all(&bytes).context("writing to standard output")?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::P4(P4Command::Test {
            program,
            stf,
            veth,
            verbose,
        }) => {
            let target = if veth { StfTarget::Veth } else { StfTarget::Memory };
            let r = intlab_testbed::p4_offline::test(&program, &stf, target, verbose, &mut io::stdout().lock())?;
            Ok(if r.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::P4(P4Command::Run {
            program,
            inputs,
            out,
            runtime,
            commands,
        }) => {
            let written =
                intlab_testbed::p4_offline::run(&program, &inputs, &out, runtime.as_deref(), commands.as_deref())?;
            for (path, n) in &written {
                println!("wrote {} ({n} frames)", path.display());
            }
            if written.is_empty() {
                println!("no frame left the switch");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::P4(P4Command::Cli { switch, lab, command }) => run_p4_cli(&switch, lab.as_deref(), &command),
        Command::Clean { prefix, force } => {
            anyhow::ensure!(
                prefix.starts_with(intlab_testbed::netns::PREFIX),
                "--prefix must start with `{}`: intlab only removes what it created",
                intlab_testbed::netns::PREFIX
            );
            let c = intlab_testbed::netns::clean(&prefix, force);
            for name in intlab_testbed::standing_lab::forget_dead()? {
                println!("forgot lab {name}: its process no longer runs");
            }
            for n in &c.removed {
                println!("removed namespace {n}");
            }
            for n in &c.live {
                println!("kept namespace {n}: its intlab process still runs (--force removes it)");
            }
            for e in &c.failed {
                eprintln!("intlab: {e}");
            }
            println!(
                "{} namespaces removed, {} of running labs kept, {} failures",
                c.removed.len(),
                c.live.len(),
                c.failed.len()
            );
            Ok(if c.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// `intlab run`: exit 0 when every flow completed, 3 when the duration ran out first, 4 when a
/// flow made no progress, 130 when interrupted (results written in every case).
fn run_scenario(
    file: Option<&std::path::Path>,
    overrides: Overrides,
    out: Option<PathBuf>,
    capture: bool,
    force: bool,
) -> Result<ExitCode> {
    let scenario = Scenario::load_or_builtin(file, &overrides)?;
    let stop = stop_on_signals()?;
    let out = out.unwrap_or_else(|| {
        free_folder(&format!(
            "results/{}-{}",
            scenario.topology.name,
            scenario.controller.name()
        ))
    });
    let opts = RunOptions {
        out: out.clone(),
        capture,
        tag: "r".into(),
        force,
    };
    let mut progress = progress::Reporter::new();
    let results = lab_run::run(&scenario, &opts, &stop, &mut progress)?;
    print!("{}", summary_table(&results.summary));
    println!("results: {}", out.display());
    Ok(exit_code(&stop, std::iter::once(results.summary.ending)))
}

/// A flag SIGINT and SIGTERM raise: the run stops, tears its lab down and writes its results.
/// A second signal ends the process at once, saying that `intlab clean` removes what is left.
fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    stop_on_signals_saying("tearing the lab down and writing the results")
}

/// [`stop_on_signals`], saying `what` the process does on the first signal.
fn stop_on_signals_saying(what: &'static str) -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("installing the signal handler")?;
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if flag.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "intlab: stopped at once; `sudo intlab clean` removes the namespaces this run leaves behind"
                    );
                    std::process::exit(130);
                }
                eprintln!("intlab: stopping: {what} (again to quit at once)");
            }
        })
        .context("starting the signal thread")?;
    Ok(stop)
}

/// `intlab compare`: exit 0 when every run completed every flow, 3 when one ran out of time,
/// 130 when interrupted.
fn run_compare(
    file: Option<&std::path::Path>,
    cc: &[String],
    set: &[String],
    out: Option<PathBuf>,
) -> Result<ExitCode> {
    let stop = stop_on_signals()?;
    let name = match file {
        Some(f) => f
            .file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned()),
        None => "incast-4to1".to_owned(),
    };
    let out = out.unwrap_or_else(|| free_folder(&format!("results/compare-{name}")));
    intlab_testbed::results::prepare(&out, false)?;
    let mut progress = progress::Reporter::new();
    let c = intlab_testbed::compare::compare(file, set, cc, &out, &stop, &mut progress)?;
    print!("{}", intlab_testbed::compare::table(&c));
    println!("comparison: {}", out.join(intlab_testbed::compare::REPORT).display());
    Ok(exit_code(&stop, c.entries.iter().map(|e| e.results.summary.ending)))
}

/// 130 when interrupted, else 4 when a flow made no progress, else 3 when a run ran out of
/// time, else 0.
fn exit_code(stop: &AtomicBool, endings: impl Iterator<Item = Ending>) -> ExitCode {
    let endings: Vec<Ending> = endings.collect();
    if stop.load(Ordering::Relaxed) || endings.contains(&Ending::Interrupted) {
        ExitCode::from(130)
    } else if endings.contains(&Ending::NoProgress) {
        ExitCode::from(4)
    } else if endings.contains(&Ending::TimedOut) {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// `intlab sweep`: exit 0 when every run completed, 3 when one ran out of time, 130 when
/// interrupted.
fn run_sweep(
    file: Option<&std::path::Path>,
    cc: Option<&str>,
    grid: &[String],
    set: &[String],
    out: Option<PathBuf>,
) -> Result<ExitCode> {
    use intlab_testbed::sweep::{self, Axis};
    let mut axes = grid.iter().map(|g| Axis::parse(g)).collect::<Result<Vec<_>, _>>()?;
    let scenario = Scenario::load_or_builtin(file, &Overrides::default())?;
    if axes.is_empty() {
        axes = scenario
            .sweep
            .iter()
            .map(|(key, values)| Axis {
                key: key.clone(),
                values: values.clone(),
            })
            .collect();
    }
    anyhow::ensure!(
        !axes.is_empty(),
        "no grid: give --grid key=v1,v2 or a `sweep:` in the scenario (docs/experiments.md)"
    );
    let stop = stop_on_signals()?;
    let out = out.unwrap_or_else(|| free_folder(&format!("results/sweep-{}", scenario.topology.name)));
    intlab_testbed::results::prepare(&out, false)?;
    let mut progress = progress::Reporter::new();
    let runs = sweep::sweep(file, cc, set, &axes, &out, &stop, &mut progress)?;
    print!("{}", sweep::table(&axes, &runs));
    println!("sweep: {}", out.join(sweep::TABLE_CSV).display());
    Ok(exit_code(&stop, runs.iter().map(|r| r.results.summary.ending)))
}

/// `intlab sensitivity`.
fn run_sensitivity(
    file: &std::path::Path,
    app: &str,
    congestion: &str,
    set: &[String],
    out: Option<PathBuf>,
) -> Result<ExitCode> {
    let axis = intlab_testbed::sweep::Axis::parse(congestion)?;
    let stop = stop_on_signals()?;
    let out = out.unwrap_or_else(|| free_folder(&format!("results/sensitivity-{app}")));
    intlab_testbed::results::prepare(&out, false)?;
    let mut progress = progress::Reporter::new();
    let (runs, fit) = intlab_testbed::sensitivity::estimate(Some(file), app, &axis, set, &out, &stop, &mut progress)?;
    println!("{:>24}{:>20}{:>16}", axis.key, "mean message us", "runtime us");
    for r in &runs {
        let a = r.results.summary.applications.iter().find(|a| a.name == app);
        let cell = |x: Option<f64>| x.map_or("-".to_owned(), |v| format!("{:.1}", v / 1e3));
        println!(
            "{:>24}{:>20}{:>16}",
            r.point.first().map_or("", |p| p.1.as_str()),
            cell(a.and_then(|a| a.message_mean_ns)),
            cell(a.and_then(|a| a.runtime_ns.map(|n| n as f64)))
        );
    }
    match fit {
        Some(f) => {
            println!(
                "{app}: runtime = {:.1} us + {:.2} × mean message time (r = {:.3}); delay sensitivity c_a = {:.2}",
                f.intercept / 1e3,
                f.slope,
                f.r,
                f.c_a
            );
            println!(
                "give it to Netscope: `delay_sensitivity: {:.2}` on the application",
                f.c_a
            );
        }
        None => println!("{app}: fewer than two congestion levels finished with different message times: no fit"),
    }
    Ok(exit_code(&stop, runs.iter().map(|r| r.results.summary.ending)))
}

/// `intlab doctor`.
fn run_doctor(file: Option<&std::path::Path>, set: Vec<String>) -> Result<ExitCode> {
    use intlab_testbed::doctor;
    let overrides = Overrides {
        set,
        ..Overrides::default()
    };
    let s = Scenario::load_or_builtin(file, &overrides)?;
    eprintln!("intlab: measuring this machine (about 1 s)");
    let m = doctor::measure().context("measuring this machine")?;
    let g = doctor::suggest(&s, &m, s.runtime.workers);
    let us = |ns: f64| ns / 1e3;
    println!(
        "wake-up lateness of a 50 us sleep: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        us(m.wakeup_late_ns.p50),
        us(m.wakeup_late_ns.p99),
        us(m.wakeup_late_ns.max)
    );
    println!(
        "packet rate: {:.0} kpps of 1 KB datagrams through loopback UDP, batched, one thread",
        m.packets_per_s / 1e3
    );
    println!(
        "{}: shortest path RTT {:.1} us; timing needs dilation {:.2} (10 x lateness p99 / RTT); \
         the workload at line rate would ask {:.0} kpps of data, which keeps the workers half busy at dilation {:.2}",
        s.topology.name,
        us(g.rtt_min_ns as f64),
        g.for_timing,
        g.packets_per_s / 1e3,
        g.for_rate
    );
    println!(
        "suggested dilation: {} (the scenario says {}){}",
        g.dilation,
        if s.dilation_auto {
            format!(
                "auto, which starts at {} and goes one step up (to {} at most) while a run warns",
                doctor::auto_start(&g),
                doctor::AUTO_MAX
            )
        } else {
            s.dilation.to_string()
        },
        if !s.dilation_auto && s.dilation < g.dilation {
            "; raise it: `--set dilation=N`"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `base`, or the first of `base-2`, `base-3`, ... that does not exist yet.
fn free_folder(base: &str) -> PathBuf {
    let base = base.to_owned();
    (1..)
        .map(|k| PathBuf::from(if k == 1 { base.clone() } else { format!("{base}-{k}") }))
        .find(|p| !p.exists())
        .unwrap_or_else(|| PathBuf::from(base))
}

/// `intlab rlcc ...`.
fn run_rlcc(cmd: RlccCommand) -> Result<ExitCode> {
    match cmd {
        RlccCommand::Train {
            out,
            updates,
            seed,
            discount,
            noise,
            models,
        } => {
            let cfg = intlab_rlcc::train::TrainConfig {
                updates,
                seed,
                discount,
                noise,
                models,
                ..Default::default()
            };
            let bar = indicatif::ProgressBar::new(updates as u64).with_style(
                indicatif::ProgressStyle::with_template("training {bar:40} {pos}/{len} updates, reward {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let curve = intlab_testbed::rlcc::train_to(&cfg, &out, |p| {
                bar.inc(1);
                bar.set_message(format!("{:.4}", p.reward));
            })?;
            bar.finish_and_clear();
            let tail = &curve[curve.len().saturating_sub(50)..];
            let n = tail.len().max(1) as f64;
            println!(
                "trained {} updates: last 50 mean reward {:.4}, utilization {:.3}, queue {:.2} BDP",
                curve.len(),
                tail.iter().map(|p| p.reward).sum::<f64>() / n,
                tail.iter().map(|p| p.utilization).sum::<f64>() / n,
                tail.iter().map(|p| p.queue).sum::<f64>() / n
            );
            let (csv, svg) = intlab_testbed::rlcc::curve_paths(&out);
            println!(
                "weights: {}; training curve: {}, {}",
                out.display(),
                csv.display(),
                svg.display()
            );
        }
        RlccCommand::Distill { mlp, out, trees, seed } => {
            let cfg = intlab_rlcc::distill::DistillConfig {
                trees,
                seed,
                ..Default::default()
            };
            let d = intlab_testbed::rlcc::distill_to(&mlp, &cfg, &out)?;
            println!(
                "{} trees of depth ≤ {}: RMSE against the MLP {:.4} held out ({:.4} fitted); written to {}",
                d.trees.trees().len(),
                cfg.depth,
                d.rmse,
                d.train_rmse,
                out.display()
            );
        }
        RlccCommand::Explain { policy, trees } => {
            print!(
                "{}",
                intlab_testbed::rlcc::explain(&policy, trees.as_deref(), &intlab_rlcc::RewardShape::default())?
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one switch until SIGINT or SIGTERM, then prints its counters.
fn run_switch(config: &std::path::Path) -> Result<ExitCode> {
    let spec = intlab_switch::SwitchSpec::load(config)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    let p4 = spec.p4.as_ref().map(|p| p.p4runtime.clone());
    let switch = intlab_switch::Switch::start(spec)?;
    let p4runtime = match (p4, switch.p4_datapath()) {
        (Some(key), Some(datapath)) => {
            let (address, device_id) = key.resolve(0).map_err(|e| anyhow::anyhow!("p4.p4runtime: {e}"))?;
            let server = intlab_p4runtime::server::start(vec![intlab_p4runtime::server::Endpoint {
                name: switch.spec().name.clone(),
                address,
                device_id,
                datapath,
                any_port_if_taken: false,
                cpu: switch.cpu_port().map(|c| intlab_p4runtime::server::CpuPort {
                    socket: c.socket,
                    max_frame: c.max_frame,
                }),
            }])?;
            eprintln!("intlab: P4Runtime on {address} (device id {device_id})");
            Some(server)
        }
        _ => None,
    };
    // How each port moves frames (`packet_io: auto` may have fallen back): the workers publish
    // it at their first run.
    let ports = switch
        .counters_now(std::time::Duration::from_secs(1))
        .map(|c| {
            c.ports
                .iter()
                .map(|p| format!("{} {}", p.name, p.io))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let workers = switch.spec().workers;
    eprintln!(
        "intlab: switch {} running with {} ports ({ports}) on {workers} worker{}; Ctrl-C stops it",
        switch.spec().name,
        switch.spec().ports.len(),
        if workers == 1 { "" } else { "s" }
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(p4runtime);
    let counters = switch.stop();
    println!("{}", serde_json::to_string_pretty(&counters)?);
    Ok(ExitCode::SUCCESS)
}

/// `intlab up`: checks the scenario and the name, then holds the lab here (`--foreground`) or
/// in a background copy of this command, returning once that copy has recorded the lab.
fn run_up(scenario: &Path, name: Option<String>, foreground: bool) -> Result<ExitCode> {
    let (topology, runtime) = Scenario::load_lab(scenario)?;
    let name = name.unwrap_or_else(|| topology.name.clone());
    intlab_testbed::topology::check_name(&name).map_err(|m| anyhow::anyhow!("--name {m}"))?;
    StandingLab::claim(&name)?;
    if foreground {
        return hold_lab(scenario, &topology, runtime, &name);
    }
    std::fs::create_dir_all(standing_lab::STATE_DIR)
        .with_context(|| format!("creating {}", standing_lab::STATE_DIR))?;
    let log_path = StandingLab::log_path(&name);
    let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let exe = std::env::current_exe().context("finding the intlab executable")?;
    // Its own process group: a Ctrl-C meant for this terminal does not reach the lab.
    let mut child = std::process::Command::new(exe)
        .arg("up")
        .arg(scenario)
        .args(["--name", &name, "--foreground"])
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
fn hold_lab(
    scenario: &Path,
    topology: &intlab_testbed::topology::Topology,
    runtime: intlab_testbed::scenario::RuntimeSettings,
    name: &str,
) -> Result<ExitCode> {
    let stop = stop_on_signals_saying("tearing the lab down")?;
    let tag: String = name.chars().filter(char::is_ascii_alphanumeric).collect();
    let mut cfg = intlab_testbed::lab::LabConfig::new(&format!("up{tag}"));
    cfg.workers = runtime.workers;
    cfg.poll = runtime.poll;
    cfg.packet_io = runtime.packet_io;
    let lab = intlab_testbed::lab::Lab::build(topology, &cfg)?;
    let socket = StandingLab::socket_path(name);
    let datapaths = lab.p4_datapaths();
    intlab_testbed::p4_control::serve(&socket, datapaths.clone())
        .with_context(|| format!("serving the P4 control plane on {}", socket.display()))?;
    let endpoints = intlab_testbed::p4runtime::endpoints(topology, datapaths, lab.cpu_ports())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let p4runtime = intlab_p4runtime::server::start(endpoints)?;
    let record = StandingLab {
        name: name.to_owned(),
        pid: std::process::id(),
        scenario: scenario.canonicalize().unwrap_or_else(|_| scenario.to_owned()),
        prefix: cfg.prefix.clone(),
        hosts: topology
            .hosts()
            .map(|h| {
                let node = &topology.nodes[h];
                let record = standing_lab::HostRecord {
                    namespace: lab.namespace(h).name().to_owned(),
                    address: node.address.expect("hosts have addresses"),
                };
                (node.name.clone(), record)
            })
            .collect(),
        p4runtime: p4runtime
            .endpoints
            .iter()
            .map(
                |(switch, address, device_id)| intlab_testbed::p4runtime::P4RuntimeRecord {
                    switch: switch.clone(),
                    address: *address,
                    device_id: *device_id,
                },
            )
            .collect(),
    };
    record.write()?;
    eprintln!("intlab: lab {name} is up; Ctrl-C (or `intlab down {name}`) stops it");
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let ended = record.end_host_processes()?;
    if ended > 0 {
        eprintln!("intlab: ended {ended} process(es) still running in the hosts");
    }
    drop(p4runtime);
    drop(lab);
    StandingLab::forget(name)?;
    eprintln!("intlab: lab {name} is down");
    Ok(ExitCode::SUCCESS)
}

/// `intlab p4 cli`: sends the command given, or each line of standard input, to a P4 switch of
/// a lab that is up; prints what each printed and refusals as `Error: ...`.
fn run_p4_cli(switch: &str, lab: Option<&str>, command: &[String]) -> Result<ExitCode> {
    use intlab_testbed::p4_control::{ControlClient, ControlError};
    let lab = StandingLab::find(lab)?;
    let mut client = ControlClient::connect(&StandingLab::socket_path(&lab.name), switch)
        .with_context(|| format!("lab {}", lab.name))?;
    let mut refused = 0;
    let mut one = |client: &mut ControlClient, line: &str| -> Result<()> {
        match client.send(line) {
            Ok(Some(out)) => println!("{out}"),
            Ok(None) => {}
            Err(ControlError::Refused(e)) => {
                eprintln!("Error: {e}");
                refused += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("lab {}", lab.name)),
        }
        Ok(())
    };
    if !command.is_empty() {
        one(&mut client, &command.join(" "))?;
    } else {
        let terminal = io::stdin().is_terminal();
        let prompt = || -> io::Result<()> {
            if terminal {
                print!("RuntimeCmd: ");
                io::stdout().flush()?;
            }
            Ok(())
        };
        prompt()?;
        for line in io::stdin().lock().lines() {
            one(&mut client, &line.context("reading standard input")?)?;
            prompt()?;
        }
    }
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `intlab exec`: enters the host's namespace and becomes the command.
fn run_exec(node: &str, lab: Option<&str>, command: &[String]) -> Result<ExitCode> {
    let lab = StandingLab::find(lab)?;
    let host = lab.host(node)?;
    let (program, args) = command.split_first().context("no command given after `--`")?;
    intlab_runtime::sys::netns::enter(&Path::new("/var/run/netns").join(&host.namespace))
        .with_context(|| format!("entering host {node} of lab {}", lab.name))?;
    let e = std::process::Command::new(program).args(args).exec();
    Err(anyhow::anyhow!("running `{program}` in host {node}: {e}"))
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
