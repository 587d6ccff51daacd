//! `intlab p4 info`'s P4Info against what p4c writes for the same program: ids, aliases,
//! implicit default actions, directly called actions, controller headers, resources, and the
//! three forms read back.

use intlab_p4runtime::format::{self, Form};
use intlab_p4runtime::p4info::p4info;
use intlab_p4runtime::proto::p4::config::v1 as p4i;

/// The program of both P4Runtime tests.
pub const PROGRAM: &str = include_str!("programs/forward.p4");

fn info() -> p4i::P4Info {
    let loaded = intlab_p4::load_text("forward.p4", PROGRAM).expect("the program loads");
    p4info(&loaded.ir).expect("ids").info
}

fn preamble<'a>(all: impl IntoIterator<Item = &'a p4i::Preamble>, name: &str) -> &'a p4i::Preamble {
    all.into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no object named {name}"))
}

#[test]
fn ids_and_aliases_are_those_p4c_gives() {
    let info = info();
    let tables: Vec<&p4i::Preamble> = info.tables.iter().filter_map(|t| t.preamble.as_ref()).collect();
    let actions: Vec<&p4i::Preamble> = info.actions.iter().filter_map(|a| a.preamble.as_ref()).collect();
    // p4c's ids for the tutorials' basic.p4 (the same names hash the same).
    let lpm = preamble(tables.iter().copied(), "MyIngress.ipv4_lpm");
    assert_eq!((lpm.id, lpm.alias.as_str()), (37375156, "ipv4_lpm"));
    assert_eq!(preamble(actions.iter().copied(), "MyIngress.ipv4_forward").id, 28792405);
    assert_eq!(preamble(actions.iter().copied(), "MyIngress.drop").id, 25652968);
    let no_action = preamble(actions.iter().copied(), "NoAction");
    assert_eq!(no_action.id, 21257015);
    assert_eq!(no_action.annotations, ["@noWarn(\"unused\")"]);
    // An action the control calls directly is the control plane's too, without parameters.
    let called = info
        .actions
        .iter()
        .find(|a| a.preamble.as_ref().is_some_and(|p| p.name == "MyIngress.count_it"))
        .expect("count_it listed");
    assert!(called.params.is_empty());
    let forward = info
        .actions
        .iter()
        .find(|a| a.preamble.as_ref().is_some_and(|p| p.name == "MyIngress.ipv4_forward"))
        .expect("ipv4_forward listed");
    let params: Vec<(u32, &str, i32)> = forward
        .params
        .iter()
        .map(|p| (p.id, p.name.as_str(), p.bitwidth))
        .collect();
    assert_eq!(params, [(1, "dstAddr", 48), (2, "port", 9)]);
}

#[test]
fn tables_list_keys_defaults_and_resources_as_p4c_does() {
    let info = info();
    let lpm = &info.tables[0];
    let key = &lpm.match_fields[0];
    assert_eq!((key.id, key.name.as_str(), key.bitwidth), (1, "hdr.ipv4.dstAddr", 32));
    assert_eq!(
        key.r#match,
        Some(p4i::match_field::Match::MatchType(
            p4i::match_field::MatchType::Lpm as i32
        ))
    );
    assert_eq!(lpm.size, 1024);
    assert_eq!(lpm.initial_default_action.as_ref().map(|d| d.action_id), Some(25652968));
    // The second table names no default: P4's NoAction is its default only.
    let valid = &info.tables[1];
    assert_eq!(valid.match_fields[0].name, "hdr.ipv4.$valid$");
    assert_eq!(valid.match_fields[0].bitwidth, 1);
    let last = valid.action_refs.last().expect("refs");
    assert_eq!(last.id, 21257015);
    assert_eq!(last.scope, p4i::action_ref::Scope::DefaultOnly as i32);
    assert_eq!(last.annotations, ["@defaultonly"]);
    assert_eq!(valid.size, 1024, "p4c's default size");
    let counter = &info.direct_counters[0];
    assert_eq!(
        valid.direct_resource_ids,
        [counter.preamble.as_ref().expect("preamble").id]
    );
    assert_eq!(counter.direct_table_id, valid.preamble.as_ref().expect("preamble").id);
    assert_eq!(counter.preamble.as_ref().expect("preamble").id >> 24, 0x13);
    let reg = &info.registers[0];
    assert_eq!(
        (reg.size, reg.preamble.as_ref().expect("preamble").id >> 24),
        (16, 0x16)
    );
}

