//! Links as users name them: by their two ends' nodes, `h1-s1` in either order, or every link
//! of a switch by the switch's name (`intlab link`, a scenario's `events:`).

use super::{NodeKind, Topology};

impl Topology {
    /// The name of link `li`: its two ends' nodes, `leaf1-spine1`.
    pub fn link_name(&self, li: usize) -> String {
        let [a, b] = &self.links[li].ends;
        format!("{}-{}", self.nodes[a.node].name, self.nodes[b.node].name)
    }

    /// Link `li`'s two nodes: index and name.
    pub fn link_ends(&self, li: usize) -> [(usize, &str); 2] {
        self.links[li]
            .ends
            .each_ref()
            .map(|e| (e.node, self.nodes[e.node].name.as_str()))
    }

    /// The links `name` means: the one between two nodes (`h1-s1`, either order), or, when
    /// `switches` allows, every link of switch `name`. Refused, saying why, when it names none
    /// or two nodes joined by several links.
    pub fn links_named(&self, name: &str, switches: bool) -> Result<Vec<usize>, String> {
        let node = |n: &str| self.nodes.iter().position(|x| x.name == n);
        if switches && let Some(s) = node(name).filter(|&s| self.nodes[s].kind == NodeKind::Switch) {
            return Ok(self.links_of(s).map(|(li, _)| li).collect());
        }
        // Node names may hold `-`: every split into two node names is tried.
        for (i, _) in name.match_indices('-') {
            let (Some(a), Some(b)) = (node(&name[..i]), node(&name[i + 1..])) else {
                continue;
            };
            let joining: Vec<usize> = (0..self.links.len())
                .filter(|&li| {
                    let ends = [self.links[li].ends[0].node, self.links[li].ends[1].node];
                    ends == [a, b] || ends == [b, a]
                })
                .collect();
            match joining.len() {
                0 => continue,
                1 => return Ok(joining),
                n => {
                    return Err(format!(
                        "`{name}` names {n} links between the same two nodes: they cannot be told apart"
                    ));
                }
            }
        }
        let mut known: Vec<String> = (0..self.links.len().min(6)).map(|li| self.link_name(li)).collect();
        if self.links.len() > 6 {
            known.push("...".into());
        }
        let what = if switches { "link or switch" } else { "link" };
        Err(format!(
            "no {what} `{name}` (a link is named by its ends, `h1-s1` in either order; links: {})",
            known.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn a_link_is_named_by_its_ends_either_way_and_a_switch_by_its_name() {
        let t = crate::topology::load_str(
            "name: t\ndefaults: { link: { rate: 1Gbps } }\nnodes: { s-1: { kind: switch }, s2: { kind: switch }, h1: { kind: host }, h2: { kind: host } }\nlinks:\n  - endpoints: [\"s-1:a\", \"h1:eth0\"]\n  - endpoints: [\"s-1:b\", \"s2:a\"]\n  - endpoints: [\"s2:b\", \"h2:eth0\"]\n",
            Path::new("t.yaml"),
        )
        .expect("valid");
        assert_eq!(t.links_named("h1-s-1", false), Ok(vec![0]));
        assert_eq!(t.links_named("s-1-h1", false), Ok(vec![0]));
        assert_eq!(t.links_named("s2-s-1", false), Ok(vec![1]));
        assert_eq!(t.links_named("s2", true), Ok(vec![1, 2]));
        let e = t.links_named("s2", false).expect_err("a switch is no link here");
        assert!(
            e.contains("no link `s2`") && e.contains("h1-s-1") | e.contains("s-1-h1"),
            "{e}"
        );
        assert!(t.links_named("h1-h2", true).is_err());
    }
}
