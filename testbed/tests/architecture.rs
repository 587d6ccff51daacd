//! The workspace's layering rules, read from its sources: no module circle in any crate, at any
//! depth of its module tree, no function longer than 150 lines, no lock taken per frame on a
//! switch's frame path, and every lab built and reported through its one life cycle.
//!
//! A module's dependencies are the paths its files name (`crate::a::b`, `super::c`, `self::d`,
//! in code and doc links alike), outside its `#[cfg(test)] mod tests`. A path from module
//! `x::y::p` to `x::z::q` is an edge `y -> z` among the children of `x`; a module naming its
//! own ancestors or descendants is no edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest a function may be.
const MAX_FUNCTION_LINES: usize = 150;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

/// The workspace's member crates' `src` folders, from the root manifest.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the root Cargo.toml");
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line in the root Cargo.toml");
    let list = &members[members.find('[').expect("a members list") + 1..members.rfind(']').expect("its end")];
    let out: Vec<(String, PathBuf)> = list
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| (m.to_owned(), root.join(m).join("src")))
        .collect();
    assert!(out.len() >= 5, "the members of {}: {out:?}", root.display());
    out
}

/// Every `.rs` file under `dir`, but the binaries' folder `src/bin`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a folder entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "bin") && p.parent().is_some_and(|d| d.ends_with("src")) {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of `file` under `src`: `lib.rs` is the root, `a/mod.rs` and `a.rs` are `a`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    match last.as_str() {
        "mod.rs" | "lib.rs" | "main.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_owned()),
    }
    parts
}

/// The text of a file without its unit tests (the tests may reach anywhere).
fn without_tests(text: &str) -> &str {
    let mut cut = text.len();
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let at = from + at;
        let rest = text[at + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod tests") {
            cut = at;
            break;
        }
        from = at + 1;
    }
    &text[..cut]
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a text names from `crate::`, `super::` and `self::`, as absolute module paths'
/// first segments (enough of them to place the edge), from a file of module `here`. Reading
/// `mod.rs` and `lib.rs` files, `here` is the folder's module itself.
fn named_modules(text: &str, here: &[String], is_folder_file: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        if !text.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !is_ident_char(bytes[i - 1] as char) && bytes[i - 1] != b':';
        let rest = &text[i..];
        if !starts_word || !(rest.starts_with("crate::") || rest.starts_with("super::") || rest.starts_with("self::")) {
            i += 1;
            continue;
        }
        let mut base: Vec<String>;
        let mut j = i;
        if rest.starts_with("crate::") {
            base = Vec::new();
            j += "crate::".len();
        } else if rest.starts_with("self::") {
            base = here.to_vec();
            j += "self::".len();
        } else {
            // `super` of a folder's own file is the folder's parent; of `a/b.rs`, it is `a`.
            base = here.to_vec();
            if !is_folder_file || !base.is_empty() {
                base.pop();
            }
            j += "super::".len();
            while text[j..].starts_with("super::") {
                base.pop();
                j += "super::".len();
            }
        }
        for tail in path_tails(&text[j..]) {
            let mut p = base.clone();
            p.extend(tail);
            out.push(p);
        }
        i = j.max(i + 1);
    }
    out
}

/// The module segments at the start of `s` (after a `::`): `a::b::C` gives `[a, b]`, a group
/// `{a, b::c}` gives each of its members'.
fn path_tails(s: &str) -> Vec<Vec<String>> {
    let s = s.trim_start();
    if let Some(group) = s.strip_prefix('{') {
        let mut depth = 0;
        let mut members = Vec::new();
        let mut start = 0;
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    members.push(&group[start..k]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    members.push(&group[start..k]);
                    start = k + 1;
                }
                _ => {}
            }
        }
        return members.into_iter().flat_map(path_tails).collect();
    }
    let mut segs = Vec::new();
    let mut rest = s;
    loop {
        let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
        let word = &rest[..end];
        // Modules are snake case; a type, a trait or a constant ends the module path.
        if word.is_empty() || word == "self" || !word.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
            break;
        }
        segs.push(word.to_owned());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) if r.starts_with('{') => {
                return path_tails(r).into_iter().map(|t| [segs.clone(), t].concat()).collect();
            }
            Some(r) => rest = r,
            // The last word may be a function or a constant, not a module: it still names its
            // module's sibling at the level where the paths part, which is all an edge needs.
            None => break,
        }
    }
    vec![segs]
}

