//! What changed since an earlier run (`--compare OLD.json`): the scenarios newly failing, the
//! fixed ones, the new ones and the ones gone, by scenario id. Reports of different corpora are
//! compared by id too, and the comparison says that the corpora differ.
//!
//! Also here: reading a JSON run report from a file, refusing one that is not a run report or
//! that a newer tep wrote.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::{escape, escape_text, status_class};
use crate::input::{InputError, MAX_REPORT_BYTES, read_bounded};
use crate::report::{JsonReport, ScenarioReport};

/// Why a file is not a run report this tep can read.
#[derive(Debug, thiserror::Error)]
pub enum ReadReportError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{file} is not a JSON run report of tep run (--json FILE): {why}")]
    NotAReport { file: String, why: String },
    #[error(
        "{file} was written by tep {theirs}, newer than this tep ({ours}): its report schema may hold what this one cannot read; use that tep or a newer one"
    )]
    Newer {
        file: String,
        theirs: String,
        ours: String,
    },
}

/// The part of a report read first: who wrote it, and which version of tep.
#[derive(serde::Deserialize)]
struct Head {
    tool: Option<String>,
    version: Option<String>,
    scenarios: Option<serde::de::IgnoredAny>,
}

/// Parses a JSON run report, named `file` in errors. `ours` is this tep's version: a report of
/// a newer one is refused (its schema is newer), before its fields are. Strict where a forged
/// value could mislead: a field named twice is refused with its line (serde's derive does it,
/// so the report is parsed typed, never through a `Value`, which keeps the last), and so is
/// a version that is not a semantic version, and a scenario id given twice.
pub fn parse_report(text: &str, file: &str, ours: &str) -> Result<JsonReport, ReadReportError> {
    let not = |why: String| ReadReportError::NotAReport {
        file: file.to_owned(),
        why,
    };
    let head: Head = serde_json::from_str(text).map_err(|e| {
        not(if e.is_data() {
            e.to_string()
        } else {
            format!("not JSON ({e})")
        })
    })?;
    if head.tool.as_deref() != Some("tep") || head.scenarios.is_none() {
        return Err(not(
            "it has no \"tool\": \"tep\" and \"scenarios\"".to_owned()
        ));
    }
    let theirs = head.version.unwrap_or_default();
    let parsed = semver::Version::parse(&theirs).map_err(|e| {
        not(format!(
            "its version {theirs:?} is not a semantic version like 0.1.0 ({e})"
        ))
    })?;
    // Pre-releases of one version read the same reports: only the numbers are compared.
    let numbers = |v: &semver::Version| (v.major, v.minor, v.patch);
    let newer = match semver::Version::parse(ours) {
        Ok(ours) => numbers(&parsed) > numbers(&ours),
        Err(_) => false,
    };
    if newer {
        return Err(ReadReportError::Newer {
            file: file.to_owned(),
            theirs,
            ours: ours.to_owned(),
        });
    }
    let report: JsonReport = serde_json::from_str(text).map_err(|e| not(e.to_string()))?;
    let mut ids = std::collections::BTreeSet::new();
    if let Some(twice) = report.scenarios.iter().find(|s| !ids.insert(s.id.as_str())) {
        return Err(not(format!(
            "scenario {} is listed twice: which of its results is the run's cannot be told",
            twice.id
        )));
    }
    Ok(report)
}

/// Reads and parses a JSON run report ([`parse_report`]), refusing one longer than
/// [`MAX_REPORT_BYTES`] (a device that never ends included) before parsing it.
pub fn read_report(path: &Path, ours: &str) -> Result<JsonReport, ReadReportError> {
    let file = path.display().to_string();
    let text = read_bounded(path, "run report", MAX_REPORT_BYTES)?;
    parse_report(&text, &file, ours)
}

/// What changed from one run to the next, by scenario id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// The earlier run's file, as given.
    pub old_file: String,
    /// The corpus hashes, when they differ.
    pub corpora: Option<(String, String)>,
    /// The implementations, when their names differ.
    pub implementations: Option<(String, String)>,
    /// Failing (or errored) now, and ran without failing before.
    pub newly_failing: Vec<String>,
    /// Failed (or errored) before, and ran without failing now.
    pub fixed: Vec<String>,
    /// Not in the earlier run.
    pub new_scenarios: Vec<String>,
    /// In the earlier run only.
    pub gone: Vec<String>,
}

/// A scenario makes its run fail: it failed or errored, unexpected by the baseline.
pub fn fails(s: &ScenarioReport) -> bool {
    matches!(status_class(s), "failed" | "errored")
}

fn ran(s: &ScenarioReport) -> bool {
    !matches!(status_class(s), "skipped")
}

/// Compares `new` with the earlier run `old` (read from `old_file`).
pub fn compare(old: &JsonReport, new: &JsonReport, old_file: &str) -> Comparison {
    let before: BTreeMap<&str, &ScenarioReport> =
        old.scenarios.iter().map(|s| (s.id.as_str(), s)).collect();
    let now: BTreeMap<&str, &ScenarioReport> =
        new.scenarios.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut c = Comparison {
        old_file: old_file.to_owned(),
        corpora: (old.corpus_hash != new.corpus_hash)
            .then(|| (old.corpus_hash.clone(), new.corpus_hash.clone())),
        implementations: (old.implementation.name != new.implementation.name).then(|| {
            (
                old.implementation.name.clone(),
                new.implementation.name.clone(),
            )
        }),
        ..Comparison::default()
    };
    for s in &new.scenarios {
        match before.get(s.id.as_str()) {
            None => c.new_scenarios.push(s.id.clone()),
            Some(b) if fails(s) && ran(b) && !fails(b) => c.newly_failing.push(s.id.clone()),
            Some(b) if fails(b) && ran(s) && !fails(s) => c.fixed.push(s.id.clone()),
            Some(_) => {}
        }
    }
    c.gone = old
        .scenarios
        .iter()
        .filter(|s| !now.contains_key(s.id.as_str()))
        .map(|s| s.id.clone())
        .collect();
    c
}

