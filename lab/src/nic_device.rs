//! The RDMA device of every lab host, as the programs run in the host see it: `intlab0`, a
//! RoCE v2 port whose GID 0 is the host's address, driven by the host's transport in the lab.
//!
//! Three things make it: the NIC's command file, one per host in a FUSE mount the lab serves
//! (transport's `command_file`); the provider libibverbs loads (the
//! `intlab-verbs-provider` library built beside the `intlab` binary, named through
//! `RDMAV_DRIVERS`); and a private view of `/sys` and `/dev` for each program started in the
//! host, in a mount namespace of its own: this kernel has no RDMA, so the sysfs files and the
//! device node libibverbs looks for are laid over the real ones there, and nowhere else.

use std::ffi::OsString;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use intlab_nic_channel::device as dev;
use intlab_runtime::sys::mount;
use intlab_transport::command_file::CommandFiles;
use intlab_transport::endpoint::ProgramPort;
use serde::{Deserialize, Serialize};

/// Where the labs keep their NICs' files, one folder per lab named by its prefix.
pub const NIC_DIR: &str = "/run/intlab/nic";

/// The device's name in every host.
pub const DEVICE_NAME: &str = "intlab0";

/// The uverbs device it is (`/dev/infiniband/uverbs0`).
const UVERBS_NAME: &str = "uverbs0";

/// The character device the device node is: the memory driver's "full" device, whose writes
/// fail. libibverbs opens the node and the provider replaces the descriptor with the command
/// file at once; a verb that writes to the node without asking the provider then fails cleanly.
const NODE_MAJOR_MINOR: (u32, u32) = (1, 7);

/// The uverbs ABI version libibverbs accepts (3 to 6).
const UVERBS_ABI_VERSION: u32 = 6;

/// The provider library's file name, as cargo builds it.
pub const PROVIDER_FILE: &str = "libintlab_verbs_provider.so";

/// The name libibverbs is given (`RDMAV_DRIVERS`), without the `-rdmav34.so` it adds.
const PROVIDER_STEM: &str = "libintlab";

/// What a host's device is: enough, with the lab's files, to give a program the host's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostDevice {
    /// The NIC's command file.
    pub command_file: PathBuf,
    /// The lab's NIC folder (the provider's link and the empty folder private views mount on).
    pub lab_dir: PathBuf,
    /// The host's address (GID 0).
    pub address: Ipv4Addr,
    /// The host's interface (the GID's network device).
    pub interface: String,
    /// The port's MTU (bytes of RoCE payload).
    pub mtu: u32,
    /// The port's link rate (b/s).
    pub rate_bps: u64,
}

