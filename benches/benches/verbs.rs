//! RDMA programs on the lab's NICs against the lab itself (run as root, after `cargo build
//! --release`, with perftest and iputils-ping installed), side by side in one run:
//!
//!     cargo bench -p intlab-benches --bench verbs
//!
//! 1. Bandwidth: at each link rate of INTLAB_VERBS_RATES (default `300Mbps,1Gbps`), one flow
//!    of the lab's own (`intlab run`, 20 MB, MTU 4096, DCQCN, dilation 1: its goodput and
//!    whether the lab judged it kept time) beside Debian's `ib_write_bw` with 64 KB messages
//!    in a lab that is up with the same scenario, each as a share of the link.
//! 2. Message rate: `ib_write_bw` with 64 B messages on a 1 Gb/s link (which carries some
//!    770,000 of them a second), and the CPU time per message of the lab and of perftest.
//! 3. Latency: `ib_write_lat`'s median against `ping`'s between the same two hosts.
//!
//! Each pair of figures is measured twice, in the order A B B A, and both are printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `intlab` binary cargo built beside this benchmark's folder.
fn intlab_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("this benchmark's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("intlab"))
        .expect("a target folder");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release` first (it builds the verbs provider too)",
        bin.display()
    );
    bin
}

fn intlab(args: &[&str]) -> Output {
    Command::new(intlab_binary()).args(args).output().expect("intlab runs")
}

fn ok(args: &[&str]) -> String {
    let out = intlab(args);
    assert!(
        out.status.success(),
        "intlab {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two hosts on one switch.
fn scenario(rate: &str, delay: &str, flow: bool) -> String {
    let mut s = format!(
        "name: vb\ndefaults:\n  link: {{ rate: {rate}, delay: {delay}, buffer: 4MB }}\n\
         nodes:\n  s1: {{ kind: switch }}\n  h1: {{ kind: host }}\n  h2: {{ kind: host }}\n\
         links:\n  - endpoints: [\"s1:eth1\", \"h1:eth0\"]\n  - endpoints: [\"s1:eth2\", \"h2:eth0\"]\n\
         controller: {{ name: dcqcn }}\ntransport: {{ mtu: 4096 }}\ndilation: 1\nduration: 30s\n"
    );
    if flow {
        s.push_str("workload:\n  flows:\n    - { src: h1, dst: h2, size: 20MB, start: 0ms }\n");
    }
    s
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("intlab-verbs-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("a scratch folder");
    d
}

fn write(name: &str, text: &str) -> PathBuf {
    let p = scratch().join(name);
    std::fs::write(&p, text).expect("the scenario");
    p
}

/// The lab's own flow: goodput (b/s) and whether the lab judged it kept time.
fn lab_flow(rate: &str) -> (f64, bool) {
    let file = write("flow.yaml", &scenario(rate, "200us", true));
    let out_dir = scratch().join("run");
    let out = intlab(&[
        "run",
        file.to_str().expect("UTF-8"),
        "--out",
        out_dir.to_str().expect("UTF-8"),
        "--force",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let goodput = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("goodput "))
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no goodput in:\n{text}"));
    (goodput * 1e6, !text.contains("did not keep up"))
}

/// A lab that is up, taken down when dropped.
struct Up;

impl Up {
    fn new(text: &str) -> Up {
        let file = write("up.yaml", text);
        ok(&["up", file.to_str().expect("UTF-8"), "--name", "verbsbench"]);
        Up
    }

    fn pid(&self) -> u32 {
        let record = std::fs::read_to_string("/run/intlab/labs/verbsbench.json").expect("the lab's record");
        let v: serde_json::Value = serde_json::from_str(&record).expect("JSON");
        v["pid"].as_u64().expect("a pid") as u32
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let out = intlab(&["down", "verbsbench"]);
        if !out.status.success() {
            eprintln!("intlab down: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

/// CPU seconds process `pid` has used so far (user and system).
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the lab's stat");
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (fields[11].parse::<f64>().unwrap_or(0.0) + fields[12].parse::<f64>().unwrap_or(0.0)) / hz
}

/// Runs perftest `args` between h2 (server) and h1 (client): the client's output and the CPU
/// seconds both programs used.
fn perftest(args: &[&str]) -> (String, f64) {
    let spawn = |host: &str, extra: &[&str]| {
        Command::new(intlab_binary())
            .args(["exec", "--lab", "verbsbench", host, "--"])
            .args(args)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("intlab exec runs")
    };
    let server = spawn("h2", &[]);
    std::thread::sleep(Duration::from_millis(500));
    let client = spawn("h1", &["198.18.0.2"]);
    let mut cpu = 0.0;
    let mut client_out = String::new();
    for (child, is_client) in [(client, true), (server, false)] {
        let pid = child.id() as libc::pid_t;
        let out = child.wait_with_output_and_rusage(pid);
        cpu += out.1;
        if is_client {
            client_out = out.0;
        }
    }
    (client_out, cpu)
}

/// Waiting for a child with its resource usage.
trait Rusage {
    fn wait_with_output_and_rusage(self, pid: libc::pid_t) -> (String, f64);
}

impl Rusage for std::process::Child {
    fn wait_with_output_and_rusage(mut self, pid: libc::pid_t) -> (String, f64) {
        use std::io::Read as _;
        let mut text = String::new();
        if let Some(mut o) = self.stdout.take() {
            o.read_to_string(&mut text).expect("its output");
        }
        if let Some(mut e) = self.stderr.take() {
            e.read_to_string(&mut text).expect("its errors");
        }
        let mut status = 0;
        // SAFETY: rusage is plain data the call fills; the pid is our child's.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid, "waiting for perftest");
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (text, secs(usage.ru_utime) + secs(usage.ru_stime))
    }
}

/// The figures of perftest's result line.
fn figures(out: &str) -> Vec<f64> {
    let mut lines = out.lines().skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    lines
        .next()
        .unwrap_or_else(|| panic!("no result in:\n{out}"))
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect()
}

/// `ping`'s median round trip between the hosts (us).
fn ping_median_us() -> f64 {
    let out = ok(&[
        "exec",
        "--lab",
        "verbsbench",
        "h1",
        "--",
        "ping",
        "-c",
        "200",
        "-i",
        "0.005",
        "198.18.0.2",
    ]);
    let mut rtts: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split("time=").nth(1)?.split_whitespace().next()?.parse::<f64>().ok())
        .collect();
    assert!(!rtts.is_empty(), "ping measured nothing:\n{out}");
    rtts.sort_by(f64::total_cmp);
    rtts[rtts.len() / 2] * 1e3
}

fn bandwidth(rate: &str) {
    let link = rate_bps(rate);
    for turn in 0..2 {
        let order: [bool; 2] = if turn == 0 { [true, false] } else { [false, true] };
        for lab_first in order {
            if lab_first {
                let (g, kept) = lab_flow(rate);
                println!(
                    "  {rate}: the lab's own flow {:.1} Mb/s, {:.1} % of the link ({})",
                    g / 1e6,
                    100.0 * g / link,
                    if kept { "kept time" } else { "did not keep time" }
                );
            } else {
                let _lab = Up::new(&scenario(rate, "200us", false));
                let (out, _) = perftest(&["ib_write_bw", "-d", "intlab0", "-s", "65536", "-n", "3000"]);
                let bw = figures(&out)[3] * 8.0 * 1_048_576.0;
                println!(
                    "  {rate}: ib_write_bw 64 KB {:.1} Mb/s, {:.1} % of the link",
                    bw / 1e6,
                    100.0 * bw / link
                );
            }
        }
    }
}

fn rate_bps(rate: &str) -> f64 {
    let (n, unit) = rate.split_at(rate.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(rate.len()));
    let n: f64 = n.parse().expect("a rate");
    n * match unit {
        "Gbps" => 1e9,
        "Mbps" => 1e6,
        _ => 1.0,
    }
}

fn message_rate() {
    let lab = Up::new(&scenario("1Gbps", "10us", false));
    let pid = lab.pid();
    for _ in 0..2 {
        let (before, started) = (cpu_s(pid), Instant::now());
        let n = 300_000;
        let (out, programs_cpu) = perftest(&["ib_write_bw", "-d", "intlab0", "-s", "64", "-n", &n.to_string()]);
        let lab_cpu = cpu_s(pid) - before;
        let rate = figures(&out)[4] * 1e6;
        println!(
            "  64 B RDMA WRITEs: {:.0} messages/s; the lab {:.1} us of CPU per message, perftest (both ends, polling) {:.1} us; {:.1} s in all",
            rate,
            lab_cpu / n as f64 * 1e6,
            programs_cpu / n as f64 * 1e6,
            started.elapsed().as_secs_f64()
        );
    }
}

fn latency() {
    let _lab = Up::new(&scenario("1Gbps", "10us", false));
    for turn in 0..2 {
        let row = |ping_first: bool| {
            if ping_first {
                println!("  ping median {:.1} us", ping_median_us());
            } else {
                let (out, _) = perftest(&["ib_write_lat", "-d", "intlab0", "-n", "2000"]);
                let f = figures(&out);
                println!(
                    "  ib_write_lat median {:.1} us (perftest's half round trip; the round trip {:.1} us)",
                    f[4],
                    2.0 * f[4]
                );
            }
        };
        let first = turn == 0;
        row(first);
        row(!first);
        row(!first);
        row(first);
    }
}

fn main() {
    // cargo bench passes `--bench`.
    let rates = std::env::var("INTLAB_VERBS_RATES").unwrap_or_else(|_| "300Mbps,1Gbps".into());
    println!("bandwidth (MTU 4096, DCQCN, 200 us links):");
    for r in rates.split(',') {
        bandwidth(r.trim());
    }
    println!("message rate (1 Gb/s, 10 us links):");
    message_rate();
    println!("latency (1 Gb/s, 10 us links):");
    latency();
    if let Err(e) = std::fs::remove_dir_all(scratch()) {
        eprintln!("removing the scratch folder: {e}");
    }
}
