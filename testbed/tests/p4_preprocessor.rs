//! P4 as production programs are built: p4c's `-I`, `-D` and `-U` on `intlab p4`, includes
//! found in include folders, ids from macros in `@id`, token pasting and stringizing
//! (`testbed/tests/p4/macros/program.p4`, written for this test), and the same options as keys
//! where a switch's file names its program.

mod support;

use std::path::{Path, PathBuf};

fn macros() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/p4/macros")
}

/// `intlab p4 ARGS`: its exit status and everything it printed.
fn p4(args: &[&str]) -> (bool, String) {
    let all: Vec<&str> = ["p4"].iter().chain(args).copied().collect();
    let o = support::intlab(&all);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), said)
}

/// The id P4Info (JSON) gives the object named `name` among `kind` (`tables`, `actions`, ...).
fn id_of(info: &serde_json::Value, kind: &str, name: &str) -> Option<u64> {
    info[kind]
        .as_array()?
        .iter()
        .find(|o| o["preamble"]["name"] == name)
        .and_then(|o| o["preamble"]["id"].as_u64())
}

#[test]
fn ids_written_as_macros_of_an_included_header_are_the_ids_p4info_gives() {
    let dir = macros();
    let program = dir.join("program.p4");
    let program = program.to_str().expect("utf-8");
    let include = dir.join("include");
    let include = include.to_str().expect("utf-8");
    // Without -I the header is not found, and the message says where it was looked for.
    let (ok, said) = p4(&["check", program]);
    assert!(!ok && said.contains("cannot include `shared/ids.p4`"), "{said}");
    let (ok, said) = p4(&["info", "--format", "json", "-I", include, "-D", "WITH_COUNTER", program]);
    assert!(ok, "{said}");
    let info: serde_json::Value = serde_json::from_str(&said).expect("P4Info as JSON");
    assert_eq!(
        id_of(&info, "tables", "MyIngress.forwarding"),
        Some(0x0200_0001),
        "{said}"
    );
    assert_eq!(id_of(&info, "actions", "MyIngress.fwd"), Some(0x0100_0007));
    // An @id without the prefix gets its kind's, as p4c gives it.
    assert_eq!(id_of(&info, "actions", "MyIngress.drop"), Some(0x0100_0008));
    assert_eq!(id_of(&info, "counters", "MyIngress.hits"), Some(0x1200_0042));
    for sketch in ["MyIngress.sketch0", "MyIngress.sketch1"] {
        assert!(id_of(&info, "registers", sketch).is_some(), "{sketch} pasted: {said}");
    }
    // -U after -D: the counter is gone with its #ifdef.
    let (ok, said) = p4(&[
        "info",
        "--format",
        "json",
        "-I",
        include,
        "-D",
        "WITH_COUNTER",
        "-U",
        "WITH_COUNTER",
        program,
    ]);
    assert!(ok, "{said}");
    let info: serde_json::Value = serde_json::from_str(&said).expect("P4Info as JSON");
    assert_eq!(id_of(&info, "counters", "MyIngress.hits"), None, "{said}");
    assert_eq!(id_of(&info, "tables", "MyIngress.forwarding"), Some(0x0200_0001));
}

#[test]
fn a_switch_file_gives_its_program_include_folders_and_macros() {
    let dir = support::scratch_dir("p4-preprocessor");
    let program = macros().join("program.p4");
    let file = dir.join("switch.yaml");
    std::fs::write(
        &file,
        format!(
            "name: s\nnode_id: 1\nports:\n  - {{ name: p0, kind: veth, device: pp0, rate: 1Gbps, delay: 0us, buffer: 1MB, mtu: 1500, p4_port: 0 }}\np4:\n  program: {}\n  include: [{}]\n  define: [WITH_COUNTER, SIZE=3]\n  undefine: [SIZE]\n",
            program.display(),
            macros().join("include").display()
        ),
    )
    .expect("switch file");
    let spec = intlab_switch::config::SwitchSpec::load(&file).unwrap_or_else(|e| panic!("{e}"));
    let p4 = spec.p4.expect("a P4 program");
    assert_eq!(p4.preprocessor.include_dirs, [macros().join("include")]);
    assert_eq!(
        p4.preprocessor.defines,
        [
            ("WITH_COUNTER".to_owned(), "1".to_owned()),
            ("SIZE".to_owned(), "3".to_owned())
        ]
    );
    assert_eq!(p4.preprocessor.undefines, ["SIZE"]);
    let loaded = intlab_p4::load_with(&p4.program, &p4.preprocessor).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        loaded.ir.counters.iter().any(|c| c.name == "MyIngress.hits"),
        "WITH_COUNTER reached the program"
    );
}
