//! Command-line changes to a scenario (`--cc NAME`, `--set key=value`), applied to the YAML
//! document before it is checked, so they obey exactly the rules the file does.

use serde_json::{Map, Value};

use crate::topology::first_line;

/// What the command line changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Run this controller: with the file's parameters for it (`controller:`, or its entry in
    /// `controllers:`), else its defaults.
    pub controller: Option<String>,
    /// `key.path=value` assignments, in order; the value is YAML (`100Mbps`, `[h1, h2]`).
    pub set: Vec<String>,
    /// Keep only this application of an `applications` workload: its isolated run, the
    /// baseline of its runtime increase.
    pub only: Option<String>,
}

impl Overrides {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.controller.is_none() && self.set.is_empty() && self.only.is_none()
    }

    /// The options that made the changes, as the user typed them ("--cc/--set").
    pub fn flags(&self) -> String {
        let used = [
            (self.controller.is_some(), "--cc"),
            (!self.set.is_empty(), "--set"),
            (self.only.is_some(), "--only"),
        ];
        used.iter().filter(|u| u.0).map(|u| u.1).collect::<Vec<_>>().join("/")
    }

    /// The document `doc` (a scenario file as read) with the changes applied, as YAML.
    pub fn apply(&self, mut doc: Value) -> Result<String, String> {
        if let Some(cc) = &self.controller {
            let root = as_map(&mut doc, "the document")?;
            let same = root
                .get("controller")
                .and_then(|c| c.get("name"))
                .and_then(Value::as_str)
                .is_some_and(|n| n == cc);
            if !same {
                // The file's parameters for it under `controllers:`, else its defaults.
                let listed = root
                    .get("controllers")
                    .and_then(Value::as_array)
                    .and_then(|l| l.iter().find(|c| c.get("name").and_then(Value::as_str) == Some(cc)))
                    .cloned();
                let c = listed.unwrap_or_else(|| {
                    let mut c = Map::new();
                    c.insert("name".into(), Value::String(cc.clone()));
                    Value::Object(c)
                });
                root.insert("controller".into(), c);
            }
        }
        for s in &self.set {
            let (path, value) = s
                .split_once('=')
                .ok_or_else(|| format!("--set {s}: expected key.path=value"))?;
            if value.trim().is_empty() {
                return Err(format!(
                    "--set {s}: expected a value after `=` (YAML: `--set {path}=\"\"` for an empty string)"
                ));
            }
            let value: Value =
                serde_saphyr::from_str(value).map_err(|e| format!("--set {s}: {}", first_line(&e.to_string())))?;
            set(&mut doc, path, value).map_err(|m| format!("--set {s}: {m}"))?;
        }
        if let Some(name) = &self.only {
            keep_application(&mut doc, name)?;
        }
        serde_saphyr::to_string(&doc).map_err(|e| e.to_string())
    }
}

/// Removes every application but `name` from the workload.
fn keep_application(doc: &mut Value, name: &str) -> Result<(), String> {
    let apps = doc
        .get_mut("workload")
        .and_then(|w| w.get_mut("applications"))
        .and_then(Value::as_array_mut)
        .ok_or_else(|| format!("--only {name}: the workload has no `applications`"))?;
    let names: Vec<String> = apps
        .iter()
        .filter_map(|a| a.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    apps.retain(|a| a.get("name").and_then(Value::as_str) == Some(name));
    if apps.is_empty() {
        return Err(format!(
            "--only {name}: expected the name of an application, one of {}",
            names.join(", ")
        ));
    }
    Ok(())
}

fn as_map<'a>(v: &'a mut Value, what: &str) -> Result<&'a mut Map<String, Value>, String> {
    if v.is_null() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().ok_or_else(|| format!("{what} is not a mapping"))
}

