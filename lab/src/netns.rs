//! Network namespaces and the interfaces in them, built with iproute2 and removed when dropped
//! (also while unwinding from a panic). Every name carries [`PREFIX`], so `intlab clean` can
//! find what a killed run left behind.

use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Output};

use int_format::ethernet::MacAddress;
use intlab_runtime::sys::{self, sysctl};

/// Prefix of every namespace intlab creates.
pub const PREFIX: &str = "intlab-";

/// A command that failed.
#[derive(Debug, thiserror::Error)]
#[error("`{command}` failed: {detail}")]
pub struct CommandError {
    /// The command line.
    pub command: String,
    /// Its standard error, or why it could not run.
    pub detail: String,
}

fn run(program: &str, args: &[&str]) -> Result<Output, CommandError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program).args(args).output().map_err(|e| CommandError {
        command: command.clone(),
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(CommandError {
            command,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(out)
}

/// Runs `program ARGS` and returns what it printed.
pub fn output(program: &str, args: &[&str]) -> Result<String, CommandError> {
    run(program, args).map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Runs `ip ARGS`.
pub fn ip(args: &[&str]) -> Result<(), CommandError> {
    run("ip", args).map(|_| ())
}

/// A network namespace, deleted (with every interface in it) when dropped.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Creates namespace `name` (which must start with [`PREFIX`]) with loopback up and IPv6
    /// off, so hosts send nothing the experiment did not ask for.
    pub fn create(name: &str) -> Result<Namespace, CommandError> {
        assert!(name.starts_with(PREFIX), "lab namespaces are named {PREFIX}*");
        ip(&["netns", "add", name])?;
        let ns = Namespace { name: name.to_owned() };
        ns.ip(&["link", "set", "lo", "up"])?;
        ns.setup("disabling IPv6", || {
            sysctl::write("net.ipv6.conf.all.disable_ipv6", "1")?;
            sysctl::write("net.ipv6.conf.default.disable_ipv6", "1")
        })?;
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its file, for setns.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }

    /// Runs `ip ARGS` inside.
    pub fn ip(&self, args: &[&str]) -> Result<(), CommandError> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Runs `program ARGS` inside and returns its output (failing on a non-zero exit).
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<Output, CommandError> {
        let mut all = vec!["netns", "exec", self.name.as_str(), program];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs `f` on a thread inside the namespace (sockets it opens live there).
    pub fn run<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> io::Result<T> + Send + 'static,
    {
        sys::netns::run_in(&self.path(), f)
    }

    /// Runs set-up step `what` inside the namespace; a failure names the step and the namespace.
    fn setup<F>(&self, what: &str, f: F) -> Result<(), CommandError>
    where
        F: FnOnce() -> io::Result<()> + Send + 'static,
    {
        self.run(f).map_err(|e| CommandError {
            command: format!("{what} in namespace {}", self.name),
            detail: e.to_string(),
        })
    }

    /// Turns the offloads of interface `dev` off (see [`sys::offload`]) and checks they read
    /// back off.
    pub fn disable_offloads(&self, dev: &str) -> Result<(), CommandError> {
        let d = dev.to_owned();
        self.setup(&format!("turning offloads off on {dev}"), move || {
            sys::offload::disable_all(&d).map_err(io::Error::other)
        })
    }

    /// A closure that moves the calling thread into this namespace (for threads that must live
    /// there, such as a transport endpoint).
    pub fn enter(&self) -> impl FnOnce() -> io::Result<()> + Send + 'static {
        let path = self.path();
        move || sys::netns::enter(&path)
    }

    /// Gives interface `dev` (already in this namespace) a MAC, an address, and brings it up
    /// with segmentation offloads off, so every frame is one MTU-sized packet.
    pub fn configure(&self, dev: &str, mac: MacAddress, addr: Ipv4Addr, prefix_len: u8) -> Result<(), CommandError> {
        self.ip(&["link", "set", "dev", dev, "address", &mac.to_string()])?;
        self.ip(&["addr", "add", &format!("{addr}/{prefix_len}"), "dev", dev])?;
        self.ip(&["link", "set", "dev", dev, "up"])?;
        self.disable_offloads(dev)
    }

    /// Adds a permanent neighbour entry (no ARP needed).
    pub fn neighbor(&self, dev: &str, addr: Ipv4Addr, mac: MacAddress) -> Result<(), CommandError> {
        self.ip(&[
            "neigh",
            "replace",
            &addr.to_string(),
            "lladdr",
            &mac.to_string(),
            "dev",
            dev,
            "nud",
            "permanent",
        ])
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            tracing::warn!("{e}");
        }
    }
}

/// The IP and UDP counters a namespace's kernel keeps (/proc/net/snmp): where datagrams that
/// reached a host but no socket were lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelCounters {
    /// IP packets received.
    pub ip_in_receives: u64,
    /// IP packets with a bad header.
    pub ip_in_hdr_errors: u64,
    /// IP packets for an address that is not the host's.
    pub ip_in_addr_errors: u64,
    /// UDP datagrams delivered to sockets.
    pub udp_in_datagrams: u64,
    /// UDP datagrams for a port nobody listens on.
    pub udp_no_ports: u64,
    /// UDP datagrams dropped with errors.
    pub udp_in_errors: u64,
    /// UDP datagrams dropped for a full socket buffer.
    pub udp_rcvbuf_errors: u64,
    /// UDP datagrams dropped for a bad checksum.
    pub udp_in_csum_errors: u64,
}

impl KernelCounters {
    /// Parses /proc/net/snmp (a header line, then a value line, per protocol).
    pub fn parse(snmp: &str) -> KernelCounters {
        let mut c = KernelCounters::default();
        let lines: Vec<&str> = snmp.lines().collect();
        for pair in lines.chunks(2) {
            let [names, values] = pair else { continue };
            let (Some((proto, names)), Some((_, values))) = (names.split_once(':'), values.split_once(':')) else {
                continue;
            };
            for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
                let v = value.parse().unwrap_or(0);
                match (proto, name) {
                    ("Ip", "InReceives") => c.ip_in_receives = v,
                    ("Ip", "InHdrErrors") => c.ip_in_hdr_errors = v,
                    ("Ip", "InAddrErrors") => c.ip_in_addr_errors = v,
                    ("Udp", "InDatagrams") => c.udp_in_datagrams = v,
                    ("Udp", "NoPorts") => c.udp_no_ports = v,
                    ("Udp", "InErrors") => c.udp_in_errors = v,
                    ("Udp", "RcvbufErrors") => c.udp_rcvbuf_errors = v,
                    ("Udp", "InCsumErrors") => c.udp_in_csum_errors = v,
                    _ => {}
                }
            }
        }
        c
    }

    /// What each counter grew by since `before`, as (name, growth) for those that grew.
    pub fn growth(&self, before: &KernelCounters) -> Vec<(&'static str, u64)> {
        let pairs = [
            ("IP packets received", self.ip_in_receives, before.ip_in_receives),
            ("IP header errors", self.ip_in_hdr_errors, before.ip_in_hdr_errors),
            (
                "IP packets for another address",
                self.ip_in_addr_errors,
                before.ip_in_addr_errors,
            ),
            (
                "UDP datagrams delivered",
                self.udp_in_datagrams,
                before.udp_in_datagrams,
            ),
            ("UDP datagrams to a closed port", self.udp_no_ports, before.udp_no_ports),
            ("UDP receive errors", self.udp_in_errors, before.udp_in_errors),
            (
                "UDP socket buffer overflows",
                self.udp_rcvbuf_errors,
                before.udp_rcvbuf_errors,
            ),
            (
                "UDP checksum errors",
                self.udp_in_csum_errors,
                before.udp_in_csum_errors,
            ),
        ];
        pairs
            .into_iter()
            .filter(|(_, now, then)| now > then)
            .map(|(name, now, then)| (name, now - then))
            .collect()
    }
}

