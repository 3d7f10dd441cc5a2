//! The contributors' docs name what exists: every file, type, function or
//! module that docs/ARCHITECTURE.md (its glossary included) names in
//! backticks is still in the tree. A rename that forgets the docs fails
//! here, naming the span.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The docs this check reads, from the workspace root.
const CHECKED: &[&str] = &["docs/ARCHITECTURE.md"];

/// The crate roots a path may start with: the workspace's crates (as Rust
/// spells them) and the language's own roots.
const ROOTS: &[&str] = &[
    "engine",
    "experiment",
    "field",
    "providers",
    "survey",
    "actors",
    "agents",
    "runs",
    "sim_cli",
    "simengine",
    "benches",
    "crate",
    "self",
    "super",
    "std",
];

/// What the sources define: for each `.rs` file (relative to the root,
/// with `/` separators), the names it declares (items, fields, variants,
/// inline modules and what it re-exports), and the types it implements.
#[derive(Default)]
struct Tree {
    files: BTreeSet<String>,
    defines: BTreeMap<String, BTreeSet<String>>,
    implements: BTreeMap<String, BTreeSet<String>>,
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifiers of `text`, in order.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !ident(c)).filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_'))
}

impl Tree {
    /// Adds one source file's declarations.
    fn add_source(&mut self, rel: &str, text: &str) {
        let (mut defines, mut implements) = (BTreeSet::new(), BTreeSet::new());
        if let Some(stem) = Path::new(rel).file_stem().and_then(|s| s.to_str()) {
            defines.insert(stem.to_string());
        }
        for line in text.lines() {
            let t = line.trim_start();
            if t.starts_with("//") {
                continue;
            }
            let mut it = words(t).peekable();
            while let Some(w) = it.next() {
                let keyword = matches!(w, "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "mod");
                if keyword || w == "macro_rules" {
                    if let Some(name) = it.peek() {
                        defines.insert((*name).to_string());
                    }
                }
            }
            if t.starts_with("pub use ") || t.starts_with("pub(crate) use ") {
                defines.extend(words(t).map(String::from));
            }
            if t.starts_with("impl") {
                // `impl<T> Trait for Type<T>` implements both names.
                implements
                    .extend(words(t).filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase())).map(String::from));
            }
            // A field, a variant or a declaration at the start of a line.
            let bare = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub ")).unwrap_or(t);
            let name: String = bare.chars().take_while(|c| ident(*c)).collect();
            let rest = bare[name.len()..].trim_start();
            let declares = rest.is_empty()
                || rest.starts_with([',', '(', '{'])
                || (rest.starts_with(':') && !rest.starts_with("::"));
            if !name.is_empty() && declares {
                defines.insert(name);
            }
        }
        self.files.insert(rel.to_string());
        self.defines.insert(rel.to_string(), defines);
        self.implements.insert(rel.to_string(), implements);
    }

    /// Adds a file that is not Rust source (docs, fixtures, scripts).
    fn add_file(&mut self, rel: &str) {
        self.files.insert(rel.to_string());
    }

    /// Whether `path` (a file or a directory, possibly given from inside a
    /// crate, as `runs/src/dir.rs`) exists.
    fn has_file(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        self.files.iter().any(|f| {
            f == path
                || f.ends_with(&format!("/{path}"))
                || f.starts_with(&format!("{path}/"))
                || f.contains(&format!("/{path}/"))
        })
    }

    /// Whether `name` is declared in some file.
    fn declared(&self, name: &str) -> bool {
        self.defines.values().any(|d| d.contains(name))
    }

    /// Whether `member` is declared where `owner` lives: in a file that
    /// declares or implements the type `owner`, or in the module `owner`'s
    /// file or directory.
    fn declared_in(&self, owner: &str, member: &str) -> bool {
        self.defines.iter().any(|(file, defs)| {
            if !defs.contains(member) {
                return false;
            }
            let module = Path::new(file).iter().any(|c| c.to_str() == Some(owner))
                || Path::new(file).file_stem().and_then(|s| s.to_str()) == Some(owner);
            let ty = self.implements.get(file).is_some_and(|i| i.contains(owner));
            module || ty || defs.contains(owner)
        })
    }
}

