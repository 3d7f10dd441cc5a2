//! Checks over the workspace's sources that no compiler lint makes.

use std::path::{Path, PathBuf};

/// Every `.rs` file of the workspace's crates, tests and benches included
/// (not `target/`, not the fuzz crate's build output).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() && !matches!(name, "target" | ".git" | "models" | "node_modules") {
            sources(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The return type of every public function whose signature starts at
/// one of `text`'s lines, as `(line, return type)`, whitespace collapsed.
fn public_returns(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let public = ["pub fn ", "pub async fn ", "pub const fn "].iter().any(|p| t.starts_with(p));
        if !public {
            continue;
        }
        // The signature runs to the body's brace or the declaration's
        // semicolon.
        let mut sig = String::new();
        for l in &lines[i..lines.len().min(i + 30)] {
            sig.push_str(l.trim());
            sig.push(' ');
            if l.contains('{') || l.trim_end().ends_with(';') {
                break;
            }
        }
        let sig = sig.split(" where ").next().unwrap_or("").split('{').next().unwrap_or("").to_string();
        if let Some((_, ret)) = sig.split_once("->") {
            out.push((i + 1, ret.split_whitespace().collect::<Vec<_>>().join(" ")));
        }
    }
    out
}

/// Errors are typed in the libraries: no public function returns a
/// `Result` whose error is a bare `String` (docs/ARCHITECTURE.md, "Layout
/// rules"). A caller cannot tell a bad input from a broken disk in a
/// string.
#[test]
fn no_public_function_returns_a_string_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["engine", "actors", "sim-cli", "benches"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "the scan found only {} files under {}", files.len(), root.display());
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (line, ret) in public_returns(&text) {
            if ret.contains("Result<") && ret.trim_end().ends_with(", String>") {
                found.push(format!("{}:{line}: -> {ret}", f.strip_prefix(&root).unwrap_or(f).display()));
            }
        }
    }
    assert!(found.is_empty(), "public functions returning a String error:\n{}", found.join("\n"));
}

/// The scan itself: it sees a multi-line signature and a `where` clause.
#[test]
fn the_scan_reads_signatures_across_lines() {
    let text = "pub fn a(\n    x: u8,\n) -> std::result::Result<u8, String> {\n}\nfn b() -> Result<(), String> {}\n\
                pub fn c<T>(t: T) -> Result<T, String>\nwhere\n    T: Copy,\n{\n}\n";
    let r = public_returns(text);
    assert_eq!(
        r,
        vec![(1, "std::result::Result<u8, String>".to_string()), (6, "Result<T, String>".to_string())],
        "private functions are left alone"
    );
}

/// A crate's module tree: each `.rs` file of `src/` (test-only files left
/// out) as its module path (`turn/converse.rs` is `["turn", "converse"]`,
/// `lib.rs` and `main.rs` the root), with its code lines: comments and
/// everything from its first `#[cfg(test)]` on are left out.
fn modules(src: &Path) -> Vec<(Vec<String>, String)> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap_or(&f).with_extension("");
        let path: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
        if path.last().is_some_and(|l| l == "tests") {
            continue;
        }
        let path = if path == ["lib"] || path == ["main"] { Vec::new() } else { path };
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let code: Vec<&str> = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
        out.push((path, code.join("\n")));
    }
    out
}

/// The paths `code` names through `crate::`, `super::` and `self::`, made
/// absolute from `module`; `use crate::{a::b, c}` names `a::b` and `c`.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let start_ok = i == 0 || !ident(bytes[i - 1] as char) && bytes[i - 1] != b':';
        let one = rest.chars().next().map_or(1, char::len_utf8);
        let (base, skip) = if !start_ok {
            (None, one)
        } else if rest.starts_with("crate::") {
            (Some(Vec::new()), "crate::".len())
        } else if rest.starts_with("self::") {
            (Some(module.to_vec()), "self::".len())
        } else if rest.starts_with("super::") {
            let mut base = module.to_vec();
            let mut skip = 0;
            while code[i + skip..].starts_with("super::") {
                base.pop();
                skip += "super::".len();
            }
            (Some(base), skip)
        } else {
            (None, one)
        };
        let Some(base) = base else {
            i += skip;
            continue;
        };
        i += skip;
        let tail = &code[i..];
        if let Some(group) = tail.strip_prefix('{') {
            // A group: split at depth-0 commas up to its closing brace.
            let (mut depth, mut item, mut end) = (0, String::new(), group.len());
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = j;
                        break;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
                if c == ',' && depth == 0 {
                    out.push(base.iter().cloned().chain(segments(&item)).collect());
                    item.clear();
                } else {
                    item.push(c);
                }
            }
            out.push(base.iter().cloned().chain(segments(&item)).collect());
            i += end;
        } else {
            let len = tail.find(|c: char| !(ident(c) || c == ':')).unwrap_or(tail.len());
            out.push(base.iter().cloned().chain(segments(&tail[..len])).collect());
            i += len;
        }
    }
    out
}

