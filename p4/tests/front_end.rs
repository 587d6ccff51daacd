//! The front end on whole programs: what it lists of a good one, and where and why it refuses
//! bad ones (every problem at once, each at its file, line and column).

use std::path::Path;

fn program() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/forward.p4"))
}

fn refusal(text: &str) -> intlab_p4::P4Errors {
    match intlab_p4::load_text("bad.p4", text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// The test program with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(program()).expect("test program");
    assert!(text.contains(from), "`{from}` not in the test program");
    text.replacen(from, to, 1)
}

/// The line of the test program where `text` first occurs.
fn line_of(text: &str) -> usize {
    let program = std::fs::read_to_string(program()).expect("test program");
    program.lines().position(|l| l.contains(text)).expect("in the program") + 1
}

#[test]
fn the_test_program_lists_its_pipeline_tables_and_actions() {
    let loaded = intlab_p4::load(program()).unwrap_or_else(|e| panic!("{e}"));
    let info = &loaded.info;
    assert_eq!(
        info.pipeline,
        [
            "ForwardParser",
            "ForwardVerify",
            "ForwardIngress",
            "ForwardEgress",
            "ForwardCompute",
            "ForwardDeparser"
        ]
    );
    assert_eq!(info.states, ["start", "parse_route", "parse_ipv4"]);
    assert_eq!(info.tables.len(), 2);
    let lpm = &info.tables[0];
    assert_eq!(
        lpm.name, "ForwardIngress.routes",
        "@name renames the table within its control"
    );
    assert_eq!(
        (
            lpm.keys[0].name.as_str(),
            lpm.keys[0].match_kind.as_str(),
            lpm.keys[0].bits
        ),
        ("hdr.ipv4.dst", "lpm", 32)
    );
    assert_eq!(
        lpm.actions,
        ["ForwardIngress.forward", "ForwardIngress.drop", "NoAction"]
    );
    assert_eq!(lpm.default_action, Some(("ForwardIngress.drop()".to_owned(), false)));
    assert_eq!(lpm.size, 1024);
    let acl = &info.tables[1];
    let keys: Vec<(&str, &str, u32)> = acl
        .keys
        .iter()
        .map(|k| (k.name.as_str(), k.match_kind.as_str(), k.bits))
        .collect();
    assert_eq!(
        keys,
        [
            ("source", "ternary", 32),
            ("hdr.ipv4.protocol", "exact", 8),
            ("hdr.ipv4.dst[31:24]", "range", 8)
        ]
    );
    assert_eq!(acl.entries, 2);
    assert_eq!(acl.default_action, Some(("NoAction()".to_owned(), true)));
    let forward = info
        .actions
        .iter()
        .find(|a| a.name == "ForwardIngress.forward")
        .expect("forward listed");
    assert_eq!(forward.params, [("next_mac".to_owned(), 48), ("port".to_owned(), 9)]);
    let listing = info.to_string();
    assert!(
        listing.contains("table ForwardIngress.routes (size 1024)\n    key hdr.ipv4.dst: lpm (32 bits)"),
        "{listing}"
    );
}

#[test]
fn refusals_name_file_line_column_and_what_was_expected() {
    // (what is replaced, by what, the message, the text on the line the error must name when
    // not the replacement's last line)
    let cases: &[(&str, &str, &str, Option<&str>)] = &[
        (
            "hdr.ipv4.dst: lpm;",
            "hdr.ipv4.dst: longest;",
            "match kind `longest` is not one v1model has",
            None,
        ),
        (
            "default_action = drop();",
            "default_action = follow_route();",
            "action `follow_route` is not one of the table's",
            None,
        ),
        (
            "default_action = drop();",
            "default_action = forward(1);",
            "takes 2 control-plane argument(s), 1 given",
            None,
        ),
        (
            "(_, 17, _): NoAction();",
            "(_, 17): NoAction();",
            "2 values for 3 keys",
            None,
        ),
        ("1: parse_ipv4;", "1: nowhere;", "state `nowhere` is not declared", None),
        (
            "meta.hits = meta.hits |+| 1;",
            "meta.hits = meta.hits |+| 8w1;",
            "`|+|` on bit<32> and bit<8>: cast one to the other's type",
            None,
        ),
        (
            "#define MAX_HOPS 4",
            "#define MAX(a, b) a\n#define MAX_HOPS MAX(4)",
            "macro `MAX` takes 2 argument(s), 1 given",
            // Where the macro is used, not defined.
            Some("srcroute_t[MAX_HOPS]"),
        ),
        (
            "ForwardDeparser()) main;",
            "ForwardDeparser()) other;",
            "no `main`",
            // The package instantiation begins a line earlier.
            Some("V1Switch("),
        ),
        (
            "ForwardEgress(), ForwardCompute()",
            "ForwardCompute(), ForwardEgress()",
            "ForwardCompute",
            None,
        ),
        (
            "hdr.ipv4.protocol: exact;",
            "hdr.ipv4.proto: exact;",
            "`ipv4_t` has no field `proto`",
            None,
        ),
    ];
    for &(from, to, message, line_with) in cases {
        let text = edited(from, to);
        let marker = line_with.unwrap_or_else(|| to.lines().last().expect("a replacement"));
        let line = text
            .lines()
            .position(|l| l.contains(marker))
            .expect("the marker is in the program")
            + 1;
        let e = match intlab_p4::load_text("forward.p4", &text) {
            Ok(_) => panic!("`{to}` accepted"),
            Err(e) => e,
        };
        let first = e.first();
        assert!(first.at.starts_with("forward.p4:"), "`{to}`: {e}");
        assert_eq!(first.pos.line as usize, line, "`{to}`: {e}");
        assert!(first.pos.column > 0, "`{to}`: {e}");
        assert!(e.to_string().contains(message), "`{to}`: {e}");
    }
}

#[test]
fn every_error_of_a_program_is_reported_at_once_where_it_is() {
    let text = edited("hdr.ipv4.dst: lpm;", "hdr.ipv4.dst: longest;")
        .replacen("1: parse_ipv4;", "1: nowhere;", 1)
        .replacen(
            "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
            "hdr.ipv4.ttl = hdr.ipv4.tll - 1;",
            1,
        );
    let e = match intlab_p4::load_text("forward.p4", &text) {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    };
    let lines: Vec<u32> = e.0.iter().map(|x| x.pos.line).collect();
    for (what, at) in [
        ("longest", line_of("hdr.ipv4.dst: lpm;")),
        ("nowhere", line_of("1: parse_ipv4;")),
        ("tll", line_of("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;")),
    ] {
        assert!(
            e.0.iter()
                .any(|x| x.pos.line as usize == at && x.message.contains(what)),
            "`{what}` at line {at}: {e}"
        );
    }
    assert_eq!(lines.len(), 3, "{e}");
}

#[test]
fn what_intlab_cannot_run_is_refused_by_name_at_its_place() {
    let e = refusal("const bit<8> X = 8w300;\n");
    assert!(e.first().message.contains("does not fit in 8 bits"), "{e}");
    assert_eq!(e.first().at, "bad.p4:1:18");
    let e = refusal("/* never closed\n");
    assert!(e.first().message.contains("comment not closed"), "{e}");
    let e = refusal("#include <core.p4>\nheader h { bit<200> wide; }\n");
    assert!(e.first().message.contains("values of up to 128 bits"), "{e}");
    assert_eq!((e.first().pos.line, e.first().pos.column), (2, 12), "{e}");
    // Also in code `main` does not use.
    let e = refusal(&edited(
        "control ForwardDeparser",
        "extern void custom(out bit<8> x);\ncontrol Unused(inout bit<8> x) { apply { custom(x); } }\ncontrol ForwardDeparser",
    ));
    assert!(
        e.to_string()
            .contains("extern function `custom` is not one intlab runs"),
        "{e}"
    );
    let e = refusal("#include <tna.p4>\n");
    assert!(
        e.first()
            .message
            .contains("cannot include `tna.p4`: no built-in of that name"),
        "{e}"
    );
}

#[test]
fn programs_nested_past_the_limit_are_refused_by_name_not_by_a_crash() {
    let deep = format!(
        "#include <v1model.p4>\nconst bit<8> X = {}1{};\n",
        "(".repeat(20_000),
        ")".repeat(20_000)
    );
    let e = refusal(&deep);
    assert!(e.first().message.contains("nested more than 256 levels"), "{e}");
    assert_eq!(e.first().pos.line, 2);
    let blocks = format!(
        "#include <v1model.p4>\ncontrol c(inout bit<8> x) {{ apply {{ {}x = 1;{} }} }}\n",
        "{".repeat(5_000),
        "}".repeat(5_000)
    );
    let e = refusal(&blocks);
    assert!(e.first().message.contains("nested more than 256 levels"), "{e}");
}

#[test]
fn the_built_in_includes_parse_on_their_own_and_define_what_programs_test() {
    let e = refusal("#include <intlab.p4>\n");
    // Everything in them parsed; what is missing is the program's own `main`.
    assert!(e.first().message.contains("no `main`"), "{e}");
    // p4c's core.p4 and v1model.p4 define their guards and version; programs test them.
    let e = refusal(
        "#include <v1model.p4>\n#if defined(_CORE_P4_) && defined(_V1_MODEL_P4_) && V1MODEL_VERSION >= 20180101\n#error guards defined\n#endif\n",
    );
    assert!(e.first().message.contains("#error guards defined"), "{e}");
}

/// A control that instantiates itself is refused by name (found by fuzzing: it used to recurse
/// until the stack ran out; P4 declares before use, so this is the only way to a cycle).
#[test]
fn a_block_that_instantiates_itself_is_refused_not_recursed_into() {
    let base = std::fs::read_to_string(program()).expect("program");
    let direct = format!("{base}\ncontrol Sub(inout bit<48> x) {{ Sub() sub; apply {{ sub.apply(x); }} }}\n");
    let e = refusal(&direct).to_string();
    assert!(e.contains("`Sub` instantiates itself (Sub → Sub)"), "{e}");
}