impl HostDevice {
    /// The files of the device under sysfs' `class/` (path, content).
    fn sysfs_files(&self) -> Vec<(String, String)> {
        let ib = format!("infiniband/{DEVICE_NAME}");
        let uv = format!("infiniband_verbs/{UVERBS_NAME}");
        let gid = dev::gid_of(self.address.octets());
        let gid_text = gid
            .chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect::<Vec<_>>()
            .join(":");
        let guid = dev::node_guid(self.address.octets());
        let guid_text = (0..4)
            .map(|k| format!("{:04x}", (guid >> (48 - 16 * k)) & 0xffff))
            .collect::<Vec<_>>()
            .join(":");
        let port = PortFacts {
            mtu: self.mtu,
            rate_bps: self.rate_bps,
        };
        vec![
            ("infiniband_verbs/abi_version".into(), format!("{UVERBS_ABI_VERSION}\n")),
            (format!("{uv}/ibdev"), format!("{DEVICE_NAME}\n")),
            (
                format!("{uv}/dev"),
                format!("{}:{}\n", NODE_MAJOR_MINOR.0, NODE_MAJOR_MINOR.1),
            ),
            (format!("{uv}/abi_version"), format!("{}\n", dev::ABI_VERSION)),
            (format!("{ib}/node_type"), "1: CA\n".into()),
            (format!("{ib}/node_guid"), format!("{guid_text}\n")),
            (format!("{ib}/sys_image_guid"), format!("{guid_text}\n")),
            (format!("{ib}/fw_ver"), format!("{}\n", dev::FW_VER)),
            (format!("{ib}/hw_rev"), format!("{}\n", dev::HW_VER)),
            (format!("{ib}/node_desc"), format!("intlab NIC of {}\n", self.address)),
            (
                format!("{ib}/{}", dev::COMMAND_FILE_ATTR),
                format!("{}\n", self.command_file.display()),
            ),
            (format!("{ib}/ports/1/state"), "4: ACTIVE\n".into()),
            (format!("{ib}/ports/1/phys_state"), "5: LinkUp\n".into()),
            (format!("{ib}/ports/1/link_layer"), "Ethernet\n".into()),
            (format!("{ib}/ports/1/rate"), format!("{}\n", port.rate_text())),
            (format!("{ib}/ports/1/lid"), "0x0\n".into()),
            (format!("{ib}/ports/1/sm_lid"), "0x0\n".into()),
            (format!("{ib}/ports/1/cap_mask"), "0x00010000\n".into()),
            (format!("{ib}/ports/1/gids/0"), format!("{gid_text}\n")),
            (format!("{ib}/ports/1/gid_attrs/types/0"), "RoCE v2\n".into()),
            (
                format!("{ib}/ports/1/gid_attrs/ndevs/0"),
                format!("{}\n", self.interface),
            ),
            (format!("{ib}/ports/1/pkeys/0"), "0xffff\n".into()),
        ]
    }

    /// Gives the calling thread (and what it executes) the host's view of its device: a mount
    /// namespace of its own where `/sys` is the host network namespace's (entered before this,
    /// as `ip netns exec` remounts it), `/sys/class` has the device's files laid over it and
    /// `/dev/infiniband` its node. Returns the environment a program needs to load the
    /// provider (`RDMAV_DRIVERS`).
    pub fn enter(&self) -> io::Result<Vec<(String, OsString)>> {
        let view = self.lab_dir.join("view");
        mount::unshare_mounts()?;
        // The other labs' command files are not this program's; a copy of their mount held
        // here would outlive their lab.
        for m in mount::mounts_under(Path::new(NIC_DIR))?.iter().rev() {
            if !m.starts_with(&self.lab_dir) {
                mount::detach(m)?;
            }
        }
        let sys = Path::new("/sys");
        mount::detach(sys)?;
        mount::mount("sysfs", sys, "sysfs", 0, None)?;
        mount::mount("intlab", &view, "tmpfs", libc::MS_NOSUID, Some("mode=755,size=1m"))?;
        let class = view.join("class");
        for (path, text) in self.sysfs_files() {
            let p = class.join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, text).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
        }
        let node_dir = view.join("dev/infiniband");
        std::fs::create_dir_all(&node_dir)?;
        mount::make_char_device(&node_dir.join(UVERBS_NAME), NODE_MAJOR_MINOR.0, NODE_MAJOR_MINOR.1)?;
        let overlay = |lower: &Path, real: &Path| format!("lowerdir={}:{}", lower.display(), real.display());
        mount::mount(
            "intlab",
            Path::new("/sys/class"),
            "overlay",
            libc::MS_RDONLY,
            Some(&overlay(&class, Path::new("/sys/class"))),
        )?;
        // /dev is laid over in a side folder with its submounts (pts, shm, mqueue) bound in,
        // then moved into place in one step, so nothing in it is ever missing.
        let new_dev = view.join("new-dev");
        std::fs::create_dir(&new_dev)?;
        let real_dev = Path::new("/dev");
        let submounts = mount::mounts_under(real_dev)?;
        mount::mount(
            "intlab",
            &new_dev,
            "overlay",
            0,
            Some(&overlay(&view.join("dev"), real_dev)),
        )?;
        let mut bound: Vec<&PathBuf> = Vec::new();
        for m in submounts.iter().filter(|m| m.parent() == Some(real_dev)) {
            if bound.contains(&m) {
                continue;
            }
            let rel = m.strip_prefix(real_dev).map_err(io::Error::other)?;
            mount::bind(m, &new_dev.join(rel))?;
            bound.push(m);
        }
        mount::move_mount(&new_dev, real_dev)?;
        let mut env = vec![(
            "RDMAV_DRIVERS".to_owned(),
            self.lab_dir.join(PROVIDER_STEM).into_os_string(),
        )];
        env.extend(
            self.middleware_environment()
                .into_iter()
                .filter(|(k, _)| std::env::var_os(k).is_none())
                .map(|(k, v)| (k.to_owned(), OsString::from(v))),
        );
        Ok(env)
    }

    /// What UCX and Open MPI need to run over the device, for a program that has not set
    /// them itself: the lab's hosts share one machine (one host name, one `/tmp`), where UCX
    /// would otherwise move data between hosts through shared memory and Open MPI pick
    /// NVIDIA devices only, talk over `lo` and share one topology segment among its daemons.
    fn middleware_environment(&self) -> Vec<(&'static str, String)> {
        vec![
            ("UCX_NET_DEVICES", format!("{DEVICE_NAME}:1")),
            ("UCX_TLS", "rc_verbs,ud_verbs,self".to_owned()),
            ("OMPI_MCA_pml_ucx_devices", "any".to_owned()),
            ("OMPI_MCA_oob_tcp_if_include", self.interface.clone()),
            ("OMPI_MCA_rtc_hwloc_vmhole", "none".to_owned()),
        ]
    }
}

