//! A topology drawn: Graphviz's DOT, Mermaid, or an SVG laid out here (`intlab graph`). Each
//! link is labelled with its rate and delay, and its impairments when it has any.

use std::collections::VecDeque;
use std::fmt::Write as _;

use super::{Link, NodeKind, Topology};

/// How a link is labelled: `100Mbps, 200us`, then what impairs it.
fn link_label(l: &Link) -> String {
    props_label(&l.props)
}

/// A link's properties in a few words: `100Mbps, 200us`, then what impairs it.
pub(crate) fn props_label(p: &super::LinkProps) -> String {
    let mut label = format!("{}, {}", p.rate, delay(p.delay.0));
    let im = &p.impair;
    if im.jitter_ns > 0 {
        let _infallible = write!(label, ", jitter {} {}", delay(im.jitter_ns), im.distribution);
    }
    if let Some(loss) = im.loss {
        let _infallible = write!(label, ", loss {:.2} %", loss.mean_loss() * 100.0);
    }
    for (what, c) in [
        ("duplicate", im.duplicate),
        ("corrupt", im.corrupt),
        ("reorder", im.reorder),
    ] {
        if c.p > 0.0 {
            let _infallible = write!(label, ", {what} {} %", c.p * 100.0);
        }
    }
    label
}

