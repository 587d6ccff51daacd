//! `intlab link set|down|up|show`: a lab's links changed while it runs, through its control
//! socket.

use std::process::ExitCode;

use anyhow::{Context, Result};
use intlab_lab::control_socket::{ControlClient, LinkRequest};
use intlab_lab::standing_lab::StandingLab;

use crate::LinkCommand;

/// Sends the request to the lab (the one named, or the only one up) and prints its answer.
pub(crate) fn link(cmd: LinkCommand) -> Result<ExitCode> {
    let (lab, request) = match cmd {
        LinkCommand::Set { link, keys, lab } => (lab, LinkRequest::Set { link, keys }),
        LinkCommand::Down { target, lab } => (lab, LinkRequest::Down { target }),
        LinkCommand::Up { target, lab } => (lab, LinkRequest::Up { target }),
        LinkCommand::Show { lab } => (lab, LinkRequest::Show),
    };
    let lab = StandingLab::find(lab.as_deref())?;
    let mut client =
        ControlClient::open(&StandingLab::socket_path(&lab.name)).with_context(|| format!("lab {}", lab.name))?;
    if let Some(out) = client.link(request).with_context(|| format!("lab {}", lab.name))? {
        println!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}