/// What sysfs says of a port's rate.
struct PortFacts {
    mtu: u32,
    rate_bps: u64,
}

impl PortFacts {
    /// The port's rate as a RoCE device's sysfs gives it (`25 Gb/sec (1X EDR)`), from the
    /// speed code `ibv_query_port` reports.
    fn rate_text(&self) -> String {
        let info = dev::PortInfo {
            mtu: self.mtu,
            rate_bps: self.rate_bps,
            gid: [0; 16],
        };
        let (width, speed) = info.width_speed();
        let lanes = if width == 2 { 4 } else { 1 };
        let (lane_gbps, name) = match speed {
            1 => (2.5, "SDR"),
            2 => (5.0, "DDR"),
            4 => (10.0, "QDR"),
            32 => (25.0, "EDR"),
            64 => (50.0, "HDR"),
            _ => (100.0, "NDR"),
        };
        format!("{} Gb/sec ({}X {name})", lane_gbps * f64::from(lanes), lanes)
    }
}

/// Where the provider library is: `INTLAB_VERBS_PROVIDER` when set, else beside the `intlab`
/// binary (`cargo build` puts it there), else in cargo's `deps` folder beside it (where `cargo
/// test` leaves it on a fresh checkout), else beside the folder of a test binary.
pub fn provider_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("INTLAB_VERBS_PROVIDER") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join(PROVIDER_FILE),
        dir.join("deps").join(PROVIDER_FILE),
        dir.parent()?.join(PROVIDER_FILE),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// The devices of a lab's hosts: their command files served, the lab's NIC folder made;
/// dropping it unmounts and removes them.
pub struct LabNics {
    dir: PathBuf,
    files: Option<CommandFiles>,
    /// Where the provider is, when it was found.
    provider: Option<PathBuf>,
}

impl std::fmt::Debug for LabNics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LabNics({})", self.dir.display())
    }
}

