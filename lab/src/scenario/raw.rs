//! The run's keys of a scenario file as written, before they are checked against the topology.

use intlab_switch::units::{Bytes, Nanos};
use intlab_transport::cc::ControllerConfig;
use intlab_transport::endpoint::IntMode;
use intlab_transport::flow::MessageKind;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use crate::workload::{Exchange, Format};

/// Everything in a scenario file that is not topology, as written (the topology's keys are
/// `crate::topology`'s, read from the same document).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRun {
    #[serde(default)]
    pub controller: Option<Spanned<ControllerConfig>>,
    /// Parameters of other controllers, for `--cc` to pick.
    #[serde(default)]
    pub controllers: Vec<Spanned<ControllerConfig>>,
    #[serde(default)]
    pub workload: Option<Spanned<RawWorkload>>,
    #[serde(default)]
    pub duration: Option<Spanned<Nanos>>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub capture: Option<bool>,
    #[serde(default)]
    pub dilation: Option<Spanned<RawDilation>>,
    #[serde(default)]
    pub transport: Option<Spanned<RawTransport>>,
    #[serde(default)]
    pub runtime: Option<Spanned<RawRuntime>>,
    #[serde(default)]
    pub sweep: Vec<RawAxis>,
    #[serde(default)]
    pub events: Vec<Spanned<RawEvent>>,
    #[serde(default)]
    pub programs: Vec<Spanned<RawProgram>>,
    #[serde(default)]
    pub reconverge: Option<Spanned<Nanos>>,
    #[serde(default)]
    pub sites: Option<Spanned<std::collections::BTreeMap<String, Spanned<Vec<String>>>>>,
    // The topology's keys.
    #[serde(default, rename = "name")]
    _name: Option<IgnoredAny>,
    #[serde(default, rename = "defaults")]
    _defaults: Option<IgnoredAny>,
    #[serde(default, rename = "nodes")]
    _nodes: Option<IgnoredAny>,
    #[serde(default, rename = "links")]
    _links: Option<IgnoredAny>,
    #[serde(default, rename = "routes")]
    _routes: Option<IgnoredAny>,
    #[serde(default, rename = "mmu")]
    _mmu: Option<IgnoredAny>,
    #[serde(default, rename = "pfc")]
    _pfc: Option<IgnoredAny>,
    #[serde(default, rename = "priorities")]
    _priorities: Option<IgnoredAny>,
}

/// One of `events:`: at a time, a link or switch down or up, or link keys set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEvent {
    pub at: Spanned<Nanos>,
    #[serde(default)]
    pub down: Option<Spanned<String>>,
    #[serde(default)]
    pub up: Option<Spanned<String>>,
    #[serde(default)]
    pub set: Option<Spanned<String>>,
    #[serde(default)]
    pub keys: Option<Spanned<crate::topology::LinkKeys>>,
}

/// One of `programs:`: a program the run starts in a host.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProgram {
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    pub host: Spanned<String>,
    pub run: Spanned<RawCommand>,
    #[serde(default)]
    pub start: Option<Spanned<Nanos>>,
    #[serde(default)]
    pub wait: Option<bool>,
    #[serde(default)]
    pub normal_priority: Option<bool>,
}

/// `run:` a command line for `sh -c`, or the program and its arguments.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawCommand {
    /// Given to `/bin/sh -c`.
    Shell(String),
    /// The program and its arguments, as they are.
    Argv(Vec<String>),
}

/// `dilation:` a factor, or `auto`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawDilation {
    /// Run this many times slower.
    Factor(f64),
    /// Measure the machine and pick.
    Word(DilationWord),
}

/// The one word `dilation:` takes.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DilationWord {
    /// Measured by the doctor before the run.
    Auto,
}

/// `runtime:` how the lab's workers run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRuntime {
    #[serde(default)]
    pub workers: Option<Spanned<usize>>,
    #[serde(default)]
    pub poll: Option<intlab_runtime::PollMode>,
    #[serde(default)]
    pub packet_io: Option<intlab_switch::config::PacketIo>,
}

/// One axis of the grid `intlab sweep` runs when given none: a key and its values.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAxis {
    pub key: String,
    pub values: Vec<String>,
}

/// `workload:` names one kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum RawWorkload {
    /// N senders × M flows to one receiver.
    Incast(RawIncast),
    /// Every host to every other host.
    AllToAll(RawAllToAll),
    /// Flows listed one by one.
    Flows(Vec<Spanned<RawFlow>>),
    /// Iterative jobs.
    Applications(Vec<Spanned<RawApplication>>),
    /// Sizes from a CDF, Poisson arrivals.
    Poisson(RawPoisson),
    /// A random permutation.
    Permutation(RawPermutation),
    /// Long flows and short ones arriving among them.
    LongShort(RawLongShort),
    /// A flow file of another simulator.
    Import(RawImport),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPermutation {
    #[serde(default)]
    pub hosts: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub flows_per_pair: Option<Spanned<u32>>,
    pub size: Spanned<Bytes>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLongShort {
    #[serde(default)]
    pub senders: Option<Vec<Spanned<String>>>,
    pub receiver: Spanned<String>,
    pub long: Spanned<u32>,
    pub long_size: Spanned<Bytes>,
    pub short: Spanned<u32>,
    pub short_size: Spanned<Bytes>,
    pub window: Spanned<Nanos>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawImport {
    pub format: Format,
    /// Relative to the scenario's folder.
    pub file: Spanned<String>,
    #[serde(default)]
    pub hosts: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPoisson {
    /// `websearch`, `fbhadoop` or a CDF file (relative to the scenario's folder).
    pub cdf: Spanned<String>,
    pub load: Spanned<f64>,
    pub window: Spanned<Nanos>,
    #[serde(default)]
    pub hosts: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApplication {
    pub name: Spanned<String>,
    pub ranks: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    pub exchange: Exchange,
    pub message: Spanned<Bytes>,
    #[serde(default)]
    pub compute: Option<Nanos>,
    pub iterations: Spanned<u32>,
    #[serde(default)]
    pub start: Option<Nanos>,
    #[serde(default)]
    pub delay_sensitivity: Option<Spanned<f64>>,
    #[serde(default)]
    pub kind: MessageKind,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIncast {
    #[serde(default)]
    pub senders: Option<Vec<Spanned<String>>>,
    pub receiver: Spanned<String>,
    #[serde(default)]
    pub flows_per_sender: Option<Spanned<u32>>,
    pub size: Spanned<Bytes>,
    #[serde(default)]
    pub stagger: Option<Nanos>,
    #[serde(default)]
    pub kind: MessageKind,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAllToAll {
    #[serde(default)]
    pub hosts: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub flows_per_pair: Option<Spanned<u32>>,
    pub size: Spanned<Bytes>,
    #[serde(default)]
    pub stagger: Option<Nanos>,
    #[serde(default)]
    pub kind: MessageKind,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    pub src: Spanned<String>,
    pub dst: Spanned<String>,
    pub size: Spanned<Bytes>,
    #[serde(default)]
    pub start: Option<Nanos>,
    #[serde(default)]
    pub kind: MessageKind,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTransport {
    #[serde(default)]
    pub mtu: Option<Spanned<u64>>,
    #[serde(default)]
    pub ack_every: Option<Spanned<u32>>,
    #[serde(default)]
    pub cnp_interval: Option<Nanos>,
    #[serde(default)]
    pub cnp_dscp: Option<Spanned<u8>>,
    #[serde(default)]
    pub int: Option<IntMode>,
}
