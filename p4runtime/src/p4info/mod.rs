//! A program's P4Info as p4c writes it for v1model and PSA (`p4c --p4runtime-files`): the same
//! objects with the same ids, names, aliases, match fields, widths and sizes, so controllers
//! written against p4c's P4Info drive intlab's switches unchanged.

pub mod ids;

use intlab_p4::ir::{self, CounterKind, MatchKind};

use crate::proto::p4::config::v1 as p4i;
use ids::{IdError, Kind, SymbolTable};

/// The architecture as P4Info's `pkg_info.arch` names it.
const ARCH_NAMES: [(ir::Arch, &str); 2] = [(ir::Arch::V1Model, "v1model"), (ir::Arch::Psa, "psa")];

/// The P4Info of `program`, with every object's id.
pub fn p4info(program: &ir::Program) -> Result<Described, IdError> {
    let actions = unique_actions(program);
    let symbols = symbols(program, &actions)?;
    let info = Builder {
        p: program,
        s: &symbols,
        actions: &actions,
    }
    .build();
    Ok(Described { info, symbols })
}

/// A P4Info and the symbol table its ids come from.
#[derive(Debug)]
pub struct Described {
    /// The message.
    pub info: p4i::P4Info,
    /// Names to ids.
    pub symbols: SymbolTable,
}

/// The actions P4Info lists, one per name: the tables' in the program's order, then those
/// only ever called directly. Name and parameters (name, width).
fn unique_actions(p: &ir::Program) -> Vec<ActionView<'_>> {
    let mut seen = std::collections::HashSet::new();
    let tables = p.actions.iter().map(|a| ActionView {
        name: &a.name,
        params: a.params.iter().map(|x| (x.name.as_str(), x.width)).collect(),
        annotations: &a.annotations,
    });
    let called = p.called_actions.iter().map(|a| ActionView {
        name: &a.name,
        params: Vec::new(),
        annotations: &a.annotations,
    });
    tables.chain(called).filter(|a| seen.insert(a.name)).collect()
}

/// An action as P4Info lists it.
struct ActionView<'a> {
    name: &'a str,
    /// Name and width.
    params: Vec<(&'a str, u16)>,
    annotations: &'a [String],
}

/// Every object's name, then ids for all.
fn symbols(p: &ir::Program, actions: &[ActionView<'_>]) -> Result<SymbolTable, IdError> {
    let mut s = SymbolTable::default();
    let asked = |name: &str| p.ids.get(name).copied();
    for a in actions {
        s.add(Kind::Action, a.name, asked(a.name));
    }
    for t in &p.tables {
        s.add(Kind::Table, &t.name, asked(&t.name));
    }
    for v in &p.value_sets {
        s.add(Kind::ValueSet, &v.name, asked(&v.name));
    }
    for h in p.headers.iter().filter(|h| h.controller_header.is_some()) {
        // p4c hashes the header type's name; the preamble shows the annotation's.
        s.add(Kind::ControllerHeader, &h.name, asked(&h.name));
    }
    for c in &p.counters {
        let kind = if c.table.is_some() {
            Kind::DirectCounter
        } else {
            Kind::Counter
        };
        s.add(kind, &c.name, asked(&c.name));
    }
    for m in &p.meters {
        let kind = if m.table.is_some() {
            Kind::DirectMeter
        } else {
            Kind::Meter
        };
        s.add(kind, &m.name, asked(&m.name));
    }
    for r in &p.registers {
        s.add(Kind::Register, &r.name, asked(&r.name));
    }
    for a in &p.profiles {
        s.add(Kind::ActionProfile, &a.name, asked(&a.name));
    }
    for d in &p.digests {
        s.add(Kind::Digest, &d.name, asked(&d.name));
    }
    s.assign()?;
    Ok(s)
}

struct Builder<'a> {
    p: &'a ir::Program,
    s: &'a SymbolTable,
    actions: &'a [ActionView<'a>],
}

