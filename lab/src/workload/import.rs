//! Flow lists from other simulators, so that their experiments carry over:
//!
//! - the ns-3 HPCC simulator's flow file (`traffic_gen.py` output): a first line with the flow
//!   count, then `src dst pg dport size_bytes start_s` per flow;
//! - htsim's connection matrix (`.cm`): `Nodes N` and `Connections C` headers, `#` comments,
//!   then `src->dst [id I] start T size B ...` per flow (T in µs, as htsim's writer and example
//!   files have it; triggers, priorities and the rest are read past).
//!
//! Node k of the file (from 0) is the k-th host of the topology in file order; a file naming a
//! node beyond the topology's hosts is refused with its line.

use intlab_transport::flow::MessageKind;

use super::PlannedFlow;

/// A flow file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// The ns-3 HPCC simulator's flow file.
    Ns3,
    /// htsim's connection matrix.
    Htsim,
}

/// A flow as the file gives it: its line, node numbers, bytes, start (ns).
type Row = (usize, usize, usize, u64, u64);

fn number<T: std::str::FromStr>(field: Option<&str>, what: &str, line: usize) -> Result<T, (usize, String)> {
    let f = field.ok_or_else(|| (line, format!("missing {what}")))?;
    f.parse()
        .map_err(|_| (line, format!("{what} `{f}` is not a number of the right kind")))
}

fn ns3(text: &str) -> Result<Vec<Row>, (usize, String)> {
    let mut rows = Vec::new();
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    // The count in the header may be stale (the generator rewrites it in place): the lines rule.
    let _ = lines.next();
    for (k, line) in lines {
        let mut f = line.split_whitespace();
        let src = number(f.next(), "src", k + 1)?;
        let dst = number(f.next(), "dst", k + 1)?;
        let _pg: u32 = number(f.next(), "pg", k + 1)?;
        let _dport: u32 = number(f.next(), "dport", k + 1)?;
        let size = number(f.next(), "size_bytes", k + 1)?;
        let start: f64 = number(f.next(), "start_s", k + 1)?;
        if !(start.is_finite() && start >= 0.0) {
            return Err((k + 1, format!("start {start} s is not a time")));
        }
        rows.push((k + 1, src, dst, size, (start * 1e9).round() as u64));
    }
    Ok(rows)
}

fn htsim(text: &str) -> Result<Vec<Row>, (usize, String)> {
    let mut rows = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((pair, rest)) = line.split_once(char::is_whitespace).filter(|(p, _)| p.contains("->")) else {
            continue;
        };
        let (src, dst) = pair.split_once("->").unwrap_or((pair, ""));
        let src = number(Some(src), "src", k + 1)?;
        let dst = number(Some(dst), "dst", k + 1)?;
        let words: Vec<&str> = rest.split_whitespace().collect();
        let after = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1).copied())
        };
        let start: f64 = number(after("start"), "start", k + 1)?;
        let size = number(after("size"), "size", k + 1)?;
        rows.push((k + 1, src, dst, size, (start * 1e3).round() as u64));
    }
    Ok(rows)
}

/// The flows of `text` in `format`, node k mapped to `hosts[k]`.
pub(super) fn parse(format: Format, text: &str, hosts: &[usize]) -> Result<Vec<PlannedFlow>, (usize, String)> {
    let rows = match format {
        Format::Ns3 => ns3(text)?,
        Format::Htsim => htsim(text)?,
    };
    let mut out = Vec::new();
    for (k, (at, src, dst, size, start_ns)) in rows.into_iter().enumerate() {
        let host = |n: usize| {
            hosts.get(n).copied().ok_or_else(|| {
                (
                    at,
                    format!(
                        "node {n}, but the topology has {} hosts (0 to {})",
                        hosts.len(),
                        hosts.len().saturating_sub(1)
                    ),
                )
            })
        };
        let (s, d) = (host(src)?, host(dst)?);
        if s == d || size == 0 {
            return Err((
                at,
                format!("flow {src}->{dst} of {size} bytes: expected two nodes and a size"),
            ));
        }
        out.push(PlannedFlow {
            id: k as u32 + 1,
            src: s,
            dst: d,
            size,
            start_ns,
            kind: MessageKind::Write,
            step: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns3_flow_files_map_nodes_to_hosts() {
        let text = "2\n0 2 3 100 1000 2.000001\n1 2 3 100 50000 2.5\n";
        let f = parse(Format::Ns3, text, &[10, 11, 12]).expect("valid");
        let got: Vec<(usize, usize, u64, u64)> = f.iter().map(|f| (f.src, f.dst, f.size, f.start_ns)).collect();
        assert_eq!(got, [(10, 12, 1000, 2_000_001_000), (11, 12, 50_000, 2_500_000_000)]);
        let e = parse(Format::Ns3, "1\n0 5 3 100 1000 2\n", &[10, 11]).unwrap_err();
        assert_eq!(e.0, 2);
        assert!(e.1.contains("node 5, but the topology has 2 hosts"), "{}", e.1);
        assert!(
            parse(Format::Ns3, "1\n0 1 3 100 x 2\n", &[1, 2])
                .unwrap_err()
                .1
                .contains("size_bytes `x`")
        );
    }

    #[test]
    fn htsim_matrices_read_flows_and_skip_the_rest() {
        let text =
            "Nodes 4\nConnections 2\n# incast\n0->3 id 1 start 0 size 2000000\n1->3 id 2 start 10 size 500 prio 1\n";
        let f = parse(Format::Htsim, text, &[5, 6, 7, 8]).expect("valid");
        let got: Vec<(usize, usize, u64, u64)> = f.iter().map(|f| (f.src, f.dst, f.size, f.start_ns)).collect();
        assert_eq!(got, [(5, 8, 2_000_000, 0), (6, 8, 500, 10_000)]);
        assert!(
            parse(Format::Htsim, "0->1 id 1 size 9\n", &[1, 2])
                .unwrap_err()
                .1
                .contains("missing start")
        );
    }
}
