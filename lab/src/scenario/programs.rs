//! `programs:` the programs a run starts in its hosts (perftest, a user's verbs code, an MPI
//! job): each on the host's RDMA device, at a scenario time, the run waiting for it or not.

use serde::Serialize;
use serde_saphyr::Spanned;

use super::raw::{RawCommand, RawProgram};
use crate::topology::{NodeKind, Topology};

/// A program of the scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgramSpec {
    /// Its name in results (`name:`, else the host and its place in the list, `h1-0`).
    pub name: String,
    /// The host it runs in (node index).
    #[serde(skip)]
    pub host: usize,
    /// The program and its arguments (`run:` as a string is `/bin/sh -c` and the string).
    pub argv: Vec<String>,
    /// When it starts, from the start of the workload (scenario ns; the program then runs on
    /// the machine's clock).
    pub start_ns: u64,
    /// The run waits for it to exit (`wait:`, true unless set): a server a client's end ends
    /// is `wait: false`, and is stopped when the run ends.
    pub wait: bool,
    /// Runs at the usual scheduling priority rather than below the lab's (docs/verbs.md).
    pub normal_priority: bool,
}

/// Checks `programs:` against `topology`, each refusal with `programs[i]` and where (`err`
/// makes the error at a position).
pub(super) fn check<E>(
    raw: &[Spanned<RawProgram>],
    topology: &Topology,
    err: impl Fn(&serde_saphyr::Location, String) -> E,
) -> Result<Vec<ProgramSpec>, E> {
    let mut out: Vec<ProgramSpec> = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        let v = &p.value;
        let host = topology
            .node(&v.host.value)
            .filter(|&n| topology.nodes[n].kind == NodeKind::Host)
            .ok_or_else(|| {
                err(
                    &v.host.referenced,
                    format!(
                        "programs[{i}].host: expected the name of a host, got `{}`",
                        v.host.value
                    ),
                )
            })?;
        let argv = match &v.run.value {
            RawCommand::Shell(line) if !line.trim().is_empty() => {
                vec!["/bin/sh".to_owned(), "-c".to_owned(), line.clone()]
            }
            RawCommand::Argv(argv) if argv.first().is_some_and(|p| !p.is_empty()) => argv.clone(),
            _ => {
                return Err(err(
                    &v.run.referenced,
                    format!("programs[{i}].run: expected a command, e.g. run: ib_write_bw -d intlab0"),
                ));
            }
        };
        let name = match &v.name {
            Some(n) if !is_file_name(&n.value) => {
                return Err(err(
                    &n.referenced,
                    format!(
                        "programs[{i}].name: expected letters, digits, `-`, `_` or `.` (it names a file), got `{}`",
                        n.value
                    ),
                ));
            }
            Some(n) => n.value.clone(),
            None => format!("{}-{i}", v.host.value),
        };
        if out.iter().any(|o| o.name == name) {
            let at = v.name.as_ref().map_or(&p.referenced, |n| &n.referenced);
            return Err(err(
                at,
                format!("programs[{i}].name: `{name}` names another program too"),
            ));
        }
        out.push(ProgramSpec {
            name,
            host,
            argv,
            start_ns: v.start.as_ref().map_or(0, |s| s.value.0),
            wait: v.wait.unwrap_or(true),
            normal_priority: v.normal_priority.unwrap_or(false),
        });
    }
    Ok(out)
}

/// True for a name that is one file name and nothing else.
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
