//! Reports for people (terminal), machines (JSON) and CI (JUnit XML), and the exit code.
//!
//! Every report counts scenarios, and all of them agree with the exit code: a run is conformant
//! (0) when something was tested, nothing failed that the baseline does not expect, no baseline
//! entry is stale, and the run was not interrupted (130).

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::baseline::{BaselineOutcome, ScenarioComparison, StaleEntry};
use crate::outcome::{RunReport, ScenarioResult, Status};
use crate::terminal::escape_controls as shown;
use tep_check::InvariantStatus;

mod check;
mod json;
mod junit;
mod text;

pub use check::*;
pub use json::*;
pub use junit::*;
pub use text::*;

/// Exit code: conformant.
pub const EXIT_CONFORMANT: u8 = 0;
/// Exit code: a failure the baseline does not expect, an errored scenario, a stale baseline
/// entry, or nothing tested.
pub const EXIT_NOT_CONFORMANT: u8 = 1;
/// Exit code: bad arguments, an unreadable file, an adapter that cannot start (before a report).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: interrupted (Ctrl-C), like a shell's 128 + SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The exit code of `tep run`.
pub fn exit_code(report: &RunReport, baseline: Option<&BaselineOutcome>) -> u8 {
    if report.interrupted {
        EXIT_INTERRUPTED
    } else if conformant(report, baseline) {
        EXIT_CONFORMANT
    } else {
        EXIT_NOT_CONFORMANT
    }
}

/// Whether the run is conformant. A run that judged no trace (everything skipped or errored)
/// tested nothing and is not.
pub fn conformant(report: &RunReport, baseline: Option<&BaselineOutcome>) -> bool {
    let clean = match baseline {
        Some(outcome) => outcome.is_clean(),
        None => !report.scenarios.iter().any(|s| s.fails(report.strict)),
    };
    clean && report.tested() && !report.interrupted
}

/// How one scenario counts in a report: exactly one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Only SHOULD-level violations, not `--strict`.
    Warned,
    /// A failure no baseline entry expects.
    Failed,
    /// No usable answer, and no baseline entry expects it.
    Errored,
    Skipped,
    /// Fails exactly as the baseline says.
    ExpectedFailure,
    /// A baseline entry for it no longer fails.
    Stale,
}

impl Verdict {
    /// The tag on a scenario's line.
    pub fn tag(self) -> &'static str {
        match self {
            Verdict::Passed => "PASS",
            Verdict::Warned => "WARN",
            Verdict::Failed => "FAIL",
            Verdict::Errored => "ERROR",
            Verdict::Skipped => "SKIP",
            Verdict::ExpectedFailure => "XFAIL",
            Verdict::Stale => "STALE",
        }
    }

    fn style(self) -> Style {
        match self {
            Verdict::Passed => AnsiColor::Green.on_default().bold(),
            Verdict::Warned | Verdict::Stale => AnsiColor::Yellow.on_default().bold(),
            Verdict::Failed | Verdict::Errored => AnsiColor::Red.on_default().bold(),
            Verdict::Skipped => AnsiColor::BrightBlack.on_default(),
            Verdict::ExpectedFailure => AnsiColor::Magenta.on_default().bold(),
        }
    }

    /// Whether it makes the run fail.
    pub fn fails_the_run(self) -> bool {
        matches!(self, Verdict::Failed | Verdict::Errored | Verdict::Stale)
    }
}

/// The verdict of one scenario, compared with the baseline when there is one.
pub fn verdict(
    result: &ScenarioResult,
    strict: bool,
    comparison: Option<&ScenarioComparison>,
) -> Verdict {
    let failed = || {
        if result.status == Status::Errored {
            Verdict::Errored
        } else {
            Verdict::Failed
        }
    };
    let fine = || {
        if result.status == Status::Warned {
            Verdict::Warned
        } else {
            Verdict::Passed
        }
    };
    if result.status == Status::Skipped {
        return Verdict::Skipped;
    }
    let fails = result.fails(strict);
    match comparison {
        None if fails => failed(),
        None => fine(),
        Some(c) if fails && !c.unexpected.is_empty() => failed(),
        Some(c) if !c.stale.is_empty() => Verdict::Stale,
        Some(_) if fails => Verdict::ExpectedFailure,
        Some(_) => fine(),
    }
}

