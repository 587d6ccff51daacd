//! Cost of control-plane writes into large P4 tables, and the pipeline's frame rate while a
//! controller writes at full rate, in memory (the P4Runtime server and the CLI apply their
//! writes through the same `Datapath::edit`; `--bench p4runtime` adds the gRPC round trip).
//!
//! Writes: for an exact and an lpm table of 1,000, 100,000 and 1,000,000 entries, five rounds
//! of 2,000 single-entry edits (inserts of new keys, then their deletes, each its own edit as
//! one P4Runtime Write of one update is) and of 10 edits of 1,000 inserts then 10 of 1,000
//! deletes: the median round of each, and how the single-write cost grows from the smallest
//! table to the largest against log n (a round is a few milliseconds, which one hiccup of the
//! machine doubles: the median is what the structure costs).
//! Frame rate: one thread runs frames through the program's ingress (an lpm hit in a table of
//! 100,000 entries) for a second, alone, beside a thread that only spins, and beside a thread
//! writing single entries as fast as it can, five rounds taking turns (the machine is shared
//! and noisy: only ratios measured side by side mean anything). The spinner is the control: on
//! a machine whose two cores share more than they show (a virtual machine's), any second busy
//! thread slows the first; the writes' own cost is the rate beside them against beside it.
//!
//!     cargo bench -p intlab-benches --bench control_plane

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use intlab_p4::Datapath;
use intlab_p4::exec::table::{InsertError, Via};
use intlab_p4::ir::{Entry, KeySet};
use intlab_switch::SwitchSpec;
use intlab_switch::frame::FramePool;
use intlab_switch::pipeline::{P4Pipeline, P4Verdict};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const SIZES: [u32; 3] = [1_000, 100_000, 1_000_000];
const SINGLES: u32 = 2_000;
const BATCH: u32 = 1_000;
const BATCHES: u32 = 10;
/// Entries per edit while a table is filled.
const FILL: u32 = 10_000;
/// Entries in the table the frames look up while the rate is measured.
const RATE_TABLE: u32 = 100_000;
const ROUNDS: usize = 5;
/// Rounds of the write measurements at each table size.
const WRITE_ROUNDS: usize = 5;
const RATE_SPELL: Duration = Duration::from_secs(1);

/// Two ports, as the program's `forward(2)` sends to the second.
const SWITCH: &str = "\
node_id: 1
ports:
  - { name: p1, kind: tap, rate: 100Gbps, delay: 0us, buffer: 4MB }
  - { name: p2, kind: tap, rate: 100Gbps, delay: 0us, buffer: 4MB }
";

fn main() {
    let spec = SwitchSpec::from_yaml(SWITCH, Path::new("bench.yaml")).expect("switch spec");
    let loaded = intlab_p4::load(&Path::new(ROOT).join("benches/programs/tables.p4")).unwrap_or_else(|e| panic!("{e}"));
    let pipeline = P4Pipeline::new(Datapath::new(loaded.ir, "s1"), &spec.ports).expect("ports");
    let dp = pipeline.datapath().clone();
    println!(
        "control-plane writes in memory (Datapath::edit), rounds of {SINGLES} single-entry edits and of {BATCHES} edits of {BATCH}, each way:"
    );
    let mut growth = Vec::new();
    for (kind, name) in [(Kind::Exact, "host_exact"), (Kind::Lpm, "prefix_lpm")] {
        let t = dp.table_id(name).expect("the table");
        let forward = dp.action_of(t, "forward").expect("the action");
        let mut cost_us = Vec::new();
        for n in SIZES {
            fill(&dp, t, kind, forward, n);
            // Unmeasured: the first round after a fill also pays for the pages the fill left.
            singles(&dp, t, kind, forward, n);
            let (mut single, mut batched) = (Vec::new(), Vec::new());
            for _ in 0..WRITE_ROUNDS {
                single.push(timed(SINGLES * 2, || singles(&dp, t, kind, forward, n)));
                batched.push(timed(BATCH * BATCHES * 2, || {
                    for b in 0..BATCHES {
                        insert(&dp, t, kind, forward, n + b * BATCH..n + (b + 1) * BATCH);
                    }
                    for b in 0..BATCHES {
                        delete(&dp, t, kind, n + b * BATCH..n + (b + 1) * BATCH);
                    }
                }));
            }
            assert_eq!(
                dp.control().tables[t].len(),
                n as usize,
                "{kind:?}: the table is back to {n}"
            );
            let (single, batched) = (median(&mut single), median(&mut batched));
            cost_us.push(1e6 / single);
            println!(
                "  {:5} table of {n:>9} entries: single {:>9.0} writes/s ({:>6.2} us each), batches of {BATCH} {:>10.0} entries/s (medians of {WRITE_ROUNDS} rounds)",
                format!("{kind:?}").to_lowercase(),
                single,
                1e6 / single,
                batched
            );
        }
        growth.push((kind, cost_us[cost_us.len() - 1] / cost_us[0]));
        dp.edit(|cp| {
            cp.tables[t].clear();
            Ok::<(), ()>(())
        })
        .expect("cleared");
    }
    let (small, large) = (SIZES[0], SIZES[SIZES.len() - 1]);
    for (kind, g) in growth {
        println!(
            "  {:5} single-write cost at {large} entries: {g:.2}x its cost at {small} (log n grows {:.2}x)",
            format!("{kind:?}").to_lowercase(),
            f64::from(large).ln() / f64::from(small).ln()
        );
    }
    frame_rate(&pipeline, &dp);
}

