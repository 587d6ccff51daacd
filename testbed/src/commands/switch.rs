//! `intlab switch`: one switch alone, from its configuration file.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};

/// Runs one switch until SIGINT or SIGTERM, then prints its counters.
pub(crate) fn run_switch(config: &std::path::Path) -> Result<ExitCode> {
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
            let tls = key
                .tls
                .as_ref()
                .map(|t| intlab_p4runtime::server::ServerTls::read(&t.cert, &t.key, t.client_ca.as_deref()))
                .transpose()?;
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
                tls,
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