/// The leading identifiers of a path (`a::b::{c, d}` gives `a`, `b`).
fn segments(path: &str) -> Vec<String> {
    path.trim()
        .split("::")
        .map(str::trim)
        .take_while(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(String::from)
        .collect()
}

/// The strongly connected components of more than one node, each sorted,
/// in sorted order (Tarjan's algorithm, iterative over sorted nodes).
fn cycles(edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        index: std::collections::BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                match self.index.get(w).copied() {
                    None => {
                        self.visit(w);
                        let low = self.index[w].1.min(self.index[v].1);
                        self.index.entry(v).and_modify(|e| e.1 = low);
                    }
                    Some((wi, _)) if self.stack.contains(&w) => {
                        let low = wi.min(self.index[v].1);
                        self.index.entry(v).and_modify(|e| e.1 = low);
                    }
                    Some(_) => {}
                }
            }
            let (vi, vl) = self.index[v];
            if vi == vl {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan { edges, index: Default::default(), stack: Vec::new(), out: Vec::new() };
    let nodes: std::collections::BTreeSet<&str> =
        edges.iter().flat_map(|(k, v)| std::iter::once(k.as_str()).chain(v.iter().map(String::as_str))).collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// The import cycles of one crate: among its top-level modules, and among
/// sibling files of one directory (a parent and its child modules may use
/// each other; that is how a module re-exports and how a child reaches its
/// parent's types). Each as `crate: a, b, c`.
fn crate_cycles(name: &str, src: &Path) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mods = modules(src);
    let known: BTreeSet<Vec<String>> = mods.iter().map(|(p, _)| p.clone()).collect();
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, code) in &mods {
        for r in references(path, code) {
            // The longest module the path lies in.
            let Some(target) = (1..=r.len()).rev().map(|n| r[..n].to_vec()).find(|p| known.contains(p)) else {
                continue;
            };
            if let (Some(a), Some(b)) = (path.first(), target.first()) {
                if a != b {
                    top.entry(a.clone()).or_default().insert(b.clone());
                }
            }
            let siblings = path.len() == target.len() && path[..path.len() - 1] == target[..target.len() - 1];
            if siblings && path.len() > 1 && path != &target {
                files.entry(path.join("/")).or_default().insert(target.join("/"));
            }
        }
    }
    let mut out: Vec<String> = cycles(&top).into_iter().map(|c| format!("{name}: {}", c.join(", "))).collect();
    out.extend(cycles(&files).into_iter().map(|c| format!("{name}: {}", c.join(", "))));
    out
}

/// Cycles that were there when this check was written, to be broken one by
/// one (issue 31). The check fails on any other cycle, and on a listed one
/// that is gone, so that this list only shrinks.
const KNOWN_CYCLES: &[&str] = &[];

/// Every member of the workspace (the root `Cargo.toml`'s
/// `[workspace] members`), as its package name and its `src` directory.
fn workspace_crates(root: &Path) -> Vec<(String, PathBuf)> {
    let read = |p: &Path| -> toml::Table {
        let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let workspace = read(&root.join("Cargo.toml"));
    let members = workspace
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(toml::Value::as_array)
        .expect("the root Cargo.toml lists [workspace] members");
    members
        .iter()
        .map(|m| {
            let dir = root.join(m.as_str().expect("a member is a path"));
            let manifest = read(&dir.join("Cargo.toml"));
            let name = manifest.get("package").and_then(|p| p.get("name")).and_then(toml::Value::as_str);
            (name.expect("a member has a package name").to_string(), dir.join("src"))
        })
        .collect()
}

/// No new import cycle between the top-level modules of a crate, or
/// between sibling files (docs/ARCHITECTURE.md, "Layout rules": modules
/// form a DAG), in every crate of the workspace: the list is read from the
/// root `Cargo.toml`, so a new member is checked without an edit here.
#[test]
fn modules_form_a_dag() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let crates = workspace_crates(&root);
    let names: Vec<&str> = crates.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["engine", "survey", "runs", "simengine", "sim-cli", "benches"] {
        assert!(names.contains(&expected), "the scan misses the crate {expected}: it read {names:?}");
    }
    for (name, src) in &crates {
        assert!(src.is_dir(), "{name}: no source directory {}", src.display());
    }
    let found: Vec<String> = crates.iter().flat_map(|(name, src)| crate_cycles(name, src)).collect();
    let new: Vec<&String> = found.iter().filter(|c| !KNOWN_CYCLES.contains(&c.as_str())).collect();
    let gone: Vec<&&str> = KNOWN_CYCLES.iter().filter(|k| !found.iter().any(|c| c == *k)).collect();
    assert!(new.is_empty(), "new import cycles (break them; modules form a DAG):\n{new:#?}");
    assert!(gone.is_empty(), "cycles broken: take them off KNOWN_CYCLES:\n{gone:#?}");
}