/// The pipeline's frame rate alone, beside a thread that only spins and beside a writer at full
/// rate (see the file's doc).
fn frame_rate(pipeline: &P4Pipeline, dp: &Arc<Datapath>) {
    let t = dp.table_id("prefix_lpm").expect("the table");
    let forward = dp.action_of(t, "forward").expect("the action");
    fill(dp, t, Kind::Lpm, forward, RATE_TABLE);
    // The frames' route: 198.18.0.0/16 to port 2.
    dp.edit(|cp| {
        cp.tables[t]
            .insert(
                Entry {
                    matches: vec![KeySet::Mask(0xc612_0000, 0xffff_0000)],
                    priority: 0,
                    action: forward,
                    args: vec![2],
                },
                Via::Action,
            )
            .map(|_| ())
    })
    .expect("the route");
    let frame = ipv4_frame();
    let (mut alone, mut spun, mut beside, mut writes) = (Vec::new(), Vec::new(), Vec::new(), 0u64);
    for _ in 0..ROUNDS {
        alone.push(forwarded_per_second(pipeline, &frame, Beside::Nothing));
        spun.push(forwarded_per_second(pipeline, &frame, Beside::Spinner));
        let written = AtomicU64::new(0);
        beside.push(forwarded_per_second(
            pipeline,
            &frame,
            Beside::Writer(dp, t, forward, &written),
        ));
        writes += written.load(Ordering::Relaxed);
    }
    // Each round's three spells are side by side in time; the median round drops one a hiccup
    // hit.
    let ratio = |of: &[f64], to: &[f64]| {
        let mut r: Vec<f64> = of.iter().zip(to).map(|(a, b)| a / b).collect();
        let m = median(&mut r);
        format!("{m:.2}x ({:.2}-{:.2})", r[0], r[r.len() - 1])
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "frame rate through ingress (lpm hit, {RATE_TABLE} entries), means of {ROUNDS} rounds: alone {:.0}/s, beside a thread that only spins {:.0}/s, beside full-rate single-entry writes ({:.0} writes/s) {:.0}/s",
        mean(&alone),
        mean(&spun),
        writes as f64 / (ROUNDS as f64 * RATE_SPELL.as_secs_f64()),
        mean(&beside),
    );
    println!(
        "  beside the writes: {} of alone, {} of beside the spinner (medians of the rounds' ratios: the second is the writes' own cost, the first adds what any second busy thread costs on this machine)",
        ratio(&beside, &alone),
        ratio(&beside, &spun),
    );
}

/// What runs on another thread while frames are counted.
enum Beside<'a> {
    /// Nothing.
    Nothing,
    /// A thread that spins, touching nothing the frames touch.
    Spinner,
    /// A thread writing single entries into table `.1` (action `.2`) as fast as it can, its
    /// count of writes added to `.3`.
    Writer(&'a Arc<Datapath>, usize, usize, &'a AtomicU64),
}

