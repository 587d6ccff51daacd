//! Control-plane write rate of a running P4 switch, in one lab, over P4Runtime (a tonic
//! client) and the `intlab p4 cli` protocol. The machine is shared and noisy: only ratios
//! measured side by side mean anything.
//!
//! 1. 10,000 /32 lpm entries written in Writes of 100 updates, in Writes of 1, and through the
//!    CLI protocol (one simple_switch_CLI command per request), the three ways taking turns
//!    for three rounds: entries per second and the latency of a batch of 100.
//! 2. At scale: with the table holding 1,000, 100,000 and 1,000,000 entries, three rounds of 10
//!    Writes of 1,000 updates (the median round), 1,000 Writes of one update one after the
//!    other, and 10,000 Writes of one update with 32 in flight on the connection (as
//!    controllers that write asynchronously do), beside 1,000 Capabilities calls (the server
//!    does nothing for one): a sequential Write cannot take less than that gRPC round trip.
//!
//!     sudo cargo bench -p intlab-benches --bench p4runtime

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use intlab_lab::control_socket::{self, ControlClient};
use intlab_lab::lab::{Lab, LabConfig};
use intlab_lab::scenario::Scenario;
use intlab_p4runtime::proto::p4::v1 as p4rt;
use intlab_p4runtime::server::{self, Endpoint};
use p4rt::p4_runtime_client::P4RuntimeClient;

const ENTRIES: u32 = 10_000;
const BATCH: u32 = 100;
const ROUNDS: usize = 3;
/// Table sizes the scale part writes into.
const SIZES: [u32; 3] = [1_000, 100_000, 1_000_000];
/// Updates in one Write of the scale part's batches.
const BIG_BATCH: u32 = 1_000;
/// Rounds of 10 Writes of [`BIG_BATCH`] at each size (the median one is reported).
const BATCH_ROUNDS: usize = 3;
/// Single-update Writes in flight at once in the scale part's concurrent run.
const IN_FLIGHT: usize = 32;
/// `MyIngress.ipv4_lpm` in the program below (p4c's id for the tutorials' basic.p4).
const LPM: u32 = 37375156;
const FORWARD: u32 = 28792405;

fn main() {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("p4runtime bench: run as root (the lab builds namespaces)");
        std::process::exit(2);
    }
    let dir = std::env::temp_dir().join(format!("intlab-p4rt-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let scenario = write_scenario(&dir);
    let topology = Scenario::load_lab(&scenario)
        .expect("the bench's scenario loads")
        .topology;
    let lab = Lab::build(&topology, &LabConfig::new("p4rtbench")).expect("the lab builds");
    let socket = dir.join("control.sock");
    control_socket::serve(&socket, lab.p4_datapaths(), None).expect("the control socket");
    let (name, datapath) = lab.p4_datapaths().remove(0);
    let srv = server::start(vec![Endpoint {
        tls: None,
        name,
        address: "127.0.0.1:0".parse().expect("address"),
        device_id: 0,
        datapath: datapath.clone(),
        any_port_if_taken: false,
        cpu: None,
    }])
    .expect("P4Runtime serves");
    let addr = srv.endpoints[0].1;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut cli = ControlClient::connect(&socket, "s1").expect("the control socket answers");
    let (mut client, _arbitration) = rt.block_on(connect(addr));

    let mut results: Vec<(&str, Vec<Duration>, Duration)> = vec![
        ("cli", vec![], Duration::ZERO),
        ("p4runtime x100", vec![], Duration::ZERO),
        ("p4runtime x1", vec![], Duration::ZERO),
    ];
    for round in 0..ROUNDS {
        for (way, batches, total) in &mut results {
            cli.send("table_clear MyIngress.ipv4_lpm").expect("cleared");
            let t0 = Instant::now();
            for b in 0..ENTRIES / BATCH {
                let t = Instant::now();
                let range = b * BATCH..(b + 1) * BATCH;
                match *way {
                    "cli" => {
                        for i in range {
                            let (ip, mac) = entry(i);
                            cli.send(&format!(
                                "table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward {ip}/32 => {mac} 1"
                            ))
                            .expect("the CLI takes it");
                        }
                    }
                    "p4runtime x100" => rt.block_on(write(&mut client, range.map(update).collect())),
                    _ => {
                        for i in range {
                            rt.block_on(write(&mut client, vec![update(i)]));
                        }
                    }
                }
                batches.push(t.elapsed());
            }
            *total += t0.elapsed();
            let n = datapath.control().tables[0].len();
            assert_eq!(n, ENTRIES as usize, "{way}: every entry in the table (round {round})");
        }
    }
    println!("{ENTRIES} entries written {ROUNDS} times each way, batches of {BATCH}:");
    let cli_rate = rate(&results[0]);
    for r in &results {
        let mut b = r.1.clone();
        b.sort();
        let q = |f: f64| b[((b.len() as f64 * f).ceil() as usize).clamp(1, b.len()) - 1];
        println!(
            "  {:16} {:>9.0} entries/s ({:.2}x the CLI)   batch of {BATCH}: median {:>8.2} ms, p99 {:>8.2} ms",
            r.0,
            rate(r),
            rate(r) / cli_rate,
            q(0.5).as_secs_f64() * 1e3,
            q(0.99).as_secs_f64() * 1e3
        );
    }
    at_scale(&rt, &client, &datapath);
    drop(srv);
    drop(lab);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        eprintln!("removing {}: {e}", dir.display());
    }
}

