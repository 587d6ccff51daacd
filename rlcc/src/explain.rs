//! RL-CC's Table VI (Fuhrer et al. 2023): the multiplier a policy applies for each pair of
//! previous and current condition of the network.
//!
//! A condition is a reward term: under-utilized is RTT inflation below β (term −target·scale),
//! on target is term 0, congested is term +3·target·scale (the √rate-weighted inflation above β
//! four times the target). The paper does not give its values; these are ours. The previous
//! multipliers are 1, so only the conditions differ.

use crate::observation::{RewardShape, multiplier};
use crate::policy::Policy;

/// The three conditions, in table order.
pub const CONDITIONS: [&str; 3] = ["under-utilized", "on target", "congested"];

/// The reward term of each condition under `shape`.
pub fn condition_terms(shape: &RewardShape) -> [f32; 3] {
    let t = (shape.target * shape.scale) as f32;
    [-t, 0.0, 3.0 * t]
}

/// table[previous][current]: the multiplier `policy` applies.
pub fn table(policy: &Policy, shape: &RewardShape) -> [[f64; 3]; 3] {
    let terms = condition_terms(shape);
    std::array::from_fn(|prev| {
        std::array::from_fn(|cur| multiplier(f64::from(policy.act(&[1.0, terms[prev], 1.0, terms[cur]]))))
    })
}

/// The table as text, rows the previous condition, columns the current one.
pub fn render(title: &str, t: &[[f64; 3]; 3]) -> String {
    let mut out = format!("{title}\n{:<16}", "previous \\ now");
    for c in CONDITIONS {
        out.push_str(&format!("{c:>16}"));
    }
    out.push('\n');
    for (name, row) in CONDITIONS.iter().zip(t) {
        out.push_str(&format!("{name:<16}"));
        for x in row {
            out.push_str(&format!("{x:>16.3}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mlp;

    #[test]
    fn a_reflex_policy_speeds_up_when_under_utilized_and_slows_down_when_congested() {
        let t = table(&Policy::Mlp(Box::new(Mlp::reflex(2.0))), &RewardShape::default());
        for row in &t {
            assert!(row[0] > 1.0 && row[2] < 1.0, "{row:?}");
            assert_eq!(row[1], 1.0);
        }
        let text = render("MLP", &t);
        assert!(text.contains("under-utilized") && text.lines().count() == 5, "{text}");
    }
}