impl Namespace {
    /// Its kernel's IP and UDP counters now.
    pub fn kernel_counters(&self) -> io::Result<KernelCounters> {
        // /proc/thread-self/net is the reading thread's namespace; /proc/self/net would be the
        // process's.
        self.run(|| std::fs::read_to_string("/proc/thread-self/net/snmp").map(|t| KernelCounters::parse(&t)))
    }
}

/// Creates a veth pair, each end directly inside its namespace (nothing in the root namespace).
pub fn veth_pair(a: &str, a_ns: &Namespace, b: &str, b_ns: &Namespace) -> Result<(), CommandError> {
    ip(&[
        "link",
        "add",
        a,
        "netns",
        a_ns.name(),
        "type",
        "veth",
        "peer",
        "name",
        b,
        "netns",
        b_ns.name(),
    ])?;
    a_ns.ip(&["link", "set", "dev", a, "up"])?;
    b_ns.ip(&["link", "set", "dev", b, "up"])?;
    a_ns.disable_offloads(a)?;
    b_ns.disable_offloads(b)
}

/// Moves interface `dev` from the root namespace into `ns`.
pub fn move_into(dev: &str, ns: &Namespace) -> Result<(), CommandError> {
    ip(&["link", "set", "dev", dev, "netns", ns.name()])
}

/// The prefix of the namespaces a lab of process `pid` makes, tagged `tag` (letters and
/// digits, to tell a process's labs apart): `intlab-PID-TAG`. The owner's PID in the name lets
/// `intlab clean` leave the labs of running processes alone.
pub fn run_prefix(pid: u32, tag: &str) -> String {
    format!("{PREFIX}{pid}-{tag}")
}