/// Part 2 (see the top of this file): Writes into a table of each of [`SIZES`].
fn at_scale(
    rt: &tokio::runtime::Runtime,
    client: &P4RuntimeClient<tonic::transport::Channel>,
    datapath: &intlab_p4::Datapath,
) {
    let table = || datapath.control().tables[0].len();
    let mut c = client.clone();
    rt.block_on(delete(&mut c, 0..ENTRIES));
    assert_eq!(table(), 0, "the table emptied");
    let mut next = 0u32;
    println!(
        "at scale (entries/s; a Write of one update against a Capabilities call, which does no work, just before):"
    );
    for size in SIZES {
        while (table() as u32) < size {
            let n = BIG_BATCH.min(size - table() as u32);
            rt.block_on(write(&mut c, (next..next + n).map(update).collect()));
            next += n;
        }
        let timed = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            f();
            t.elapsed()
        };
        // A round is a tenth of a second, which one hiccup of the machine doubles: the median
        // of three is what a batch costs.
        let mut rounds: Vec<Duration> = (0..BATCH_ROUNDS)
            .map(|_| {
                timed(&mut || {
                    for _ in 0..10 {
                        rt.block_on(write(&mut c, (next..next + BIG_BATCH).map(update).collect()));
                        next += BIG_BATCH;
                    }
                })
            })
            .collect();
        rounds.sort();
        let batches = rounds[rounds.len() / 2];
        let floor = timed(&mut || {
            for _ in 0..1_000 {
                rt.block_on(c.capabilities(p4rt::CapabilitiesRequest::default()))
                    .expect("the switch answers Capabilities");
            }
        }) / 1_000;
        let one_by_one = timed(&mut || {
            for _ in 0..1_000 {
                rt.block_on(write(&mut c, vec![update(next)]));
                next += 1;
            }
        });
        let concurrent = timed(&mut || {
            rt.block_on(in_flight(&c, next..next + 10_000));
            next += 10_000;
        });
        assert_eq!(
            table() as u32,
            size + BATCH_ROUNDS as u32 * 10 * BIG_BATCH + 11_000,
            "every entry written into the {size}-entry table"
        );
        let per_write = one_by_one.as_secs_f64() / 1_000.0;
        println!(
            "  {size:>9} entries: batches of {BIG_BATCH} {:>8.0}   one update {:>7.0} ({:.0} us each, {:.2}x a Capabilities call's {:.0} us)   one update x{IN_FLIGHT} in flight {:>7.0}",
            f64::from(10 * BIG_BATCH) / batches.as_secs_f64(),
            1_000.0 / one_by_one.as_secs_f64(),
            per_write * 1e6,
            per_write / floor.as_secs_f64(),
            floor.as_secs_f64() * 1e6,
            10_000.0 / concurrent.as_secs_f64(),
        );
        // Refill from empty: each size starts from a table filled the same way.
        rt.block_on(delete(&mut c, 0..next));
        assert_eq!(table(), 0, "the table emptied");
        next = 0;
    }
}

/// Writes one update for each of `keys`, [`IN_FLIGHT`] Writes at a time on one connection.
async fn in_flight(client: &P4RuntimeClient<tonic::transport::Channel>, keys: std::ops::Range<u32>) {
    let mut running = tokio::task::JoinSet::new();
    for i in keys {
        if running.len() == IN_FLIGHT {
            running
                .join_next()
                .await
                .expect("a Write running")
                .expect("the Write's task");
        }
        let mut c = client.clone();
        running.spawn(async move { write(&mut c, vec![update(i)]).await });
    }
    while let Some(done) = running.join_next().await {
        done.expect("the Write's task");
    }
}

