//! The lab as a library: a scenario file ([`scenario`]: the run's keys; [`topology`]: nodes,
//! links, routes) becomes a running lab ([`lab`]: namespaces, veths, the switch fabric and the
//! hosts on the runtime's workers, placed by [`placement`]) through one [`life_cycle`]
//! (planned, built, started, stopped, reported), which [`run`] drives through a workload
//! ([`workload`]) into results ([`results`]: files, plots, the summary and its timing
//! judgement). A lab is watched ([`live`]), changed while it runs ([`lab_links`],
//! [`control_socket`], [`p4runtime_endpoints`]), left up ([`standing_lab`]), run with programs in
//! its hosts ([`host_programs`], [`nic_device`]) and spread over machines ([`sites`] what the
//! parts share, [`distributed`] driving them). See `docs/architecture.md`.

#![forbid(unsafe_code)]

pub mod base_rtt;
pub mod control_socket;
pub mod datapath;
pub mod dilation;
pub mod distributed;
pub mod doctor;
pub mod event_player;
pub mod host_programs;
pub mod lab;
pub mod lab_links;
pub mod life_cycle;
pub mod live;
pub mod netns;
pub mod nic_device;
pub mod p4runtime_endpoints;
pub mod placement;
pub mod prerequisites;
pub mod results;
pub mod run;
pub mod scenario;
pub mod sites;
pub mod standing_lab;
pub mod topology;
pub mod workload;
