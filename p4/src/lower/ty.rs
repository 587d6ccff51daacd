//! Types as the lowering sees them, the program's type definitions (aggregates with their
//! generic instances, enums), and how values of each type are laid out in slots.

use std::collections::HashMap;

use crate::front::ast::{self, Annotation};
use crate::ir::{self, Slot};

/// A type, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Ty {
    /// `bit<W>` (false) or `int<W>` (true).
    Bits(u16, bool),
    /// `varbit<W>`.
    Varbit(u16),
    /// `bool`.
    Bool,
    /// An integer of no width (`int`, a literal).
    InfInt,
    /// `string`.
    Str,
    /// `void`.
    Void,
    /// `error`.
    Error,
    /// `match_kind`.
    MatchKind,
    /// `_`.
    DontCare,
    /// An enum (index into [`Types::enums`]).
    Enum(usize),
    /// A header (index into [`Types::headers`], the same as the program's header types).
    Header(usize),
    /// A header union.
    Union(usize),
    /// A struct.
    Struct(usize),
    /// A stack of headers or unions.
    Stack(Box<Ty>, u32),
    /// A tuple or list.
    Tuple(Vec<Ty>),
    /// An extern object type with its type arguments (index into the extern declarations).
    Extern(String, Vec<Ty>),
    /// A parser, control or package type, by declared name.
    Block(String),
    /// A type variable not yet bound (a generic's parameter).
    Var(String),
}

impl Ty {
    /// Width of a scalar in bits (enums and errors take 32).
    pub(crate) fn width(&self, types: &Types) -> Option<u16> {
        match self {
            Ty::Bits(w, _) => Some(*w),
            Ty::Bool => Some(1),
            Ty::Error => Some(32),
            Ty::Enum(e) => Some(types.enums[*e].underlying.map_or(32, |u| u.0)),
            _ => None,
        }
    }

    /// Whether values are signed (`int<W>`, or an enum over `int<W>`).
    pub(crate) fn signed(&self, types: &Types) -> bool {
        match self {
            Ty::Bits(_, s) => *s,
            Ty::Enum(e) => types.enums[*e].underlying.is_some_and(|u| u.1),
            _ => false,
        }
    }

    /// Whether it is held in one slot.
    pub(crate) fn is_scalar(&self) -> bool {
        matches!(self, Ty::Bits(..) | Ty::Bool | Ty::Error | Ty::Enum(_))
    }
}

/// A field of an aggregate.
#[derive(Debug, Clone)]
pub(crate) struct FieldDef {
    pub(crate) name: String,
    pub(crate) ty: Ty,
    pub(crate) annotations: Vec<Annotation>,
}

/// A header, union or struct type.
#[derive(Debug, Clone)]
pub(crate) struct AggDef {
    pub(crate) name: String,
    pub(crate) fields: Vec<FieldDef>,
}

/// An enum: its members' values, and its underlying type (width, signed) if serializable.
#[derive(Debug, Clone)]
pub(crate) struct EnumDef {
    pub(crate) name: String,
    pub(crate) members: Vec<(String, u128)>,
    pub(crate) underlying: Option<(u16, bool)>,
}

/// Every type definition of the program.
#[derive(Debug, Default)]
pub(crate) struct Types {
    pub(crate) headers: Vec<AggDef>,
    pub(crate) unions: Vec<AggDef>,
    pub(crate) structs: Vec<AggDef>,
    pub(crate) enums: Vec<EnumDef>,
    /// Instances of generic aggregates: (name, arguments) → type.
    pub(crate) instances: HashMap<(String, Vec<Ty>), Ty>,
}

impl Types {
    /// The definition of an aggregate type.
    pub(crate) fn agg(&self, t: &Ty) -> Option<&AggDef> {
        match t {
            Ty::Header(i) => self.headers.get(*i),
            Ty::Union(i) => self.unions.get(*i),
            Ty::Struct(i) => self.structs.get(*i),
            _ => None,
        }
    }

    /// Slots a value of `t` takes.
    pub(crate) fn size(&self, t: &Ty, headers: &[ir::HeaderType]) -> u32 {
        match t {
            Ty::Bits(..) | Ty::Bool | Ty::Error | Ty::Enum(_) | Ty::InfInt => 1,
            // Its length, then its data.
            Ty::Varbit(w) => 1 + u32::from(*w).div_ceil(128),
            Ty::Header(h) => headers[*h].stride(),
            Ty::Union(_) | Ty::Struct(_) => self
                .agg(t)
                .map_or(0, |a| a.fields.iter().map(|f| self.size(&f.ty, headers)).sum()),
            Ty::Stack(e, n) => 1 + n * self.size(e, headers),
            Ty::Tuple(items) => items.iter().map(|i| self.size(i, headers)).sum(),
            _ => 0,
        }
    }

    /// Offset (in slots) and type of field `name` of aggregate `t`; a header's fields start
    /// after its validity slot.
    pub(crate) fn field(&self, t: &Ty, name: &str, headers: &[ir::HeaderType]) -> Option<(u32, Ty)> {
        let a = self.agg(t)?;
        let mut off = if matches!(t, Ty::Header(_)) { 1 } else { 0 };
        for f in &a.fields {
            if f.name == name {
                return Some((off, f.ty.clone()));
            }
            // A header's fields take a slot each, a varbit its length and its data, a struct in
            // a header one for each of its fields.
            off += self.size(&f.ty, headers);
        }
        None
    }