/// Sets `path` (keys and sequence indices joined by '.') in `doc`, creating missing mappings.
fn set(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut at = doc;
    let mut walked = String::new();
    let keys: Vec<&str> = path.split('.').collect();
    for (i, key) in keys.iter().enumerate() {
        if key.is_empty() {
            return Err(format!("empty key in `{path}`"));
        }
        let last = i + 1 == keys.len();
        let here = if walked.is_empty() {
            "the document".to_owned()
        } else {
            format!("`{walked}`")
        };
        at = match at {
            Value::Array(items) => {
                let n = items.len();
                let slot = key
                    .parse::<usize>()
                    .ok()
                    .and_then(|k| items.get_mut(k))
                    .ok_or_else(|| format!("{here} is a list of {n}: expected an index below {n}, got `{key}`"))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            other => {
                let map = as_map(other, &here)?;
                if last {
                    map.insert((*key).to_owned(), value);
                    return Ok(());
                }
                map.entry((*key).to_owned()).or_insert(Value::Null)
            }
        };
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name: t\nnodes:\n  s1: { kind: switch }\n  h2: { kind: host }\n  h1: { kind: host }\nlinks:\n  - endpoints: [\"s1:e1\", \"h1:e0\"]\n    rate: 1Gbps\ncontroller: { name: hpcc, eta: 0.9 }\ncontrollers:\n  - { name: dcqcn, g: 0.01 }\n";

    fn apply(cc: Option<&str>, set: &[&str]) -> Result<Value, String> {
        let o = Overrides {
            controller: cc.map(str::to_owned),
            set: set.iter().map(|s| s.to_string()).collect(),
            only: None,
        };
        let text = o.apply(read(DOC))?;
        Ok(serde_saphyr::from_str(&text).expect("valid YAML out"))
    }

    /// Scenario text as the scenario reads it before applying changes.
    fn read(text: &str) -> Value {
        serde_saphyr::from_str(text).expect("valid YAML in")
    }

    #[test]
    fn sets_nested_keys_and_list_items_and_keeps_node_order() {
        let v = apply(None, &["links.0.rate=10Mbps", "workload.incast.receiver=h1", "seed=7"]).unwrap();
        assert_eq!(v["links"][0]["rate"], "10Mbps");
        assert_eq!(v["workload"]["incast"]["receiver"], "h1");
        assert_eq!(v["seed"], 7);
        let names: Vec<&String> = v["nodes"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["s1", "h2", "h1"], "file order matters: it assigns addresses");
    }

    #[test]
    fn cc_replaces_another_controller_but_keeps_its_own_parameters() {
        assert_eq!(
            apply(Some("hpcc++"), &[]).unwrap()["controller"],
            serde_json::json!({"name": "hpcc++"})
        );
        assert_eq!(apply(Some("hpcc"), &[]).unwrap()["controller"]["eta"], 0.9);
    }

    #[test]
    fn cc_takes_the_files_parameters_for_the_controller_it_picks() {
        assert_eq!(
            apply(Some("dcqcn"), &[]).unwrap()["controller"],
            serde_json::json!({"name": "dcqcn", "g": 0.01})
        );
        assert_eq!(
            apply(Some("dcqcn"), &["controller.g=0.02"]).unwrap()["controller"]["g"],
            0.02,
            "--set applies after"
        );
    }

    #[test]
    fn bad_assignments_say_what_was_expected() {
        assert!(apply(None, &["seed"]).unwrap_err().contains("expected key.path=value"));
        assert!(
            apply(None, &["name="])
                .unwrap_err()
                .contains("--set name=: expected a value after `=`")
        );
        let e = apply(None, &["links.3.rate=1Gbps"]).unwrap_err();
        assert!(e.contains("list of 1: expected an index below 1, got `3`"), "{e}");
        let e = apply(None, &["name.x=1"]).unwrap_err();
        assert!(e.contains("`name` is not a mapping"), "{e}");
    }

    #[test]
    fn only_keeps_one_application() {
        let doc = format!("{DOC}workload:\n  applications:\n    - {{ name: a, x: 1 }}\n    - {{ name: b, x: 2 }}\n");
        let only = |name: &str| Overrides {
            only: Some(name.into()),
            ..Overrides::default()
        };
        let v: Value = serde_saphyr::from_str(&only("b").apply(read(&doc)).unwrap()).unwrap();
        assert_eq!(
            v["workload"]["applications"],
            serde_json::json!([{"name": "b", "x": 2}])
        );
        let e = only("c").apply(read(&doc)).unwrap_err();
        assert!(e.contains("expected the name of an application, one of a, b"), "{e}");
        assert!(
            only("a")
                .apply(read(DOC))
                .unwrap_err()
                .contains("has no `applications`")
        );
    }
}
