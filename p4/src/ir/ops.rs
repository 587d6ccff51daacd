//! Operators on `width`-bit values held in `u128`s: what the executor runs and what the
//! lowering folds constants with, so the two never disagree.

use super::{Binary, Expr, Unary, mask};

/// `v` of `w` bits, sign-extended to 128.
pub fn signed(v: u128, w: u16) -> i128 {
    if w >= 128 {
        return v as i128;
    }
    let shift = 128 - u32::from(w);
    ((v << shift) as i128) >> shift
}

/// A unary operator.
pub fn unary(op: Unary, v: u128, w: u16) -> u128 {
    match op {
        Unary::Not => u128::from(v == 0),
        Unary::Complement => !v & mask(w),
        Unary::Negate => v.wrapping_neg() & mask(w),
    }
}

/// A binary operator other than `&&` and `||` (which short-circuit where they are evaluated).
#[inline(always)]
pub fn binary(op: Binary, a: u128, b: u128, w: u16, is_signed: bool) -> u128 {
    let m = mask(w);
    match op {
        Binary::Add => a.wrapping_add(b) & m,
        Binary::Sub => a.wrapping_sub(b) & m,
        Binary::Mul => a.wrapping_mul(b) & m,
        Binary::Div | Binary::Rem if b == 0 => 0,
        Binary::Div if is_signed => (signed(a, w).wrapping_div(signed(b, w)) as u128) & m,
        Binary::Rem if is_signed => (signed(a, w).wrapping_rem(signed(b, w)) as u128) & m,
        Binary::Div => a / b,
        Binary::Rem => a % b,
        Binary::AddSat if is_signed => {
            let (lo, hi) = (signed(1 << (w - 1), w), signed(m >> 1, w));
            (signed(a, w).saturating_add(signed(b, w)).clamp(lo, hi) as u128) & m
        }
        Binary::SubSat if is_signed => {
            let (lo, hi) = (signed(1 << (w - 1), w), signed(m >> 1, w));
            (signed(a, w).saturating_sub(signed(b, w)).clamp(lo, hi) as u128) & m
        }
        Binary::AddSat => a.saturating_add(b).min(m),
        Binary::SubSat => a.saturating_sub(b),
        Binary::And => a & b,
        Binary::Or => a | b,
        Binary::Xor => a ^ b,
        Binary::Shl => {
            if b >= u128::from(w) {
                0
            } else {
                (a << b) & m
            }
        }
        Binary::Shr if is_signed => {
            let s = signed(a, w) >> b.min(127);
            (s as u128) & m
        }
        Binary::Shr => a.checked_shr(b.min(128) as u32).unwrap_or(0),
        Binary::Eq => u128::from(a == b),
        Binary::Ne => u128::from(a != b),
        Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge => {
            let ord = if is_signed {
                signed(a, w).cmp(&signed(b, w))
            } else {
                a.cmp(&b)
            };
            u128::from(match op {
                Binary::Lt => ord.is_lt(),
                Binary::Le => ord.is_le(),
                Binary::Gt => ord.is_gt(),
                _ => ord.is_ge(),
            })
        }
        Binary::LogicalAnd => u128::from(a != 0 && b != 0),
        Binary::LogicalOr => u128::from(a != 0 || b != 0),
    }
}

/// `v` of `from` bits converted to `to` bits.
pub fn cast(v: u128, from: u16, to: u16, is_signed: bool) -> u128 {
    if is_signed && to > from {
        (signed(v, from) as u128) & mask(to)
    } else {
        v & mask(to)
    }
}

/// The value of an expression of constants (for folding at load time).
pub fn constant(e: &Expr) -> u128 {
    match e {
        Expr::Const(c) => *c,
        Expr::Unary(op, a, w) => unary(*op, constant(a), *w),
        Expr::Binary(op, a, b, w, s) => binary(*op, constant(a), constant(b), *w, *s),
        Expr::Slice(a, lo, w) => (constant(a) >> lo) & mask(*w),
        Expr::BinaryConst(op, a, c, w, s) => binary(*op, constant(a), *c, *w, *s),
        Expr::Concat(a, b, wb) => (constant(a) << wb) | constant(b),
        Expr::Cast(a, from, to, s) => cast(constant(a), *from, *to, *s),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_wrap_saturate_and_compare_at_their_width() {
        assert_eq!(binary(Binary::Add, 250, 10, 8, false), 4);
        assert_eq!(binary(Binary::AddSat, 250, 10, 8, false), 255);
        assert_eq!(binary(Binary::SubSat, 5, 10, 8, false), 0);
        // int<8>: 100 |+| 100 saturates at 127; -100 |-| 100 at -128.
        assert_eq!(binary(Binary::AddSat, 100, 100, 8, true), 127);
        assert_eq!(binary(Binary::SubSat, 0x9c, 100, 8, true), 0x80);
        assert_eq!(binary(Binary::Lt, 0xff, 1, 8, true), 1, "-1 < 1 as int<8>");
        assert_eq!(binary(Binary::Lt, 0xff, 1, 8, false), 0, "255 > 1 as bit<8>");
        assert_eq!(binary(Binary::Shr, 0x80, 1, 8, true), 0xc0, "arithmetic shift");
        assert_eq!(binary(Binary::Shl, 1, 8, 8, false), 0);
        assert_eq!(binary(Binary::Div, 7, 0, 8, false), 0);
        assert_eq!(unary(Unary::Negate, 1, 4), 0xf);
        assert_eq!(cast(0xf, 4, 8, true), 0xff);
        assert_eq!(cast(0x1ff, 9, 8, false), 0xff);
    }
}
