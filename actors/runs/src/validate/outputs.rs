//! What a validation writes: its directory (`validate.json` marks one in
//! progress, so that the same command continues it), then `summary.json`,
//! `calibration.json`, `answers.csv` and `report.html`.

use super::ask::{Asked, Replies};
use super::figures::Summary;
use super::page;
use crate::dir::{ANSWERS, CALIBRATION, REPORT, SUMMARY, VALIDATION};
use crate::error::{refuse, Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use survey::score::Source;
use survey::Survey;

/// What a validation's directory records when it starts (`validate.json`),
/// so that the same command on an unfinished directory continues it,
/// serving the answers its chat logs already hold, and any other command is
/// refused there.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(super) struct Started {
    pub(super) suite: String,
    pub(super) inputs: String,
    pub(super) seed: u64,
    pub(super) respondents: usize,
    pub(super) config_hash: String,
    #[serde(default)]
    pub(super) given: Vec<String>,
    #[serde(default)]
    pub(super) weights: Option<String>,
}

/// The output directory: `out` (absent, empty, or an unfinished validation
/// of the same `started`), or a fresh `runs/validate-<suite>-s<seed>`.
/// Returns it with whether an unfinished validation is continued.
pub(super) fn prepare_out(out: Option<&Path>, started: &Started) -> Result<(PathBuf, bool)> {
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => crate::dir::fresh(&format!("runs/validate-{}-s{}", started.suite, started.seed)),
    };
    let empty = std::fs::read_dir(&path).map(|mut d| d.next().is_none()).unwrap_or(true);
    let marker = path.join(VALIDATION);
    let resumed = !empty && marker.exists() && !path.join(SUMMARY).exists();
    if resumed {
        let text = std::fs::read_to_string(&marker).map_err(Error::io(format!("cannot read {}", marker.display())))?;
        let theirs: Started = match serde_json::from_str(&text) {
            Ok(t) => t,
            Err(e) => refuse!("{}: not a validation's marker: {e}", marker.display()),
        };
        if theirs != *started {
            return Err(Error::Refused(format!(
                "output directory {} holds an unfinished validation of other inputs ({} seed {}, {} respondents, config {}, \
                 given [{}], weights {}); continue it with the command that started it, or choose another --out",
                path.display(),
                theirs.suite,
                theirs.seed,
                theirs.respondents,
                &theirs.config_hash[..12.min(theirs.config_hash.len())],
                theirs.given.join(", "),
                theirs.weights.as_deref().unwrap_or("none")
            )));
        }
    } else if !empty {
        return Err(Error::Refused(format!(
            "output directory {} already exists and is not empty; choose another --out or remove it",
            path.display()
        )));
    }
    std::fs::create_dir_all(&path).map_err(Error::io(format!("cannot create output directory {}", path.display())))?;
    let text =
        serde_json::to_string_pretty(started).map_err(|e| Error::Input(format!("cannot encode the marker: {e}")))?;
    std::fs::write(&marker, text).map_err(Error::io(format!("cannot write {}", marker.display())))?;
    Ok((path, resumed))
}

/// What the per-respondent file is made of.
pub(super) struct Table<'a> {
    pub(super) survey: &'a Survey,
    pub(super) respondents: &'a [survey::Respondent],
    pub(super) split: &'a [bool],
    pub(super) human: &'a [Vec<Option<u8>>],
    pub(super) runs: [&'a Replies; 2],
    pub(super) sources: &'a [Source],
}

/// Writes comparison.json into `out`.
pub(super) fn write_comparison(out: &Path, summary: &super::ComparisonSummary) -> Result<()> {
    let path = out.join(crate::dir::COMPARISON);
    let encoded = serde_json::to_string_pretty(summary)
        .map_err(|e| Error::Input(format!("cannot encode the comparison: {e}")))?;
    std::fs::write(&path, encoded).map_err(Error::io(format!("cannot write {}", path.display())))
}

/// Writes summary.json, answers.csv and report.html into `out`.
pub(super) fn write_outputs(out: &Path, summary: &Summary, t: &Table<'_>) -> Result<()> {
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let path = out.join(name);
        std::fs::write(&path, bytes).map_err(Error::io(format!("cannot write {}", path.display())))
    };
    let encoded =
        serde_json::to_string_pretty(summary).map_err(|e| Error::Input(format!("cannot encode the summary: {e}")))?;
    write(SUMMARY, encoded.as_bytes())?;
    if let Some(c) = &summary.calibration {
        let encoded =
            serde_json::to_string_pretty(c).map_err(|e| Error::Input(format!("cannot encode the calibration: {e}")))?;
        write(CALIBRATION, encoded.as_bytes())?;
    }
    let ssr = t.sources.iter().position(|s| s.name == "model (SSR)");
    let mut csv = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["respondent", "half", "question", "human", "model", "model_rerun"];
    if ssr.is_some() {
        header.extend(["model_ssr", "model_ssr_expected"]);
    }
    let probabilities = t.runs[0].iter().flatten().any(|a| a.probabilities.is_some());
    if probabilities {
        header.push("model_probabilities");
    }
    header.extend(["attempts", "attempts_rerun", "cost_nano_usd", "why"]);
    let to_csv = |e| crate::export::csv_error(e, "cannot write answers.csv");
    csv.write_record(&header).map_err(to_csv)?;
    let opt = |x: Option<u8>| x.map_or_else(String::new, |p| p.to_string());
    for (q, question) in t.survey.questions.iter().enumerate() {
        for (r, person) in t.respondents.iter().enumerate() {
            // In probabilities mode there is no second run.
            let (a, b): (&Asked, Option<&Asked>) = (&t.runs[0][q][r], t.runs[1].get(q).map(|c| &c[r]));
            let mut row = vec![
                person.id.clone(),
                if t.split[r] { "held_out" } else { "fitted" }.to_string(),
                question.id.clone(),
                opt(t.human[q][r]),
                opt(a.point),
                opt(b.and_then(|b| b.point)),
            ];
            if let Some(j) = ssr {
                let answer = t.sources[j].answers[q][r].as_ref();
                row.push(opt(answer.map(|x| x.point)));
                row.push(answer.map_or_else(String::new, |x| format!("{:.4}", survey::stats::mean(&x.pmf))));
            }
            if probabilities {
                let shares: Vec<String> =
                    a.probabilities.iter().flatten().map(|p| format!("{p:.6}")).collect::<Vec<_>>();
                row.push(shares.join(";"));
            }
            row.push(a.attempts.to_string());
            row.push(b.map_or_else(String::new, |b| b.attempts.to_string()));
            row.push((a.spend.nano_usd + b.map_or(0, |b| b.spend.nano_usd)).to_string());
            row.push(a.why.clone());
            csv.write_record(&row).map_err(to_csv)?;
        }
    }
    let bytes = csv.into_inner().map_err(|e| Error::Input(format!("cannot write {ANSWERS}: {e}")))?;
    write(ANSWERS, &bytes)?;
    write(REPORT, page::html(summary).as_bytes())?;
    Ok(())
}