/// Frames per second through ingress for [`RATE_SPELL`], with `beside` running meanwhile.
fn forwarded_per_second(pipeline: &P4Pipeline, frame: &[u8], beside: Beside<'_>) -> f64 {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop = &stop;
        match beside {
            Beside::Nothing => {}
            Beside::Spinner => {
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            Beside::Writer(dp, t, forward, written) => {
                s.spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        // Keys above the filled ones, inserted and deleted in turn.
                        let key = RATE_TABLE + (i / 2) % 1_000;
                        if i % 2 == 0 {
                            insert(dp, t, Kind::Lpm, forward, key..key + 1);
                        } else {
                            delete(dp, t, Kind::Lpm, key..key + 1);
                        }
                        i += 1;
                    }
                    if i % 2 == 1 {
                        // The last insert's entry goes, so that the next spell starts as this one.
                        let key = RATE_TABLE + (i / 2) % 1_000;
                        delete(dp, t, Kind::Lpm, key..key + 1);
                    }
                    written.fetch_add(u64::from(i), Ordering::Relaxed);
                });
            }
        }
        let pool = FramePool::new(2048, 16);
        let mut scratch = pipeline.scratch();
        let start = Instant::now();
        let mut frames = 0u64;
        while start.elapsed() < RATE_SPELL {
            for _ in 0..256 {
                let mut f = pool.get();
                f.buffer_mut()[..frame.len()].copy_from_slice(frame);
                f.len = frame.len();
                let v = pipeline.ingress(&mut f, 0, &mut scratch, None).verdict;
                assert!(matches!(v, P4Verdict::Forward(1)), "routed to p2: {v:?}");
                pool.put(black_box(f));
            }
            frames += 256;
        }
        stop.store(true, Ordering::Relaxed);
        frames as f64 / start.elapsed().as_secs_f64()
    })
}

/// Which table a key is for.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Exact,
    Lpm,
}

/// The key of entry `i`: host address 10.0.0.0 + i, exact or as a /32.
fn matches(kind: Kind, i: u32) -> Vec<KeySet> {
    let ip = u128::from(0x0a00_0000 + i);
    match kind {
        Kind::Exact => vec![KeySet::Value(ip)],
        Kind::Lpm => vec![KeySet::Mask(ip, 0xffff_ffff)],
    }
}

/// Inserts entries `range` into table `t`, in one edit.
fn insert(dp: &Datapath, t: usize, kind: Kind, forward: usize, range: std::ops::Range<u32>) {
    dp.edit(|cp| {
        for i in range {
            let e = Entry {
                matches: matches(kind, i),
                priority: 0,
                action: forward,
                args: vec![u128::from(1 + i % 2)],
            };
            cp.tables[t].insert(e, Via::Action)?;
        }
        Ok::<(), InsertError>(())
    })
    .unwrap_or_else(|e| panic!("insert: {e}"));
}

/// Deletes entries `range` from table `t`, found by key as a P4Runtime delete finds them, in one
/// edit.
fn delete(dp: &Datapath, t: usize, kind: Kind, range: std::ops::Range<u32>) {
    dp.edit(|cp| {
        for i in range {
            let at = cp.tables[t].find(&matches(kind, i), 0).ok_or(i)?;
            cp.tables[t].delete(at);
        }
        Ok::<(), u32>(())
    })
    .unwrap_or_else(|i| panic!("delete: no entry {i}"));
}

/// [`SINGLES`] single-entry inserts of keys from `n` on, then their deletes, each its own edit.
fn singles(dp: &Datapath, t: usize, kind: Kind, forward: usize, n: u32) {
    for i in n..n + SINGLES {
        insert(dp, t, kind, forward, i..i + 1);
    }
    for i in n..n + SINGLES {
        delete(dp, t, kind, i..i + 1);
    }
}

/// The median of `rates`.
fn median(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// Clears table `t` and fills it with entries 0..n, [`FILL`] per edit.
fn fill(dp: &Datapath, t: usize, kind: Kind, forward: usize, n: u32) {
    dp.edit(|cp| {
        cp.tables[t].clear();
        Ok::<(), ()>(())
    })
    .expect("cleared");
    for from in (0..n).step_by(FILL as usize) {
        insert(dp, t, kind, forward, from..(from + FILL).min(n));
    }
}

/// `f`'s rate of `count` operations per second.
fn timed(count: u32, f: impl FnOnce()) -> f64 {
    let t0 = Instant::now();
    f();
    f64::from(count) / t0.elapsed().as_secs_f64()
}

/// Ethernet and IPv4 to 198.18.0.2, 60 bytes.
fn ipv4_frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    f
}
