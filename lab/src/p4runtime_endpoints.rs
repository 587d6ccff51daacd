//! The P4Runtime endpoints of a lab's P4 switches: the i-th P4 switch in topology order on
//! 127.0.0.1:50051+i with device id i (the tutorials' numbering), or where its
//! `p4.p4runtime` key says.

use std::sync::Arc;

use intlab_p4::Datapath;
use intlab_p4runtime::server::{CpuPort, Endpoint};
use intlab_switch::port::CpuPortEnd;
use serde::{Deserialize, Serialize};

use crate::topology::Topology;

/// Where a switch of a standing lab serves P4Runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct P4RuntimeRecord {
    /// The switch.
    pub switch: String,
    /// `HOST:PORT`.
    pub address: std::net::SocketAddr,
    /// Its device id.
    pub device_id: u64,
}

/// The endpoints of `datapaths` (the lab's P4 switches, in topology order), with the CPU ports
/// of those that have one.
pub fn endpoints(
    topology: &Topology,
    datapaths: Vec<(String, Arc<Datapath>)>,
    cpu_ports: Vec<CpuPortEnd>,
) -> Result<Vec<Endpoint>, String> {
    datapaths
        .into_iter()
        .enumerate()
        .map(|(i, (name, datapath))| {
            let key = topology
                .nodes
                .iter()
                .find(|n| n.name == name)
                .and_then(|n| n.p4.as_ref())
                .map(|p| p.spec.p4runtime.clone())
                .unwrap_or_default();
            let (address, device_id) = key
                .resolve(i)
                .map_err(|e| format!("switch {name}: p4.p4runtime: {e}"))?;
            let tls = key
                .tls
                .as_ref()
                .map(|t| intlab_p4runtime::server::ServerTls::read(&t.cert, &t.key, t.client_ca.as_deref()))
                .transpose()
                .map_err(|e| format!("switch {name}: p4.p4runtime.tls: {e}"))?;
            Ok(Endpoint {
                tls,
                address,
                device_id,
                cpu: cpu_ports.iter().find(|c| c.switch == name).map(|c| CpuPort {
                    socket: Arc::clone(&c.socket),
                    max_frame: c.max_frame,
                }),
                name,
                datapath,
                any_port_if_taken: key.address.is_none(),
            })
        })
        .collect()
}
