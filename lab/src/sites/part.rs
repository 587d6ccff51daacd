//! The part of a lab one site runs: its nodes, and a VXLAN tunnel for each of its links whose
//! far end is on another site.

use std::net::Ipv4Addr;

use crate::netns::{self, CommandError, Namespace};

/// The UDP port VXLAN tunnels use (IANA's, RFC 7348).
pub const VXLAN_PORT: u16 = 4789;

/// Bytes a frame gains crossing a tunnel: VXLAN's outer Ethernet, IPv4, UDP and VXLAN headers
/// (50), and the lab-time stamp each frame carries (8).
pub const TUNNEL_OVERHEAD: u16 = 50 + intlab_switch::port::tunnel::STAMP_LEN as u16;

/// One cut link as a site sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelSpec {
    /// The VXLAN network identifier: the link's index plus one, the same on both sites.
    pub vni: u32,
    /// This machine's address on the machines' network.
    pub local: Ipv4Addr,
    /// The other machine's.
    pub remote: Ipv4Addr,
    /// What its frames are tagged with: the run's tunnel key and `vni` (its key is never
    /// printed).
    pub seal: intlab_switch::port::tunnel::TunnelSeal,
}

/// What one site builds of a lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitePart {
    /// The site's name.
    pub name: String,
    /// Node index → whether this site runs it.
    pub here: Vec<bool>,
    /// Cut links with an end here: (link index, its tunnel).
    pub tunnels: Vec<(usize, TunnelSpec)>,
}

impl SitePart {
    /// The tunnel of link `li`, when it is cut and has an end here.
    pub fn tunnel(&self, li: usize) -> Option<&TunnelSpec> {
        self.tunnels.iter().find(|(l, _)| *l == li).map(|(_, t)| t)
    }
}

/// The name of link `li`'s tunnel device while it is made (in the site's own namespace, before
/// it moves into the lab's): `iv<PID>x<LINK>`, so that `intlab clean` knows a dead process's.
pub fn device_name(li: usize) -> String {
    format!("iv{}x{li}", std::process::id())
}

/// The process that made tunnel device `name`, when the name is one [`device_name`] gives.
pub fn device_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("iv")?;
    let (pid, link) = rest.split_once('x')?;
    link.parse::<usize>().ok()?;
    pid.parse().ok()
}

/// Removes the tunnel devices in this namespace that a killed site left (made, not yet moved
/// into its lab), and the folder its captures waited in: those of processes no longer running
/// (all with `force`). Returns what was removed and what could not be.
pub fn remove_leftovers(force: bool) -> (Vec<String>, Vec<CommandError>) {
    let (mut removed, mut failed) = (Vec::new(), Vec::new());
    let dead = |pid: u32| force || !netns::process_runs(pid);
    if let Ok(devices) = std::fs::read_dir("/sys/class/net") {
        for name in devices.flatten().map(|e| e.file_name().to_string_lossy().into_owned()) {
            if device_owner(&name).is_some_and(dead) {
                match netns::ip(&["link", "del", &name]) {
                    Ok(()) => removed.push(format!("tunnel device {name}")),
                    Err(e) => failed.push(e),
                }
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for path in entries.flatten().map(|e| e.path()) {
            let owner = path
                .file_name()
                .and_then(|n| n.to_str()?.strip_prefix(CAPTURE_FOLDER)?.parse().ok());
            if owner.is_some_and(dead) {
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => removed.push(format!("capture folder {}", path.display())),
                    Err(e) => failed.push(CommandError {
                        command: format!("removing {}", path.display()),
                        detail: e.to_string(),
                    }),
                }
            }
        }
    }
    (removed, failed)
}

/// The start of the folder a site's captures wait in until sent, before its PID.
pub const CAPTURE_FOLDER: &str = "intlab-site-capture-";

/// Makes link `li`'s VXLAN device in this process's namespace (whose routes reach the other
/// machine), sized for frames of IP MTU `mtu` plus the stamp, and moves it into `lab` (the
/// lab's switch namespace), up. The device keeps its UDP socket where it was made.
pub fn create_tunnel(li: usize, t: &TunnelSpec, mtu: u16, lab: &Namespace) -> Result<String, CommandError> {
    let name = device_name(li);
    let vni = t.vni.to_string();
    let (local, remote) = (t.local.to_string(), t.remote.to_string());
    let port = VXLAN_PORT.to_string();
    let args = [
        "link",
        "add",
        &name,
        "type",
        "vxlan",
        "id",
        &vni,
        "local",
        &local,
        "remote",
        &remote,
        "dstport",
        &port,
        "nolearning",
    ];
    netns::ip(&args)?;
    let inner = (mtu + intlab_switch::port::tunnel::STAMP_LEN as u16).to_string();
    let moved = netns::ip(&["link", "set", "dev", &name, "mtu", &inner]).and_then(|()| netns::move_into(&name, lab));
    if let Err(e) = moved {
        // Still here: it must not outlive the lab.
        if let Err(del) = netns::ip(&["link", "del", &name]) {
            tracing::warn!("removing tunnel device {name}: {del}");
        }
        return Err(e);
    }
    lab.ip(&["link", "set", "dev", &name, "up"])?;
    lab.disable_offloads(&name)?;
    Ok(name)
}

/// The MTU of the interface this machine reaches `remote` through (what the machines' network
/// carries), from `ip route get`.
pub fn underlay_mtu(remote: Ipv4Addr) -> Result<(String, u32), CommandError> {
    let addr = remote.to_string();
    let route = netns::output("ip", &["-o", "route", "get", &addr])?;
    let dev = route
        .split_whitespace()
        .skip_while(|w| *w != "dev")
        .nth(1)
        .ok_or_else(|| CommandError {
            command: format!("ip route get {addr}"),
            detail: format!("no device in `{}`", route.trim()),
        })?
        .to_owned();
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| CommandError {
            command: format!("reading the MTU of {dev}"),
            detail: "no /sys/class/net entry".into(),
        })?;
    Ok((dev, mtu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tunnel_device_names_its_maker() {
        let name = device_name(12);
        assert!(name.len() <= 15, "{name} fits IFNAMSIZ");
        assert_eq!(device_owner(&name), Some(std::process::id()));
        assert_eq!(device_owner("ivy"), None);
        assert_eq!(device_owner("veth0"), None);
    }
}