/// The scan: grouped imports, `super::`, comments and test code.
#[test]
fn the_scan_finds_a_cycle_and_ignores_comments_and_tests() {
    let m = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let refs =
        references(&m(&["turn", "stage"]), "use crate::{chat::X, error::{Error, Result}};\nuse super::converse::y;");
    assert_eq!(refs, vec![m(&["chat", "X"]), m(&["error"]), m(&["turn", "converse", "y"])]);
    let dir = std::env::temp_dir().join(format!("layout-scan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).expect("dir");
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").expect("write");
    std::fs::write(dir.join("a.rs"), "use crate::b::x;\n// crate::c::z\n").expect("write");
    std::fs::write(dir.join("b.rs"), "mod x;\nmod y;\npub use crate::a::thing;\n").expect("write");
    std::fs::write(dir.join("b/x.rs"), "use super::y::f;\n").expect("write");
    std::fs::write(dir.join("b/y.rs"), "use super::T;\n#[cfg(test)]\nmod tests { use super::super::x::g; }\n")
        .expect("write");
    std::fs::write(dir.join("c.rs"), "use crate::a::q;\n").expect("write");
    assert_eq!(crate_cycles("t", &dir), vec!["t: a, b".to_string()], "b/x -> b/y only: no file cycle");
    std::fs::write(dir.join("b/y.rs"), "use super::x::g;\n").expect("write");
    assert_eq!(crate_cycles("t", &dir), vec!["t: a, b".to_string(), "t: b/x, b/y".to_string()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The normal (not dev, not build) dependencies of the workspace crate at
/// `dir`, each with the directory of its manifest when it is a workspace
/// member (`None` for a registry crate).
fn dependencies(root: &Path, dir: &Path) -> Vec<(String, Option<PathBuf>)> {
    let read = |p: &Path| -> toml::Table {
        let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let workspace = read(&root.join("Cargo.toml"));
    let shared = workspace.get("workspace").and_then(|w| w.get("dependencies")).and_then(|d| d.as_table());
    let manifest = read(&dir.join("Cargo.toml"));
    let Some(deps) = manifest.get("dependencies").and_then(|d| d.as_table()) else { return Vec::new() };
    deps.iter()
        .map(|(name, spec)| {
            let inherited = spec.get("workspace").and_then(toml::Value::as_bool) == Some(true);
            let spec = if inherited { shared.and_then(|s| s.get(name)).unwrap_or(spec) } else { spec };
            let base = if inherited { root } else { dir };
            (name.clone(), spec.get("path").and_then(toml::Value::as_str).map(|p| base.join(p)))
        })
        .collect()
}

/// Every crate that `dir`'s crate depends on, directly or through other
/// workspace crates (a registry crate's own dependencies are not read: none
/// of them can reach back into the workspace).
fn closure(root: &Path, dir: &Path) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for (name, path) in dependencies(root, &d) {
            if seen.insert(name) {
                todo.extend(path);
            }
        }
    }
    seen
}

/// The persona panel does not compile FAISS: only the agents' workload
/// (the `agents` crate and the `field` crate under it) reaches it
/// (docs/ARCHITECTURE.md, "Layout rules"). This is what `cargo tree -p
/// actors` shows, checked without cargo.
#[test]
fn the_persona_path_does_not_depend_on_faiss() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let agents_only = ["faiss", "faiss-sys", "field", "agents"];
    for member in ["engine/core", "engine/experiment", "engine/providers", "actors"] {
        let deps = closure(&root, &root.join(member));
        let found: Vec<&&str> = agents_only.iter().filter(|d| deps.contains(**d)).collect();
        assert!(found.is_empty(), "{member} depends on {found:?}: {deps:?}");
    }
    // The scan itself: the agents' crate does reach FAISS, through `field`.
    let agents = closure(&root, &root.join("actors/agents"));
    assert!(agents.contains("field") && agents.contains("faiss"), "{agents:?}");
    assert!(agents.contains("engine") && agents.contains("ractor"), "{agents:?}");
}