/// The process that made lab namespace `name`, when the name says (see [`run_prefix`]).
pub fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok()
}

/// True when the process that made lab namespace `name` still runs.
pub fn is_live(name: &str) -> bool {
    owner(name).is_some_and(process_runs)
}

/// True while process `pid` exists.
pub fn process_runs(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Sends `sig` to process `pid`; a process already gone is no error.
pub fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    intlab_runtime::sys::process::signal(pid, sig)
}

/// Names of the lab namespaces that exist now. No `/var/run/netns` means none (`ip netns`
/// makes it with the first namespace); any other failure to read it is an error, so that a
/// leak check cannot pass on a list it could not read.
pub fn lab_namespaces() -> io::Result<Vec<String>> {
    let dir = match std::fs::read_dir("/var/run/netns") {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("reading /var/run/netns: {e}"))),
    };
    let mut names = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|e| io::Error::new(e.kind(), format!("reading /var/run/netns: {e}")))?;
        if let Ok(name) = entry.file_name().into_string()
            && name.starts_with(PREFIX)
        {
            names.push(name);
        }
    }
    Ok(names)
}

/// Processes whose network namespace is `name` (as `ip netns pids` finds them: by the
/// namespace file's inode), this process excluded.
pub fn processes_in(name: &str) -> io::Result<Vec<u32>> {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata(PathBuf::from("/var/run/netns").join(name))?;
    let me = std::process::id();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // A process may end while we look: its entry is then simply gone.
        if let Ok(m) = std::fs::metadata(entry.path().join("ns/net"))
            && (m.dev(), m.ino()) == (ns.dev(), ns.ino())
            && pid != me
        {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// Ends every process in namespace `name` (SIGTERM, then SIGKILL for those still there after
/// `grace`): a namespace whose processes live on outlasts its deletion. Returns how many.
pub fn end_processes_in(name: &str, grace: std::time::Duration) -> io::Result<usize> {
    let pids = processes_in(name)?;
    for &pid in &pids {
        signal(pid, libc::SIGTERM)?;
    }
    let started = std::time::Instant::now();
    while pids.iter().any(|&p| process_runs(p)) && started.elapsed() < grace {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for &pid in pids.iter().filter(|&&p| process_runs(p)) {
        signal(pid, libc::SIGKILL)?;
    }
    Ok(pids.len())
}

/// What [`clean`] did.
#[derive(Debug, Default)]
pub struct Cleaned {
    /// Namespaces removed.
    pub removed: Vec<String>,
    /// Namespaces of labs whose process still runs, left alone.
    pub live: Vec<String>,
    /// Removals that failed.
    pub failed: Vec<CommandError>,
}

/// Deletes every lab namespace whose name starts with `prefix` (itself starting with
/// [`PREFIX`]), their interfaces with them, except those of processes still running unless
/// `force`.
pub fn clean(prefix: &str, force: bool) -> Cleaned {
    let mut out = Cleaned::default();
    let names = match lab_namespaces() {
        Ok(n) => n,
        Err(e) => {
            out.failed.push(CommandError {
                command: "list /var/run/netns".into(),
                detail: e.to_string(),
            });
            return out;
        }
    };
    for name in names.into_iter().filter(|n| n.starts_with(prefix)) {
        if !force && is_live(&name) {
            out.live.push(name);
            continue;
        }
        match ip(&["netns", "del", &name]) {
            Ok(()) => out.removed.push(name),
            Err(e) => out.failed.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_namespace_names_its_owner() {
        let p = run_prefix(4242, "r");
        assert_eq!(p, "intlab-4242-r");
        assert_eq!(owner(&format!("{p}-h1")), Some(4242));
        assert_eq!(owner("intlab-r12345-h1"), None, "names of older versions say nobody");
        assert!(is_live(&run_prefix(std::process::id(), "x")));
        assert!(!is_live("intlab-r12345-h1"));
    }

    #[test]
    fn snmp_counters_are_read_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors\nIp: 2 64 10 1 2\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n\
                    Udp: 7 1 3 9 0 0 3\n";
        let c = KernelCounters::parse(snmp);
        assert_eq!((c.ip_in_receives, c.ip_in_hdr_errors, c.ip_in_addr_errors), (10, 1, 2));
        assert_eq!(
            (
                c.udp_in_datagrams,
                c.udp_no_ports,
                c.udp_in_errors,
                c.udp_in_csum_errors
            ),
            (7, 1, 3, 3)
        );
        let before = KernelCounters {
            udp_in_csum_errors: 1,
            ..c
        };
        assert_eq!(c.growth(&before), [("UDP checksum errors", 2)]);
    }
}