fn verdict_in(
    report: &RunReport,
    baseline: Option<&BaselineOutcome>,
    result: &ScenarioResult,
) -> Verdict {
    let comparison = baseline.map(|b| b.comparisons.get(&result.id).cloned().unwrap_or_default());
    verdict(result, report.strict, comparison.as_ref())
}

/// Scenario counts: every selected scenario is counted once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Selected scenarios (those that did not run included).
    pub scenarios: usize,
    pub passed: usize,
    /// Only SHOULD-level violations (not failing without `--strict`).
    pub warned: usize,
    /// Failing, and not expected by the baseline.
    pub failed: usize,
    /// No usable answer, and not expected by the baseline.
    pub errored: usize,
    /// Not applicable, or skipped by the implementation.
    pub skipped: usize,
    /// Failing exactly as the baseline expects.
    pub expected_failures: usize,
    /// Scenarios with a stale baseline entry (one that no longer fails, or names a scenario the
    /// corpus does not have).
    pub stale: usize,
    /// Not run: the run was interrupted.
    pub not_run: usize,
}

/// The counts of a run.
pub fn counts(report: &RunReport, baseline: Option<&BaselineOutcome>) -> Counts {
    let mut counts = Counts {
        scenarios: report.scenarios.len() + report.not_run.len(),
        not_run: report.not_run.len(),
        ..Counts::default()
    };
    for result in &report.scenarios {
        let n = match verdict_in(report, baseline, result) {
            Verdict::Passed => &mut counts.passed,
            Verdict::Warned => &mut counts.warned,
            Verdict::Failed => &mut counts.failed,
            Verdict::Errored => &mut counts.errored,
            Verdict::Skipped => &mut counts.skipped,
            Verdict::ExpectedFailure => &mut counts.expected_failures,
            Verdict::Stale => &mut counts.stale,
        };
        *n += 1;
    }
    if let Some(b) = baseline {
        counts.stale += b.missing_scenarios.len();
    }
    counts
}

/// How a baseline entry that fails the run is reported: an entry naming no scenario of the
/// corpus is an unknown id (likely a typo: fix it, rather than remove it); any other no longer
/// fails (remove it).
fn stale_line(b: &BaselineOutcome, e: &StaleEntry) -> String {
    let scenario = e.id.split(':').next().unwrap_or_default();
    if b.missing_scenarios.contains(scenario) {
        format!("unknown id {}: {}", shown(&e.id), shown(&e.why))
    } else {
        format!("stale entry {}: {}; remove it", shown(&e.id), shown(&e.why))
    }
}

/// The line every text report ends with: `N passed, N failed, N skipped`, then the other
/// counts that are not zero. Every number counts scenarios.
pub fn summary_line(counts: &Counts) -> String {
    let mut line = format!(
        "{} passed, {} failed, {} skipped",
        counts.passed, counts.failed, counts.skipped
    );
    for (n, what) in [
        (counts.errored, "errored"),
        (counts.warned, "warned"),
        (counts.expected_failures, "failed as expected"),
        (counts.stale, "stale"),
        (counts.not_run, "not run"),
    ] {
        if n > 0 {
            let _ = write!(line, ", {n} {what}");
        }
    }
    line
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
    let partly: Vec<&str> = report
        .invariants
        .iter()
        .filter(|(_, s)| matches!(s, InvariantStatus::PartlyCheckable(_)))
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
    if !partly.is_empty() {
        let _ = write!(
            line,
            "; partly checkable at this level ({}): {}",
            partly.len(),
            partly.join(", ")
        );
    }
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
