//! The RL-CC policy network: 4 → 12 → 12 → 1, ReLU, no biases, tanh output (the shape of the
//! public RL-CC checkpoint). Evaluated in plain Rust on the stack.
//!
//! File format (JSON, ours): `{"format": "intlab-rlcc-mlp", "version": 1, "layers": [W1, W2,
//! W3]}` where W1 is 12 rows of 4 weights, W2 12 rows of 12 and W3 one row of 12; row k holds
//! the weights into unit k (PyTorch's `Linear.weight` layout).

use serde::{Deserialize, Serialize};

use crate::observation::Observation;

/// Hidden units per layer.
pub const HIDDEN: usize = 12;
/// Inputs.
pub const INPUTS: usize = 4;

/// The format tag of an MLP file.
pub const MLP_FORMAT: &str = "intlab-rlcc-mlp";

/// The network's weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Mlp {
    /// Input → first hidden layer, [unit][input].
    pub w1: [[f32; INPUTS]; HIDDEN],
    /// First → second hidden layer, [unit][input].
    pub w2: [[f32; HIDDEN]; HIDDEN],
    /// Second hidden layer → output.
    pub w3: [f32; HIDDEN],
}

/// What a forward pass computed, for the gradient.
#[derive(Debug, Clone, Copy)]
pub struct Activations {
    /// First hidden layer after ReLU.
    pub h1: [f32; HIDDEN],
    /// Second hidden layer after ReLU.
    pub h2: [f32; HIDDEN],
    /// The output, tanh applied: the action in [−1, 1].
    pub action: f32,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MlpFile {
    format: String,
    version: u32,
    layers: Vec<Vec<Vec<f32>>>,
}

impl Mlp {
    /// A network whose weights are all zero (action 0 everywhere).
    pub fn zeros() -> Mlp {
        Mlp {
            w1: [[0.0; INPUTS]; HIDDEN],
            w2: [[0.0; HIDDEN]; HIDDEN],
            w3: [0.0; HIDDEN],
        }
    }

    /// A hand-made policy: action tanh(gain·(relu(−r) − relu(r))) of the newest reward term r:
    /// faster when under-utilized, slower when congested, still on target. A baseline and
    /// the tests' fixture.
    pub fn reflex(gain: f32) -> Mlp {
        let mut m = Mlp::zeros();
        m.w1[0][3] = -1.0;
        m.w1[1][3] = 1.0;
        m.w2[0][0] = 1.0;
        m.w2[1][1] = 1.0;
        m.w3[0] = gain;
        m.w3[1] = -gain;
        m
    }

    /// The action for `obs`, in [−1, 1].
    pub fn act(&self, obs: &Observation) -> f32 {
        self.forward(obs).action
    }

    /// The forward pass, keeping what the gradient needs.
    pub fn forward(&self, obs: &Observation) -> Activations {
        let mut h1 = [0.0f32; HIDDEN];
        for (h, w) in h1.iter_mut().zip(&self.w1) {
            *h = w.iter().zip(obs).map(|(w, x)| w * x).sum::<f32>().max(0.0);
        }
        let mut h2 = [0.0f32; HIDDEN];
        for (h, w) in h2.iter_mut().zip(&self.w2) {
            *h = w.iter().zip(&h1).map(|(w, x)| w * x).sum::<f32>().max(0.0);
        }
        let out: f32 = self.w3.iter().zip(&h2).map(|(w, x)| w * x).sum();
        Activations {
            h1,
            h2,
            action: out.tanh(),
        }
    }

    /// Adds `scale` times the gradient of the action with respect to every weight at `obs`
    /// into `grad` (same shape as the weights).
    pub fn accumulate_gradient(&self, obs: &Observation, scale: f32, grad: &mut Mlp) {
        let a = self.forward(obs);
        let d_out = scale * (1.0 - a.action * a.action);
        // Output layer, then back through each ReLU (no gradient where a unit was cut).
        let mut d_h2 = [0.0f32; HIDDEN];
        for (((g, d), &h), &w) in grad.w3.iter_mut().zip(&mut d_h2).zip(&a.h2).zip(&self.w3) {
            *g += d_out * h;
            *d = if h > 0.0 { d_out * w } else { 0.0 };
        }
        let mut d_h1 = [0.0f32; HIDDEN];
        for ((g_row, w_row), &d) in grad.w2.iter_mut().zip(&self.w2).zip(&d_h2) {
            for (((g, &w), &h), back) in g_row.iter_mut().zip(w_row).zip(&a.h1).zip(&mut d_h1) {
                *g += d * h;
                *back += d * w;
            }
        }
        for ((g_row, &h), &d) in grad.w1.iter_mut().zip(&a.h1).zip(&d_h1) {
            if h <= 0.0 {
                continue;
            }
            for (g, &x) in g_row.iter_mut().zip(obs) {
                *g += d * x;
            }
        }
    }

