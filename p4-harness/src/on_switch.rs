//! STF tests through the lab's running switch: `intlab p4 test --veth`. Each port an STF file
//! names (and every port below the highest, as simple_switch's test harness has them, up to
//! [`ALL_PORTS_BELOW`]) becomes a veth pair in a namespace of its own, the switch on one end
//! (one worker) and the test on the other, sending and reading raw frames. Each packet is done
//! with before the next is sent, so that every port's frames come in the file's order. The verdicts are those of the in-memory run when the switch does what the
//! program says; frames a kernel interface cannot carry (shorter than an Ethernet header,
//! longer than the MTU) are refused up front.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use intlab_p4::stf::{Command, Report, StfFile, StfSwitch};
use intlab_p4::{Datapath, PreprocessorOptions};
use intlab_runtime::sys::{mmsg, socket};
use intlab_switch::Switch;
use intlab_switch::config::SwitchSpec;

use intlab_lab::netns::{self, Namespace};

/// The interfaces' MTU: room for any frame an STF file of p4c's sends.
const MTU: usize = 9000;
/// Shortest frame AF_PACKET sends: an Ethernet header.
const MIN_FRAME: usize = 14;
/// How long the switch may take over a frame before the test gives up on it.
const PATIENCE: Duration = Duration::from_secs(5);
/// How long the counters must stay still before the switch counts as done: a frame it holds
/// (a queue, a recirculation) moves them within microseconds.
const QUIET: Duration = Duration::from_millis(5);
/// Files whose ports are all below this get every port from 0 to their highest: a program may
/// send a frame through a port the file never names (to recirculate it, say).
const ALL_PORTS_BELOW: u16 = 32;

/// Runs STF file `file` on `program` through a switch on veth pairs; returns the verdicts.
pub fn run(program: &Path, options: &PreprocessorOptions, file: &StfFile) -> Result<Report> {
    let ports = ports_of(file)?;
    let mut rig = Rig::start(program, options, &ports)?;
    let dp = rig.datapath()?;
    let report = intlab_p4::stf::run_on(&dp, file, &mut rig)?;
    rig.stop()?;
    Ok(report)
}

/// The ports a file sends on or expects on, each frame checked to fit a kernel interface.
fn ports_of(file: &StfFile) -> Result<BTreeSet<u16>> {
    let mut ports = BTreeSet::new();
    for (line, cmd) in &file.commands {
        match cmd {
            Command::Packet(port, frame) => {
                if !(MIN_FRAME..=MTU + MIN_FRAME).contains(&frame.len()) {
                    bail!(
                        "{}:{line}: a {}-byte frame cannot cross a kernel interface ({MIN_FRAME} to {} bytes)",
                        file.name,
                        frame.len(),
                        MTU + MIN_FRAME
                    );
                }
                ports.insert(*port);
            }
            Command::Expect(port, _) => {
                ports.insert(*port);
            }
            _ => {}
        }
    }
    if ports.is_empty() {
        bail!("{}: no packet is sent or expected", file.name);
    }
    if let Some(&highest) = ports.last().filter(|&&p| p < ALL_PORTS_BELOW) {
        ports.extend(0..=highest);
    }
    Ok(ports)
}

/// The switch under test and the test's ends of its ports. Field order is drop order: the
/// switch stops (closing its ends) before the namespace and its interfaces go.
struct Rig {
    switch: Option<Switch>,
    /// Per P4 port: the test's raw socket on the other end of the port's veth pair.
    ends: Vec<(u16, OwnedFd)>,
    /// Frames sent in since the switch was last done.
    sent: u64,
    /// Frames the switch counted in and out when it was last done.
    counted: (u64, u64),
    /// Frames read since the last `settle`.
    held: Vec<(u16, Vec<u8>)>,
    _ns: Namespace,
}

impl Rig {
    fn start(program: &Path, options: &PreprocessorOptions, ports: &BTreeSet<u16>) -> Result<Rig> {
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let tag = format!("stf{}", RUNS.fetch_add(1, Ordering::Relaxed));
        let ns = Namespace::create(&netns::run_prefix(std::process::id(), &tag))?;
        let mtu = MTU.to_string();
        for p in ports {
            let (sw, test) = (format!("s{p}"), format!("t{p}"));
            netns::veth_pair(&sw, &ns, &test, &ns)?;
            ns.ip(&["link", "set", "dev", &sw, "mtu", &mtu])?;
            ns.ip(&["link", "set", "dev", &test, "mtu", &mtu])?;
        }
        // Its ports name their namespace: the switch opens them there.
        let switch = Switch::start(spec(program, options, ports, &ns)?)
            .with_context(|| format!("starting the switch on {}", program.display()))?;
        let mut ends = Vec::new();
        for &p in ports {
            let dev = format!("t{p}");
            let fd = ns
                .run(move || socket::packet(&dev))
                .with_context(|| format!("a raw socket on t{p}"))?;
            ends.push((p, fd));
        }
        Ok(Rig {
            switch: Some(switch),
            ends,
            sent: 0,
            counted: (0, 0),
            held: Vec::new(),
            _ns: ns,
        })
    }

    fn switch(&self) -> Result<&Switch, String> {
        self.switch.as_ref().ok_or_else(|| "the switch has stopped".to_owned())
    }

