//! The page of `tep report`: many runs side by side (their JSON reports), one column each,
//! the scenarios and the invariants as rows, each cell the verdict; a filter shows only the
//! rows where the runs differ, and a cell opens that run's scenario (its violations, witness
//! lines and steps) in a panel.
//!
//! Everything a run wrote (names, messages, reasons) is escaped, as on the single-run page,
//! and the page is self-contained under the same Content-Security-Policy.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use base64::Engine as _;
use sha2::{Digest, Sha256};
use tep_check::invariant;

use super::compare::{Comparison, fails};
use super::results::{first_failing, inline_code};
use super::{STYLE, escape, escape_text, implementation_line, status_class, status_tag};
use crate::report::{InvariantCheck, JsonReport, ScenarioReport};

const MATRIX_SCRIPT: &str = include_str!("matrix.js");

/// One run of the matrix: its file, as given, and its report.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub file: &'a str,
    pub report: &'a JsonReport,
}

/// What the matrix page shows.
#[derive(Debug, Clone, Copy)]
pub struct MatrixPage<'a> {
    pub runs: &'a [Run<'a>],
    /// What changed since an earlier run of one of them (`--compare`).
    pub compare: Option<&'a Comparison>,
    /// This tep's version.
    pub version: &'a str,
}

fn verdict(report: &JsonReport) -> (&'static str, &'static str) {
    if report.interrupted {
        ("interrupted", "interrupted")
    } else if report.conformant {
        ("conformant", "conformant")
    } else {
        ("not-conformant", "not conformant")
    }
}

/// The matrix page.
pub fn render(page: &MatrixPage<'_>) -> String {
    let mut out = String::with_capacity(128 * 1024);
    let script_hash =
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(MATRIX_SCRIPT));
    let n = page.runs.len();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{script_hash}'\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <meta name=\"generator\" content=\"tep {version}\">\n\
         <title>tep report: {n} run(s) side by side</title>\n\
         <link rel=\"icon\" href=\"data:,\">\n<style>\n{STYLE}</style>\n</head>\n<body class=\"matrix-page\">\n\
         <header>\n<h1><span>tep report</span> <span class=\"sub\">{n} run(s) side by side</span></h1>\n</header>\n<main>\n",
        version = escape(page.version),
    );
    let hashes: BTreeSet<&str> = page
        .runs
        .iter()
        .map(|r| r.report.corpus_hash.as_str())
        .collect();
    if hashes.len() > 1 {
        let _ = writeln!(
            out,
            "<p class=\"banner\" id=\"corpora-differ\">The corpora differ ({}): scenarios are compared by id, and a run without a scenario shows an empty cell.</p>",
            escape_text(&hashes.into_iter().collect::<Vec<_>>().join(", "))
        );
    }
    if let Some(c) = page.compare {
        super::compare::section(&mut out, c);
    }
    let _ = writeln!(
        out,
        "<div class=\"filters\" role=\"group\" aria-label=\"Filter the rows\">\
         <label><input type=\"checkbox\" id=\"only-differ\"> only where they differ</label>\
         <label><input type=\"checkbox\" id=\"only-failing\"> only where one fails</label>\
         <output id=\"shown\" aria-live=\"polite\"></output></div>"
    );
    let _ = writeln!(
        out,
        "<div class=\"matrix-scroll\"><table class=\"matrix\">\n<thead><tr><th scope=\"col\">Scenario</th>"
    );
    for (k, run) in page.runs.iter().enumerate() {
        let (class, text) = verdict(run.report);
        let c = &run.report.summary;
        let _ = writeln!(
            out,
            "<th scope=\"col\" class=\"run\" data-run=\"{k}\"><span class=\"who\">{}</span> <span class=\"verdict {class}\">{text}</span>\
             <span class=\"muted small\">{} · {} · {} failed, {} errored, {} passed</span><span class=\"muted small file\">{}</span></th>",
            escape_text(&implementation_line(run.report)),
            run.report.spec,
            run.report.observation,
            c.failed,
            c.errored,
            c.passed,
            escape_text(run.file),
        );
    }
    let _ = writeln!(out, "</tr></thead>\n<tbody class=\"scenarios\">");
    scenario_rows(&mut out, page.runs);
    let _ = writeln!(
        out,
        "</tbody>\n<tbody class=\"invariant-rows\"><tr class=\"group\"><th scope=\"colgroup\" colspan=\"{}\">Invariants: the scenarios that break each first</th></tr>",
        n + 1
    );
    invariant_rows(&mut out, page.runs);
    let _ = writeln!(out, "</tbody>\n</table></div>");
    let _ = writeln!(
        out,
        "<div id=\"cell-panel\" class=\"panel\" role=\"region\" aria-label=\"the selected cell\" aria-live=\"polite\" hidden tabindex=\"-1\">\
         <button type=\"button\" class=\"close\">close</button><div class=\"body\"></div></div>\n<div class=\"cell-details\" hidden>"
    );
    details(&mut out, page.runs);
    let _ = write!(
        out,
        "</div>\n</main>\n<footer>tep {}</footer>\n<script>{MATRIX_SCRIPT}</script>\n</body>\n</html>\n",
        escape(page.version)
    );
    out
}

