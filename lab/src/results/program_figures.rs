//! The figures a program printed itself: perftest's result table (`#bytes #iterations BW
//! peak[MB/sec] ...`) or ucx_perftest's `Final:` line, read so that a run's summary shows them
//! beside the lab's own count.

/// The last row of the last perftest result table in `output`, as (column, value) pairs;
/// empty when there is none. Column names are perftest's (`BW average[MB/sec]`, where a MB is
/// 2^20 bytes; `t_avg[usec]`).
pub fn perftest_table(output: &str) -> Vec<(String, f64)> {
    let mut columns: Vec<String> = Vec::new();
    let mut last: Vec<(String, f64)> = Vec::new();
    for line in output.lines() {
        let t = line.trim();
        if t.starts_with("#bytes") {
            columns = header_columns(t);
            continue;
        }
        if columns.is_empty() {
            continue;
        }
        let values: Option<Vec<f64>> = t.split_whitespace().map(|v| v.parse().ok()).collect();
        match values {
            Some(v) if v.len() >= 2 => {
                last = columns.iter().cloned().zip(v).collect();
            }
            // The table ends at its closing rule or at any other text.
            _ => columns.clear(),
        }
    }
    last
}

/// The figures of ucx_perftest's `Final:` line, named after its table's columns (latency in
/// us, bandwidth in MB/s of 2^20 bytes, message rate in messages/s); empty when there is none.
pub fn ucx_perftest_final(output: &str) -> Vec<(String, f64)> {
    const COLUMNS: [&str; 8] = [
        "iterations",
        "overhead p50[usec]",
        "overhead average[usec]",
        "overhead overall[usec]",
        "bandwidth average[MB/sec]",
        "bandwidth overall[MB/sec]",
        "message rate average[msg/sec]",
        "message rate overall[msg/sec]",
    ];
    let Some(line) = output.lines().rev().find_map(|l| l.trim().strip_prefix("Final:")) else {
        return Vec::new();
    };
    let values: Option<Vec<f64>> = line.split_whitespace().map(|v| v.parse().ok()).collect();
    match values {
        Some(v) if v.len() == COLUMNS.len() => COLUMNS.iter().map(|c| c.to_string()).zip(v).collect(),
        _ => Vec::new(),
    }
}

/// `figure: NAME VALUE` lines, the form a program of one's own prints its figures in (NAME may
/// hold spaces; VALUE is the last word).
pub fn figure_lines(output: &str) -> Vec<(String, f64)> {
    output
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("figure:")?.trim();
            let (name, value) = rest.rsplit_once(char::is_whitespace)?;
            Some((name.trim().to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// What a program printed of its own figures: perftest's table, ucx_perftest's `Final:` line,
/// and `figure:` lines.
pub fn of_output(output: &str) -> Vec<(String, f64)> {
    let mut figures = perftest_table(output);
    if figures.is_empty() {
        figures = ucx_perftest_final(output);
    }
    figures.extend(figure_lines(output));
    figures
}

/// The column names of a perftest header: `#name` words, or text up to a closing `]`
/// (`BW peak[MB/sec]`, `99% percentile[usec]`), since names hold single spaces.
fn header_columns(header: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = header.trim_start();
    while !rest.is_empty() {
        let end = if rest.starts_with('#') {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        } else {
            rest.find(']').map_or(rest.len(), |i| i + 1)
        };
        out.push(rest[..end].trim().to_owned());
        rest = rest[end..].trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_and_latency_tables_read_as_perftest_prints_them() {
        let bw = "\
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5000             112.29             112.26             0.001796
---------------------------------------------------------------------------------------
";
        let f = perftest_table(bw);
        assert_eq!(f.len(), 5, "{f:?}");
        assert_eq!(f[3], ("BW average[MB/sec]".to_owned(), 112.26));
        let lat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n 2       1000          60.12          190.40       70.01              72.50          9.10           120.30                 180.20\n";
        let f = perftest_table(lat);
        assert_eq!(f.len(), 9, "{f:?}");
        assert_eq!(f[5], ("t_avg[usec]".to_owned(), 72.5));
        assert_eq!(f[7].0, "99% percentile[usec]");
        assert!(perftest_table("no table here\n 1 2 3\n").is_empty());
    }

    #[test]
    fn ucx_perftest_final_line_reads_by_its_columns() {
        let out = "[thread 0]  1971 2721.630 11437.091 12221.777 5.46 5.11 87 82\nFinal:                  2000   2685.019  3520.900 12095.614       17.75       5.17         294          83\n";
        let f = of_output(out);
        assert_eq!(f.len(), 8, "{f:?}");
        assert_eq!(f[5], ("bandwidth overall[MB/sec]".to_owned(), 5.17));
        assert!(ucx_perftest_final("Final: 1 2\n").is_empty());
    }

    #[test]
    fn figure_lines_name_their_value() {
        let f = of_output("allreduce of 8 doubles\nfigure: allreduce mean[s] 0.25\nfigure: broken\n");
        assert_eq!(f, vec![("allreduce mean[s]".to_owned(), 0.25)]);
    }

    #[test]
    fn the_last_row_of_a_sweep_is_kept() {
        let all = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 2 1000 1.0 0.9 0.5\n 4 1000 2.0 1.9 0.5\n----\n";
        assert_eq!(perftest_table(all)[0], ("#bytes".to_owned(), 4.0));
    }
}
