//! `intlab p4 ...`: P4 programs checked, described, tested and run, and the CLI of a lab's P4 switch.

use std::io::{self, BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};
use intlab_lab::standing_lab::StandingLab;
use intlab_p4_harness::offline::StfTarget;
use intlab_p4runtime::format::Form;

use crate::{InfoFormat, P4Command};

/// Runs a `p4` subcommand.
pub(crate) fn p4(cmd: P4Command) -> Result<ExitCode> {
    match cmd {
        P4Command::Check { file, preprocessor } => {
            let loaded = intlab_p4::load_with(&file, &preprocessor.options())?;
            print!("{}", loaded.info);
            Ok(ExitCode::SUCCESS)
        }
        P4Command::Info {
            program,
            preprocessor,
            format,
            out,
        } => {
            let loaded = intlab_p4::load_with(&program, &preprocessor.options())?;
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
        P4Command::Test {
            program,
            preprocessor,
            stf,
            veth,
            verbose,
        } => {
            let target = if veth { StfTarget::Veth } else { StfTarget::Memory };
            let options = preprocessor.options();
            let r =
                intlab_p4_harness::offline::test(&program, &options, &stf, target, verbose, &mut io::stdout().lock())?;
            Ok(if r.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        P4Command::Run {
            program,
            preprocessor,
            inputs,
            out,
            runtime,
            commands,
        } => {
            let written = intlab_p4_harness::offline::run(
                &program,
                &preprocessor.options(),
                &inputs,
                &out,
                runtime.as_deref(),
                commands.as_deref(),
            )?;
            for (path, n) in &written {
                println!("wrote {} ({n} frames)", path.display());
            }
            if written.is_empty() {
                println!("no frame left the switch");
            }
            Ok(ExitCode::SUCCESS)
        }
        P4Command::Cli { switch, lab, command } => run_p4_cli(&switch, lab.as_deref(), &command),
    }
}

/// `intlab p4 cli`: sends the command given, or each line of standard input, to a P4 switch of
/// a lab that is up; prints what each printed and refusals as `Error: ...`.
pub(crate) fn run_p4_cli(switch: &str, lab: Option<&str>, command: &[String]) -> Result<ExitCode> {
    use intlab_lab::control_socket::{ControlClient, ControlError};
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
