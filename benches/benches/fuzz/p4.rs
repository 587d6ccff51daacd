//! What a P4 user hands the lab: program source, STF tests, runtime JSON files (p4lang's
//! tutorials), simple_switch_CLI command files and P4Runtime Write requests.

use intlab_p4::Datapath;
use intlab_p4runtime::proto::p4::v1 as p4rt;
use intlab_p4runtime::server::Device;
use proptest::prelude::*;
use prost::Message;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::mutation::{apply, mutation};
use crate::texts::{damaged, fuzz_texts, text_strategy};
use crate::{Report, Tally, finish, runner};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The files of `dir` ending in `ext`, read.
fn files(dir: &str, ext: &str) -> Vec<String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    paths.sort();
    paths.iter().map(|p| read(p)).collect()
}

/// The tutorials' forwarding program, loaded: what runtime files and commands are applied to.
fn forwarding() -> Datapath {
    let loaded = intlab_p4::load(&repo("testbed/tests/p4/forward_dscp.p4")).expect("the program loads");
    Datapath::new(loaded.ir, "fuzz")
}

/// Runs the P4 source target: every program the front end refuses is refused with positions.
pub fn fuzz_p4_source(cases: u32) -> Report {
    let mut seeds = files("p4/tests/programs", "p4");
    seeds.extend(files("p4/tests/stf", "p4"));
    // The preprocessor's own seed: `#`, `##`, `#ifdef` and ids from macros, its header inlined
    // (text has no folder to include from).
    let macros = repo("testbed/tests/p4/macros");
    seeds.push(read(&macros.join("program.p4")).replace(
        "#include \"shared/ids.p4\"",
        &read(&macros.join("include/shared/ids.p4")),
    ));
    let tally = Tally::default();
    let started = Instant::now();
    let result = runner(cases).run(&text_strategy(seeds.len()), |(seed, edits, bytes)| {
        let text = damaged(&seeds[seed], &edits, &bytes);
        match intlab_p4::load_text("fuzz.p4", &text) {
            Ok(_) => tally.count("accepted"),
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
                tally.count("refused");
            }
        }
        Ok(())
    });
    finish("P4 source", cases, started, tally, result)
}

/// Runs the STF target: test files parsed.
pub fn fuzz_stf(cases: u32) -> Report {
    let seeds = files("p4/tests/stf", "stf");
    let parse = |t: &str| {
        intlab_p4::stf::parse("fuzz.stf", t)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    fuzz_texts("STF files", cases, &seeds, "fuzz.stf", parse, "parsed")
}

/// Runs the runtime JSON target: applied to the tutorials' program.
pub fn fuzz_runtime_json(cases: u32) -> Report {
    let seeds = [
        read(&repo("testbed/tests/p4/s1-runtime.json")),
        read(&repo("testbed/tests/p4/tutorial/s1-runtime.json")),
    ];
    let dp = forwarding();
    let parse = |t: &str| intlab_p4::control::runtime_json::apply_text(&dp, "fuzz.json", t).map_err(|e| e.to_string());
    fuzz_texts("runtime JSON", cases, &seeds, "fuzz.json", parse, "applied")
}

/// Runs the CLI command file target: applied to the tutorials' program.
pub fn fuzz_cli_commands(cases: u32) -> Report {
    let seeds = [
        read(&repo("testbed/tests/p4/tutorial/s2-commands.txt")),
        "table_set_default LineIngress.ipv4_lpm drop\ntable_clear LineIngress.ipv4_lpm\ncounter_read x 0\nmirroring_add 5 3\n".to_owned(),
    ];
    let dp = forwarding();
    let parse = |t: &str| {
        intlab_p4::control::cli_commands::apply_text(&dp, "fuzz.txt", t)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    fuzz_texts("CLI command files", cases, &seeds, "fuzz.txt", parse, "applied")
}

/// Write requests of the tutorials' program: an entry of each table with its first action.
fn write_seeds(device_program: &intlab_p4::ir::Program) -> Vec<Vec<u8>> {
    let described = intlab_p4runtime::p4info::p4info(device_program).expect("P4Info");
    let mut seeds = Vec::new();
    for t in &described.info.tables {
        let Some(preamble) = &t.preamble else { continue };
        let matches = t
            .match_fields
            .iter()
            .map(|f| {
                let bytes = prost::bytes::Bytes::from(vec![1; (f.bitwidth as usize).div_ceil(8).max(1)]);
                let exact = p4rt::field_match::FieldMatchType::Exact(p4rt::field_match::Exact { value: bytes.clone() });
                let lpm = p4rt::field_match::FieldMatchType::Lpm(p4rt::field_match::Lpm {
                    value: bytes,
                    prefix_len: f.bitwidth,
                });
                p4rt::FieldMatch {
                    field_id: f.id,
                    field_match_type: Some(if f.r#match.is_some() { lpm } else { exact }),
                }
            })
            .collect();
        // Its first action with every parameter set: an entry the device takes.
        let action = t.action_refs.first().map(|a| {
            let params = described
                .info
                .actions
                .iter()
                .find(|x| x.preamble.as_ref().is_some_and(|p| p.id == a.id))
                .map(|x| {
                    x.params
                        .iter()
                        .map(|p| p4rt::action::Param {
                            param_id: p.id,
                            value: vec![1; (p.bitwidth as usize).div_ceil(8).max(1)].into(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            p4rt::TableAction {
                r#type: Some(p4rt::table_action::Type::Action(p4rt::Action {
                    action_id: a.id,
                    params,
                })),
            }
        });
        let entry = p4rt::TableEntry {
            table_id: preamble.id,
            r#match: matches,
            action,
            ..Default::default()
        };
        let req = p4rt::WriteRequest {
            device_id: 1,
            updates: vec![p4rt::Update {
                r#type: p4rt::update::Type::Insert as i32,
                entity: Some(p4rt::Entity {
                    entity: Some(p4rt::entity::Entity::TableEntry(entry)),
                }),
            }],
            ..Default::default()
        };
        seeds.push(req.encode_to_vec());
    }
    seeds
}

/// Runs the P4Runtime target: Write requests, damaged, decoded and written to a device; every
/// update gets its own answer.
pub fn fuzz_p4runtime_writes(cases: u32) -> Report {
    let loaded = intlab_p4::load(&repo("testbed/tests/p4/forward_dscp.p4")).expect("the program loads");
    let seeds = write_seeds(&loaded.ir);
    assert!(!seeds.is_empty(), "the program has tables");
    let device = Device::new("fuzz", 1, Arc::new(Datapath::new(loaded.ir, "fuzz")), None).expect("device");
    let tally = Tally::default();
    let started = Instant::now();
    let strategy = (
        proptest::collection::vec(0..seeds.len(), 1..4),
        proptest::collection::vec(mutation(), 0..4),
        any::<bool>(),
    );
    let result = runner(cases).run(&strategy, |(picked, mutations, all_or_none)| {
        let joined: Vec<u8> = picked.iter().flat_map(|&i| seeds[i].iter().copied()).collect();
        let bytes = apply(joined, &mutations);
        let Ok(req) = p4rt::WriteRequest::decode(bytes.as_slice()) else {
            tally.count("not a WriteRequest");
            return Ok(());
        };
        let answers = device.write(&req.updates, all_or_none);
        prop_assert_eq!(answers.len(), req.updates.len(), "an answer per update");
        for a in answers {
            tally.count(if a.is_ok() { "update written" } else { "update refused" });
        }
        Ok(())
    });
    finish("P4Runtime writes", cases, started, tally, result)
}