    fn datapath(&self) -> Result<Arc<Datapath>> {
        let switch = self.switch().map_err(anyhow::Error::msg)?;
        switch.p4_datapath().context("the switch runs no P4 program")
    }

    /// Frames the switch has counted in and out on all its ports.
    fn counters(&self) -> Result<(u64, u64), String> {
        let snapshot = self
            .switch()?
            .counters_now(Duration::from_secs(1))
            .ok_or("the switch's workers did not answer")?;
        if snapshot.failed_workers > 0 {
            return Err("a switch worker died".to_owned());
        }
        Ok(snapshot
            .ports
            .iter()
            .fold((0, 0), |(rx, tx), p| (rx + p.totals.rx_frames, tx + p.totals.tx_frames)))
    }

    /// Reads every frame waiting on the test's ends.
    fn drain(&self, out: &mut Vec<(u16, Vec<u8>)>) -> Result<usize, String> {
        let mut bufs = vec![vec![0u8; MTU + 64]; 16];
        let mut meta = vec![mmsg::RecvMeta::default(); 16];
        let mut got = 0;
        for (port, fd) in &self.ends {
            loop {
                let n = match mmsg::recv_batch(fd.as_raw_fd(), &mut bufs, &mut meta) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                    Err(e) => return Err(format!("reading port {port}: {e}")),
                };
                for (b, m) in bufs.iter_mut().zip(&meta).take(n) {
                    // The kernel takes a VLAN tag off into metadata: put it back where it was.
                    let (len, cut) = socket::restore_vlan(b, m.len, m.vlan);
                    if m.truncated || cut {
                        return Err(format!("port {port} sent a frame longer than {} bytes", b.len()));
                    }
                    out.push((*port, b[..len].to_vec()));
                }
                got += n;
                if n < bufs.len() {
                    break;
                }
            }
        }
        Ok(got)
    }

    fn stop(mut self) -> Result<()> {
        let switch = self.switch.take().context("the switch has stopped")?;
        let snapshot = switch.stop();
        if snapshot.failed_workers > 0 {
            bail!("{} switch worker(s) died", snapshot.failed_workers);
        }
        Ok(())
    }
}

impl StfSwitch for Rig {
    fn send(&mut self, port: u16, frame: &[u8]) -> Result<(), String> {
        let fd = &self
            .ends
            .iter()
            .find(|(p, _)| *p == port)
            .ok_or_else(|| format!("port {port} was not set up"))?
            .1;
        let sent =
            mmsg::send_batch(fd.as_raw_fd(), &[frame], &[]).map_err(|e| format!("sending on port {port}: {e}"))?;
        if sent != 1 {
            return Err(format!("port {port}'s interface would not take the frame"));
        }
        self.sent += 1;
        // Done with before the next is sent: frames keep the file's order on every port.
        let out = self.settle()?;
        self.held.extend(out);
        Ok(())
    }

    /// Done when the switch has counted every frame sent in, the test has read every frame it
    /// counted out, and neither count moves for [`QUIET`].
    fn settle(&mut self) -> Result<Vec<(u16, Vec<u8>)>, String> {
        let mut out = std::mem::take(&mut self.held);
        if self.sent == 0 {
            // Nothing sent since the switch was last done: it still is.
            self.drain(&mut out)?;
            return Ok(out);
        }
        let mut received = 0u64;
        let start = Instant::now();
        let (rx0, tx0) = self.counted;
        let mut still_since: Option<(Instant, (u64, u64))> = None;
        loop {
            received += self.drain(&mut out)? as u64;
            let (rx, tx) = self.counters()?;
            let all_in = rx >= rx0 + self.sent;
            let all_read = received >= tx - tx0;
            if all_in && all_read {
                match still_since {
                    Some((since, seen)) if seen == (rx, tx) => {
                        if since.elapsed() >= QUIET {
                            self.counted = (rx, tx);
                            self.sent = 0;
                            return Ok(out);
                        }
                    }
                    _ => still_since = Some((Instant::now(), (rx, tx))),
                }
            } else {
                still_since = None;
            }
            if start.elapsed() > PATIENCE {
                return Err(format!(
                    "the switch was not done after {PATIENCE:?}: {} of {} frames counted in, {received} of {} read out",
                    rx - rx0,
                    self.sent,
                    tx - tx0
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// One worker (frames keep their order), ports fast and deep enough to hold nothing back, the
/// program loaded with no entries: the STF file adds them.
fn spec(program: &Path, options: &PreprocessorOptions, ports: &BTreeSet<u16>, ns: &Namespace) -> Result<SwitchSpec> {
    let netns = ns.path();
    let mut yaml = String::from("name: stf\nnode_id: 1\nworkers: 1\nports:\n");
    for p in ports {
        yaml.push_str(&format!(
            "  - {{ name: p{p}, kind: veth, device: s{p}, netns: {}, rate: 100Gbps, delay: 0us, buffer: 64MB, mtu: {MTU}, p4_port: {p} }}\n",
            netns.display()
        ));
    }
    yaml.push_str(&format!("p4:\n  program: {}\n", program.display()));
    let mut spec = SwitchSpec::from_yaml(&yaml, Path::new("(STF switch)")).context("the STF switch's configuration")?;
    if let Some(p4) = spec.p4.as_mut() {
        p4.preprocessor = options.clone();
    }
    Ok(spec)
}