/// A delay in the largest unit it is a whole number of.
fn delay(ns: u64) -> String {
    match ns {
        0 => "0".into(),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// How a node is labelled: its name, and a host's address.
fn node_label(t: &Topology, n: usize) -> String {
    let node = &t.nodes[n];
    match node.address {
        Some(a) if node.kind == NodeKind::Host => format!("{}\\n{a}", node.name),
        _ => node.name.clone(),
    }
}

/// Graphviz's DOT: switches as boxes, hosts as ellipses, links undirected.
pub fn dot(t: &Topology) -> String {
    let mut out = format!("graph \"{}\" {{\n  node [fontname=\"sans-serif\"];\n", t.name);
    for (i, n) in t.nodes.iter().enumerate() {
        let shape = if n.kind == NodeKind::Switch { "box" } else { "ellipse" };
        let _infallible = writeln!(out, "  \"{}\" [shape={shape}, label=\"{}\"];", n.name, node_label(t, i));
    }
    for l in &t.links {
        let [a, b] = &l.ends;
        let _infallible = writeln!(
            out,
            "  \"{}\" -- \"{}\" [label=\"{}\", taillabel=\"{}\", headlabel=\"{}\"];",
            t.nodes[a.node].name,
            t.nodes[b.node].name,
            link_label(l),
            a.interface,
            b.interface
        );
    }
    out.push_str("}\n");
    out
}

/// Mermaid's flowchart: switches in brackets, hosts in parentheses.
pub fn mermaid(t: &Topology) -> String {
    let mut out = String::from("flowchart TB\n");
    for (i, n) in t.nodes.iter().enumerate() {
        let label = node_label(t, i).replace("\\n", "<br>");
        let (open, close) = if n.kind == NodeKind::Switch {
            ("[", "]")
        } else {
            ("(", ")")
        };
        let _infallible = writeln!(out, "  {}{open}\"{label}\"{close}", n.name);
    }
    for l in &t.links {
        let [a, b] = &l.ends;
        let _infallible = writeln!(
            out,
            "  {} ---|\"{}\"| {}",
            t.nodes[a.node].name,
            link_label(l),
            t.nodes[b.node].name
        );
    }
    out
}

/// Each node's layer: hosts 0, then each switch one more than its nearest host's hops.
fn layers(t: &Topology) -> Vec<usize> {
    let mut layer = vec![usize::MAX; t.nodes.len()];
    let mut queue = VecDeque::new();
    for (i, n) in t.nodes.iter().enumerate() {
        if n.kind == NodeKind::Host {
            layer[i] = 0;
            queue.push_back(i);
        }
    }
    while let Some(i) = queue.pop_front() {
        for l in &t.links {
            let [a, b] = &l.ends;
            let next = if a.node == i {
                b.node
            } else if b.node == i {
                a.node
            } else {
                continue;
            };
            if layer[next] == usize::MAX {
                layer[next] = layer[i] + 1;
                queue.push_back(next);
            }
        }
    }
    // A switch no host reaches sits above the others.
    let top = layer.iter().copied().filter(|&l| l != usize::MAX).max().unwrap_or(0);
    layer
        .iter()
        .map(|&l| if l == usize::MAX { top + 1 } else { l })
        .collect()
}

/// Where the SVG draws each node, and how large the drawing and its nodes are.
struct Drawing {
    width: f64,
    height: f64,
    /// The room one node takes across, for the longest name.
    node_width: f64,
    /// Each node's centre.
    at: Vec<(f64, f64)>,
}

/// Tiers of switches this far apart, the hosts' first row as far below the lowest.
const TIER_SPACING: f64 = 130.0;
/// Rows of hosts this far apart when they stand in more than one.
const HOST_ROW_SPACING: f64 = 40.0;
/// Around the drawing.
const MARGIN: f64 = 20.0;
/// A row of hosts grows no wider than this (px) unless a tier of switches is wider: past it,
/// the hosts stand in more rows, each switch's hosts in a column below it.
const HOST_ROW_WIDTH: f64 = 1200.0;

/// Lays `t` out: hosts at the bottom, each tier of switches above the one nearer the hosts, in
/// the file's order within a tier; hosts ordered by the switch they hang from, so that each
/// stands below its own.
fn drawing(t: &Topology) -> Drawing {
    let longest = t.nodes.iter().map(|n| n.name.chars().count()).max().unwrap_or(1);
    // About 6 px a character of 11 px sans-serif, and a little room either side.
    let node_width = (longest as f64 * 6.0 + 12.0).max(44.0);
    let layer = layers(t);
    let tiers = layer.iter().copied().max().unwrap_or(0) + 1;
    let mut in_tier = vec![0usize; tiers];
    let mut slot = vec![0usize; t.nodes.len()];
    for (i, &l) in layer.iter().enumerate() {
        if l > 0 {
            slot[i] = in_tier[l];
        }
        in_tier[l] += 1;
    }
    let widest_switches = in_tier.iter().skip(1).copied().max().unwrap_or(0).max(1);
    let hosts = in_tier[0];
    let per_row = widest_switches.max((HOST_ROW_WIDTH / node_width) as usize).max(1);
    let rows = hosts.div_ceil(per_row).max(1);
    let host_columns = hosts.div_ceil(rows);
    let widest = widest_switches.max(host_columns);
    let column_x = |count: usize, k: usize| {
        let offset = (widest - count) as f64 * node_width / 2.0;
        MARGIN + offset + k as f64 * node_width + node_width / 2.0
    };
    let tier_y = |l: usize| MARGIN + (tiers - 1 - l) as f64 * TIER_SPACING + TIER_SPACING / 2.0;
    // Switches first; the hosts' places follow from them.
    let mut at: Vec<(f64, f64)> = (0..t.nodes.len())
        .map(|i| match layer[i] {
            0 => (0.0, 0.0),
            l => (column_x(in_tier[l], slot[i]), tier_y(l)),
        })
        .collect();
    // Hosts by where the switch they hang from is drawn, then in the file's order.
    let mut order: Vec<(f64, usize)> = (0..t.nodes.len())
        .filter(|&i| layer[i] == 0)
        .map(|i| {
            let above = t.links.iter().find_map(|l| {
                let [a, b] = &l.ends;
                let other = if a.node == i {
                    b.node
                } else if b.node == i {
                    a.node
                } else {
                    return None;
                };
                (layer[other] > 0).then(|| at[other].0)
            });
            (above.unwrap_or(f64::MAX), i)
        })
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    for (k, &(_, i)) in order.iter().enumerate() {
        let (column, row) = (k / rows, k % rows);
        at[i] = (
            column_x(host_columns, column),
            tier_y(0) + row as f64 * HOST_ROW_SPACING,
        );
    }
    Drawing {
        width: widest as f64 * node_width + 2.0 * MARGIN,
        height: tier_y(0) + (rows - 1) as f64 * HOST_ROW_SPACING + TIER_SPACING / 2.0 + MARGIN,
        node_width,
        at,
    }
}

/// An SVG of [`drawing`]'s layout: links as lines, each labelled near its lower end (where the
/// lines of one upper node fan out), along the line. It has a view box, so a page can scale it
/// to the room it has.
pub fn svg(t: &Topology) -> String {
    let d = drawing(t);
    let at = |i: usize| d.at[i];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"sans-serif\" font-size=\"11\">\n<title>{}</title>\n",
        escape(&t.name),
        w = d.width,
        h = d.height,
    );
    for (li, l) in t.links.iter().enumerate() {
        let [a, b] = &l.ends;
        let ((x1, y1), (x2, y2)) = (at(a.node), at(b.node));
        // From the upper end to the lower: the label sits 62 % of the way down.
        let ((ux, uy), (lx, ly)) = if y1 <= y2 {
            ((x1, y1), (x2, y2))
        } else {
            ((x2, y2), (x1, y1))
        };
        let (mx, my) = (ux + 0.62 * (lx - ux), uy + 0.62 * (ly - uy));
        let mut angle = (ly - uy).atan2(lx - ux).to_degrees();
        if angle > 90.0 {
            angle -= 180.0;
        }
        let _infallible = writeln!(
            out,
            "<line class=\"link\" id=\"link-{li}\" x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"#888\" stroke-width=\"2\"/>\n<text x=\"{mx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"8\" fill=\"#444\" transform=\"rotate({angle:.1} {mx:.1} {my:.1})\">{}</text>",
            my - 2.0,
            escape(&link_label(l))
        );
    }
    for (i, n) in t.nodes.iter().enumerate() {
        let (x, y) = at(i);
        let shape = if n.kind == NodeKind::Switch {
            format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"28\" rx=\"3\" fill=\"#dde8f6\" stroke=\"#345\"/>",
                x - (d.node_width - 8.0) / 2.0,
                y - 14.0,
                d.node_width - 8.0
            )
        } else {
            format!(
                "<ellipse cx=\"{x:.1}\" cy=\"{y:.1}\" rx=\"{:.1}\" ry=\"15\" fill=\"#eef6e4\" stroke=\"#354\"/>",
                (d.node_width - 8.0) / 2.0
            )
        };
        let _infallible = writeln!(
            out,
            "<g class=\"node\" id=\"{}\">{shape}<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></g>",
            escape(&n.name),
            y + 4.0,
            escape(&n.name)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Text made safe inside SVG.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_topology() -> Topology {
        crate::scenario::Scenario::builtin(&crate::scenario::Overrides::default())
            .expect("the built-in scenario")
            .topology
    }

    #[test]
    fn every_node_and_link_is_drawn_in_each_format() {
        let t = default_topology();
        let (d, m, s) = (dot(&t), mermaid(&t), svg(&t));
        for n in &t.nodes {
            assert!(d.contains(&format!("\"{}\" [shape=", n.name)), "{}", n.name);
            assert!(m.contains(&format!("  {}", n.name)), "{}", n.name);
            assert!(s.contains(&format!("id=\"{}\"", n.name)), "{}", n.name);
        }
        assert_eq!(d.matches(" -- ").count(), t.links.len());
        assert_eq!(m.matches(" ---|").count(), t.links.len());
        assert_eq!(s.matches("<line ").count(), t.links.len());
        assert!(d.contains("label=\"100Mbps, 200us\""), "{d}");
    }

    #[test]
    fn hosts_sit_below_their_switch() {
        let t = default_topology();
        let l = layers(&t);
        for (i, n) in t.nodes.iter().enumerate() {
            assert_eq!(l[i], usize::from(n.kind == NodeKind::Switch), "{}", n.name);
        }
    }

    #[test]
    fn a_fat_tree_k8_stands_each_edge_switchs_hosts_below_it_and_no_two_nodes_overlap() {
        let file = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../topologies/fat-tree-k8.yaml"));
        let text = std::fs::read_to_string(file).expect("the shipped fat-tree");
        let t = crate::topology::load_str(&text, file).expect("it loads");
        let d = drawing(&t);
        // 32 edge switches wide, not 128 hosts: a page a screen wide shows it at a legible scale.
        assert!(d.width < 40.0 * d.node_width, "{} px wide", d.width);
        for l in &t.links {
            let [a, b] = &l.ends;
            for (host, switch) in [(a.node, b.node), (b.node, a.node)] {
                if t.nodes[host].kind == NodeKind::Host {
                    assert_eq!(d.at[host].0, d.at[switch].0, "{} below its switch", t.nodes[host].name);
                    assert!(d.at[host].1 > d.at[switch].1);
                }
            }
        }
        for i in 0..t.nodes.len() {
            for j in i + 1..t.nodes.len() {
                let (dx, dy) = (d.at[i].0 - d.at[j].0, d.at[i].1 - d.at[j].1);
                assert!(
                    dx.abs() >= d.node_width - 8.0 || dy.abs() >= 30.0,
                    "{} and {} overlap",
                    t.nodes[i].name,
                    t.nodes[j].name
                );
            }
        }
        assert!(svg(&t).contains(&format!("viewBox=\"0 0 {:.0} {:.0}\"", d.width, d.height)));
    }
}
