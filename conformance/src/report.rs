//! Reports for people (terminal), machines (JSON) and CI (JUnit XML), and the exit code.

use std::fmt::Write as _;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde_json::{Value, json};
use tep_reference::graph::StageGraph;

use crate::baseline::BaselineOutcome;
use crate::checker::{InvariantStatus, Violation};
use crate::invariants::invariant;
use crate::protocol::PROTOCOL_VERSION;
use crate::runner::{RunReport, Status};

/// The exit code of `tep run`: 0 conformant, 1 violations (an unexpected failure, an errored
/// scenario, or a stale baseline entry). Usage and environment errors (2) happen before a report.
pub fn exit_code(report: &RunReport, baseline: Option<&BaselineOutcome>) -> i32 {
    i32::from(!conformant(report, baseline))
}

/// Whether the run is conformant.
pub fn conformant(report: &RunReport, baseline: Option<&BaselineOutcome>) -> bool {
    match baseline {
        Some(outcome) => outcome.is_clean(),
        None => !report.scenarios.iter().any(|s| s.fails(report.strict)),
    }
}

/// The line every report ends with: `N passed, N failed, N skipped` (and errored/warned when any).
pub fn summary_line(report: &RunReport) -> String {
    let mut line = format!(
        "{} passed, {} failed, {} skipped",
        report.count(Status::Passed),
        report.count(Status::Failed),
        report.count(Status::Skipped)
    );
    for status in [Status::Errored, Status::Warned] {
        let n = report.count(status);
        if n > 0 {
            let _ = write!(line, ", {n} {}", status.as_str());
        }
    }
    line
}

fn violation_lines(out: &mut String, v: &Violation) {
    let inv = invariant(v.invariant);
    let _ = writeln!(out, "        {} [{}] {}", v.invariant, v.level, v.message);
    let sources: Vec<String> = inv.sources.iter().map(ToString::to_string).collect();
    let _ = writeln!(out, "          {} ({})", inv.doc_link(), sources.join("; "));
}

/// The terminal report.
pub fn text(report: &RunReport, baseline: Option<&BaselineOutcome>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tep conformance: {} against {} ({} scenarios)\n",
        report.implementation.name,
        report.spec,
        report.scenarios.len()
    );
    for s in &report.scenarios {
        let tag = match (s.status, s.expected_failure) {
            (Status::Failed | Status::Errored | Status::Warned, true) => "XFAIL",
            (Status::Passed, _) => "PASS ",
            (Status::Warned, _) => "WARN ",
            (Status::Failed, _) => "FAIL ",
            (Status::Skipped, _) => "SKIP ",
            (Status::Errored, _) => "ERROR",
        };
        match &s.reason {
            Some(reason) => {
                let _ = writeln!(out, "{tag} {} \u{2014} {reason}", s.id);
            }
            None => {
                let _ = writeln!(out, "{tag} {}", s.id);
            }
        }
        for v in &s.violations {
            violation_lines(&mut out, v);
        }
        for note in &s.notes {
            let _ = writeln!(out, "        note: {}", note.message);
        }
        if let Some(stderr) = &s.stderr {
            let _ = writeln!(out, "        adapter stderr (tail):");
            for line in stderr.lines() {
                let _ = writeln!(out, "          | {line}");
            }
        }
    }
    let total = StageGraph::of(report.spec).edges().len();
    let _ = writeln!(
        out,
        "\nedge coverage: {}/{} edges of the {} stage graph ({:.0}%)",
        report.coverage.edges.len(),
        total,
        report.spec,
        report.edge_coverage() * 100.0
    );
    for missing in report.missing_edges() {
        let _ = writeln!(out, "  not taken: {missing}");
    }
    if !report.coverage.code_mode_edges.is_empty() {
        let _ = writeln!(
            out,
            "code mode edge coverage: {}/{} edges of the {} Code Mode graph ({:.0}%)",
            report.coverage.code_mode_edges.len(),
            StageGraph::code_mode(report.spec).edges().len(),
            report.spec,
            report.code_mode_edge_coverage() * 100.0
        );
        for missing in report.missing_code_mode_edges() {
            let _ = writeln!(out, "  not taken: {missing}");
        }
    }
    let _ = writeln!(out, "{}", invariants_line(report));
    if let Some(b) = baseline {
        let _ = writeln!(
            out,
            "baseline: {} expected failure(s), {} unexpected, {} stale",
            b.expected.len(),
            b.unexpected.len(),
            b.stale.len()
        );
        for u in &b.unexpected {
            let _ = writeln!(out, "  unexpected: {u}");
        }
        for s in &b.stale {
            let _ = writeln!(out, "  stale (now passes; remove it): {s}");
        }
    }
    let _ = writeln!(out, "{}", summary_line(report));
    out
}