impl LabNics {
    /// Makes the NIC folder of the lab with namespace prefix `prefix` and serves the command
    /// files of `hosts` there. Without the provider library (not built), programs will find
    /// no device: that is logged, not an error, for runs that start none.
    pub fn serve(prefix: &str, hosts: Vec<ProgramPort>) -> io::Result<LabNics> {
        let dir = Path::new(NIC_DIR).join(prefix);
        let made = |e: io::Error, p: &Path| io::Error::new(e.kind(), format!("{}: {e}", p.display()));
        for sub in ["commands", "view"] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).map_err(|e| made(e, &p))?;
        }
        let mut nics = LabNics {
            dir: dir.clone(),
            files: None,
            provider: provider_path(),
        };
        match &nics.provider {
            Some(p) => {
                let link = dir.join(format!("{PROVIDER_STEM}-rdmav34.so"));
                std::os::unix::fs::symlink(p, &link).map_err(|e| made(e, &link))?;
            }
            None => tracing::warn!(
                "no {PROVIDER_FILE} beside the intlab binary (cargo build --release builds it): \
                 RDMA programs in the hosts will find no device"
            ),
        }
        nics.files = Some(CommandFiles::serve(&dir.join("commands"), hosts)?);
        Ok(nics)
    }

    /// True when programs can load the provider.
    pub fn has_provider(&self) -> bool {
        self.provider.is_some()
    }

    /// The device of host `name`, with its address, interface and port.
    pub fn device(&self, name: &str, address: Ipv4Addr, interface: &str, mtu: u32, rate_bps: u64) -> HostDevice {
        HostDevice {
            command_file: self.dir.join("commands").join(name),
            lab_dir: self.dir.clone(),
            address,
            interface: interface.to_owned(),
            mtu,
            rate_bps,
        }
    }
}

impl Drop for LabNics {
    fn drop(&mut self) {
        drop(self.files.take());
        if let Err(e) = remove(&self.dir) {
            tracing::warn!("removing {}: {e}", self.dir.display());
        }
    }
}

/// Detaches whatever is still mounted under `dir` (the command files of a lab whose process
/// was killed) and removes it.
fn remove(dir: &Path) -> io::Result<()> {
    for m in mount::mounts_under(dir)?.iter().rev() {
        mount::detach(m)?;
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display())))
        }
        _ => Ok(()),
    }
}

/// Removes the NIC folders of labs under `prefix` whose process is gone (all of them with
/// `force`); returns the folders removed and the failures.
pub fn clean(prefix: &str, force: bool) -> (Vec<PathBuf>, Vec<String>) {
    let (mut removed, mut failed) = (Vec::new(), Vec::new());
    let entries = match std::fs::read_dir(NIC_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (removed, failed),
        Err(e) => {
            failed.push(format!("{NIC_DIR}: {e}"));
            return (removed, failed);
        }
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(prefix) || (!force && crate::netns::is_live(&name)) {
            continue;
        }
        match remove(&e.path()) {
            Ok(()) => removed.push(e.path()),
            Err(err) => failed.push(err.to_string()),
        }
    }
    (removed, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> HostDevice {
        HostDevice {
            command_file: "/run/intlab/nic/intlab-1-x/commands/h1".into(),
            lab_dir: "/run/intlab/nic/intlab-1-x".into(),
            address: Ipv4Addr::new(198, 18, 0, 1),
            interface: "eth0".into(),
            mtu: 1024,
            rate_bps: 25_000_000_000,
        }
    }

    #[test]
    fn the_sysfs_files_say_what_libibverbs_reads() {
        let files: std::collections::HashMap<String, String> = device().sysfs_files().into_iter().collect();
        let f = |k: &str| files[k].trim().to_owned();
        assert_eq!(f("infiniband_verbs/uverbs0/ibdev"), "intlab0");
        assert_eq!(f("infiniband_verbs/uverbs0/dev"), "1:7");
        assert_eq!(
            f("infiniband/intlab0/ports/1/gids/0"),
            "0000:0000:0000:0000:0000:ffff:c612:0001"
        );
        assert_eq!(f("infiniband/intlab0/node_guid"), "0200:0000:c612:0001");
        assert_eq!(f("infiniband/intlab0/ports/1/gid_attrs/types/0"), "RoCE v2");
        assert_eq!(f("infiniband/intlab0/ports/1/gid_attrs/ndevs/0"), "eth0");
        assert_eq!(f("infiniband/intlab0/ports/1/rate"), "25 Gb/sec (1X EDR)");
        assert_eq!(
            f(&format!("infiniband/intlab0/{}", dev::COMMAND_FILE_ATTR)),
            "/run/intlab/nic/intlab-1-x/commands/h1"
        );
    }
}
