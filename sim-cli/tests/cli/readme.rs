//! The user guide's command list (`docs/GUIDE.md`, "Commands and flags")
//! agrees with `--help`: every command is listed, with every flag its
//! `--help` shows; and the guide's minimal scenario runs.

use crate::support::{scratch, sim};
use std::path::Path;

/// The subcommands a `--help` lists.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags a `--help` defines (the first long flag of each option
/// line), but --help and --version.
fn flags(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Options:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.trim_start().starts_with('-'))
        .filter_map(|l| l.split([' ', ',']).find(|w| w.starts_with("--")).map(str::to_string))
        .filter(|f| f != "--help" && f != "--version")
        .collect()
}

/// The user guide, where the command list and the scenario format live.
fn guide() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/GUIDE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The guide's command block, one entry per command (continuation lines
/// joined).
fn guide_entries() -> Vec<String> {
    let guide = guide();
    let block = guide.split("## Commands and flags").nth(1).expect("a \"Commands and flags\" section");
    let block = block.split("```").nth(1).expect("a code block");
    let mut entries: Vec<String> = Vec::new();
    for line in block.lines() {
        if line.starts_with("sim-cli") {
            entries.push(line.to_string());
        } else if let Some(last) = entries.last_mut() {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    // `sim-cli memory status|health|ready ...` lists three commands.
    entries
        .into_iter()
        .flat_map(|e| {
            let words: Vec<&str> = e.splitn(4, ' ').collect();
            match words.as_slice() {
                ["sim-cli", group, alternatives, rest]
                    if alternatives.contains('|') && !alternatives.starts_with('[') =>
                {
                    alternatives.split('|').map(|a| format!("sim-cli {group} {a} {rest}")).collect()
                }
                _ => vec![e],
            }
        })
        .collect()
}

#[test]
fn the_guide_lists_every_command_with_every_flag() {
    let dir = scratch("readme");
    let entries = guide_entries();
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut missing = Vec::new();
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = String::from_utf8_lossy(&sim(&dir, &args).stdout).into_owned();
        let subs = subcommands(&help);
        if !subs.is_empty() {
            queue.extend(subs.into_iter().map(|s| path.iter().cloned().chain([s]).collect()));
            continue;
        }
        let name = format!("sim-cli {}", path.join(" "));
        // `sim-cli memory COMMAND ...` holds what every memory command takes.
        let group = format!("sim-cli {} COMMAND ", path.first().map_or("", String::as_str));
        let mine: Vec<&String> = entries
            .iter()
            .filter(|e| {
                e.starts_with(&format!("{name} "))
                    || **e == name
                    || (path.len() > 1 && e.starts_with(&group))
                    || e.starts_with("sim-cli COMMAND ")
            })
            .collect();
        if !mine.iter().any(|e| !e.contains(" COMMAND ")) {
            missing.push(format!("{name}: not listed"));
            continue;
        }
        for flag in flags(&help) {
            if !mine.iter().any(|e| e.split(['[', ']', ' ', '|']).any(|w| w == flag)) {
                missing.push(format!("{name}: {flag}"));
            }
        }
    }
    assert!(missing.is_empty(), "the command list in docs/GUIDE.md lacks:\n{}", missing.join("\n"));
}

#[test]
fn the_guides_minimal_scenario_runs() {
    let guide = guide();
    let after = guide.split("A minimal scenario:").nth(1).expect("the minimal scenario");
    let toml = after.split("```toml").nth(1).and_then(|b| b.split("```").next()).expect("its TOML block");
    let dir = scratch("readme-scenario");
    std::fs::write(dir.join("s.toml"), toml).expect("write");
    let out = sim(&dir, &["run", "--scenario", "s.toml", "--personas", "4", "--ticks", "2", "--out", "r", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