/// Every backticked span of `doc` that names a file or a Rust item and
/// names nothing in `tree`, each with the reason.
///
/// - A span with a `/` and no spaces is a file or directory.
/// - A path (`a::b::C`, `C::method`, `f()`) must resolve segment by
///   segment: each segment is declared where the one before it lives.
/// - A single CamelCase name, or a snake_case one with an underscore, must
///   be declared somewhere. Plain lowercase words (`commit`, `chat`) and
///   anything else (commands, config keys, TOML) are not read as names.
fn missing(doc: &str, tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    let spans: BTreeSet<&str> = doc.split('`').skip(1).step_by(2).filter(|s| !s.contains('\n')).collect();
    for span in spans {
        if span.contains('/') {
            let file_like = span.chars().all(|c| ident(c) || matches!(c, '.' | '-' | '/'));
            if file_like && !span.starts_with('/') && !tree.has_file(span) {
                out.push(format!("`{span}`: no such file or directory"));
            }
            continue;
        }
        let path = span.trim_end_matches("()").trim_end_matches("::");
        let segments: Vec<&str> = path.split("::").collect();
        if path.is_empty() || !segments.iter().all(|s| !s.is_empty() && s.chars().all(ident)) {
            continue;
        }
        let segments: Vec<&str> = segments.into_iter().skip_while(|s| ROOTS.contains(s)).collect();
        match segments.as_slice() {
            [] => {}
            [one] => {
                let camel =
                    one.starts_with(|c: char| c.is_ascii_uppercase()) && one.contains(|c: char| c.is_ascii_lowercase());
                let snake = one.contains('_') && one.chars().all(|c| !c.is_ascii_uppercase());
                if (camel || snake) && !tree.declared(one) {
                    out.push(format!("`{span}`: nothing declares {one}"));
                }
            }
            [first, rest @ ..] => {
                if !tree.declared(first) {
                    out.push(format!("`{span}`: nothing declares {first}"));
                    continue;
                }
                let mut owner = *first;
                for member in rest {
                    if !tree.declared_in(owner, member) {
                        out.push(format!("`{span}`: {owner} has no {member}"));
                        break;
                    }
                    owner = member;
                }
            }
        }
    }
    out
}

/// Every file under `dir` (not `target/`, `.git/`, fetched models), relative
/// to `root`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "models" | "node_modules" | ".venv") {
                walk(root, &p, out);
            }
        } else {
            out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
        }
    }
}

/// The workspace as [`missing`] reads it.
fn workspace_tree(root: &Path) -> Tree {
    let mut files = Vec::new();
    walk(root, root, &mut files);
    let mut tree = Tree::default();
    for f in files {
        let rel = f.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>().join("/");
        if rel.ends_with(".rs") {
            let text = std::fs::read_to_string(root.join(&f)).unwrap_or_default();
            tree.add_source(&rel, &text);
        } else {
            tree.add_file(&rel);
        }
    }
    tree
}

#[test]
fn the_architecture_doc_names_only_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tree = workspace_tree(&root);
    assert!(tree.declared("run_tick") && tree.has_file("engine/core/src/tick.rs"), "the scan read no sources");
    for doc in CHECKED {
        let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let gone = missing(&text, &tree);
        assert!(gone.is_empty(), "{doc} names what does not exist (rename it there too):\n{}", gone.join("\n"));
    }
}

/// The check itself: removing a named function, type or file makes it fail,
/// and words that are not names are left alone.
#[test]
fn removing_a_named_item_fails_the_check() {
    let source = "pub struct Book;\nimpl Book {\n    pub fn of_shard() {}\n}\npub fn run_tick() {}\n\
                  pub enum Split {\n    Merged,\n}\n";
    let doc = "`Book::of_shard` and `run_tick()` in `engine::tick::run_tick`, `Split::Merged`, \
               file `engine/core/src/tick.rs`, `engine/core/`; not names: `commit`, `cargo test`, \
               `chat.concurrency`, `[chat] mode = \"batch\"`, `SIMTRACE`.";
    let tree = |src: &str, with_file: bool| {
        let mut t = Tree::default();
        t.add_source("engine/core/src/tick.rs", src);
        if !with_file {
            t = Tree::default();
            t.add_source("engine/core/src/turn.rs", src);
        }
        t
    };
    assert_eq!(missing(doc, &tree(source, true)), Vec::<String>::new());
    let without = source.replace("pub fn of_shard() {}", "");
    assert_eq!(missing(doc, &tree(&without, true)), vec!["`Book::of_shard`: Book has no of_shard".to_string()]);
    let renamed = source.replace("run_tick", "drive_tick");
    assert_eq!(
        missing(doc, &tree(&renamed, true)),
        vec![
            "`engine::tick::run_tick`: tick has no run_tick".to_string(),
            "`run_tick()`: nothing declares run_tick".to_string()
        ]
    );
    let gone = missing(doc, &tree(source, false));
    assert!(gone.contains(&"`engine/core/src/tick.rs`: no such file or directory".to_string()), "{gone:?}");
}
