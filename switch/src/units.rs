//! Rates, durations and sizes as users write them in configuration files ("200Mbps", "10us",
//! "256KB"), each also accepting a plain number in base units (b/s, ns, bytes).

use std::fmt;

use serde::{Deserialize, Deserializer, de};

/// A link rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

/// A duration in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(pub u64);

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

/// Splits "12.5Gbps" into (12.5, "Gbps").
fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some((v, unit.trim()))
}

fn scaled(v: f64, factor: f64) -> Option<u64> {
    let x = (v * factor).round();
    (x >= 0.0 && x <= u64::MAX as f64).then_some(x as u64)
}

impl Rate {
    /// Parses "200Mbps", "200Mb/s", "1.5Gbps", "800kbps", "1000bps" (SI prefixes).
    pub fn parse(s: &str) -> Option<Rate> {
        let (v, unit) = split_number(s)?;
        let unit = unit.strip_suffix("bps").or_else(|| unit.strip_suffix("b/s"))?;
        let factor = match unit {
            "" => 1.0,
            "k" | "K" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            _ => return None,
        };
        scaled(v, factor).filter(|&r| r > 0).map(Rate)
    }

    /// Bits per second.
    pub fn bps(self) -> u64 {
        self.0
    }

    /// Nanoseconds to serialize `bytes` at this rate, rounded to the nearest ns.
    pub fn serialization_ns(self, bytes: u64) -> u64 {
        ((u128::from(bytes) * 8 * 1_000_000_000 + u128::from(self.0) / 2) / u128::from(self.0)) as u64
    }
}

impl Nanos {
    /// Parses "10us", "1.5ms", "500ns", "2s" (also "µs").
    pub fn parse(s: &str) -> Option<Nanos> {
        let (v, unit) = split_number(s)?;
        let factor = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            _ => return None,
        };
        scaled(v, factor).map(Nanos)
    }
}

impl Bytes {
    /// Parses "1500B", "256KB" (1000), "256KiB" (1024), "1MB", "1MiB".
    pub fn parse(s: &str) -> Option<Bytes> {
        let (v, unit) = split_number(s)?;
        let factor = match unit {
            "" | "B" => 1.0,
            "KB" | "kB" => 1e3,
            "KiB" => 1024.0,
            "MB" => 1e6,
            "MiB" => 1024.0 * 1024.0,
            "GB" => 1e9,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        scaled(v, factor).map(Bytes)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0 as f64;
        if r >= 1e9 {
            write!(f, "{}Gbps", r / 1e9)
        } else if r >= 1e6 {
            write!(f, "{}Mbps", r / 1e6)
        } else {
            write!(f, "{}kbps", r / 1e3)
        }
    }
}

/// Deserializes a unit-suffixed string or a plain number.
fn from_str_or_number<'de, D, T>(
    d: D,
    what: &'static str,
    parse: fn(&str) -> Option<T>,
    plain: fn(u64) -> T,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct V<T> {
        what: &'static str,
        parse: fn(&str) -> Option<T>,
        plain: fn(u64) -> T,
    }
    impl<T> de::Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.what)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            Ok((self.plain)(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            u64::try_from(v)
                .map(self.plain)
                .map_err(|_| E::custom(format!("expected {}, got {v}", self.what)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            Err(E::custom(format!("expected {}, got {v}", self.what)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            (self.parse)(v).ok_or_else(|| E::custom(format!("expected {}, got \"{v}\"", self.what)))
        }
    }
    d.deserialize_any(V { what, parse, plain })
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = from_str_or_number(
            d,
            "a positive rate such as \"200Mbps\" or a number of b/s",
            Rate::parse,
            Rate,
        )?;
        if r.0 == 0 {
            return Err(de::Error::custom("expected a positive rate, got 0"));
        }
        Ok(r)
    }
}

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_or_number(d, "a duration such as \"10us\" or a number of ns", Nanos::parse, Nanos)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_or_number(d, "a size such as \"256KB\" or a number of bytes", Bytes::parse, Bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(Rate::parse("200Mbps"), Some(Rate(200_000_000)));
        assert_eq!(Rate::parse("1.5Gb/s"), Some(Rate(1_500_000_000)));
        assert_eq!(Rate::parse("800kbps"), Some(Rate(800_000)));
        assert_eq!(Rate::parse("-1Mbps"), None);
        assert_eq!(Rate::parse("0Mbps"), None);
        assert_eq!(Rate::parse("200MB"), None);
        assert_eq!(Rate(200_000_000).serialization_ns(1500), 60_000);
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(Nanos::parse("10us"), Some(Nanos(10_000)));
        assert_eq!(Nanos::parse("1.5ms"), Some(Nanos(1_500_000)));
        assert_eq!(Nanos::parse("3 parsecs"), None);
        assert_eq!(Bytes::parse("256KB"), Some(Bytes(256_000)));
        assert_eq!(Bytes::parse("1MiB"), Some(Bytes(1 << 20)));
        assert_eq!(Bytes::parse("64"), Some(Bytes(64)));
    }
}
