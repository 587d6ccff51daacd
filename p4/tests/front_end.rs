//! The front end on whole programs: what it lists of a good one, and where and why it refuses
//! bad ones.

use std::path::Path;

fn program() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/forward.p4"))
}

fn refusal(text: &str) -> intlab_p4::P4Error {
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
    assert_eq!(lpm.name, "ForwardIngress.routes", "@name renames the table");
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
    assert_eq!(lpm.size, Some(1024));
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
    assert_eq!(acl.const_entries, 2);
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
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "hdr.ipv4.dst: lpm;",
            "hdr.ipv4.dst: longest;",
            "forward.p4:",
            "unknown match kind `longest`",
        ),
        (
            "default_action = drop();",
            "default_action = follow_route();",
            "forward.p4:",
            "not in the table's actions",
        ),
        (
            "default_action = drop();",
            "default_action = forward(1);",
            "forward.p4:",
            "takes 2 arguments, 1 given",
        ),
        (
            "(_, 17, _): NoAction();",
            "(_, 17): NoAction();",
            "forward.p4:",
            "entry has 2 keys",
        ),
        (
            "1: parse_ipv4;",
            "1: nowhere;",
            "forward.p4:",
            "state `nowhere` is not declared",
        ),
        (
            "meta.hits = meta.hits |+| 1;",
            "meta.hits += 1;",
            "forward.p4:",
            "compound assignment `+=`",
        ),
        (
            "#include <v1model.p4>",
            "#include <psa.p4>",
            "forward.p4:4:1",
            "no built-in include `psa.p4`",
        ),
        (
            "#define MAX_HOPS 4",
            "#define MAX(a) a",
            "forward.p4:6:1",
            "function-like macro",
        ),
        (
            "ForwardDeparser()) main;",
            "ForwardDeparser()) other;",
            "forward.p4:",
            "no `main`",
        ),
        (
            "ForwardEgress(), ForwardCompute()",
            "ForwardCompute(), ForwardEgress()",
            "forward.p4:",
            "`ForwardCompute` takes 2 parameters; an Egress control takes 3",
        ),
        (
            "hdr.ipv4.protocol: exact;",
            "hdr.ipv4.proto: exact;",
            "forward.p4:",
            "has no field `proto`",
        ),
    ];
    for (from, to, at, message) in cases {
        let e = match intlab_p4::load_text("forward.p4", &edited(from, to)) {
            Ok(_) => panic!("`{to}` accepted"),
            Err(e) => e,
        };
        assert!(e.to_string().starts_with(at), "`{to}`: {e}");
        assert!(e.message.contains(message), "`{to}`: {e}");
        assert!(e.pos.line > 0 || at.ends_with(':'), "`{to}`: {e}");
    }
}

#[test]
fn unsupported_constructs_are_refused_by_name_at_their_place() {
    let e = refusal("#include <v1model.p4>\nparser P(packet_in p) {\n  value_set<bit<8>>(4) vs;\n}\n");
    assert_eq!((e.pos.line, e.pos.column), (3, 3), "{e}");
    assert!(e.message.contains("value_set"), "{e}");
    let e = refusal("#if X > 1\n#endif\n");
    assert!(e.message.contains("#if with an expression"), "{e}");
    let e = refusal("const bit<8> X = 8w300;\n");
    assert!(e.message.contains("does not fit in 8 bits"), "{e}");
    assert_eq!(e.at, "bad.p4:1:18");
    let e = refusal("/* never closed\n");
    assert!(e.message.contains("comment not closed"), "{e}");
    let e = refusal("#include <core.p4>\nbit<8> f(in bit<8> x) { return x; }\n");
    assert!(e.message.contains("functions are not supported"), "{e}");
    assert_eq!(e.pos.line, 2);
}

#[test]
fn clones_other_than_ingress_to_egress_are_refused_where_they_are_asked_for() {
    let mirror = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/mirror.p4"))
        .expect("test program");
    let cases = [
        (
            "clone(CloneType.I2E, 5);",
            "clone(CloneType.E2E, 5);",
            "CloneType.E2E (a clone of the frame leaving egress) is not supported",
        ),
        (
            "clone(CloneType.I2E, 5);",
            "clone3(CloneType.I2E, 5, { meta.kept });",
            "clone3 is not supported",
        ),
        (
            "hdr.ipv4.tos = (bit<8>) std.instance_type;",
            "clone(CloneType.I2E, 5);",
            "clone in the egress control",
        ),
    ];
    for (from, to, expected) in cases {
        assert!(mirror.contains(from), "{from}");
        let e = refusal(&mirror.replacen(from, to, 1)).to_string();
        let line = mirror.lines().position(|l| l.contains(from)).expect("found") + 1;
        assert!(e.contains(&format!("bad.p4:{line}:")), "{e}");
        assert!(e.contains(expected), "{e}");
    }
}

#[test]
fn the_built_in_includes_parse_on_their_own() {
    let e = refusal("#include <intlab.p4>\n");
    // Everything in them parsed; what is missing is the program's own `main`.
    assert!(e.message.contains("no `main`"), "{e}");
}
