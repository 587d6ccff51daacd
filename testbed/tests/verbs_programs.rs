//! RDMA programs on the lab's NICs (issue 43), through the `intlab` binary as a user runs them:
//! Debian's perftest and rdma-core's `ibv_rc_pingpong`, unchanged, between two hosts of a lab
//! that is up; a capture of their packets in tshark; and a verbs program of our own
//! (`tests/verbs/verbs_check.c`, built with the system's C compiler against libibverbs-dev)
//! for the errors the specification gives, a program killed mid-transfer among them. Needs
//! root, perftest, ibverbs-utils, libibverbs-dev and tshark (`scripts/test` installs them).

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{Labs, intlab, intlab_ok, sample, scrape};

/// A lab of two hosts on one switch at a rate this machine keeps at dilation 1, under HPCC
/// (INT on data).
const SCENARIO: &str = "name: verbs
defaults:
  link: { rate: 200Mbps, delay: 10us, buffer: 1MB }
nodes:
  s1: { kind: switch }
  h1: { kind: host }
  h2: { kind: host }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
  - endpoints: [\"s1:eth2\", \"h2:eth0\"]
controller: { name: hpcc }
";

const H2: &str = "198.18.0.2";

/// A lab brought up from [`SCENARIO`] under a name unique to this test, taken down however
/// the test ends.
struct VerbsLab {
    name: String,
    dir: PathBuf,
    metrics: Option<SocketAddr>,
    _labs: Labs,
}

impl VerbsLab {
    fn up(tag: &str, extra: &[&str]) -> VerbsLab {
        support::require_root();
        let name = format!("verbs{tag}{}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let scenario = dir.join("verbs.yaml");
        std::fs::write(&scenario, SCENARIO).expect("the scenario");
        let labs = Labs(vec![name.clone()]);
        let mut args = vec!["up", scenario.to_str().expect("a UTF-8 path"), "--name", &name];
        args.extend_from_slice(extra);
        let printed = intlab_ok(&args);
        assert!(printed.contains("RDMA device intlab0"), "{printed}");
        let metrics = printed.lines().find_map(|l| {
            l.trim()
                .strip_prefix("metrics at http://")?
                .strip_suffix("/metrics")?
                .parse()
                .ok()
        });
        VerbsLab {
            name,
            dir,
            metrics,
            _labs: labs,
        }
    }

    /// `intlab exec HOST -- ARGS` started, its output piped.
    fn spawn(&self, host: &str, args: &[&str]) -> Child {
        Command::new(env!("CARGO_BIN_EXE_intlab"))
            .args(["exec", "--lab", &self.name, host, "--"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("intlab runs")
    }

    /// `intlab exec HOST -- ARGS` to its end.
    fn run(&self, host: &str, args: &[&str]) -> Output {
        intlab(&[&["exec", "--lab", &self.name, host, "--"], args].concat())
    }

    /// A server on h2 and its client on h1, both `args` (the client with h2's address last),
    /// the client tried again while the server is not listening yet; both outputs, checked
    /// to have succeeded.
    fn pair(&self, args: &[&str]) -> (String, String) {
        let server = self.spawn("h2", args);
        let client_args: Vec<&str> = args.iter().copied().chain([H2]).collect();
        let started = Instant::now();
        let client = loop {
            let out = self.run("h1", &client_args);
            let text = text(&out);
            let refused = text.contains("Couldn't connect") || text.contains("Unable to open file descriptor");
            if out.status.success() || !refused || started.elapsed() > Duration::from_secs(10) {
                break out;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let server = wait_within(server, Duration::from_secs(60));
        assert!(
            client.status.success(),
            "client {args:?}: {}\n{}",
            client.status,
            text(&client)
        );
        assert!(
            server.status.success(),
            "server {args:?}: {}\n{}",
            server.status,
            text(&server)
        );
        (text(&client), text(&server))
    }

    fn metrics(&self) -> String {
        scrape(self.metrics.expect("the lab serves metrics"))
    }
}

impl Drop for VerbsLab {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("removing {}: {e}", self.dir.display());
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits for `child` for up to `limit`, then kills it: a test never hangs on a program.
fn wait_within(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("waiting").is_none() {
        if started.elapsed() > limit {
            child.kill().expect("killing a program that hung");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("its output")
}

/// The figures of perftest's result line (the line after its `#bytes` header).
fn perftest_figures(out: &str) -> Vec<f64> {
    let mut lines = out.lines().skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    let line = lines.next().unwrap_or_else(|| panic!("no result line in:\n{out}"));
    line.split_whitespace()
        .map(|f| f.parse().unwrap_or_else(|_| panic!("`{f}` in `{line}`")))
        .collect()
}

/// The value of metric `name` for the latest QP (highest number) of `program` on `host`.
fn latest_qp(metrics: &str, name: &str, host: &str, program: &str) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| l.contains(&format!("host=\"{host}\"")) && l.contains(&format!("program=\"{program}\"")))
        .filter_map(|l| {
            let qpn: u32 = l.split("qpn=\"").nth(1)?.split('"').next()?.parse().ok()?;
            Some((qpn, l.rsplit(' ').next()?.parse::<f64>().ok()?))
        })
        .max_by_key(|(qpn, _)| *qpn)
        .map(|(_, v)| v)
}

#[test]
fn perftest_runs_unchanged_and_its_bandwidth_is_what_the_lab_counted_for_the_qp() {
    let _one = support::serial();
    let lab = VerbsLab::up("p", &["--metrics", "127.0.0.1:0"]);
    // Bandwidth tests: the client's figure (MB/s of 2^20 bytes) against the lab's rate for
    // the client's QP; in event mode too where perftest has it (not for WRITE).
    let bandwidth: [(&str, &[&str]); 7] = [
        ("ib_write_bw", &["-n", "300"]),
        ("ib_send_bw", &["-n", "300"]),
        ("ib_send_bw", &["-n", "300", "-e"]),
        ("ib_read_bw", &["-n", "300"]),
        ("ib_read_bw", &["-n", "300", "-e"]),
        ("ib_atomic_bw", &["-n", "3000"]),
        ("ib_atomic_bw", &["-n", "3000", "-e"]),
    ];
    for (test, args) in bandwidth {
        let all: Vec<&str> = [test, "-d", "intlab0"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let (client, _) = lab.pair(&all);
        let figures = perftest_figures(&client);
        // From the message rate (Mpps, six decimals) times the size: the MB/s column has two
        // decimals, a 6 % step at the 0.08 MB/s of 8-byte atomics.
        let perftest_bps = figures[4] * 1e6 * figures[0] * 8.0;
        assert!(perftest_bps > 0.0, "{test} {args:?} measured nothing:\n{client}");
        let metrics = lab.metrics();
        let lab_bps = latest_qp(&metrics, "intlab_qp_send_bits_per_second", "h1", test)
            .unwrap_or_else(|| panic!("the lab counted no rate for {test}'s QP"));
        let off = (perftest_bps - lab_bps).abs() / lab_bps;
        eprintln!("{test} {args:?}: perftest {perftest_bps:.0} b/s, the lab {lab_bps:.0} b/s");
        assert!(
            off <= 0.05,
            "{test} {args:?}: perftest measured {perftest_bps:.0} b/s, the lab counted {lab_bps:.0} b/s for its QP"
        );
        let messages = latest_qp(&metrics, "intlab_qp_sent_messages_total", "h1", test).expect("messages");
        assert!(
            messages >= figures[1],
            "{test}: {messages} messages counted of {}",
            figures[1]
        );
    }
    // Latency tests: they complete, with a median no worse than a thousand times the wire's.
    for test in ["ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_atomic_lat"] {
        for events in [false, true] {
            if events && test == "ib_write_lat" {
                continue;
            }
            let mut all = vec![test, "-d", "intlab0", "-n", "300"];
            if events {
                all.push("-e");
            }
            let (client, _) = lab.pair(&all);
            let figures = perftest_figures(&client);
            let typical_us = figures[4];
            assert!(
                typical_us > 0.0 && typical_us < 50_000.0,
                "{all:?}: a typical latency of {typical_us} us:\n{client}"
            );
        }
    }
    // Every program ended: the NICs hold nothing of theirs.
    let metrics = lab.metrics();
    for host in ["h1", "h2"] {
        for kind in ["contexts", "qps", "mrs", "cqs", "pds"] {
            let n = sample(
                &metrics,
                "intlab_nic_objects",
                &format!("host=\"{host}\",kind=\"{kind}\""),
            );
            assert_eq!(n, Some(0.0), "{host} still holds {kind} after every program ended");
        }
    }
    intlab_ok(&["down", &lab.name]);
}

#[test]
fn rc_pingpong_checks_every_byte_from_1_b_to_1_mb() {
    let _one = support::serial();
    let lab = VerbsLab::up("r", &[]);
    for size in ["1", "1000", "4096", "65536", "1048576"] {
        for events in [false, true] {
            let mut args = vec![
                "ibv_rc_pingpong",
                "-d",
                "intlab0",
                "-g",
                "0",
                "-c",
                "-s",
                size,
                "-n",
                "10",
            ];
            if events {
                args.push("-e");
            }
            let (client, server) = lab.pair(&args);
            for out in [&client, &server] {
                assert!(out.contains("10 iters in"), "{args:?}:\n{out}");
            }
        }
    }
    intlab_ok(&["down", &lab.name]);
}

/// The lab's INT dissector for tshark.
fn dissector() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../int-format/wireshark/intlab_int.lua")
}

#[test]
fn a_capture_of_perftest_decodes_in_tshark_as_rocev2_with_int() {
    let _one = support::serial();
    let capture = std::env::temp_dir().join(format!("intlab-verbs-capture-{}", std::process::id()));
    let lab = VerbsLab::up("c", &["--capture", capture.to_str().expect("UTF-8")]);
    for args in [
        &["ib_write_bw", "-n", "5", "-s", "3000"][..],
        &["ib_read_bw", "-n", "5", "-s", "3000"],
        &["ib_send_bw", "-n", "5", "-s", "3000"],
        &["ib_atomic_bw", "-n", "5"],
        &["ib_atomic_bw", "-n", "5", "-A", "CMP_AND_SWAP"],
    ] {
        let all: Vec<&str> = [args[0], "-d", "intlab0"]
            .into_iter()
            .chain(args[1..].iter().copied())
            .collect();
        lab.pair(&all);
    }
    intlab_ok(&["down", &lab.name]);
    // h1's port sees every request one way and every answer the other.
    let file = capture.join("s1-eth1.pcapng");
    let out = Command::new("tshark")
        .arg("-X")
        .arg(format!("lua_script:{}", dissector().display()))
        .arg("-r")
        .arg(&file)
        .args([
            "-Y",
            "infiniband",
            "-T",
            "fields",
            "-e",
            "infiniband.bth.opcode",
            "-e",
            "intlab_int.hops",
        ])
        .output()
        .expect("tshark runs (scripts/test installs it)");
    assert!(out.status.success(), "tshark: {}", text(&out));
    let fields = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut opcodes = std::collections::BTreeMap::<u32, (usize, usize)>::new();
    for line in fields.lines() {
        let mut f = line.split('\t');
        let Some(Ok(op)) = f.next().map(str::parse::<u32>) else {
            continue;
        };
        let int = f.next().and_then(|h| h.parse::<u32>().ok()).is_some();
        let e = opcodes.entry(op).or_default();
        e.0 += 1;
        e.1 += usize::from(int);
    }
    // RC opcodes as perftest posts them: SEND first/middle/last, WRITE first/middle/last,
    // READ request and its responses, compare-and-swap, fetch-and-add, their answer, ACKs.
    let names = [
        (0, "SEND First"),
        (1, "SEND Middle"),
        (2, "SEND Last"),
        (6, "WRITE First"),
        (7, "WRITE Middle"),
        (8, "WRITE Last"),
        (12, "READ Request"),
        (13, "READ Response First"),
        (15, "READ Response Last"),
        (17, "Acknowledge"),
        (18, "Atomic Acknowledge"),
        (19, "CompareSwap"),
        (20, "FetchAdd"),
    ];
    for (op, name) in names {
        let (n, with_int) = opcodes.get(&op).copied().unwrap_or_default();
        assert!(n > 0, "no {name} (opcode {op}) in the capture: {opcodes:?}");
        // Data and requests carry INT (HPCC's); ACKs carry none.
        if ![17, 18].contains(&op) {
            assert_eq!(with_int, n, "{name}: {with_int} of {n} decoded with INT");
        }
    }
    std::fs::remove_dir_all(&capture).expect("removing the capture");
}

/// `tests/verbs/verbs_check.c` built against Debian's libibverbs.
fn verbs_check(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verbs/verbs_check.c");
    let program = dir.join("verbs_check");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-O1", "-Wall", "-o"])
        .arg(&program)
        .arg(&source)
        .arg("-libverbs")
        .output()
        .expect("the C compiler runs");
    assert!(
        out.status.success(),
        "{cc} could not build {} (libibverbs-dev installed?): {}",
        source.display(),
        text(&out)
    );
    program
}

/// The `RESULT name value` lines of a `verbs_check` run.
fn results(out: &str) -> Vec<(String, i64)> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("RESULT ")?.split(' ');
            Some((f.next()?.to_owned(), f.next()?.parse().ok()?))
        })
        .collect()
}

/// `ibv_wc_status` values.
const SUCCESS: i64 = 0;
const WR_FLUSH_ERR: i64 = 5;
const REM_INV_REQ_ERR: i64 = 9;
const REM_ACCESS_ERR: i64 = 10;
const RETRY_EXC_ERR: i64 = 12;

#[test]
fn errors_complete_as_the_specification_says_and_a_killed_program_leaves_nothing() {
    let _one = support::serial();
    let lab = VerbsLab::up("e", &["--metrics", "127.0.0.1:0"]);
    let program = verbs_check(&lab.dir);
    let p = program.to_str().expect("UTF-8");
    let owned = |v: &[(&str, i64)]| v.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect::<Vec<_>>();

    // Verbs the device does not do fail with EOPNOTSUPP, bad requests with EINVAL.
    let alone = lab.run("h1", &[p, "alone", "unsupported"]);
    assert!(alone.status.success(), "{}", text(&alone));
    let (eopnotsupp, einval) = (i64::from(libc::EOPNOTSUPP), i64::from(libc::EINVAL));
    assert_eq!(
        results(&text(&alone)),
        owned(&[
            ("alloc_mw", eopnotsupp),
            ("create_uc_qp", eopnotsupp),
            ("reg_mr_remote_write_without_local_write", einval),
            ("post_send_in_reset", einval),
            ("post_recv_in_reset", einval),
            ("modify_reset_to_rts", einval),
            ("create_cq_too_large", einval),
            ("closed", 0),
        ])
    );

    // Errors of a connected pair, as the requester's completions give them.
    let pair = |case: &str| {
        let server = lab.spawn("h2", &[p, "server", case]);
        let client = lab.run("h1", &[p, "client", case, H2]);
        let server = wait_within(server, Duration::from_secs(30));
        assert!(client.status.success(), "{case}: {}", text(&client));
        assert!(server.status.success(), "{case} (server): {}", text(&server));
        results(&text(&client))
    };
    assert_eq!(
        pair("write-outside"),
        owned(&[
            ("inside", SUCCESS),
            ("outside", REM_ACCESS_ERR),
            ("after", WR_FLUSH_ERR),
            ("closed", 0)
        ])
    );
    assert_eq!(
        pair("read-no-access"),
        owned(&[("read", REM_INV_REQ_ERR), ("after", WR_FLUSH_ERR), ("closed", 0)])
    );
    assert_eq!(
        pair("qp-err"),
        owned(&[
            ("modify-errno", 0),
            ("recv", WR_FLUSH_ERR),
            ("recv-id", 11),
            ("recv", WR_FLUSH_ERR),
            ("send", WR_FLUSH_ERR),
            ("state", 6),
            ("closed", 0),
        ])
    );

    // A program killed in the middle of a transfer: its peer, sending to it all along, finds
    // its requests unanswered (retries exceeded); the NIC holds nothing of the dead program.
    let mut victim = lab.spawn("h2", &[p, "server", "victim"]);
    let peer = lab.spawn("h1", &[p, "client", "victim", H2]);
    let mut said = String::new();
    let pid: u32 = {
        use std::io::BufRead as _;
        let mut lines = std::io::BufReader::new(victim.stdout.take().expect("its output"));
        lines.read_line(&mut said).expect("the victim says it is ready");
        said.trim()
            .strip_prefix("RESULT victim-ready ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the victim said `{said}`"))
    };
    // Mid-transfer: its writes and the peer's are both flowing.
    std::thread::sleep(Duration::from_millis(500));
    let before = lab.metrics();
    let moving = latest_qp(&before, "intlab_qp_sent_bytes_total", "h2", "verbs_check").expect("the victim's QP");
    assert!(moving > 0.0, "the victim wrote nothing before it was killed");
    intlab_lab::netns::signal(pid, libc::SIGKILL).expect("killing the victim");
    let peer = wait_within(peer, Duration::from_secs(20));
    assert_eq!(
        results(&text(&peer)),
        owned(&[("peer", RETRY_EXC_ERR), ("closed", 0)]),
        "{}",
        text(&peer)
    );
    let victim = wait_within(victim, Duration::from_secs(5));
    assert!(!victim.status.success(), "the victim was killed");
    let after = lab.metrics();
    for kind in ["contexts", "qps", "mrs", "cqs", "pds"] {
        for host in ["h1", "h2"] {
            let n = sample(
                &after,
                "intlab_nic_objects",
                &format!("host=\"{host}\",kind=\"{kind}\""),
            );
            assert_eq!(n, Some(0.0), "{host} still holds {kind} of a program that ended");
        }
    }
    let alive = latest_qp(&after, "intlab_qp_alive", "h2", "verbs_check");
    assert_eq!(alive, Some(0.0), "the killed program's QP is gone");
    // The lab is still up and serves the next program.
    let again = lab.run("h1", &[p, "alone", "unsupported"]);
    assert!(again.status.success(), "{}", text(&again));

    // Down, nothing of the lab is left: no namespace, no NIC folder, no mount.
    let prefix = intlab_lab::standing_lab::StandingLab::read(&lab.name)
        .expect("the record")
        .expect("the lab is up")
        .prefix;
    intlab_ok(&["down", &lab.name]);
    let left: Vec<String> = intlab_lab::netns::lab_namespaces()
        .expect("the namespaces")
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    let nic = Path::new(intlab_lab::nic_device::NIC_DIR).join(&prefix);
    assert!(!nic.exists(), "{} is left", nic.display());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("the mounts");
    assert!(!mounts.contains(&prefix), "a mount of the lab is left:\n{mounts}");
}
