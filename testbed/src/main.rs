//! `intlab`: the command-line front of the lab.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use int_format::int::DEFAULT_INT_PORT;
use intlab_lab::scenario::Overrides;

mod commands;
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
        /// Serve Prometheus metrics of the running lab at http://ADDR/metrics: a port alone
        /// listens on 127.0.0.1 (another address only if named, e.g. 0.0.0.0:9464).
        #[arg(long, value_name = "ADDR", value_parser = intlab_lab::live::listen_address)]
        metrics: Option<std::net::SocketAddr>,
        /// Serve a live page of the running lab at http://ADDR/ (the topology coloured by
        /// utilisation, queues, flows, events); ADDR as for --metrics.
        #[arg(long, value_name = "ADDR", value_parser = intlab_lab::live::listen_address)]
        web: Option<std::net::SocketAddr>,
        /// Spread the lab over machines: each site of the scenario's `sites:` runs on the
        /// `intlab site serve` this file names (`NAME: HOST:PORT`; see docs/distributed.md).
        #[arg(long, value_name = "SITES.yaml")]
        sites: Option<PathBuf>,
        /// With --sites: the lab's keys (`intlab site init`) [default: $INTLAB_KEYS, else
        /// ~/.config/intlab/keys].
        #[arg(long, value_name = "DIR", requires = "sites")]
        keys: Option<PathBuf>,
    },
    /// One machine's share of labs spread over several (see docs/distributed.md).
    #[command(subcommand)]
    Site(SiteCommand),
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
    /// Draw a scenario's topology, each link with its rate, delay and impairments: Graphviz's
    /// DOT (`| dot -Tsvg`), Mermaid, or an SVG laid out by intlab (default: the built-in one).
    Graph {
        /// The scenario.
        scenario: Option<PathBuf>,
        /// dot, mermaid or svg.
        #[arg(long, value_enum, default_value_t = commands::graph::Format::Dot)]
        format: commands::graph::Format,
        /// Change one scenario key, as `key.path=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Plan how to spread a scenario over machines: which switches (with their hosts) go on
    /// which site, balancing the planned traffic and cutting as few links as can be; prints the
    /// plan as a `sites:` key and the links that become tunnels (docs/distributed.md).
    Plan {
        /// The scenario (default: the built-in 4-to-1 incast).
        scenario: Option<PathBuf>,
        /// How many sites (machines).
        #[arg(long, default_value_t = 2)]
        sites: usize,
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
    /// it) whose intlab process no longer runs, and what a killed `intlab site serve` left in
    /// this namespace (a tunnel device not yet moved into its lab, its captures' folder).
    Clean {
        /// Only namespaces whose name starts with this (default: every intlab namespace).
        #[arg(long, default_value = intlab_lab::netns::PREFIX)]
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
        /// The scenario (or a topology) [default: the built-in one `intlab run` runs].
        scenario: Option<PathBuf>,
        /// The lab's name [default: the scenario's `name`]. Two labs may be up at once if their
        /// names differ.
        #[arg(long)]
        name: Option<String>,
        /// Keep the lab in this terminal until Ctrl-C instead of in the background.
        #[arg(long)]
        foreground: bool,
        /// Serve Prometheus metrics of the running lab at http://ADDR/metrics: a port alone
        /// listens on 127.0.0.1 (another address only if named, e.g. 0.0.0.0:9464).
        #[arg(long, value_name = "ADDR", value_parser = intlab_lab::live::listen_address)]
        metrics: Option<std::net::SocketAddr>,
        /// Serve a live page of the running lab at http://ADDR/ (the topology coloured by
        /// utilisation, queues, flows, events); ADDR as for --metrics.
        #[arg(long, value_name = "ADDR", value_parser = intlab_lab::live::listen_address)]
        web: Option<std::net::SocketAddr>,
        /// Capture every switch port into a pcapng file in this folder (made if missing; the
        /// files are complete once the lab is down).
        #[arg(long, value_name = "DIR")]
        capture: Option<PathBuf>,
    },
    /// Run a command inside a host of a lab that is up: `intlab exec h1 -- ping -c 3 198.18.0.2`.
    /// Exits with the command's status.
    Exec {
        /// The host.
        node: String,
        /// The lab [default: the only one up].
        #[arg(long)]
        lab: Option<String>,
        /// Run the command at the normal scheduling priority, not below the lab's: then a
        /// command that spins (perftest polling its completion queue) takes CPU time from the
        /// emulated network, which falls behind.
        #[arg(long)]
        normal_priority: bool,
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
    /// Change the links of a lab that is up (`intlab up`) while it runs; a link is named by its
    /// two ends, `h1-s1` in either order (docs/live.md).
    #[command(subcommand)]
    Link(LinkCommand),
}

#[derive(Debug, Subcommand)]
enum LinkCommand {
    /// Set link keys, as in a scenario: `intlab link set h1-s1 delay=50us rate=1Gbps loss=1%`.
    /// Impairment keys replace the link's impairments whole, as `tc qdisc change` does.
    Set {
        /// The link.
        link: String,
        /// KEY=VALUE, one or more (rate, delay, buffer, jitter, distribution, loss, duplicate,
        /// corrupt, reorder, gap).
        #[arg(required = true, value_name = "KEY=VALUE")]
        keys: Vec<String>,
        /// The lab [default: the only one up].
        #[arg(long)]
        lab: Option<String>,
    },
    /// Take a link, or every link of a switch, down: frames on it and sent to it are lost.
    Down {
        /// The link (`h1-s1`) or switch.
        target: String,
        /// The lab [default: the only one up].
        #[arg(long)]
        lab: Option<String>,
    },
    /// Bring a link, or every link of a switch, up again.
    Up {
        /// The link (`h1-s1`) or switch.
        target: String,
        /// The lab [default: the only one up].
        #[arg(long)]
        lab: Option<String>,
    },
    /// List every link with its state, rate, delay, buffer and impairments.
    Show {
        /// The lab [default: the only one up].
        #[arg(long)]
        lab: Option<String>,
    },
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
enum SiteCommand {
    /// Wait for a coordinator (`intlab run --sites`), build the part of its lab it names, run
    /// it and report back; everything is torn down after each run. Until Ctrl-C.
    Serve {
        /// Where to listen: a port alone listens on 127.0.0.1; name an address the other
        /// machines reach (e.g. 10.0.0.1:7700) to serve them.
        #[arg(long, value_name = "ADDR", default_value = "7700", value_parser = intlab_lab::live::listen_address)]
        listen: std::net::SocketAddr,
        /// The lab's keys (`intlab site init`): only a coordinator holding the same lab's keys
        /// gets in [default: $INTLAB_KEYS, else ~/.config/intlab/keys].
        #[arg(long, value_name = "DIR")]
        keys: Option<PathBuf>,
    },
    /// Make a new lab's keys: a private authority and a certificate and key for sites and one
    /// for coordinators. Copy the folder to every machine of the lab (it refuses to overwrite).
    Init {
        /// Where [default: $INTLAB_KEYS, else ~/.config/intlab/keys].
        folder: Option<PathBuf>,
    },
}

/// p4c's preprocessor options, as p4c spells them.
#[derive(clap::Args, Debug, Clone, Default)]
struct PreprocessorArgs {
    /// Look for includes in DIR too (after the including file's folder), in the order given.
    #[arg(short = 'I', value_name = "DIR")]
    include: Vec<PathBuf>,
    /// Define macro NAME (as 1, or as VALUE) before the program.
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    define: Vec<String>,
    /// Undefine macro NAME (after the -D options).
    #[arg(short = 'U', value_name = "NAME")]
    undefine: Vec<String>,
}

impl PreprocessorArgs {
    /// The options the P4 front end takes.
    fn options(&self) -> intlab_p4::PreprocessorOptions {
        intlab_p4::PreprocessorOptions::new(self.include.clone(), &self.define, self.undefine.clone())
    }
}

#[derive(Debug, Subcommand)]
enum P4Command {
    /// Parse and check a program and list what its control plane sees: the pipeline, the
    /// parser's states, every table with its keys and actions, and the actions' parameters.
    /// Every problem is reported at once.
    Check {
        /// The program.
        file: PathBuf,
        #[command(flatten)]
        preprocessor: PreprocessorArgs,
    },
    /// The program's P4Info as p4c writes it (`--p4runtime-files`): the same ids, names,
    /// aliases, match fields and widths, for P4Runtime controllers; to standard output or a file.
    Info {
        /// The program.
        program: PathBuf,
        #[command(flatten)]
        preprocessor: PreprocessorArgs,
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
        #[command(flatten)]
        preprocessor: PreprocessorArgs,
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
        #[command(flatten)]
        preprocessor: PreprocessorArgs,
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
            metrics,
            web,
            sites,
            keys,
        } => commands::run::run_scenario(
            scenario.as_deref(),
            Overrides {
                controller: cc,
                set,
                only,
            },
            commands::run::Where {
                out,
                capture,
                force,
                live: (metrics, web),
                sites,
                keys,
            },
        ),
        Command::Site(SiteCommand::Serve { listen, keys }) => commands::site::serve(listen, keys),
        Command::Site(SiteCommand::Init { folder }) => commands::site::init(folder),
        Command::Graph { scenario, format, set } => commands::graph::graph(scenario.as_deref(), format, set),
        Command::Plan { scenario, sites, set } => commands::plan::plan(scenario.as_deref(), sites, set),
        Command::Inspect { file, json, int_port } => commands::inspect::inspect(&file, json, int_port),
        Command::Switch { config } => commands::switch::run_switch(&config),
        Command::Doctor { scenario, set } => commands::doctor::run_doctor(scenario.as_deref(), set),
        Command::Sensitivity {
            scenario,
            app,
            congestion,
            set,
            out,
        } => commands::sensitivity::run_sensitivity(&scenario, &app, &congestion, &set, out),
        Command::Compare { scenario, cc, set, out } => {
            commands::compare::run_compare(scenario.as_deref(), &cc, &set, out)
        }
        Command::Sweep {
            scenario,
            cc,
            grid,
            set,
            out,
        } => commands::sweep::run_sweep(scenario.as_deref(), cc.as_deref(), &grid, &set, out),
        Command::Rlcc(cmd) => commands::rlcc::run_rlcc(cmd),
        Command::Up {
            scenario,
            name,
            foreground,
            metrics,
            web,
            capture,
        } => commands::lab::run_up(scenario.as_deref(), name, foreground, (metrics, web), capture),
        Command::Exec {
            node,
            lab,
            normal_priority,
            command,
        } => commands::lab::run_exec(&node, lab.as_deref(), normal_priority, &command),
        Command::Down { name } => commands::lab::down(name),
        Command::Import(cmd) => commands::import::import(cmd),
        Command::Link(cmd) => commands::link::link(cmd),
        Command::P4(cmd) => commands::p4::p4(cmd),
        Command::Clean { prefix, force } => commands::clean::clean(&prefix, force),
    }
}
