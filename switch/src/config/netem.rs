//! A link's impairment keys as tc-netem(8) writes them, shared by the lab's links and the
//! switch's own ports: `jitter: 20us 25%`, `distribution: normal`, `loss: gemodel 1% 30%`,
//! `duplicate: 1%`, `corrupt: 0.1%`, `reorder: 25% 50%`, `gap: 5`. A probability is a
//! percentage or a plain fraction (`loss: 0.01`, as before these keys).

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::impair::{Chance, ImpairmentSpec, LossModel};
use crate::units::Nanos;

/// A key's value as written: a number (a probability) or netem's words.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum NetemValue {
    /// `loss: 0.01`.
    Number(f64),
    /// `loss: gemodel 1% 30%`.
    Words(String),
}

/// The impairment keys of one link or port, as written (each with where it was).
#[derive(Debug, Clone, Copy, Default)]
pub struct NetemKeys<'a> {
    /// `jitter: TIME [CORRELATION]`.
    pub jitter: Option<&'a Spanned<NetemValue>>,
    /// `distribution: uniform|normal|pareto|paretonormal`.
    pub distribution: Option<&'a Spanned<String>>,
    /// `loss: [random] P [CORRELATION] | state P13 [P31 [P32 [P23 [P14]]]] | gemodel P [R [1-H [1-K]]]`.
    pub loss: Option<&'a Spanned<NetemValue>>,
    /// `duplicate: P [CORRELATION]`.
    pub duplicate: Option<&'a Spanned<NetemValue>>,
    /// `corrupt: P [CORRELATION]`.
    pub corrupt: Option<&'a Spanned<NetemValue>>,
    /// `reorder: P [CORRELATION]`.
    pub reorder: Option<&'a Spanned<NetemValue>>,
    /// `gap: N`.
    pub gap: Option<&'a Spanned<u32>>,
}

/// A key that does not say what netem would accept: which, where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetemError {
    /// The key.
    pub key: &'static str,
    /// Its line in the file.
    pub line: usize,
    /// Its column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl NetemKeys<'_> {
    /// The impairments they describe, on a link of one-way delay `delay`.
    pub fn resolve(&self, delay: Nanos) -> Result<ImpairmentSpec, NetemError> {
        let mut spec = ImpairmentSpec::default();
        if let Some(v) = self.jitter {
            let words = words_of(v, "jitter")?;
            let (time, rest) = words
                .split_first()
                .ok_or_else(|| error(v, "jitter", "expected TIME [CORRELATION]"))?;
            spec.jitter_ns = Nanos::parse(time)
                .ok_or_else(|| error(v, "jitter", format!("`{time}` is not a time (e.g. 20us)")))?
                .0;
            spec.delay_correlation = at_most_one(v, "jitter", rest)?;
        }
        if let Some(d) = self.distribution {
            if spec.jitter_ns == 0 {
                return Err(error(
                    d,
                    "distribution",
                    "a distribution shapes the jitter: set `jitter:` too",
                ));
            }
            spec.distribution = d.value.parse().map_err(|m: String| error(d, "distribution", m))?;
        }
        if let Some(v) = self.loss {
            spec.loss = Some(loss(v)?);
        }
        for (key, value, slot) in [
            ("duplicate", self.duplicate, &mut spec.duplicate),
            ("corrupt", self.corrupt, &mut spec.corrupt),
            ("reorder", self.reorder, &mut spec.reorder),
        ] {
            if let Some(v) = value {
                *slot = chance(v, key)?;
            }
        }
        if spec.reorder.p > 0.0 {
            // netem: a reordered frame is one sent without the delay the others wait.
            if delay.0 == 0 {
                return Err(error(
                    self.reorder.expect("reorder was given"),
                    "reorder",
                    "reordering needs a link `delay:` (a reordered frame is one sent without it)",
                ));
            }
            spec.gap = self.gap.map_or(1, |g| g.value);
            if spec.gap == 0 {
                return Err(error(self.gap.expect("gap was given"), "gap", "expected at least 1"));
            }
        } else if let Some(g) = self.gap {
            return Err(error(g, "gap", "a gap spaces out reordered frames: set `reorder:` too"));
        }
        Ok(spec)
    }
}

fn error<T>(at: &Spanned<T>, key: &'static str, message: impl Into<String>) -> NetemError {
    NetemError {
        key,
        line: at.referenced.line() as usize,
        column: at.referenced.column() as usize,
        message: message.into(),
    }
}

/// The words of a value (a number is one word).
fn words_of(v: &Spanned<NetemValue>, key: &'static str) -> Result<Vec<String>, NetemError> {
    let words: Vec<String> = match &v.value {
        NetemValue::Number(x) => vec![x.to_string()],
        NetemValue::Words(s) => s.split_whitespace().map(str::to_owned).collect(),
    };
    if words.is_empty() {
        return Err(error(v, key, "empty"));
    }
    Ok(words)
}

/// A probability: `25%` or a fraction in [0, 1].
fn probability(v: &Spanned<NetemValue>, key: &'static str, word: &str) -> Result<f64, NetemError> {
    let p = match word.strip_suffix('%') {
        Some(percent) => percent.parse::<f64>().map(|x| x / 100.0),
        None => word.parse::<f64>(),
    }
    .map_err(|_| error(v, key, format!("`{word}` is not a probability (e.g. 1% or 0.01)")))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(error(v, key, format!("`{word}`: a probability is between 0 and 100 %")));
    }
    Ok(p)
}

/// An optional correlation, the only word left.
fn at_most_one(v: &Spanned<NetemValue>, key: &'static str, rest: &[String]) -> Result<f64, NetemError> {
    match rest {
        [] => Ok(0.0),
        [c] => probability(v, key, c),
        _ => Err(error(v, key, format!("unexpected `{}`", rest[1..].join(" ")))),
    }
}

