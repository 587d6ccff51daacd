//! One life cycle for every lab: planned ([`LabPlan`]: the scenario's topology at its
//! dilation, the lab's configuration and placement, the workload), built and then started,
//! watched, changed and stopped ([`RunningLab`]), and reported ([`report`]). The drivers differ
//! only in placement and in who says when:
//!
//! | driver | plan | built | started and watched | reported |
//! |---|---|---|---|---|
//! | a run (`run`) | [`LabPlan::of_run`] | whole | here, every flow | here |
//! | a site's part (`distributed::serve`) | [`LabPlan::of_run`] with `cfg.site` | its nodes | as its coordinator says, its flows | its [`StoppedLab`] sent to the coordinator |
//! | a lab over sites (`distributed::coordinator`) | [`LabPlan::of_run`] | by its sites | over the sites' connections | the sites' reports merged, then here |
//! | a standing lab (`standing_lab::hold`) | [`LabPlan::standing`] | whole | not: changed through its control socket and P4Runtime | not: its record removed when it stops |

pub mod plan;
pub mod report;
pub mod running;

pub use plan::LabPlan;
pub use report::{Ended, Watched, WorkloadClock, ending_now, report};
pub use running::{RunningLab, StartError, StoppedLab, flow_paths};
