//! Watching a lab while it runs (issue 35): `--metrics` on `intlab run` and `intlab up`
//! serves Prometheus text that Prometheus' own checker accepts and whose values move with
//! the traffic, through the `intlab` binary as a user runs it.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Labs, intlab, intlab_ok, sample, scrape};

/// What `promtool check metrics` says of `text`: it must accept it.
fn promtool_accepts(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (scripts/test installs Debian's prometheus package)");
    child
        .stdin
        .take()
        .expect("its input")
        .write_all(text.as_bytes())
        .expect("promtool reads the metrics");
    let out = child.wait_with_output().expect("promtool ends");
    assert!(
        out.status.success(),
        "promtool check metrics refused them:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `intlab run` of the built-in scenario with `args` into `out`, and its standard error line by
/// line as it comes, from a thread that ends with it.
fn intlab_run(
    args: &[&str],
    out: &std::path::Path,
) -> (
    std::process::Child,
    crossbeam_channel::Receiver<String>,
    std::thread::JoinHandle<()>,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .arg("run")
        .args(args)
        .args(["--force", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("intlab runs");
    let stderr = child.stderr.take().expect("its standard error");
    let (tx, lines) = crossbeam_channel::unbounded();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines, reader)
}

/// The address a process printed in a line `... metrics at http://ADDR/metrics`.
fn metrics_address(line: &str) -> Option<SocketAddr> {
    line.split("metrics at http://").nth(1)?.split('/').next()?.parse().ok()
}

#[test]
fn a_run_serves_metrics_that_promtool_accepts_and_that_follow_the_traffic() {
    support::require_root();
    let _serial = support::serial();
    let out = support::scratch_dir("live-metrics");
    let (mut child, lines, reader) = intlab_run(&["--metrics", "127.0.0.1:0", "--set", "dilation=1"], &out);
    let addr = lines
        .iter()
        .find_map(|l| metrics_address(&l))
        .expect("intlab run says where its metrics are");
    // Once every flow has had an ACK and an RTT sample (a flow's first ACKs give none while
    // they span a worker's hiccup): a scrape mid-run.
    let started = Instant::now();
    let first = loop {
        let text = scrape(addr);
        let acked = (1..=4).filter_map(|f| sample(&text, "intlab_flow_acked_bytes_total", &format!("flow=\"{f}\"")));
        let timed = (1..=4).filter(|f| sample(&text, "intlab_flow_rtt_seconds", &format!("flow=\"{f}\"")).is_some());
        if acked.filter(|&b| b > 0.0).count() == 4 && timed.count() == 4 {
            break text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not every flow acknowledged and timed in a minute:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    promtool_accepts(&first);
    std::thread::sleep(Duration::from_millis(300));
    let second = scrape(addr);
    assert_eq!(sample(&first, "intlab_lab_up", ""), Some(1.0));
    let port = "switch=\"s1\",port=\"eth5\"";
    let (tx0, tx1) = (
        sample(&first, "intlab_port_tx_bytes_total", port).expect("the receiver's port"),
        sample(&second, "intlab_port_tx_bytes_total", port).expect("the receiver's port"),
    );
    // 300 ms of a 100 Mb/s port busy with the incast: about 3.7 MB.
    assert!(
        tx1 > tx0 + 1e6,
        "the receiver's port sent {} bytes in 300 ms",
        tx1 - tx0
    );
    for f in 1..=4 {
        let flow = format!("flow=\"{f}\"");
        let a0 = sample(&first, "intlab_flow_acked_bytes_total", &flow).expect("acked");
        let a1 = sample(&second, "intlab_flow_acked_bytes_total", &flow).expect("acked");
        assert!(a1 >= a0, "flow {f}'s acknowledged bytes went back: {a0} then {a1}");
        let size = sample(&first, "intlab_flow_size_bytes", &flow).expect("size");
        assert!(a0 <= size, "flow {f}: {a0} of {size} bytes acknowledged");
        let rtt = sample(&first, "intlab_flow_rtt_seconds", &flow).expect("an RTT sample once ACKs came");
        // Two links of 200 us each way, plus the frames' time on the wire and the hosts.
        assert!((8e-4..0.1).contains(&rtt), "flow {f}'s RTT {rtt} s");
        let rate = sample(&first, "intlab_flow_rate_bytes_per_second", &flow).expect("a rate");
        assert!(rate > 0.0 && rate <= 100e6 / 8.0 * 1.01, "flow {f}'s rate {rate} B/s");
    }
    let status = child.wait().expect("intlab run ends");
    reader.join().expect("the reader ends");
    assert!(status.success(), "intlab run: {status}");
}

#[test]
fn a_bad_or_taken_metrics_address_is_refused_before_anything_is_built() {
    let out = intlab(&["run", "--metrics", "nowhere", "--out", "/nonexistent/never"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("`nowhere`") && err.contains("--metrics"), "{err}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("its address").to_string();
    let out = intlab(&["run", "--metrics", &addr, "--out", "/nonexistent/never"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("listening on {addr}")), "{err}");
}

#[test]
fn a_lab_that_is_up_serves_its_metrics_until_it_goes_down() {
    support::require_root();
    let name = format!("live{}", std::process::id());
    let _labs = Labs(vec![name.clone()]);
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../topologies/incast-4to1.yaml");
    let printed = intlab_ok(&["up", scenario, "--name", &name, "--metrics", "127.0.0.1:0"]);
    let addr = printed
        .lines()
        .find_map(metrics_address)
        .unwrap_or_else(|| panic!("intlab up says where its metrics are:\n{printed}"));
    let h5 = printed
        .lines()
        .find_map(|l| l.trim().strip_prefix("h5 "))
        .map(str::trim)
        .unwrap_or_else(|| panic!("intlab up lists h5's address:\n{printed}"));
    intlab_ok(&["exec", "h1", "--lab", &name, "--", "ping", "-c", "3", "-i", "0.2", h5]);
    let text = scrape(addr);
    promtool_accepts(&text);
    assert_eq!(sample(&text, "intlab_lab_up", ""), Some(1.0));
    let rx = sample(&text, "intlab_port_rx_frames_total", "switch=\"s1\",port=\"eth1\"").expect("h1's port");
    assert!(rx >= 3.0, "h1's port received {rx} frames after 3 pings");
    intlab_ok(&["down", &name]);
    assert!(TcpStream::connect(addr).is_err(), "the metrics server outlived its lab");
}

/// Headless Chromium (Debian's) at `url`: the DOM after the page's scripts ran for `budget_ms`
/// of virtual time.
fn chromium_dom(url: &str, profile: &std::path::Path, extra: &[&str]) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium runs (scripts/test installs Debian's chromium package)");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The numbers of attribute `name` in `dom`, in order.
fn attribute_values(dom: &str, name: &str) -> Vec<f64> {
    dom.split(&format!("{name}=\""))
        .skip(1)
        .filter_map(|rest| rest.split('"').next()?.parse().ok())
        .collect()
}

#[test]
fn the_live_page_draws_the_lab_in_headless_chromium_and_follows_it() {
    support::require_root();
    let _serial = support::serial();
    let out = support::scratch_dir("live-page");
    let args = [
        "--web",
        "127.0.0.1:0",
        // Chromium starting takes both cores for a second or more: at dilation 2 the lab then
        // fell behind (the switch released frames 1.2 ms late at p99, the link carried 0.475 of
        // its rate in that time); at 10 it keeps up. 24 MB at 100 Mb/s: 1.9 s of the lab's
        // time, 19 s of wall-clock time, past both page loads.
        "--set",
        "dilation=10",
        "--set",
        "workload.incast.size=6MB",
    ];
    let (mut child, lines, reader) = intlab_run(&args, &out);
    let addr: SocketAddr = lines
        .iter()
        .find_map(|l| {
            l.split("live page at http://")
                .nth(1)?
                .trim_end_matches('/')
                .parse()
                .ok()
        })
        .expect("intlab run says where its page is");
    // Once the flows are under way.
    let started = Instant::now();
    while lines
        .recv_timeout(Duration::from_secs(60))
        .is_ok_and(|l| !l.contains("running"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the workload did not start"
        );
    }
    std::thread::sleep(Duration::from_secs(1));
    let url = format!("http://{addr}/");
    let profile = out.join("chromium-profile");
    let first = chromium_dom(&url, &profile, &["--dump-dom"]);
    std::thread::sleep(Duration::from_millis(1500));
    let second = chromium_dom(&url, &profile, &["--dump-dom"]);
    chromium_dom(
        &url,
        &profile,
        &[
            "--window-size=1300,900",
            &format!("--screenshot={}", out.join("live.png").display()),
        ],
    );
    let status = child.wait().expect("intlab run ends");
    drop(lines);
    reader.join().expect("the reader ends");
    assert!(status.success(), "intlab run: {status}");
    // The topology, drawn: a node per node of the incast (s1, h1-h5), a line per link.
    for dom in [&first, &second] {
        assert_eq!(dom.matches("class=\"node\"").count(), 6, "{dom}");
        assert_eq!(dom.matches("class=\"link\"").count(), 5, "{dom}");
        let updates = attribute_values(dom, "data-updates");
        assert!(
            updates.first().is_some_and(|&u| u >= 2.0),
            "the page polled {updates:?} times"
        );
    }
    // Each flow's acknowledged bytes, as the page shows them, grew between the two loads.
    let (a, b) = (
        attribute_values(&first, "data-bytes"),
        attribute_values(&second, "data-bytes"),
    );
    assert_eq!((a.len(), b.len()), (4, 4), "four flows on the page");
    assert!(
        b.iter().sum::<f64>() > a.iter().sum::<f64>(),
        "acknowledged bytes did not move: {a:?} then {b:?}"
    );
    // The receiver's link, which the incast fills, is drawn busy in both loads.
    for dom in [&first, &second] {
        let busy = dom
            .split("id=\"link-4\"")
            .nth(1)
            .and_then(|rest| attribute_values(rest, "data-utilisation").first().copied())
            .expect("h5's link carries a utilisation");
        assert!(
            busy > 0.5,
            "h5's link drawn at {busy} of its rate while the incast fills it"
        );
    }
    let png = std::fs::metadata(out.join("live.png")).expect("the screenshot");
    assert!(png.len() > 10_000, "a screenshot of {} bytes", png.len());
}

/// Each node's box on screen (left, top, right, bottom) as the page noted it in `dom`.
fn node_boxes(dom: &str) -> Vec<(String, [f64; 4])> {
    dom.split("class=\"node\"")
        .skip(1)
        .map(|rest| {
            let tag = &rest[..rest.find('>').expect("the node's tag ends")];
            let attr = |name: &str| {
                tag.split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .unwrap_or_else(|| panic!("a node without {name}: {tag}"))
                    .to_owned()
            };
            let b: Vec<f64> = attr("data-box")
                .split(',')
                .map(|v| v.parse().expect("a number"))
                .collect();
            (attr("id"), [b[0], b[1], b[2], b[3]])
        })
        .collect()
}

#[test]
fn the_live_page_shows_every_node_of_a_leaf_spine_and_a_fat_tree_k8_legibly_in_one_screen() {
    support::require_root();
    let _serial = support::serial();
    let out = support::scratch_dir("live-layout");
    let (width, height) = (1300.0, 900.0);
    for file in ["leaf-spine", "fat-tree-k8"] {
        let scenario = format!("{}/../topologies/{file}.yaml", env!("CARGO_MANIFEST_DIR"));
        let name = format!("layout{}", std::process::id());
        let _labs = Labs(vec![name.clone()]);
        let printed = intlab_ok(&["up", &scenario, "--name", &name, "--web", "127.0.0.1:0"]);
        let url = printed
            .lines()
            .find_map(|l| l.trim().strip_prefix("live page at "))
            .unwrap_or_else(|| panic!("intlab up says where its page is:\n{printed}"))
            .to_owned();
        let profile = out.join(format!("chromium-{file}"));
        let window = format!("--window-size={width:.0},{height:.0}");
        let dom = chromium_dom(&url, &profile, &[&window, "--dump-dom"]);
        chromium_dom(
            &url,
            &profile,
            &[
                &window,
                &format!("--screenshot={}", out.join(format!("{file}.png")).display()),
            ],
        );
        intlab_ok(&["down", &name]);
        let boxes = node_boxes(&dom);
        let expected = intlab_lab::topology::load_str(
            &std::fs::read_to_string(&scenario).expect("the scenario"),
            std::path::Path::new(&scenario),
        )
        .expect("it loads")
        .nodes
        .len();
        assert_eq!(boxes.len(), expected, "{file}: every node drawn");
        for (node, [l, t, r, b]) in &boxes {
            assert!(
                *l >= 0.0 && *t >= 0.0 && *r <= width && *b <= height && r > l && b > t,
                "{file}: {node} at {l},{t}-{r},{b}, outside the {width}x{height} window"
            );
        }
        // Node names are 11 px at scale 1: below 7 px they are no longer read at a glance.
        let scale = attribute_values(&dom, "data-scale")
            .first()
            .copied()
            .unwrap_or_else(|| panic!("{file}: the page notes its scale"));
        assert!(11.0 * scale >= 7.0, "{file}: names drawn at {:.1} px", 11.0 * scale);
    }
}