/// Circles among the children of each module, as (parent, members).
fn circles(src: &Path) -> Vec<(String, Vec<String>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    // parent -> child -> children it depends on
    let mut graph: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for m in &modules {
        for depth in 0..m.len() {
            graph
                .entry(m[..depth].to_vec())
                .or_default()
                .entry(m[depth].clone())
                .or_default();
        }
    }
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let here = module_of(src, f);
        let folder_file = matches!(
            f.file_name().and_then(|n| n.to_str()),
            Some("mod.rs" | "lib.rs" | "main.rs")
        );
        for to in named_modules(without_tests(&text), &here, folder_file) {
            let common = here.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < here.len() && common < to.len() {
                let parent = here[..common].to_vec();
                if let Some(children) = graph.get_mut(&parent)
                    && children.contains_key(&to[common])
                {
                    let from = here[common].clone();
                    children.entry(from).or_default().insert(to[common].clone());
                }
            }
        }
    }
    let mut out = Vec::new();
    for (parent, children) in &graph {
        for c in strongly_connected(children) {
            out.push((parent.join("::"), c));
        }
    }
    out
}

/// The strongly connected components of more than one node (Tarjan's algorithm).
fn strongly_connected(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.g.contains_key(w) || w == v {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_crate_has_a_module_circle() {
    let mut found = Vec::new();
    for (name, src) in crate_sources() {
        for (parent, members) in circles(&src) {
            let at = if parent.is_empty() {
                name.clone()
            } else {
                format!("{name}::{parent}")
            };
            found.push(format!("{at}: {}", members.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "module circles:\n{}", found.join("\n"));
}

#[test]
fn the_circle_finder_finds_a_circle_and_ignores_what_is_not_one() {
    let dir = std::env::temp_dir().join(format!("intlab-architecture-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).expect("a scratch crate");
    let files = [
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a/mod.rs", "mod x; mod y; use super::b::Thing;"),
        ("a/x.rs", "use super::y::f; use crate::a::Parent;"),
        ("a/y.rs", "/// See [`super::x`].\nfn f() {}"),
        ("b.rs", "use crate::{c::g, a::x};"),
        ("c.rs", "fn g() {}\n#[cfg(test)]\nmod tests { use crate::b::Thing; }"),
    ];
    for (name, text) in files {
        std::fs::write(src.join(name), text).expect("a scratch file");
    }
    let found = circles(&src);
    std::fs::remove_dir_all(&dir).expect("the scratch crate removed");
    // a <-> b at the root; x <-> y inside a (the doc link counts); c's test module does not
    // make c <-> b, and x naming its parent `a` is no edge.
    assert_eq!(
        found,
        vec![
            (String::new(), vec!["a".to_owned(), "b".to_owned()]),
            ("a".to_owned(), vec!["x".to_owned(), "y".to_owned()]),
        ]
    );
}

/// Functions (free, in impls and in traits) and their length in lines, signature to closing
/// brace.
struct FunctionLengths {
    found: Vec<(String, usize)>,
}

impl FunctionLengths {
    fn note(&mut self, name: String, span: proc_macro2::Span) {
        let lines = span.end().line - span.start().line + 1;
        self.found.push((name, lines));
    }
}

impl<'ast> Visit<'ast> for FunctionLengths {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let span = f.sig.span().join(f.block.span()).unwrap_or_else(|| f.span());
        self.note(f.sig.ident.to_string(), span);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let span = f.sig.span().join(f.block.span()).unwrap_or_else(|| f.span());
        self.note(f.sig.ident.to_string(), span);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            let span = f.sig.span().join(block.span()).unwrap_or_else(|| f.span());
            self.note(f.sig.ident.to_string(), span);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_is_longer_than_150_lines() {
    let root = workspace();
    // (file, function, lines) of every function over the limit.
    let mut long = Vec::new();
    for (_, src) in crate_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let mut v = FunctionLengths { found: Vec::new() };
            v.visit_file(&file);
            let rel = f.strip_prefix(&root).expect("a workspace file").display().to_string();
            for (name, lines) in v.found {
                if lines > MAX_FUNCTION_LINES {
                    long.push((rel.clone(), name, lines));
                }
            }
        }
    }
    let problems: Vec<String> = long
        .iter()
        .map(|(file, name, lines)| {
            format!("{file}: `{name}` is {lines} lines (at most {MAX_FUNCTION_LINES}): split it")
        })
        .collect();
    assert!(problems.is_empty(), "function lengths:\n{}", problems.join("\n"));
}

#[test]
fn function_lengths_are_counted_from_signature_to_closing_brace() {
    let body: String = (0..149).map(|i| format!("    let _x{i} = {i};\n")).collect();
    let text =
        format!("fn long() {{\n{body}}}\nstruct S;\nimpl S {{\n    fn short(&self) -> u8 {{\n        1\n    }}\n}}\n");
    let mut v = FunctionLengths { found: Vec::new() };
    v.visit_file(&syn::parse_file(&text).expect("the sample parses"));
    assert_eq!(v.found, vec![("long".to_owned(), 151), ("short".to_owned(), 3)]);
}

/// The folders and files every frame goes through on its way through a switch.
const FRAME_PATH: &[&str] = &[
    "switch/src/shard.rs",
    "switch/src/fabric_state.rs",
    "switch/src/port_engine.rs",
    "switch/src/egress.rs",
    "switch/src/frame.rs",
    "switch/src/tm",
    "switch/src/pipeline",
    "switch/src/port",
    "switch/src/impair",
    "p4/src/exec",
];

/// The locks the frame path may take, none of them per frame: (file, what is locked, when).
const LOCKS_ALLOWED: &[(&str, &str, &str)] = &[
    (
        "switch/src/fabric_state.rs",
        "published",
        "the counters, read by the control side, once per reading",
    ),
    (
        "switch/src/shard.rs",
        "0",
        "the shard itself, once per run (a worker tries, never waits)",
    ),
    (
        "switch/src/shard.rs",
        "self",
        "a borrowed shard, once per borrowed run, tried",
    ),
    (
        "switch/src/shard.rs",
        "link_changes",
        "the link changes posted to a worker, when the posted count moved",
    ),
    (
        "switch/src/shard.rs",
        "published",
        "a port's counters, once per publication",
    ),
    (
        "switch/src/frame.rs",
        "free",
        "the pool's free list, once per batch of frames a worker takes or gives back",
    ),
    (
        "switch/src/pipeline/ingress.rs",
        "pending_routes",
        "route changes, when posted and when one falls due",
    ),
    (
        "p4/src/exec/mod.rs",
        "editing",
        "control-plane edits, never a frame's pass",
    ),
];

/// What each `.lock()` and `.try_lock()` in `text` locks: the name just before the call, past
/// an index (`link_changes[w].lock()` locks `link_changes`).
fn locked_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for call in [".lock()", ".try_lock()"] {
        for (at, _) in text.match_indices(call) {
            let mut before = text[..at].trim_end();
            if before.ends_with(']') {
                before = before[..before.rfind('[').unwrap_or(0)].trim_end();
            }
            let start = before.rfind(|c| !is_ident_char(c)).map_or(0, |i| i + 1);
            out.push(before[start..].to_owned());
        }
    }
    out
}

#[test]
fn the_frame_path_takes_no_lock_per_frame() {
    let root = workspace();
    let mut files = Vec::new();
    for p in FRAME_PATH {
        let p = root.join(p);
        if p.is_dir() {
            rust_files(&p, &mut files);
        } else {
            files.push(p);
        }
    }
    let mut found = BTreeSet::new();
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let text = without_tests(&text);
        let rel = f.strip_prefix(&root).expect("a workspace file").display().to_string();
        if text.contains("RwLock") {
            problems.push(format!("{rel}: an RwLock on the frame path"));
        }
        for name in locked_names(text) {
            if LOCKS_ALLOWED.iter().any(|(file, n, _)| *file == rel && *n == name) {
                found.insert((rel.clone(), name));
            } else {
                problems.push(format!(
                    "{rel}: locks `{name}`, which the frame path may not: count it with atomics, \
                     own it per worker, or add it to LOCKS_ALLOWED with why it is not per frame"
                ));
            }
        }
    }
    for (file, name, _) in LOCKS_ALLOWED {
        if !found.contains(&(file.to_string(), name.to_string())) {
            problems.push(format!("{file}: `{name}` is allowed but no longer locked: strike it"));
        }
    }
    assert!(problems.is_empty(), "locks on the frame path:\n{}", problems.join("\n"));
}

#[test]
fn a_lock_is_named_by_what_it_locks() {
    let text = "let a = self.free.lock().x;\nlet b = &mut *self.fabric.link_changes[self.worker]\n    .lock()\n    .y;\nself.0.try_lock()";
    assert_eq!(locked_names(text), ["free", "link_changes", "0"]);
}

/// The calls a lab's life cycle makes once for every driver (a run, a standing lab, a site's
/// part, a lab over sites), and the one file each may be made in.
const LIFE_CYCLE_CALLS: &[(&str, &str)] = &[
    ("Lab::build(", "lab/src/life_cycle/running.rs"),
    ("Results::of_run(", "lab/src/life_cycle/report.rs"),
    ("Timebase {", "lab/src/life_cycle/report.rs"),
    ("RunRecord {", "lab/src/life_cycle/report.rs"),
    ("EventPlayer::start(", "lab/src/life_cycle/running.rs"),
];

/// Where the calls of [`LIFE_CYCLE_CALLS`] are made in `files` (workspace-relative path,
/// text): (call, file) for each file that makes it outside its tests.
fn life_cycle_calls(files: &[(String, String)]) -> BTreeSet<(&'static str, &str)> {
    let mut out = BTreeSet::new();
    for (rel, text) in files {
        // Code, not comments, and a call or a value made, not the type's own definition.
        let code = without_tests(text)
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .filter(|l| !l.contains("struct ") && !l.contains("impl "));
        for line in code {
            for (call, _) in LIFE_CYCLE_CALLS.iter().filter(|(call, _)| names(line, call)) {
                out.insert((*call, rel.as_str()));
            }
        }
    }
    out
}

/// Whether `line` names `path` whole (`Lab::build(`, not `RunningLab::build(`).
fn names(line: &str, path: &str) -> bool {
    line.match_indices(path)
        .any(|(at, _)| !line[..at].chars().next_back().is_some_and(is_ident_char))
}

#[test]
fn every_lab_is_built_and_reported_through_its_one_life_cycle() {
    let root = workspace();
    let mut paths = Vec::new();
    for (_, src) in crate_sources() {
        rust_files(&src, &mut paths);
    }
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&root).expect("a workspace file").display().to_string();
            (
                rel,
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())),
            )
        })
        .collect();
    let found = life_cycle_calls(&files);
    let strays: Vec<String> = found
        .iter()
        .filter(|(call, file)| !LIFE_CYCLE_CALLS.contains(&(call, file)))
        .map(|(call, file)| format!("{file} calls `{call}`: go through lab/src/life_cycle/"))
        .collect();
    assert!(strays.is_empty(), "{}", strays.join("\n"));
    for (call, file) in LIFE_CYCLE_CALLS {
        assert!(
            found.contains(&(call, file)),
            "{file} no longer calls `{call}`: move or strike it"
        );
    }
}

#[test]
fn a_life_cycle_call_outside_its_file_is_found() {
    let files = [
        (
            "lab/src/run.rs".to_string(),
            "let lab = Lab::build(&t, &cfg)?;\nlet r = RunningLab::build(plan)?;".to_string(),
        ),
        ("lab/src/y.rs".to_string(), "RunningLab::build(plan)".to_string()),
        (
            "lab/src/x.rs".to_string(),
            "/// Calls `Lab::build(`.\npub struct Timebase {}\n#[cfg(test)]\nmod tests {\n    fn f() { Lab::build(&t, &cfg); }\n}\n"
                .to_string(),
        ),
    ];
    let found = life_cycle_calls(&files);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        [("Lab::build(", "lab/src/run.rs")]
    );
}