/// Which invariants the run checked, and which it could not at its observation level.
pub fn invariants_line(report: &RunReport) -> String {
    let checked = report
        .invariants
        .iter()
        .filter(|(_, s)| *s == InvariantStatus::Checked)
        .count();
    let not_checkable: Vec<&str> = report
        .invariants
        .iter()
        .filter(|(_, s)| matches!(s, InvariantStatus::NotCheckable(_)))
        .map(|(id, _)| id.as_str())
        .collect();
    let not_applicable = report
        .invariants
        .iter()
        .filter(|(_, s)| matches!(s, InvariantStatus::NotApplicable(_)))
        .count();
    let mut line = format!(
        "observation level {}: {checked} invariants checked, {not_applicable} not applicable",
        report.level
    );
    if !not_checkable.is_empty() {
        let _ = write!(
            line,
            "; not checkable at this level ({}): {}",
            not_checkable.len(),
            not_checkable.join(", ")
        );
    }
    line
}

fn violation_json(v: &Violation) -> Value {
    let inv = invariant(v.invariant);
    json!({
        "invariant": v.invariant,
        "level": v.level,
        "lines": v.lines,
        "call": v.call,
        "message": v.message,
        "doc": inv.doc_link(),
        "sources": inv.sources.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

/// The machine-readable report (one JSON object).
pub fn json(report: &RunReport, baseline: Option<&BaselineOutcome>) -> Value {
    let scenarios: Vec<Value> = report
        .scenarios
        .iter()
        .map(|s| {
            let mut row = json!({ "id": s.id, "status": s.status });
            if !s.violations.is_empty() {
                row["violations"] = s.violations.iter().map(violation_json).collect();
            }
            if let Some(reason) = &s.reason {
                row["reason"] = json!(reason);
            }
            if let Some(stderr) = &s.stderr {
                row["stderr"] = json!(stderr);
            }
            if s.expected_failure {
                row["expected_failure"] = json!(true);
            }
            if !s.notes.is_empty() {
                row["notes"] = json!(s.notes);
            }
            row
        })
        .collect();
    json!({
        "tool": "tep",
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": PROTOCOL_VERSION,
        "spec": report.spec,
        "strict": report.strict,
        "implementation": report.implementation,
        "conformant": conformant(report, baseline),
        "passed": report.count(Status::Passed),
        "failed": report.count(Status::Failed),
        "skipped": report.count(Status::Skipped),
        "errored": report.count(Status::Errored),
        "warned": report.count(Status::Warned),
        "edge_coverage": report.edge_coverage(),
        "edges_taken": report.coverage.edges.len(),
        "edges_total": StageGraph::of(report.spec).edges().len(),
        "edges_missing": report.missing_edges(),
        "code_mode_edge_coverage": report.code_mode_edge_coverage(),
        "code_mode_edges_missing": report.missing_code_mode_edges(),
        "baseline": baseline,
        "observation": report.level,
        "invariants": report
            .invariants
            .iter()
            .map(|(id, status)| {
                let mut row = serde_json::to_value(status).unwrap_or(Value::Null);
                row["invariant"] = json!(id);
                row
            })
            .collect::<Vec<_>>(),
        "scenarios": scenarios,
    })
}

/// The JUnit XML report: one test case per scenario.
pub fn junit(report: &RunReport) -> Result<String, quick_junit::SerializeError> {
    let mut suite = TestSuite::new(format!("tep conformance ({})", report.spec));
    for s in &report.scenarios {
        let mut status = match s.status {
            Status::Passed | Status::Warned => TestCaseStatus::success(),
            Status::Skipped => {
                let mut st = TestCaseStatus::skipped();
                if let Some(reason) = &s.reason {
                    st.set_message(reason.clone());
                }
                st
            }
            Status::Failed => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                let first = s
                    .violations
                    .iter()
                    .find(|v| v.level == crate::invariants::Level::Must);
                if let Some(v) = first {
                    st.set_message(v.to_string());
                    st.set_type(v.invariant.as_str());
                }
                st
            }
            Status::Errored => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
                st.set_message(s.reason.clone().unwrap_or_default());
                st
            }
        };
        if !s.violations.is_empty() {
            let details: Vec<String> = s
                .violations
                .iter()
                .map(|v| format!("[{}] {v}", v.level))
                .collect();
            status.set_description(details.join("\n"));
        }
        let mut case = TestCase::new(s.id.clone(), status);
        case.set_classname(format!("tep.{}", report.spec));
        if let Some(stderr) = &s.stderr {
            case.set_system_err(stderr.clone());
        }
        suite.add_test_case(case);
    }
    let mut junit = Report::new("tep");
    junit.add_test_suite(suite);
    junit.to_string()
}
