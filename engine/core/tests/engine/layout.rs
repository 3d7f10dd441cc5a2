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
/// `Result` whose error is a bare `String` (CONVENTIONS.md, item 3). A
/// caller cannot tell a bad input from a broken disk in a string.
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