    /// Every weight, in file order (W1 row by row, W2, W3).
    pub fn weights_mut(&mut self) -> impl Iterator<Item = &mut f32> {
        self.w1
            .iter_mut()
            .flatten()
            .chain(self.w2.iter_mut().flatten())
            .chain(self.w3.iter_mut())
    }

    /// From the three weight matrices in PyTorch's layout, checking their shapes.
    pub fn from_layers(layers: &[Vec<Vec<f32>>]) -> Result<Mlp, String> {
        let shapes = [(HIDDEN, INPUTS), (HIDDEN, HIDDEN), (1, HIDDEN)];
        if layers.len() != 3 {
            return Err(format!("expected 3 layers, got {}", layers.len()));
        }
        for (k, (layer, &(rows, cols))) in layers.iter().zip(&shapes).enumerate() {
            let got_cols = layer.iter().map(Vec::len).find(|&c| c != cols);
            if layer.len() != rows || got_cols.is_some() {
                return Err(format!(
                    "layer {k}: expected {rows}×{cols} weights, got {}×{}",
                    layer.len(),
                    got_cols.unwrap_or(cols)
                ));
            }
            if let Some(x) = layer.iter().flatten().find(|x| !x.is_finite()) {
                return Err(format!("layer {k}: weight {x} is not a finite number"));
            }
        }
        let mut m = Mlp::zeros();
        let flat = layers.iter().flatten().flatten();
        for (w, x) in m.weights_mut().zip(flat) {
            *w = *x;
        }
        Ok(m)
    }

    /// The weights in PyTorch's layout.
    pub fn layers(&self) -> Vec<Vec<Vec<f32>>> {
        vec![
            self.w1.iter().map(|r| r.to_vec()).collect(),
            self.w2.iter().map(|r| r.to_vec()).collect(),
            vec![self.w3.to_vec()],
        ]
    }

    /// Parses an MLP file's text.
    pub fn from_json(text: &str) -> Result<Mlp, String> {
        let f: MlpFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if f.format != MLP_FORMAT || f.version != 1 {
            return Err(format!(
                "expected format \"{MLP_FORMAT}\" version 1, got \"{}\" version {}",
                f.format, f.version
            ));
        }
        Mlp::from_layers(&f.layers)
    }

    /// The file text.
    pub fn to_json(&self) -> String {
        let f = MlpFile {
            format: MLP_FORMAT.into(),
            version: 1,
            layers: self.layers(),
        };
        serde_json::to_string_pretty(&f).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Mlp {
        let mut m = Mlp::zeros();
        for (k, w) in m.weights_mut().enumerate() {
            *w = ((k * 7919 % 101) as f32 - 50.0) / 100.0;
        }
        m
    }

    #[test]
    fn the_forward_pass_is_relu_relu_tanh_without_biases() {
        let mut m = Mlp::zeros();
        m.w1[0] = [1.0, 0.0, 0.0, -1.0];
        m.w2[3][0] = 2.0;
        m.w3[3] = 0.5;
        // h1[0] = relu(x0 − x3), h2[3] = 2·h1[0], out = tanh(h2[3]/2).
        assert!((m.act(&[0.75, 9.0, 9.0, 0.25]) - 0.5f32.tanh()).abs() < 1e-7);
        assert_eq!(m.act(&[0.25, 0.0, 0.0, 0.75]), 0.0, "ReLU cuts a negative sum");
    }

    #[test]
    fn the_gradient_matches_finite_differences() {
        let m = sample();
        let obs = [1.05, -0.4, 0.93, 0.7];
        let mut grad = Mlp::zeros();
        m.accumulate_gradient(&obs, 1.0, &mut grad);
        let analytic: Vec<f32> = grad.clone().weights_mut().map(|g| *g).collect();
        for k in (0..analytic.len()).step_by(7) {
            let eps = 1e-3;
            let mut plus = m.clone();
            *plus.weights_mut().nth(k).expect("weight") += eps;
            let mut minus = m.clone();
            *minus.weights_mut().nth(k).expect("weight") -= eps;
            let numeric = (plus.act(&obs) - minus.act(&obs)) / (2.0 * eps);
            assert!(
                (numeric - analytic[k]).abs() < 2e-3,
                "weight {k}: {numeric} vs {}",
                analytic[k]
            );
        }
    }

    #[test]
    fn files_round_trip_and_wrong_shapes_say_which_layer() {
        let m = sample();
        assert_eq!(Mlp::from_json(&m.to_json()), Ok(m.clone()));
        let mut layers = m.layers();
        layers[1].pop();
        let e = Mlp::from_layers(&layers).unwrap_err();
        assert!(e.contains("layer 1: expected 12×12 weights, got 11×12"), "{e}");
        let e = Mlp::from_json("{\"format\": \"x\", \"version\": 1, \"layers\": []}").unwrap_err();
        assert!(e.contains("expected format"), "{e}");
        assert!(Mlp::from_json("{").is_err());
    }
}