/// Every scenario id of the runs, in the order the runs list them.
fn scenario_ids<'a>(runs: &[Run<'a>]) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    runs.iter()
        .flat_map(|r| r.report.scenarios.iter())
        .map(|s| s.id.as_str())
        .filter(|id| seen.insert(*id))
        .collect()
}

fn cell_id(k: usize, id: &str) -> String {
    format!("cell-{k}-{}", escape(id))
}

fn scenario_rows(out: &mut String, runs: &[Run<'_>]) {
    let by_id: Vec<BTreeMap<&str, &ScenarioReport>> = runs
        .iter()
        .map(|r| {
            r.report
                .scenarios
                .iter()
                .map(|s| (s.id.as_str(), s))
                .collect()
        })
        .collect();
    for id in scenario_ids(runs) {
        let cells: Vec<Option<&ScenarioReport>> =
            by_id.iter().map(|m| m.get(id).copied()).collect();
        let statuses: BTreeSet<&str> = cells
            .iter()
            .map(|c| c.map(status_class).unwrap_or("absent"))
            .collect();
        let failing = cells.iter().flatten().any(|s| fails(s));
        let _ = write!(
            out,
            "<tr class=\"row\" data-id=\"{}\" data-differ=\"{}\" data-failing=\"{failing}\"><th scope=\"row\" class=\"id\">{}</th>",
            escape(id),
            statuses.len() > 1,
            escape_text(id)
        );
        for (k, cell) in cells.iter().enumerate() {
            match cell {
                None => {
                    let _ = write!(
                        out,
                        "<td class=\"cell absent\" data-status=\"absent\">—</td>"
                    );
                }
                Some(s) => {
                    let first = first_failing(s, runs[k].report.strict)
                        .map(|v| format!(" <span class=\"small\">{}</span>", v.invariant.as_str()))
                        .unwrap_or_default();
                    let _ = write!(
                        out,
                        "<td class=\"cell {class}\" data-status=\"{class}\"><a href=\"#{cell}\" data-cell=\"{cell}\" aria-label=\"{who}: {id}: {tag}\"><span class=\"status\">{tag}</span>{first}</a></td>",
                        class = status_class(s),
                        cell = cell_id(k, id),
                        who = escape(&runs[k].report.implementation.name),
                        id = escape(id),
                        tag = status_tag(s),
                    );
                }
            }
        }
        let _ = writeln!(out, "</tr>");
    }
}

fn invariant_rows(out: &mut String, runs: &[Run<'_>]) {
    let ids = runs
        .first()
        .map(|r| {
            r.report
                .invariants
                .iter()
                .map(|i| i.invariant)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for id in ids {
        let mut cells = Vec::new();
        for run in runs {
            let status = run
                .report
                .invariants
                .iter()
                .find(|i| i.invariant == id)
                .map(|i| i.status);
            let failing = run
                .report
                .scenarios
                .iter()
                .filter(|s| fails(s))
                .filter(|s| first_failing(s, run.report.strict).is_some_and(|v| v.invariant == id))
                .count();
            cells.push(match (status, failing) {
                (_, n) if n > 0 => ("failed", format!("FAIL {n}")),
                (Some(InvariantCheck::Checked), _) => ("passed", "PASS".to_owned()),
                (Some(InvariantCheck::PartlyCheckable), _) => {
                    ("passed", "PASS (partly)".to_owned())
                }
                (Some(InvariantCheck::NotCheckable), _) => ("skipped", "not checkable".to_owned()),
                (Some(InvariantCheck::NotApplicable), _) => ("skipped", "n/a".to_owned()),
                (None, _) => ("absent", "—".to_owned()),
            });
        }
        let classes: BTreeSet<&str> = cells.iter().map(|(c, _)| *c).collect();
        let inv = invariant(id);
        let _ = write!(
            out,
            "<tr class=\"row invariant\" data-id=\"{id}\" data-differ=\"{}\" data-failing=\"{}\"><th scope=\"row\" class=\"id\" title=\"{}\">{id} <span class=\"level small\">{}</span></th>",
            classes.len() > 1,
            classes.contains("failed"),
            escape(inv.statement),
            inv.level,
            id = id.as_str(),
        );
        for (class, text) in cells {
            let _ = write!(
                out,
                "<td class=\"cell {class}\" data-status=\"{class}\"><span class=\"status\">{text}</span></td>"
            );
        }
        let _ = writeln!(out, "</tr>");
    }
}

/// Each cell's scenario as its run reported it, shown in the panel when the cell is opened.
fn details(out: &mut String, runs: &[Run<'_>]) {
    for (k, run) in runs.iter().enumerate() {
        for s in &run.report.scenarios {
            let _ = writeln!(
                out,
                "<div class=\"cell-detail\" id=\"{}\" data-run=\"{k}\" data-scenario=\"{}\"><h3><span class=\"status {class}\">{tag}</span> {} in {}</h3>",
                cell_id(k, &s.id),
                escape(&s.id),
                escape_text(&s.id),
                escape_text(&implementation_line(run.report)),
                class = status_class(s),
                tag = status_tag(s),
            );
            if let Some(reason) = &s.reason {
                let _ = writeln!(out, "<p>{}</p>", escape_text(reason));
            }
            if !s.violations.is_empty() {
                let _ = writeln!(out, "<ol class=\"violations\">");
                for v in &s.violations {
                    let mut place = Vec::new();
                    if !v.lines.is_empty() {
                        let lines: Vec<String> = v.lines.iter().map(ToString::to_string).collect();
                        place.push(format!("line {}", lines.join(", ")));
                    }
                    if let Some(call) = &v.call {
                        place.push(format!("call {}", escape_text(call)));
                    }
                    if let Some(step) = v.step.as_ref().filter(|_| super::on_the_graph(v)) {
                        place.push(format!(
                            "step {} --> {}{}",
                            step.from,
                            step.to,
                            if step.refused {
                                ", a step the graph does not have"
                            } else {
                                ""
                            }
                        ));
                    }
                    let _ = writeln!(
                        out,
                        "<li class=\"violation {}\"><b>{}</b><span class=\"level\">{}</span>{}<span class=\"statement\">{}</span><span class=\"where\">{}</span></li>",
                        v.level.to_string().to_lowercase(),
                        v.invariant.as_str(),
                        v.level,
                        escape_text(&v.message),
                        inline_code(invariant(v.invariant).statement),
                        place.join("; ")
                    );
                }
                let _ = writeln!(out, "</ol>");
            }
            if let Some(stderr) = &s.stderr {
                let _ = writeln!(out, "<pre class=\"stderr\">{}</pre>", escape_text(stderr));
            }
            if let Some(trace) = &s.trace {
                let _ = writeln!(
                    out,
                    "<p class=\"muted\">trace kept at <code>{}</code></p>",
                    escape_text(trace)
                );
            }
            let _ = writeln!(
                out,
                "<p class=\"muted\">{} stage-graph edge(s), {} Code Mode edge(s) taken; {:.3} s.</p></div>",
                s.edges.len(),
                s.code_mode_edges.len(),
                s.duration_seconds
            );
        }
    }
}