impl Builder<'_> {
    fn preamble(&self, kind: Kind, name: &str) -> Option<p4i::Preamble> {
        Some(p4i::Preamble {
            id: self.s.id(kind, name),
            name: name.to_owned(),
            alias: self.s.alias(name),
            ..Default::default()
        })
    }

    fn build(&self) -> p4i::P4Info {
        let p = self.p;
        let arch = ARCH_NAMES
            .iter()
            .find(|(a, _)| *a == p.arch)
            .map_or("v1model", |(_, n)| n);
        p4i::P4Info {
            pkg_info: Some(p4i::PkgInfo {
                arch: arch.to_owned(),
                ..Default::default()
            }),
            tables: p.tables.iter().map(|t| self.table(t)).collect(),
            actions: self.actions.iter().map(|a| self.action(a)).collect(),
            action_profiles: p.profiles.iter().enumerate().map(|(i, a)| self.profile(i, a)).collect(),
            counters: p
                .counters
                .iter()
                .filter(|c| c.table.is_none())
                .map(|c| p4i::Counter {
                    preamble: self.preamble(Kind::Counter, &c.name),
                    spec: Some(counter_spec(c.kind)),
                    size: c.size as i64,
                    ..Default::default()
                })
                .collect(),
            direct_counters: p
                .counters
                .iter()
                .filter_map(|c| {
                    let t = c.table?;
                    Some(p4i::DirectCounter {
                        preamble: self.preamble(Kind::DirectCounter, &c.name),
                        spec: Some(counter_spec(c.kind)),
                        direct_table_id: self.s.id(Kind::Table, &p.tables[t].name),
                    })
                })
                .collect(),
            meters: p
                .meters
                .iter()
                .filter(|m| m.table.is_none())
                .map(|m| p4i::Meter {
                    preamble: self.preamble(Kind::Meter, &m.name),
                    spec: Some(meter_spec(m.bytes)),
                    size: m.size as i64,
                    ..Default::default()
                })
                .collect(),
            direct_meters: p
                .meters
                .iter()
                .filter_map(|m| {
                    let t = m.table?;
                    Some(p4i::DirectMeter {
                        preamble: self.preamble(Kind::DirectMeter, &m.name),
                        spec: Some(meter_spec(m.bytes)),
                        direct_table_id: self.s.id(Kind::Table, &p.tables[t].name),
                    })
                })
                .collect(),
            controller_packet_metadata: p.headers.iter().filter_map(|h| self.controller_header(h)).collect(),
            value_sets: p.value_sets.iter().map(|v| self.value_set(v)).collect(),
            registers: p
                .registers
                .iter()
                .map(|r| p4i::Register {
                    preamble: self.preamble(Kind::Register, &r.name),
                    type_spec: Some(bitstring(r.width)),
                    size: r.size as i32,
                    ..Default::default()
                })
                .collect(),
            digests: p
                .digests
                .iter()
                .map(|d| p4i::Digest {
                    preamble: self.preamble(Kind::Digest, &d.name),
                    type_spec: Some(p4i::P4DataTypeSpec {
                        type_spec: Some(p4i::p4_data_type_spec::TypeSpec::Struct(p4i::P4NamedType {
                            name: d.name.clone(),
                        })),
                    }),
                })
                .collect(),
            externs: Vec::new(),
            type_info: self.type_info(),
        }
    }

    fn table(&self, t: &ir::Table) -> p4i::Table {
        let p = self.p;
        let action_id = |a: usize| self.s.id(Kind::Action, &p.actions[a].name);
        let (default, args) = &t.default_action;
        let default_action = &p.actions[*default];
        let counter = t
            .direct_counter
            .map(|c| self.s.id(Kind::DirectCounter, &p.counters[c].name));
        let meter = t.direct_meter.map(|m| self.s.id(Kind::DirectMeter, &p.meters[m].name));
        let direct: Vec<u32> = counter.into_iter().chain(meter).collect();
        // A default the action list does not name (P4's implicit NoAction) is the table's
        // too, for the default only, as p4c lists it.
        let implicit_default = (!t
            .actions
            .iter()
            .any(|a| p.actions[a.action].name == default_action.name))
        .then_some(ir::TableAction {
            action: *default,
            default_only: true,
            table_only: false,
        });
        p4i::Table {
            preamble: self.preamble(Kind::Table, &t.name),
            match_fields: t
                .keys
                .iter()
                .enumerate()
                .map(|(k, key)| p4i::MatchField {
                    id: k as u32 + 1,
                    name: key.name.clone(),
                    bitwidth: i32::from(key.width),
                    r#match: Some(p4i::match_field::Match::MatchType(match_type(key.kind) as i32)),
                    ..Default::default()
                })
                .collect(),
            action_refs: t
                .actions
                .iter()
                .chain(implicit_default.as_ref())
                .map(|a| {
                    let (scope, note) = if a.default_only {
                        (p4i::action_ref::Scope::DefaultOnly, Some("@defaultonly"))
                    } else if a.table_only {
                        (p4i::action_ref::Scope::TableOnly, Some("@tableonly"))
                    } else {
                        (p4i::action_ref::Scope::TableAndDefault, None)
                    };
                    p4i::ActionRef {
                        id: action_id(a.action),
                        scope: scope as i32,
                        annotations: note.map(str::to_owned).into_iter().collect(),
                        ..Default::default()
                    }
                })
                .collect(),
            const_default_action_id: if t.const_default { action_id(*default) } else { 0 },
            initial_default_action: Some(p4i::TableActionCall {
                action_id: action_id(*default),
                arguments: default_action
                    .params
                    .iter()
                    .zip(args)
                    .enumerate()
                    .map(|(n, (param, &value))| p4i::table_action_call::Argument {
                        param_id: n as u32 + 1,
                        value: value_bytes(value, param.width),
                    })
                    .collect(),
            }),
            implementation_id: t
                .profile
                .map_or(0, |a| self.s.id(Kind::ActionProfile, &p.profiles[a].name)),
            direct_resource_ids: direct,
            size: t.size as i64,
            idle_timeout_behavior: if t.idle_timeout {
                p4i::table::IdleTimeoutBehavior::NotifyControl as i32
            } else {
                0
            },
            is_const_table: t.entries.as_ref().is_some_and(|(_, more)| !more),
            has_initial_entries: t.entries.as_ref().is_some_and(|(e, _)| !e.is_empty()),
            ..Default::default()
        }
    }

    fn action(&self, a: &ActionView<'_>) -> p4i::Action {
        let mut preamble = self.preamble(Kind::Action, a.name);
        if let Some(p) = &mut preamble {
            p.annotations = a.annotations.to_vec();
        }
        p4i::Action {
            preamble,
            params: a
                .params
                .iter()
                .enumerate()
                .map(|(n, (param, width))| p4i::action::Param {
                    id: n as u32 + 1,
                    name: (*param).to_owned(),
                    bitwidth: i32::from(*width),
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn profile(&self, i: usize, a: &ir::Profile) -> p4i::ActionProfile {
        let p = self.p;
        p4i::ActionProfile {
            preamble: self.preamble(Kind::ActionProfile, &a.name),
            table_ids: p
                .tables
                .iter()
                .filter(|t| t.profile == Some(i))
                .map(|t| self.s.id(Kind::Table, &t.name))
                .collect(),
            with_selector: a.selector.is_some(),
            size: a.size as i64,
            ..Default::default()
        }
    }

    fn controller_header(&self, h: &ir::HeaderType) -> Option<p4i::ControllerPacketMetadata> {
        let name = h.controller_header.as_ref()?;
        Some(p4i::ControllerPacketMetadata {
            // The preamble's name is the annotation's, and so is its alias.
            preamble: Some(p4i::Preamble {
                id: self.s.id(Kind::ControllerHeader, &h.name),
                name: name.clone(),
                alias: name.clone(),
                annotations: vec![format!("@controller_header(\"{name}\")")],
                ..Default::default()
            }),
            metadata: h
                .fields
                .iter()
                .enumerate()
                .map(|(n, (field, width))| p4i::controller_packet_metadata::Metadata {
                    id: n as u32 + 1,
                    name: field.clone(),
                    bitwidth: i32::from(*width),
                    ..Default::default()
                })
                .collect(),
        })
    }

    fn value_set(&self, v: &ir::ValueSet) -> p4i::ValueSet {
        p4i::ValueSet {
            preamble: self.preamble(Kind::ValueSet, &v.name),
            r#match: v
                .widths
                .iter()
                .enumerate()
                .map(|(n, &w)| {
                    let (name, kind) = v.fields.get(n).cloned().unwrap_or((String::new(), MatchKind::Exact));
                    p4i::MatchField {
                        id: n as u32 + 1,
                        name,
                        bitwidth: i32::from(w),
                        r#match: Some(p4i::match_field::Match::MatchType(match_type(kind) as i32)),
                        ..Default::default()
                    }
                })
                .collect(),
            size: v.size as i32,
        }
    }

    /// The named types digests refer to. p4c writes the field (empty, often) once anything
    /// typed went through its type converter: a table's keys, an action's parameters, a
    /// register, a controller header, a value set or a digest.
    fn type_info(&self) -> Option<p4i::P4TypeInfo> {
        let p = self.p;
        let typed = !p.tables.is_empty()
            || self.actions.iter().any(|a| !a.params.is_empty())
            || !p.registers.is_empty()
            || !p.value_sets.is_empty()
            || !p.digests.is_empty()
            || p.headers.iter().any(|h| h.controller_header.is_some())
            || !p.serializable_enums.is_empty();
        if !typed {
            return None;
        }
        let mut info = p4i::P4TypeInfo::default();
        for e in &p.serializable_enums {
            let bytes = usize::from(e.width).div_ceil(8);
            info.serializable_enums.insert(
                e.name.clone(),
                p4i::P4SerializableEnumTypeSpec {
                    underlying_type: Some(p4i::P4BitTypeSpec {
                        bitwidth: i32::from(e.width),
                    }),
                    members: e
                        .members
                        .iter()
                        .map(|(name, v)| p4i::p4_serializable_enum_type_spec::Member {
                            name: name.clone(),
                            // Padded to the underlying type's bytes, as p4c writes them.
                            value: v.to_be_bytes()[16 - bytes..].to_vec(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            );
        }
        for d in &self.p.digests {
            info.structs.insert(
                d.name.clone(),
                p4i::P4StructTypeSpec {
                    members: d
                        .fields
                        .iter()
                        .map(|(name, w)| p4i::p4_struct_type_spec::Member {
                            name: name.clone(),
                            type_spec: Some(bitstring(*w)),
                        })
                        .collect(),
                    ..Default::default()
                },
            );
        }
        Some(info)
    }
}

fn match_type(kind: MatchKind) -> p4i::match_field::MatchType {
    use p4i::match_field::MatchType;
    match kind {
        MatchKind::Exact => MatchType::Exact,
        MatchKind::Lpm => MatchType::Lpm,
        MatchKind::Ternary => MatchType::Ternary,
        MatchKind::Range => MatchType::Range,
        MatchKind::Optional => MatchType::Optional,
    }
}

fn counter_spec(kind: CounterKind) -> p4i::CounterSpec {
    use p4i::counter_spec::Unit;
    let unit = match kind {
        CounterKind::Packets => Unit::Packets,
        CounterKind::Bytes => Unit::Bytes,
        CounterKind::PacketsAndBytes => Unit::Both,
    };
    p4i::CounterSpec { unit: unit as i32 }
}

fn meter_spec(bytes: bool) -> p4i::MeterSpec {
    use p4i::meter_spec::Unit;
    p4i::MeterSpec {
        unit: if bytes { Unit::Bytes } else { Unit::Packets } as i32,
        ..Default::default()
    }
}

fn bitstring(width: u16) -> p4i::P4DataTypeSpec {
    use p4i::p4_bitstring_like_type_spec::TypeSpec;
    p4i::P4DataTypeSpec {
        type_spec: Some(p4i::p4_data_type_spec::TypeSpec::Bitstring(
            p4i::P4BitstringLikeTypeSpec {
                type_spec: Some(TypeSpec::Bit(p4i::P4BitTypeSpec {
                    bitwidth: i32::from(width),
                })),
                ..Default::default()
            },
        )),
    }
}

/// `value` in the bytes a field of `width` bits takes, most significant first (p4c writes
/// a default action's arguments at their full width).
pub fn value_bytes(value: u128, width: u16) -> Vec<u8> {
    let n = usize::from(width).div_ceil(8).max(1);
    let bytes = value.to_be_bytes();
    if n <= 16 {
        bytes[16 - n..].to_vec()
    } else {
        let mut v = vec![0; n - 16];
        v.extend_from_slice(&bytes);
        v
    }
}
