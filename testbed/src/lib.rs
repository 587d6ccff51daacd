//! intlab's testbed: everything the `intlab` command does. A scenario file ([`scenario`]: the
//! run's keys; [`topology`]: nodes, links, routes) becomes a running lab ([`lab`]: namespaces,
//! veths, the switch fabric and the hosts on the runtime's workers, placed by [`placement`]),
//! which [`run`] drives through a workload ([`workload`]) into results ([`results`]: files,
//! plots, the summary and its timing judgement). Around that: comparing controllers
//! ([`compare`]), sweeping parameters ([`sweep`]), checking the machine ([`doctor`]), labs left
//! up ([`standing_lab`]), P4 tools ([`p4_offline`], [`p4_on_switch`], [`control_socket`],
//! [`p4runtime`]), RL-CC ([`rlcc`]) and the capture inspector ([`inspect`]). See
//! `docs/architecture.md`.

#![forbid(unsafe_code)]

pub mod base_rtt;
pub mod capture;
pub mod compare;
pub mod control_socket;
pub mod datapath;
pub mod dilation;
pub mod distributed;
pub mod doctor;
pub mod event_player;
pub mod host_programs;
pub mod inspect;
pub mod lab;
pub mod lab_links;
pub mod live;
pub mod netns;
pub mod nic_device;
pub mod p4_offline;
pub mod p4_on_switch;
pub mod p4runtime;
pub mod placement;
pub mod prerequisites;
pub mod results;
pub mod rlcc;
pub mod run;
pub mod scenario;
pub mod sensitivity;
pub mod sites;
pub mod standing_lab;
pub mod sweep;
pub mod topology;
pub mod workload;
