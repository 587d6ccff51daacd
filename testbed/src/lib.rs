//! intlab's testbed: the `intlab` command and what it drives.
//!
//! Today this is the capture inspector; the topology model, lab orchestration, workloads and
//! metrics arrive here as they are built (see `docs/`).

pub mod base_rtt;
pub mod capture;
pub mod compare;
pub mod datapath;
pub mod doctor;
pub mod inspect;
pub mod lab;
pub mod netns;
pub mod p4_control;
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
pub mod standing_lab;
pub mod sweep;
pub mod topology;
pub mod workload;
