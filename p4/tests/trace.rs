//! The per-packet trace (`trace: true`, BMv2's log in spirit): every parser state, each table's
//! hit or miss with its key and the action with its arguments, externs that decide a fate, and
//! the decision, as `tracing` events at debug level with target `p4`.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use intlab_p4::{Arrival, Datapath, Decision};

/// Where the events go: one buffer, shared with the subscriber.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn take(&self) -> Vec<String> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        String::from_utf8_lossy(&bytes).lines().map(str::to_owned).collect()
    }
}

/// An Ethernet + IPv4/UDP frame to `dst` (checksum left zero: the program does not verify it).
fn frame(dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 0xaa, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1]);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0; 8]);
    f
}

/// Ingress of one frame with tracing on or off; the lines it logged.
fn ingress_lines(dp: &Datapath, lines: &Lines, dst: [u8; 4]) -> (Decision, Vec<String>) {
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .without_time()
        .with_writer({
            let l = lines.clone();
            move || l.clone()
        })
        .finish();
    let mut st = dp.packet_state();
    let f = frame(dst);
    let mut buf = vec![0u8; 256];
    buf[..f.len()].copy_from_slice(&f);
    let mut len = f.len();
    let r = tracing::subscriber::with_default(subscriber, || {
        dp.ingress(&mut st, &mut buf, &mut len, Arrival { port: 1, now_ns: 0 })
    });
    (r.decision, lines.take())
}

#[test]
fn a_traced_packet_logs_its_states_tables_actions_and_fate_in_order() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/forward.p4");
    let loaded = intlab_p4::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut dp = Datapath::new(loaded.ir, "s7");
    let runtime = r#"{"table_entries": [{ "table": "ForwardIngress.routes",
        "match": { "hdr.ipv4.dst": ["10.0.2.0", 24] }, "action_name": "ForwardIngress.forward",
        "action_params": { "next_mac": "08:00:00:00:02:22", "port": 2 } }]}"#;
    intlab_p4::runtime_json::apply_text(&dp, "runtime.json", runtime).unwrap_or_else(|e| panic!("{e}"));
    let lines = Lines::default();

    let (d, quiet) = ingress_lines(&dp, &lines, [10, 0, 2, 2]);
    assert_eq!(d, Decision::Unicast(2));
    assert!(quiet.is_empty(), "tracing is off by default: {quiet:?}");

    dp.trace = true;
    let (d, hit) = ingress_lines(&dp, &lines, [10, 0, 2, 2]);
    assert_eq!(d, Decision::Unicast(2));
    let (d, miss) = ingress_lines(&dp, &lines, [10, 0, 3, 3]);
    assert_eq!(d, Decision::Drop);
    for l in hit.iter().chain(&miss) {
        assert!(l.contains("DEBUG p4: ") && l.contains("switch=s7"), "{l}");
    }
    // In the order the packet met them.
    let expect_in_order = |lines: &[String], wanted: &[&str]| {
        let mut at = 0;
        for w in wanted {
            match lines[at..].iter().position(|l| l.contains(w)) {
                Some(k) => at += k + 1,
                None => panic!("`{w}` missing after line {at} of:\n{}", lines.join("\n")),
            }
        }
    };
    expect_in_order(
        &hit,
        &[
            "parser state start",
            "parser state parse_ipv4",
            "parser: accept after 34 header bytes",
            "table ForwardIngress.acl: hit key [a000101, 11, a] -> NoAction[]",
            "table ForwardIngress.routes: hit key [a000202] -> ForwardIngress.forward[80000000222, 2]",
            "ingress decided Unicast(2)",
        ],
    );
    expect_in_order(
        &miss,
        &[
            "parser state start",
            "table ForwardIngress.routes: miss key [a000303] -> ForwardIngress.drop[]",
            "mark_to_drop",
            "ingress decided Drop",
        ],
    );
}