impl Comparison {
    /// The comparison for the terminal, a line each.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "compared with {}: {} newly failing, {} fixed, {} new scenario(s), {} gone",
            self.old_file,
            self.newly_failing.len(),
            self.fixed.len(),
            self.new_scenarios.len(),
            self.gone.len()
        )];
        if let Some((old, new)) = &self.corpora {
            lines.push(format!(
                "  the corpora differ ({old} then {new}): scenarios are compared by id"
            ));
        }
        if let Some((old, new)) = &self.implementations {
            lines.push(format!("  the implementations differ: {old} then {new}"));
        }
        for (what, ids) in [
            ("newly failing", &self.newly_failing),
            ("fixed", &self.fixed),
            ("new", &self.new_scenarios),
            ("gone", &self.gone),
        ] {
            if !ids.is_empty() {
                lines.push(format!("  {what}: {}", ids.join(", ")));
            }
        }
        lines
    }
}

/// The comparison on the single-run page, under the counts.
pub(super) fn section(out: &mut String, c: &Comparison) {
    let _ = writeln!(
        out,
        "<div class=\"comparison panel\" id=\"comparison\"><h3>Since {}</h3>",
        escape_text(&c.old_file)
    );
    if let Some((old, new)) = &c.corpora {
        let _ = writeln!(
            out,
            "<p class=\"banner\">The corpora differ ({} then {}): scenarios are compared by id.</p>",
            escape_text(old),
            escape_text(new)
        );
    }
    if let Some((old, new)) = &c.implementations {
        let _ = writeln!(
            out,
            "<p class=\"banner\">The implementations differ: {} then {}.</p>",
            escape_text(old),
            escape_text(new)
        );
    }
    let _ = writeln!(out, "<dl class=\"changes\">");
    for (what, class, ids) in [
        ("newly failing", "failed", &c.newly_failing),
        ("fixed", "passed", &c.fixed),
        ("new scenarios", "skipped", &c.new_scenarios),
        ("gone", "skipped", &c.gone),
    ] {
        let links: Vec<String> = ids
            .iter()
            .map(|id| {
                format!(
                    "<a class=\"to-scenario\" href=\"#scenario={}\">{}</a>",
                    escape(id),
                    escape_text(id)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "<dt class=\"{class}\">{what} <b>{}</b></dt><dd data-change=\"{}\">{}</dd>",
            ids.len(),
            what.replace(' ', "-"),
            if links.is_empty() {
                "none".to_owned()
            } else {
                links.join(", ")
            }
        );
    }
    let _ = writeln!(out, "</dl></div>");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_newer_or_foreign_file_is_refused_by_name() {
        let err = parse_report("{\"a\":1}", "x.json", "0.1.0").unwrap_err();
        assert!(
            matches!(err, ReadReportError::NotAReport { ref file, .. } if file == "x.json"),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("x.json is not a JSON run report")
        );
        let err = parse_report("not json", "y.json", "0.1.0").unwrap_err();
        assert!(err.to_string().contains("y.json"), "{err}");
        let newer = "{\"tool\":\"tep\",\"version\":\"0.2.0\",\"scenarios\":[]}";
        let err = parse_report(newer, "z.json", "0.1.0").unwrap_err();
        assert!(matches!(err, ReadReportError::Newer { .. }), "{err}");
        assert!(err.to_string().contains("z.json was written by tep 0.2.0"));
        // The same version is read (and then fails on its missing fields, as not a report).
        let err = parse_report(
            "{\"tool\":\"tep\",\"version\":\"0.1.0\",\"scenarios\":[]}",
            "w.json",
            "0.1.0",
        )
        .unwrap_err();
        assert!(matches!(err, ReadReportError::NotAReport { .. }), "{err}");
        let v10 = "{\"tool\":\"tep\",\"version\":\"0.10.0\",\"scenarios\":[]}";
        let err = parse_report(v10, "v.json", "0.9.9").unwrap_err();
        assert!(matches!(err, ReadReportError::Newer { .. }), "{err}");
    }

    #[test]
    fn a_version_that_is_not_semver_is_refused() {
        for version in [
            "18446744073709551616.0.0",
            " 9.0.0",
            "v9.0.0",
            "",
            "9",
            "9.0",
        ] {
            let text = serde_json::json!({"tool": "tep", "version": version, "scenarios": []});
            let err = parse_report(&text.to_string(), "f.json", "0.1.0").unwrap_err();
            assert!(
                err.to_string().contains("is not a semantic version"),
                "{version:?}: {err}"
            );
        }
        let missing = "{\"tool\":\"tep\",\"scenarios\":[]}";
        let err = parse_report(missing, "f.json", "0.1.0").unwrap_err();
        assert!(
            err.to_string().contains("is not a semantic version"),
            "{err}"
        );
    }
}