/// Deletes the entries of `keys` through P4Runtime, [`BIG_BATCH`] a Write.
async fn delete(c: &mut P4RuntimeClient<tonic::transport::Channel>, keys: std::ops::Range<u32>) {
    let mut from = keys.start;
    while from < keys.end {
        let to = (from + BIG_BATCH).min(keys.end);
        let updates = (from..to)
            .map(|i| p4rt::Update {
                r#type: p4rt::update::Type::Delete as i32,
                ..update(i)
            })
            .collect();
        write(c, updates).await;
        from = to;
    }
}

fn rate(r: &(&str, Vec<Duration>, Duration)) -> f64 {
    f64::from(ENTRIES) * ROUNDS as f64 / r.2.as_secs_f64()
}

/// Entry `i`: a /32 in 10.0.0.0/8 and a MAC.
fn entry(i: u32) -> (String, String) {
    let ip = std::net::Ipv4Addr::from(0x0a00_0000 | i);
    (
        ip.to_string(),
        format!("02:00:00:00:{:02x}:{:02x}", i >> 8 & 0xff, i & 0xff),
    )
}

fn update(i: u32) -> p4rt::Update {
    let ip = (0x0a00_0000 | i).to_be_bytes().to_vec();
    let mac = vec![2, 0, 0, 0, (i >> 8 & 0xff) as u8, (i & 0xff) as u8];
    p4rt::Update {
        r#type: p4rt::update::Type::Insert as i32,
        entity: Some(p4rt::Entity {
            entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
                table_id: LPM,
                r#match: vec![p4rt::FieldMatch {
                    field_id: 1,
                    field_match_type: Some(p4rt::field_match::FieldMatchType::Lpm(p4rt::field_match::Lpm {
                        value: ip.into(),
                        prefix_len: 32,
                    })),
                }],
                action: Some(p4rt::TableAction {
                    r#type: Some(p4rt::table_action::Type::Action(p4rt::Action {
                        action_id: FORWARD,
                        params: vec![
                            p4rt::action::Param {
                                param_id: 1,
                                value: mac.into(),
                            },
                            p4rt::action::Param {
                                param_id: 2,
                                value: vec![1].into(),
                            },
                        ],
                    })),
                }),
                ..Default::default()
            })),
        }),
    }
}

async fn write(c: &mut P4RuntimeClient<tonic::transport::Channel>, updates: Vec<p4rt::Update>) {
    c.write(p4rt::WriteRequest {
        device_id: 0,
        election_id: Some(p4rt::Uint128 { high: 0, low: 1 }),
        updates,
        ..Default::default()
    })
    .await
    .expect("the switch takes the write");
}

/// A client that has arbitrated as primary (the stream's sender keeps the stream open).
async fn connect(
    addr: std::net::SocketAddr,
) -> (
    P4RuntimeClient<tonic::transport::Channel>,
    tokio::sync::mpsc::UnboundedSender<p4rt::StreamMessageRequest>,
) {
    let mut c = P4RuntimeClient::connect(format!("http://{addr}"))
        .await
        .expect("connects");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tx.send(p4rt::StreamMessageRequest {
        update: Some(p4rt::stream_message_request::Update::Arbitration(
            p4rt::MasterArbitrationUpdate {
                device_id: 0,
                election_id: Some(p4rt::Uint128 { high: 0, low: 1 }),
                ..Default::default()
            },
        )),
    })
    .expect("queued");
    let mut answers = c
        .stream_channel(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    let first = answers.message().await.expect("an answer").expect("open");
    assert!(matches!(
        first.update,
        Some(p4rt::stream_message_response::Update::Arbitration(_))
    ));
    // The answers are not read again: keep the stream open by holding it in a task.
    tokio::spawn(async move { while let Ok(Some(_)) = answers.message().await {} });
    (c, tx)
}

/// A lab of one host and one P4 switch running the P4Runtime tests' program with an lpm
/// table of 1,100,000 entries.
fn write_scenario(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let program = std::fs::read_to_string(root.join("p4runtime/tests/programs/forward.p4")).expect("the program");
    let big = program.replace("size = 1024;", "size = 1100000;");
    assert_ne!(big, program, "the program's lpm table has a size to raise");
    std::fs::write(dir.join("forward.p4"), big).expect("written");
    let yaml = "\
name: p4rtbench
nodes:
  h1: { kind: host, address: 198.18.1.1/24 }
  s1: { kind: switch, p4: { program: forward.p4, ports: { eth1: 1 } } }
links:
  - { endpoints: [\"h1:eth0\", \"s1:eth1\"], rate: 1Gbps, delay: 0ms }
";
    let path = dir.join("bench.yaml");
    std::fs::write(&path, yaml).expect("written");
    path
}