/// `P [CORRELATION]`.
fn chance(v: &Spanned<NetemValue>, key: &'static str) -> Result<Chance, NetemError> {
    let words = words_of(v, key)?;
    Ok(Chance {
        p: probability(v, key, &words[0])?,
        correlation: at_most_one(v, key, &words[1..])?,
    })
}

/// The loss model `v` names.
fn loss(v: &Spanned<NetemValue>) -> Result<LossModel, NetemError> {
    let key = "loss";
    let words = words_of(v, key)?;
    let numbers = |from: usize, most: usize, what: &str| -> Result<Vec<f64>, NetemError> {
        let given = &words[from..];
        if given.is_empty() || given.len() > most {
            return Err(error(v, key, format!("expected {what}")));
        }
        given.iter().map(|w| probability(v, key, w)).collect()
    };
    match words[0].as_str() {
        "state" => {
            let p = numbers(1, 5, "state P13 [P31 [P32 [P23 [P14]]]]")?;
            Ok(LossModel::four_state(
                p[0],
                p.get(1).copied(),
                p.get(2).copied(),
                p.get(3).copied(),
                p.get(4).copied(),
            ))
        }
        "gemodel" => {
            let p = numbers(1, 4, "gemodel P [R [1-H [1-K]]]")?;
            Ok(LossModel::gilbert_elliott(
                p[0],
                p.get(1).copied(),
                p.get(2).copied(),
                p.get(3).copied(),
            ))
        }
        first => {
            let from = usize::from(first == "random");
            let p = numbers(from, 2, "[random] P [CORRELATION], state ... or gemodel ...")?;
            if p[0] >= 1.0 {
                return Err(error(v, key, "a link that loses every frame is down: use a link event"));
            }
            Ok(LossModel::Random {
                p: p[0],
                correlation: p.get(1).copied().unwrap_or(0.0),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impair::Distribution;

    #[derive(Deserialize)]
    struct Link {
        #[serde(default)]
        jitter: Option<Spanned<NetemValue>>,
        #[serde(default)]
        distribution: Option<Spanned<String>>,
        #[serde(default)]
        loss: Option<Spanned<NetemValue>>,
        #[serde(default)]
        duplicate: Option<Spanned<NetemValue>>,
        #[serde(default)]
        corrupt: Option<Spanned<NetemValue>>,
        #[serde(default)]
        reorder: Option<Spanned<NetemValue>>,
        #[serde(default)]
        gap: Option<Spanned<u32>>,
    }

    fn resolve(yaml: &str, delay: u64) -> Result<ImpairmentSpec, NetemError> {
        let l: Link = serde_saphyr::from_str(yaml).expect("valid YAML");
        NetemKeys {
            jitter: l.jitter.as_ref(),
            distribution: l.distribution.as_ref(),
            loss: l.loss.as_ref(),
            duplicate: l.duplicate.as_ref(),
            corrupt: l.corrupt.as_ref(),
            reorder: l.reorder.as_ref(),
            gap: l.gap.as_ref(),
        }
        .resolve(Nanos(delay))
    }

    #[test]
    fn netem_s_words_read_as_netem_means_them() {
        let s = resolve(
            "jitter: 20us 25%\ndistribution: normal\nloss: gemodel 1% 30%\nduplicate: 1%\ncorrupt: 0.001\nreorder: 25% 50%\ngap: 5\n",
            100_000,
        )
        .unwrap();
        assert_eq!(s.jitter_ns, 20_000);
        assert_eq!(s.delay_correlation, 0.25);
        assert_eq!(s.distribution, Distribution::Normal);
        assert_eq!(s.loss, Some(LossModel::gilbert_elliott(0.01, Some(0.3), None, None)));
        assert_eq!(
            s.duplicate,
            Chance {
                p: 0.01,
                correlation: 0.0
            }
        );
        assert_eq!(s.corrupt.p, 0.001);
        assert_eq!(
            s.reorder,
            Chance {
                p: 0.25,
                correlation: 0.5
            }
        );
        assert_eq!(s.gap, 5);
        assert_eq!(
            resolve("loss: 0.01\n", 0).unwrap().loss,
            Some(LossModel::Random {
                p: 0.01,
                correlation: 0.0
            })
        );
        assert_eq!(
            resolve("loss: state 1% 30%\n", 0).unwrap().loss,
            Some(LossModel::four_state(0.01, Some(0.3), None, None, None))
        );
        assert_eq!(resolve("reorder: 10%\n", 1000).unwrap().gap, 1, "tc's default gap");
    }

    #[test]
    fn what_netem_refuses_is_refused_with_its_line() {
        for (yaml, line, says) in [
            ("loss: 2%\nreorder: 25%\n", 2, "needs a link `delay:`"),
            ("\ngap: 3\n", 2, "set `reorder:` too"),
            ("distribution: normal\n", 1, "set `jitter:` too"),
            ("jitter: 20us\ndistribution: gaussian\n", 2, "unknown distribution"),
            ("loss: 120%\n", 1, "between 0 and 100 %"),
            ("loss: gemodel\n", 1, "gemodel P [R [1-H [1-K]]]"),
            ("loss: 100%\n", 1, "link event"),
            ("duplicate: 1% 2% 3%\n", 1, "unexpected `3%`"),
            ("jitter: soon\n", 1, "not a time"),
        ] {
            let e = resolve(yaml, 0).expect_err(yaml);
            assert_eq!(e.line, line, "{yaml}: {e:?}");
            assert!(e.message.contains(says), "{yaml}: {}", e.message);
        }
    }
}
