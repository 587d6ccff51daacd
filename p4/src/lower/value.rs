//! Values the lowering works with: compile-time constants, run-time expressions, places that
//! hold values, and the list and record expressions that take the type of their context.

use crate::front::source::Pos;
use crate::ir::{self, Expr, HeaderRef, Place, Slot, StackRef};

use super::ty::Ty;

/// A value known at compile time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CVal {
    /// An integer of no width (`int`): arbitrary values are not needed by P4 programs that
    /// run, 128 bits and a sign are.
    Int(i128),
    /// A value of a fixed-width type (bits, bool, error, enum), masked to its width.
    Bits(u128),
    /// A string.
    Str(String),
    /// An aggregate: its fields in order (a header's validity first).
    Agg(Vec<CVal>),
}

impl CVal {
    /// The value as the bits of a `w`-bit type (an `int` constant in two's complement).
    pub(crate) fn bits(&self, w: u16) -> Option<u128> {
        match self {
            CVal::Int(v) => Some((*v as u128) & ir::mask(w)),
            CVal::Bits(v) => Some(*v & ir::mask(w)),
            _ => None,
        }
    }

    /// The value as a signed integer, for compile-time arithmetic and widths.
    pub(crate) fn int(&self, ty: &Ty) -> Option<i128> {
        match (self, ty) {
            (CVal::Int(v), _) => Some(*v),
            (CVal::Bits(v), Ty::Bits(w, true)) => Some(ir::ops::signed(*v, *w)),
            (CVal::Bits(v), _) => i128::try_from(*v).ok(),
            _ => None,
        }
    }
}

/// Where a value lives.
#[derive(Debug, Clone)]
pub(crate) enum Loc {
    /// At a fixed slot (a scalar, or the first slot of an aggregate).
    Fixed(Slot),
    /// `offset` slots into an element of a stack chosen at run time.
    Elem(StackRef, Expr, u32),
}

impl Loc {
    /// The location `off` slots further.
    pub(crate) fn at(&self, off: u32) -> Loc {
        match self {
            Loc::Fixed(s) => Loc::Fixed(s + off),
            Loc::Elem(st, i, o) => Loc::Elem(*st, i.clone(), o + off),
        }
    }

    /// The scalar held here.
    pub(crate) fn read(&self) -> Expr {
        match self {
            Loc::Fixed(s) => Expr::Slot(*s),
            Loc::Elem(st, i, o) => Expr::Element(*st, Box::new(i.clone()), *o),
        }
    }

    /// The place to write a `w`-bit scalar here.
    pub(crate) fn place(&self, w: u16) -> Place {
        match self {
            Loc::Fixed(s) => Place::Slot(*s, w),
            Loc::Elem(st, i, o) => Place::Element(*st, Box::new(i.clone()), *o, w),
        }
    }

    /// The header whose validity slot is here.
    pub(crate) fn header(&self) -> HeaderRef {
        match self {
            Loc::Fixed(s) => HeaderRef::Fixed(*s),
            Loc::Elem(st, i, o) => HeaderRef::Element(*st, Box::new(i.clone()), *o),
        }
    }
}

/// A value being lowered.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// Known at compile time.
    Const(CVal, Ty),
    /// A scalar computed at run time (free of side effects).
    Expr(Expr, Ty),
    /// Held at a location (a variable, a field, a header, a temporary).
    Loc(Loc, Ty),
    /// `{a, b}`: typed by where it goes.
    List(Vec<Val>, Pos),
    /// `{f = a, ...}`: typed by where it goes.
    Record(Vec<(String, Val)>, Pos),
    /// `{#}`: an invalid header or union.
    Invalid,
}

impl Val {
    /// Its type, when it has one of its own.
    pub(crate) fn ty(&self) -> Option<&Ty> {
        match self {
            Val::Const(_, t) | Val::Expr(_, t) | Val::Loc(_, t) => Some(t),
            _ => None,
        }
    }

    /// A compile-time constant's value.
    pub(crate) fn constant(&self) -> Option<&CVal> {
        match self {
            Val::Const(c, _) => Some(c),
            _ => None,
        }
    }
}