#[test]
fn controller_headers_and_value_sets_carry_their_fields() {
    let info = info();
    let cpm = &info.controller_packet_metadata[0];
    let pre = cpm.preamble.as_ref().expect("preamble");
    // Named by the annotation, hashed by the header type's name, as p4c does.
    assert_eq!((pre.name.as_str(), pre.alias.as_str()), ("packet_in", "packet_in"));
    let by_type = intlab_p4runtime::p4info::ids::one_at_a_time(b"packet_in_header_t") & 0xff_ffff;
    assert_eq!(pre.id, 0x0400_0000 | by_type);
    let fields: Vec<(u32, &str, i32)> = cpm
        .metadata
        .iter()
        .map(|m| (m.id, m.name.as_str(), m.bitwidth))
        .collect();
    assert_eq!(fields, [(1, "ingress_port", 9), (2, "_pad", 7)]);
    let pvs = &info.value_sets[0];
    assert_eq!(pvs.size, 4);
    let m: Vec<(&str, i32, Option<p4i::match_field::Match>)> = pvs
        .r#match
        .iter()
        .map(|f| (f.name.as_str(), f.bitwidth, f.r#match.clone()))
        .collect();
    use p4i::match_field::{Match, MatchType};
    assert_eq!(
        m,
        [
            ("ether", 16, Some(Match::MatchType(MatchType::Ternary as i32))),
            ("proto", 8, Some(Match::MatchType(MatchType::Exact as i32)))
        ]
    );
}

#[test]
fn every_form_reads_back_as_the_same_message() {
    let info = info();
    for form in [Form::Binary, Form::Text, Form::Json] {
        let bytes = format::write(&info, "p4.config.v1.P4Info", form).expect("written");
        let back: p4i::P4Info = format::read(&bytes, "p4.config.v1.P4Info", form).expect("read back");
        assert_eq!(back, info, "{form:?}");
    }
    let text =
        String::from_utf8(format::write(&info, "p4.config.v1.P4Info", Form::Text).expect("text")).expect("utf-8");
    // As protoc prints it: a repeated field is one block per element.
    assert!(text.contains("tables {\n  preamble {\n    id: 37375156\n"), "{text}");
    let bad = format::read::<p4i::P4Info>(b"tables { nonsense: 1 }", "p4.config.v1.P4Info", Form::Text);
    assert!(bad.is_err());
}

#[test]
fn serializable_enums_a_controller_sees_are_listed_with_their_values() {
    // As the flowcache exercise writes them: one enum in the packet_in header, one unused.
    let program = r#"
#include <core.p4>
#include <v1model.p4>
enum bit<8> Reason_t { UNKNOWN = 1, BAD = 2 }
enum bit<16> Unused_t { A = 0x0800 }
@controller_header("packet_in")
header packet_in_t { bit<16> port; Reason_t reason; }
struct headers { packet_in_t packet_in; }
struct metadata { }
parser P(packet_in pk, out headers h, inout metadata m, inout standard_metadata_t sm) { state start { transition accept; } }
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { h.packet_in.setValid(); h.packet_in.reason = Reason_t.BAD; } }
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out pk, in headers h) { apply { pk.emit(h.packet_in); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let loaded = intlab_p4::load_text("enums.p4", program).expect("the program loads");
    let info = p4info(&loaded.ir).expect("ids").info;
    let enums = info.type_info.expect("type info").serializable_enums;
    assert_eq!(
        enums.keys().collect::<Vec<_>>(),
        ["Reason_t"],
        "the unused enum is left out, as p4c leaves it"
    );
    let reason = &enums["Reason_t"];
    assert_eq!(reason.underlying_type.as_ref().map(|u| u.bitwidth), Some(8));
    let members: Vec<(&str, &[u8])> = reason
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.value.as_slice()))
        .collect();
    assert_eq!(members, [("UNKNOWN", &[1u8][..]), ("BAD", &[2u8][..])]);
}