    /// A type as P4 writes it, for messages.
    pub(crate) fn name(&self, t: &Ty) -> String {
        match t {
            Ty::Bits(w, false) => format!("bit<{w}>"),
            Ty::Bits(w, true) => format!("int<{w}>"),
            Ty::Varbit(w) => format!("varbit<{w}>"),
            Ty::Bool => "bool".into(),
            Ty::InfInt => "int".into(),
            Ty::Str => "string".into(),
            Ty::Void => "void".into(),
            Ty::Error => "error".into(),
            Ty::MatchKind => "match_kind".into(),
            Ty::DontCare => "_".into(),
            Ty::Enum(e) => self.enums[*e].name.clone(),
            Ty::Header(_) | Ty::Union(_) | Ty::Struct(_) => self.agg(t).map_or("?".into(), |a| a.name.clone()),
            Ty::Stack(e, n) => format!("{}[{n}]", self.name(e)),
            Ty::Tuple(items) => {
                let items: Vec<String> = items.iter().map(|i| self.name(i)).collect();
                format!("tuple<{}>", items.join(", "))
            }
            Ty::Extern(n, _) | Ty::Block(n) | Ty::Var(n) => n.clone(),
        }
    }

    /// Every scalar leaf of a value of `t` at `base`: (slot, type), in field order (a header's
    /// validity first). Varbit data is not a leaf.
    pub(crate) fn leaves(&self, t: &Ty, base: Slot, headers: &[ir::HeaderType], out: &mut Vec<(Slot, Ty)>) {
        match t {
            Ty::Header(h) => {
                out.push((base, Ty::Bool));
                let mut off = 1;
                for f in &self.headers[*h].fields {
                    match &f.ty {
                        t @ Ty::Varbit(_) => {
                            out.push((base + off, Ty::Bits(32, false)));
                            off += self.size(t, headers);
                        }
                        t @ Ty::Struct(_) => {
                            self.leaves(t, base + off, headers, out);
                            off += self.size(t, headers);
                        }
                        t => {
                            out.push((base + off, t.clone()));
                            off += 1;
                        }
                    }
                }
            }
            Ty::Union(_) | Ty::Struct(_) => {
                let mut off = 0;
                for f in &self.agg(t).map(|a| a.fields.clone()).unwrap_or_default() {
                    self.leaves(&f.ty, base + off, headers, out);
                    off += self.size(&f.ty, headers);
                }
            }
            Ty::Stack(e, n) => {
                out.push((base, Ty::Bits(32, false)));
                let stride = self.size(e, headers);
                for i in 0..*n {
                    self.leaves(e, base + 1 + i * stride, headers, out);
                }
            }
            Ty::Tuple(items) => {
                let mut off = 0;
                for i in items {
                    self.leaves(i, base + off, headers, out);
                    off += self.size(i, headers);
                }
            }
            t => out.push((base, t.clone())),
        }
    }

    /// The headers inside a value of `t` at `base` (a union's members, a struct's headers at
    /// any depth, a stack's elements), with their header types.
    pub(crate) fn headers_in(&self, t: &Ty, base: Slot, headers: &[ir::HeaderType], out: &mut Vec<(Slot, usize)>) {
        match t {
            Ty::Header(h) => out.push((base, *h)),
            Ty::Union(_) | Ty::Struct(_) => {
                let mut off = 0;
                for f in &self.agg(t).map(|a| a.fields.clone()).unwrap_or_default() {
                    self.headers_in(&f.ty, base + off, headers, out);
                    off += self.size(&f.ty, headers);
                }
            }
            Ty::Stack(e, n) => {
                let stride = self.size(e, headers);
                for i in 0..*n {
                    self.headers_in(e, base + 1 + i * stride, headers, out);
                }
            }
            Ty::Tuple(items) => {
                let mut off = 0;
                for i in items {
                    self.headers_in(i, base + off, headers, out);
                    off += self.size(i, headers);
                }
            }
            _ => {}
        }
    }

    /// Serialized width of a header or a struct of bit fields (`minSizeInBits`).
    pub(crate) fn bits(&self, t: &Ty) -> Option<u32> {
        match t {
            Ty::Bits(w, _) => Some(u32::from(*w)),
            Ty::Bool => Some(1),
            Ty::Varbit(_) => Some(0),
            Ty::Enum(e) => self.enums[*e].underlying.map(|u| u32::from(u.0)),
            Ty::Header(_) | Ty::Struct(_) => {
                let a = self.agg(t)?;
                a.fields.iter().map(|f| self.bits(&f.ty)).sum()
            }
            Ty::Union(_) => {
                let a = self.agg(t)?;
                a.fields.iter().map(|f| self.bits(&f.ty)).max().flatten()
            }
            Ty::Stack(e, n) => Some(self.bits(e)? * n),
            _ => None,
        }
    }

    /// Largest serialized width (a varbit at its maximum).
    pub(crate) fn max_bits(&self, t: &Ty) -> Option<u32> {
        match t {
            Ty::Varbit(w) => Some(u32::from(*w)),
            Ty::Header(_) | Ty::Struct(_) => {
                let a = self.agg(t)?;
                a.fields.iter().map(|f| self.max_bits(&f.ty)).sum()
            }
            Ty::Union(_) => {
                let a = self.agg(t)?;
                a.fields.iter().map(|f| self.max_bits(&f.ty)).max().flatten()
            }
            Ty::Stack(e, n) => Some(self.max_bits(e)? * n),
            t => self.bits(t),
        }
    }
}

/// Whether an aggregate declaration is generic.
pub(crate) fn is_generic(a: &ast::Aggregate) -> bool {
    !a.type_params.is_empty()
}
