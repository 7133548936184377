//! Reports for people (terminal), machines (JSON) and CI (JUnit XML), and the exit code.
//!
//! Every report counts scenarios, and all of them agree with the exit code: a run is conformant
//! (0) when something was tested, nothing failed that the baseline does not expect, no baseline
//! entry is stale, and the run was not interrupted (130).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use anstyle::{AnsiColor, Style};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tep_reference::graph::{EdgeId, GraphKind, NodeId, Revision, StageGraph};
use tep_reference::trace::{Capability, ObservationLevel};

use crate::baseline::{BaselineOutcome, ScenarioComparison, StaleEntry};
use crate::excerpt::TraceExcerpt;
use crate::protocol::{ImplementationInfo, PROTOCOL_VERSION, Ready};
use crate::runner::{Coverage, RunReport, ScenarioResult, Status};
use crate::terminal::escape_controls as shown;
use tep_check::catalog::invariant;
use tep_check::checker::{CheckOptions, CheckReport, InvariantStatus, StepRecord, Violation};
use tep_check::invariants::{InvariantId, Level};

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

// ---------------------------------------------------------------------------------------------
// text

/// What the reports need beyond the run: where its files are, how to rerun a scenario.
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// The command line that reruns a single scenario, up to (without) `--scenario ID`.
    pub rerun: Vec<String>,
    /// Where each kept trace was written.
    pub traces: BTreeMap<String, PathBuf>,
    /// The directory the failing scenarios' traces were kept in, when any was.
    pub run_dir: Option<PathBuf>,
    /// What the reports quote of each failing scenario's trace (the trace itself is not kept
    /// in memory).
    pub excerpts: BTreeMap<String, TraceExcerpt>,
}

impl RunContext {
    /// The shell command that reruns `scenario` alone.
    pub fn rerun_command(&self, scenario: &str) -> String {
        self.rerun
            .iter()
            .map(String::as_str)
            .chain(["--scenario", scenario])
            .map(quote)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One word for a POSIX shell.
pub fn quote(word: &str) -> String {
    shlex::try_quote(word)
        .map(|w| w.into_owned())
        .unwrap_or_else(|_| format!("'{}'", word.replace('\'', "'\\''").replace('\0', "")))
}

/// `text` in `style`; what `text` holds is shown, not obeyed (it may quote an implementation).
fn paint(style: Style, text: &str) -> String {
    format!("{style}{}{style:#}", shown(text))
}

const DIM: Style = AnsiColor::BrightBlack.on_default();
const BOLD: Style = Style::new().bold();

fn seconds(d: std::time::Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// A scenario's line, as it finishes: tag, duration, id, and why in a few words.
/// The text carries ANSI styles; the printer strips them when colour is off.
pub fn scenario_line(
    result: &ScenarioResult,
    strict: bool,
    comparison: Option<&ScenarioComparison>,
) -> String {
    let verdict = verdict(result, strict, comparison);
    let time = if result.status == Status::Skipped && result.duration.is_zero() {
        " ".repeat(10)
    } else {
        format!("[{:>8}]", seconds(result.duration))
    };
    let mut line = format!(
        "{} {} {}",
        paint(verdict.style(), &format!("{:>5}", verdict.tag())),
        paint(DIM, &time),
        shown(&result.id)
    );
    let why = match verdict {
        Verdict::Failed | Verdict::Warned => result
            .first_failing(strict)
            .map(|v| v.invariant.to_string())
            .or_else(|| result.reason.clone()),
        Verdict::ExpectedFailure => {
            comparison.map(|c| format!("expected: {}", c.reasons.join("; ")))
        }
        Verdict::Stale => comparison.map(|c| {
            c.stale
                .iter()
                .map(|s| format!("stale baseline entry {}", s.id))
                .collect::<Vec<_>>()
                .join("; ")
        }),
        Verdict::Errored | Verdict::Skipped => result.reason.clone(),
        Verdict::Passed => None,
    };
    if let Some(why) = why {
        let _ = write!(line, "  {}", paint(DIM, &why));
    }
    line.push('\n');
    for note in &result.notes {
        let _ = writeln!(
            line,
            "        {}",
            paint(DIM, &format!("note: {}", note.message))
        );
    }
    line
}

/// The longest trace line quoted, in characters.
const QUOTE_WIDTH: usize = 160;
/// Scenarios listed one line each under a failure group, beyond its first.
const GROUP_LINES: usize = 10;

/// The witness lines of `v`, with a line of context around each, from `trace`'s JSON Lines.
fn quote_witnesses(out: &mut String, excerpt: &TraceExcerpt, v: &Violation, indent: &str) {
    let witnesses: BTreeSet<usize> = v.lines.iter().copied().collect();
    let quoted: BTreeSet<usize> = witnesses
        .iter()
        .flat_map(|&n| [n.saturating_sub(1), n, n + 1])
        .filter(|&n| n >= 1 && n <= excerpt.total)
        .collect();
    let width = quoted.iter().max().map_or(1, |n| n.to_string().len());
    let mut previous = None;
    for n in quoted {
        if previous.is_some_and(|p| p + 1 < n) {
            let _ = writeln!(
                out,
                "{indent}{}",
                paint(DIM, &format!("  {:>width$} \u{2502}", "\u{22ee}"))
            );
        }
        previous = Some(n);
        let text = excerpt.line(n).unwrap_or_default();
        let text: String = if text.chars().count() > QUOTE_WIDTH {
            text.chars().take(QUOTE_WIDTH).chain(['\u{2026}']).collect()
        } else {
            text.to_owned()
        };
        if witnesses.contains(&n) {
            let _ = writeln!(
                out,
                "{indent}{} {}",
                paint(BOLD, &format!("> {n:>width$} \u{2502}")),
                shown(&text)
            );
        } else {
            let _ = writeln!(
                out,
                "{indent}{}",
                paint(DIM, &format!("  {n:>width$} \u{2502} {text}"))
            );
        }
    }
}

fn doc_line(id: InvariantId) -> String {
    let inv = invariant(id);
    let sources: Vec<String> = inv.sources.iter().map(ToString::to_string).collect();
    format!("{} ({})", inv.doc_link(), sources.join("; "))
}

fn failure_detail(out: &mut String, result: &ScenarioResult, strict: bool, ctx: &RunContext) {
    let Some(first) = result.first_failing(strict) else {
        return;
    };
    let _ = writeln!(
        out,
        "    {}: {}",
        paint(BOLD, &result.id),
        shown(&first.message)
    );
    let others: Vec<&Violation> = result
        .violations
        .iter()
        .filter(|v| !std::ptr::eq(*v, first))
        .collect();
    for v in others.iter().take(3) {
        let _ = writeln!(
            out,
            "      also: {} [{}] {}",
            v.invariant,
            v.level,
            shown(&v.message)
        );
    }
    if others.len() > 3 {
        let _ = writeln!(out, "      and {} more violation(s)", others.len() - 3);
    }
    if let Some(excerpt) = ctx.excerpts.get(&result.id) {
        match ctx.traces.get(&result.id) {
            Some(path) => {
                let _ = writeln!(out, "      trace {}:", shown(&path.display().to_string()));
            }
            None => {
                let _ = writeln!(out, "      trace:");
            }
        }
        quote_witnesses(out, excerpt, first, "        ");
    }
    let _ = writeln!(out, "      rerun: {}", ctx.rerun_command(&result.id));
}

fn compact_line(out: &mut String, result: &ScenarioResult, strict: bool) {
    let Some(first) = result.first_failing(strict) else {
        return;
    };
    let more = result.violations.len() - 1;
    let more = if more > 0 {
        format!(" (+{more} more)")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "    {}: {}{more}",
        shown(&result.id),
        shown(&first.message)
    );
}

/// Everything after the scenarios' lines: the failures grouped by the invariant each scenario
/// breaks first (one root cause, one group), the errored scenarios, warnings, coverage, the
/// baseline, where the traces are, the failed scenarios, and the summary line last (ending with
/// the run's wall time).
pub fn closing(report: &RunReport, baseline: Option<&BaselineOutcome>, ctx: &RunContext) -> String {
    let closing = Closing::classify(report, baseline);
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = closing.write(&mut out, report, baseline, ctx);
    out
}

/// What the closing report says, classified before it is written: each scenario's verdict, the
/// failures grouped by the invariant each breaks first, the errored ones by cause, the
/// warnings by invariant.
struct Closing<'a> {
    verdicts: Vec<(Verdict, &'a ScenarioResult)>,
    /// In catalog order, MUST first.
    failures: BTreeMap<(Level, usize, InvariantId), Vec<&'a ScenarioResult>>,
    /// One cause (the same message), one group, in the order first seen.
    errored: Vec<(&'a str, Vec<&'a ScenarioResult>)>,
    warned: BTreeMap<InvariantId, Vec<&'a ScenarioResult>>,
}

impl<'a> Closing<'a> {
    fn classify(report: &'a RunReport, baseline: Option<&BaselineOutcome>) -> Self {
        let verdicts: Vec<(Verdict, &ScenarioResult)> = report
            .scenarios
            .iter()
            .map(|s| (verdict_in(report, baseline, s), s))
            .collect();
        let mut failures: BTreeMap<(Level, usize, InvariantId), Vec<&ScenarioResult>> =
            BTreeMap::new();
        let mut errored: Vec<&ScenarioResult> = Vec::new();
        let mut warned: BTreeMap<InvariantId, Vec<&ScenarioResult>> = BTreeMap::new();
        for (verdict, result) in &verdicts {
            match verdict {
                Verdict::Failed => match result.first_failing(report.strict) {
                    Some(v) => failures
                        .entry((v.level, v.invariant as usize, v.invariant))
                        .or_default()
                        .push(result),
                    None => errored.push(result),
                },
                Verdict::Errored => errored.push(result),
                Verdict::Warned => {
                    if let Some(v) = result.violations.first() {
                        warned.entry(v.invariant).or_default().push(result);
                    }
                }
                _ => {}
            }
        }
        let mut causes: Vec<(&str, Vec<&ScenarioResult>)> = Vec::new();
        for result in errored {
            let reason = result.reason.as_deref().unwrap_or("errored");
            match causes.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, results)) => results.push(result),
                None => causes.push((reason, vec![result])),
            }
        }
        Closing {
            verdicts,
            failures,
            errored: causes,
            warned,
        }
    }

    fn write(
        &self,
        out: &mut String,
        report: &RunReport,
        baseline: Option<&BaselineOutcome>,
        ctx: &RunContext,
    ) -> std::fmt::Result {
        self.write_failures(out, report.strict, ctx)?;
        self.write_errored(out, ctx)?;
        self.write_warnings(out)?;
        out.push('\n');
        write_coverage(out, report)?;
        writeln!(out, "{}", invariants_line(report))?;
        let counts = counts(report, baseline);
        if let Some(b) = baseline {
            write_baseline(out, b, &counts)?;
        }
        self.write_kept_traces(out, ctx)?;
        self.write_failed_list(out, report.strict)?;
        write_ending(out, report, &counts)
    }

    fn write_failures(&self, out: &mut String, strict: bool, ctx: &RunContext) -> std::fmt::Result {
        if self.failures.is_empty() {
            return Ok(());
        }
        let failing: usize = self.failures.values().map(Vec::len).sum();
        writeln!(
            out,
            "\n{} {failing} scenario(s), grouped by the invariant each breaks first",
            paint(AnsiColor::Red.on_default().bold(), "FAILURES:")
        )?;
        for ((level, _, id), results) in &self.failures {
            writeln!(
                out,
                "\n  {} [{level}]: {} scenario(s)",
                paint(BOLD, id.as_str()),
                results.len()
            )?;
            writeln!(out, "    {}", invariant(*id).statement)?;
            writeln!(out, "    {}", paint(DIM, &doc_line(*id)))?;
            let mut results = results.iter();
            if let Some(first) = results.next() {
                failure_detail(out, first, strict, ctx);
            }
            let rest: Vec<_> = results.collect();
            for result in rest.iter().take(GROUP_LINES) {
                compact_line(out, result, strict);
            }
            if rest.len() > GROUP_LINES {
                writeln!(
                    out,
                    "    and {} more (listed below)",
                    rest.len() - GROUP_LINES
                )?;
            }
        }
        Ok(())
    }

    fn write_errored(&self, out: &mut String, ctx: &RunContext) -> std::fmt::Result {
        if self.errored.is_empty() {
            return Ok(());
        }
        let n: usize = self.errored.iter().map(|(_, results)| results.len()).sum();
        writeln!(
            out,
            "\n{} {n} scenario(s) without a usable answer, grouped by what went wrong",
            paint(AnsiColor::Red.on_default().bold(), "ERRORED:"),
        )?;
        // The first of a cause in full, the others by name.
        for (reason, results) in &self.errored {
            writeln!(
                out,
                "\n  {}: {} scenario(s)",
                paint(BOLD, reason),
                results.len()
            )?;
            let mut results = results.iter();
            if let Some(first) = results.next() {
                writeln!(out, "    {}", paint(BOLD, &first.id))?;
                if let Some(stderr) = &first.stderr {
                    writeln!(out, "      adapter stderr (tail):")?;
                    for line in stderr.lines() {
                        writeln!(out, "        | {}", shown(line))?;
                    }
                }
                writeln!(out, "      rerun: {}", ctx.rerun_command(&first.id))?;
            }
            let rest: Vec<_> = results.collect();
            for result in rest.iter().take(GROUP_LINES) {
                writeln!(out, "    {}", shown(&result.id))?;
            }
            if rest.len() > GROUP_LINES {
                writeln!(
                    out,
                    "    and {} more (listed below)",
                    rest.len() - GROUP_LINES
                )?;
            }
        }
        Ok(())
    }

    fn write_warnings(&self, out: &mut String) -> std::fmt::Result {
        if self.warned.is_empty() {
            return Ok(());
        }
        let n: usize = self.warned.values().map(Vec::len).sum();
        writeln!(
            out,
            "\n{} {n} scenario(s) with SHOULD-level violations only (they fail only with --strict)",
            paint(AnsiColor::Yellow.on_default().bold(), "WARNINGS:")
        )?;
        for (id, results) in &self.warned {
            writeln!(out, "  {} [SHOULD]: {}", id, paint(DIM, &doc_line(*id)))?;
            for result in results.iter().take(GROUP_LINES) {
                compact_line(out, result, true);
            }
            if results.len() > GROUP_LINES {
                writeln!(out, "    and {} more", results.len() - GROUP_LINES)?;
            }
        }
        Ok(())
    }

    fn write_kept_traces(&self, out: &mut String, ctx: &RunContext) -> std::fmt::Result {
        let kept_failing = self.verdicts.iter().any(|(v, s)| {
            !matches!(v, Verdict::Passed | Verdict::Skipped) && ctx.traces.contains_key(&s.id)
        });
        if let Some(dir) = ctx.run_dir.as_ref().filter(|_| kept_failing) {
            writeln!(
                out,
                "traces of the failing scenarios: {}{}<scenario>.jsonl",
                shown(&dir.display().to_string()),
                std::path::MAIN_SEPARATOR
            )?;
        }
        Ok(())
    }

    fn write_failed_list(&self, out: &mut String, strict: bool) -> std::fmt::Result {
        let failed: Vec<&(Verdict, &ScenarioResult)> = self
            .verdicts
            .iter()
            .filter(|(v, _)| v.fails_the_run())
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        writeln!(out, "failed scenarios ({}):", failed.len())?;
        for (verdict, result) in failed {
            let why = match verdict {
                Verdict::Failed => result
                    .first_failing(strict)
                    .map(|v| v.invariant.to_string())
                    .unwrap_or_default(),
                Verdict::Stale => "stale baseline entry".to_owned(),
                _ => result.reason.clone().unwrap_or_default(),
            };
            writeln!(
                out,
                "  {} {}  {}",
                paint(verdict.style(), &format!("{:>5}", verdict.tag())),
                shown(&result.id),
                paint(DIM, &why)
            )?;
        }
        Ok(())
    }
}

/// The edge coverage of both graphs, and the edges not taken or not seen.
fn write_coverage(out: &mut String, report: &RunReport) -> std::fmt::Result {
    let total = StageGraph::of(report.spec).edges().len();
    writeln!(
        out,
        "edge coverage: {}/{} edges of the {} stage graph ({:.0}%)",
        report.coverage.taken(),
        total,
        report.spec,
        report.edge_coverage() * 100.0
    )?;
    let c = &report.coverage;
    // With no trace judged, every edge is missing and listing them says nothing.
    if report.tested() {
        below_full(out, report, c.edges.len(), c.implied_edges.len());
        for missing in report.missing_edges() {
            writeln!(out, "  not taken: {missing}")?;
        }
        for unseen in report.unseen_edges() {
            writeln!(out, "  not seen at level {}: {unseen}", report.level)?;
        }
    }
    if c.code_mode_taken() > 0 {
        writeln!(
            out,
            "code mode edge coverage: {}/{} edges of the {} Code Mode graph ({:.0}%)",
            c.code_mode_taken(),
            StageGraph::code_mode(report.spec).edges().len(),
            report.spec,
            report.code_mode_edge_coverage() * 100.0
        )?;
        let (observed, implied) = (c.code_mode_edges.len(), c.implied_code_mode_edges.len());
        below_full(out, report, observed, implied);
        for missing in report.missing_code_mode_edges() {
            writeln!(out, "  not taken: {missing}")?;
        }
        for unseen in report.unseen_code_mode_edges() {
            writeln!(out, "  not seen at level {}: {unseen}", report.level)?;
        }
    }
    Ok(())
}

fn write_baseline(out: &mut String, b: &BaselineOutcome, counts: &Counts) -> std::fmt::Result {
    writeln!(
        out,
        "baseline {}: {} scenario(s) failed as expected, {} unexpectedly, {} stale",
        shown(&b.path),
        counts.expected_failures,
        counts.failed + counts.errored,
        counts.stale
    )?;
    for u in &b.unexpected {
        writeln!(out, "  unexpected: {}", shown(u))?;
    }
    for s in &b.stale {
        writeln!(out, "  {}", stale_line(b, s))?;
    }
    Ok(())
}

/// What did not run, a run that tested nothing, and the summary with the wall time last (as
/// nextest's summary has it).
fn write_ending(out: &mut String, report: &RunReport, counts: &Counts) -> std::fmt::Result {
    if report.interrupted {
        writeln!(
            out,
            "{} {} of {} selected scenario(s) did not run; the reports cover the rest",
            paint(AnsiColor::Yellow.on_default().bold(), "interrupted:"),
            report.not_run.len(),
            counts.scenarios
        )?;
    }
    if !report.tested() {
        writeln!(
            out,
            "{} no scenario passed or failed ({} skipped, {} errored): a run that tests nothing is not conformant",
            paint(AnsiColor::Red.on_default().bold(), "nothing was tested:"),
            report.count(Status::Skipped),
            report.count(Status::Errored)
        )?;
    }
    writeln!(
        out,
        "{} in {}",
        summary_line(counts),
        seconds(report.duration)
    )
}

// ---------------------------------------------------------------------------------------------
// tep check

/// One checked trace (`tep check`) as a run of one scenario, the trace itself, so that a check
/// has the reports of a run (the HTML report): the trace passes, warns (SHOULD violations only)
/// or fails like a scenario, and one that holds no batch tested nothing. The implementation is
/// the one the trace's header names, at the options' revision, capabilities and level.
pub fn run_of_check(
    name: &str,
    implementation: Option<&str>,
    options: &CheckOptions,
    check: CheckReport,
    strict: bool,
) -> RunReport {
    let status = if check.batches == 0 {
        Status::Skipped
    } else if check.violations.iter().any(|v| v.level == Level::Must) {
        Status::Failed
    } else if check.violations.is_empty() {
        Status::Passed
    } else {
        Status::Warned
    };
    let edges = Coverage::of(&check);
    let steps = check.steps;
    let result = ScenarioResult {
        id: name.to_owned(),
        status,
        violations: check.violations,
        notes: Vec::new(),
        reason: (status == Status::Skipped).then(|| {
            "nothing was checked: the trace holds no batch (no `model` record)".to_owned()
        }),
        stderr: None,
        expected_failure: false,
        duration: std::time::Duration::ZERO,
        trace: None,
        edges: edges.clone(),
        steps,
    };
    RunReport {
        ready: Ready {
            ready: true,
            protocol: PROTOCOL_VERSION,
            implementation: ImplementationInfo {
                name: implementation
                    .unwrap_or("an implementation the trace does not name")
                    .to_owned(),
                version: None,
                language: None,
                homepage: None,
            },
            capabilities: match &options.capabilities {
                Some(caps) => caps.iter().copied().collect(),
                None => Capability::ALL.to_vec(),
            },
            specs: vec![options.revision],
            observation: Some(options.level),
        },
        spec: options.revision,
        level: options.level,
        strict,
        scenarios: vec![result],
        coverage: edges,
        invariants: options.statuses(),
        interrupted: false,
        not_run: Vec::new(),
        duration: std::time::Duration::ZERO,
    }
}

// ---------------------------------------------------------------------------------------------
// JSON

/// The JSON report of `tep run` (`--format json`, `--json FILE`); its schema is
/// `docs/schemas/run-report.schema.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonReport {
    /// Always `tep`.
    pub tool: String,
    /// The suite's version.
    pub version: String,
    /// `sha256:…` of the embedded scenario corpus (see `tep --version`).
    pub corpus_hash: String,
    /// The adapter protocol version the runner speaks.
    pub protocol: u32,
    /// The spec revision tested against.
    pub spec: Revision,
    /// SHOULD-level violations fail the run too.
    pub strict: bool,
    /// The observation level the traces were checked at.
    pub observation: ObservationLevel,
    /// Who was tested, from its handshake.
    pub implementation: ImplementationReport,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// Wall time of the whole run, in seconds.
    pub duration_seconds: f64,
    /// The exit code `tep run` ends with: 0 conformant, 1 not, 130 interrupted.
    pub exit_code: u8,
    /// Something was tested, nothing failed unexpectedly, no baseline entry is stale, and the
    /// run was not interrupted.
    pub conformant: bool,
    /// At least one scenario passed or failed.
    pub tested: bool,
    /// Ctrl-C stopped the run: `notRun` lists what did not run.
    pub interrupted: bool,
    /// Scenario counts.
    pub summary: Counts,
    pub coverage: CoverageReport,
    /// Every invariant, and whether this run could check it.
    pub invariants: Vec<InvariantReport>,
    /// The comparison with `--baseline`, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineReport>,
    /// The directory the failing scenarios' traces were kept in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_directory: Option<String>,
    /// The scenarios, in corpus order.
    pub scenarios: Vec<ScenarioReport>,
    /// Selected scenarios that did not run (interrupted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
}

/// The implementation, as its handshake (`ready`) describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImplementationReport {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
    /// The adapter protocol version it speaks.
    pub protocol: u32,
    pub capabilities: Vec<Capability>,
    /// The spec revisions it implements.
    pub specs: Vec<Revision>,
    /// The observation level it declares.
    pub observation: ObservationLevel,
}

/// Edge coverage of both graphs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoverageReport {
    /// The revision's stage graph.
    pub edges: EdgeCoverage,
    /// The revision's Code Mode graph, taken by sub-calls.
    pub code_mode_edges: EdgeCoverage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EdgeCoverage {
    pub taken: usize,
    pub total: usize,
    /// `taken / total`, from 0 to 1.
    pub ratio: f64,
    /// Of `taken`, the edges no trace recorded but the records around them imply (only below
    /// level `full`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub implied: usize,
    /// The edges no trace took, of those the run's level records.
    pub missing: Vec<String>,
    /// The edges the run's level does not record and no trace implied: neither taken nor
    /// missing, as far as the level can tell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<String>,
    /// Every edge of the graph in declaration order, with how many scenarios took it. An edge's
    /// index here is its number: in a scenario's `edges`, a violation's `step`, and the
    /// `data-edge` of its group in the docs' SVG picture of the graph.
    pub edges: Vec<EdgeTaken>,
}

/// One edge of a graph, and how many scenarios took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EdgeTaken {
    /// As the flowchart prints it: `pre -->|deny| denied`.
    pub edge: String,
    pub from: NodeId,
    pub to: NodeId,
    /// How many scenarios' traces took it (recorded or implied).
    pub scenarios: usize,
    /// Of those, how many only imply it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub implied: usize,
}

/// Whether the run could check an invariant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvariantReport {
    pub invariant: InvariantId,
    pub status: InvariantCheck,
    /// Why it was not checkable or not applicable; what it still catches when partly checkable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InvariantCheck {
    Checked,
    /// Some of its breaches are caught at this level; `why` says which.
    PartlyCheckable,
    /// The observation level lacks the records the check reads, or does not record its breach.
    NotCheckable,
    /// Outside the revision, or about a part the implementation does not declare.
    NotApplicable,
}

/// The comparison with the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaselineReport {
    /// The baseline file.
    pub file: String,
    /// Entries that matched a failure.
    pub expected: Vec<String>,
    /// Failures no entry lists (`scenario:invariant`, or `scenario (errored)`).
    pub unexpected: Vec<String>,
    /// Entries to remove.
    pub stale: Vec<StaleEntry>,
}

/// One scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioReport {
    pub id: String,
    pub status: Status,
    /// How long the implementation and the checker took over it, in seconds.
    pub duration_seconds: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<ViolationReport>,
    /// Information that is no verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<NoteReport>,
    /// Why it was skipped or errored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The tail of the adapter's stderr, for errored scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// It fails exactly as the baseline expects.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expected_failure: bool,
    /// The reasons of the baseline entries that expect its failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_reason: Option<String>,
    /// Where its trace was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The edges of the stage graph its trace took (their numbers: `coverage.edges.edges`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<usize>,
    /// The edges of the Code Mode graph its sub-calls took (`coverage.codeModeEdges.edges`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_mode_edges: Vec<usize>,
    /// The edges of the stage graph its trace does not record but implies (below `full`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub implied_edges: Vec<usize>,
    /// The edges of the Code Mode graph its sub-calls imply so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub implied_code_mode_edges: Vec<usize>,
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViolationReport {
    pub invariant: InvariantId,
    pub level: Level,
    /// Witness lines of the trace (1-based), the offending one first.
    pub lines: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// One plain sentence, in the trace's vocabulary.
    pub message: String,
    /// The invariant's entry in `docs/invariants.md`.
    pub doc: String,
    /// Where the invariant comes from.
    pub sources: Vec<String>,
    /// Where on the graph it happened: the step of the record it points at first, when that
    /// record visits a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepReport>,
}

/// A record's step on its call's graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepReport {
    /// The graph the call walks: the stage graph, or the Code Mode graph for a sub-call.
    pub graph: GraphName,
    /// Where the step starts: the edge's source, or where the call stood.
    pub from: NodeId,
    /// The node the record visits.
    pub to: NodeId,
    /// The edge taken (its number in that graph's `coverage` edges), when the step is one edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<usize>,
    /// The graph has no such step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
}

/// Which graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GraphName {
    /// The revision's stage graph.
    Pipeline,
    /// The revision's Code Mode graph.
    CodeMode,
}

impl From<GraphKind> for GraphName {
    fn from(kind: GraphKind) -> Self {
        match kind {
            GraphKind::Pipeline => GraphName::Pipeline,
            GraphKind::CodeMode => GraphName::CodeMode,
        }
    }
}

fn step_report(step: &StepRecord) -> StepReport {
    StepReport {
        graph: step.graph.into(),
        from: step.from,
        to: step.to,
        edge: step.edge.map(|e| e.0),
        refused: step.refused,
    }
}

/// Information that is no verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    pub lines: Vec<usize>,
    pub message: String,
}

fn violation_report(v: &Violation, step: Option<&StepRecord>) -> ViolationReport {
    let inv = invariant(v.invariant);
    ViolationReport {
        invariant: v.invariant,
        level: v.level,
        lines: v.lines.clone(),
        call: v.call.as_ref().map(ToString::to_string),
        message: v.message.clone(),
        doc: inv.doc_link(),
        sources: inv.sources.iter().map(ToString::to_string).collect(),
        step: step.map(step_report),
    }
}

/// Below `full`, how many of the edges taken the traces recorded and how many their records
/// imply (`full` records every stage and implies none).
fn below_full(out: &mut String, report: &RunReport, observed: usize, implied: usize) {
    if report.level < ObservationLevel::Full {
        let _ = writeln!(
            out,
            "  at level {}: {observed} observed, {implied} implied by the records around them",
            report.level
        );
    }
}

fn rounded(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

fn edge_coverage(
    graph: &StageGraph,
    ratio: f64,
    (missing, unseen): (Vec<String>, Vec<String>),
    taken_by: impl Fn(&ScenarioResult) -> (&BTreeSet<EdgeId>, &BTreeSet<EdgeId>),
    scenarios: &[ScenarioResult],
) -> EdgeCoverage {
    // Per edge: the scenarios that took it, and those of them that only imply it.
    let mut counts = vec![(0, 0); graph.edges().len()];
    for s in scenarios {
        let (observed, implied) = taken_by(s);
        for edge in observed.union(implied) {
            if let Some((n, only_implied)) = counts.get_mut(edge.0) {
                *n += 1;
                if !observed.contains(edge) {
                    *only_implied += 1;
                }
            }
        }
    }
    EdgeCoverage {
        taken: counts.iter().filter(|(n, _)| *n > 0).count(),
        total: counts.len(),
        ratio,
        implied: counts.iter().filter(|(n, i)| *n > 0 && n == i).count(),
        missing,
        unseen,
        edges: graph
            .edges()
            .iter()
            .zip(counts)
            .map(|(e, (scenarios, implied))| EdgeTaken {
                edge: e.describe(),
                from: e.from,
                to: e.to,
                scenarios,
                implied,
            })
            .collect(),
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The machine-readable report.
pub fn json(
    report: &RunReport,
    baseline: Option<&BaselineOutcome>,
    ctx: &RunContext,
    corpus_hash: &str,
) -> JsonReport {
    let ready = &report.ready;
    let scenarios = report
        .scenarios
        .iter()
        .map(|s| {
            let comparison = baseline.and_then(|b| b.comparisons.get(&s.id));
            ScenarioReport {
                id: s.id.clone(),
                status: s.status,
                duration_seconds: rounded(s.duration.as_secs_f64()),
                violations: s
                    .violations
                    .iter()
                    .map(|v| violation_report(v, s.step_of(v)))
                    .collect(),
                notes: s
                    .notes
                    .iter()
                    .map(|n| NoteReport {
                        call: n.call.as_ref().map(ToString::to_string),
                        lines: n.lines.clone(),
                        message: n.message.clone(),
                    })
                    .collect(),
                reason: s.reason.clone(),
                stderr: s.stderr.clone(),
                expected_failure: s.expected_failure,
                baseline_reason: comparison
                    .filter(|c| !c.reasons.is_empty())
                    .map(|c| c.reasons.join("; ")),
                trace: ctx.traces.get(&s.id).map(|p| p.display().to_string()),
                edges: s.edges.edges.iter().map(|e| e.0).collect(),
                code_mode_edges: s.edges.code_mode_edges.iter().map(|e| e.0).collect(),
                implied_edges: s.edges.implied_edges.iter().map(|e| e.0).collect(),
                implied_code_mode_edges: s
                    .edges
                    .implied_code_mode_edges
                    .iter()
                    .map(|e| e.0)
                    .collect(),
            }
        })
        .collect();
    JsonReport {
        tool: "tep".to_owned(),
        version: crate::suite::VERSION.to_owned(),
        corpus_hash: corpus_hash.to_owned(),
        protocol: PROTOCOL_VERSION,
        spec: report.spec,
        strict: report.strict,
        observation: report.level,
        implementation: ImplementationReport {
            name: ready.implementation.name.clone(),
            version: ready.implementation.version.clone(),
            language: ready.implementation.language.clone(),
            homepage: ready.implementation.homepage.clone(),
            protocol: ready.protocol,
            capabilities: ready.capabilities.clone(),
            specs: ready.specs.clone(),
            observation: ready.level(),
        },
        started_at: ctx.started_at.clone(),
        duration_seconds: rounded(report.duration.as_secs_f64()),
        exit_code: exit_code(report, baseline),
        conformant: conformant(report, baseline),
        tested: report.tested(),
        interrupted: report.interrupted,
        summary: counts(report, baseline),
        coverage: CoverageReport {
            edges: edge_coverage(
                StageGraph::of(report.spec),
                report.edge_coverage(),
                (report.missing_edges(), report.unseen_edges()),
                |s| (&s.edges.edges, &s.edges.implied_edges),
                &report.scenarios,
            ),
            code_mode_edges: edge_coverage(
                StageGraph::code_mode(report.spec),
                report.code_mode_edge_coverage(),
                (
                    report.missing_code_mode_edges(),
                    report.unseen_code_mode_edges(),
                ),
                |s| (&s.edges.code_mode_edges, &s.edges.implied_code_mode_edges),
                &report.scenarios,
            ),
        },
        invariants: report
            .invariants
            .iter()
            .map(|(id, status)| {
                let (status, why) = match status {
                    InvariantStatus::Checked => (InvariantCheck::Checked, None),
                    InvariantStatus::PartlyCheckable(what) => {
                        (InvariantCheck::PartlyCheckable, Some(what.clone()))
                    }
                    InvariantStatus::NotCheckable(why) => {
                        (InvariantCheck::NotCheckable, Some(why.clone()))
                    }
                    InvariantStatus::NotApplicable(why) => {
                        (InvariantCheck::NotApplicable, Some(why.clone()))
                    }
                };
                InvariantReport {
                    invariant: *id,
                    status,
                    why,
                }
            })
            .collect(),
        baseline: baseline.map(|b| BaselineReport {
            file: b.path.clone(),
            expected: b.expected.clone(),
            unexpected: b.unexpected.clone(),
            stale: b.stale.clone(),
        }),
        run_directory: ctx.run_dir.as_ref().map(|d| d.display().to_string()),
        scenarios,
        not_run: report.not_run.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// JUnit

/// The JUnit XML report: a test case per scenario, valid against the Jenkins xUnit plugin's
/// `junit-10.xsd`, agreeing with the exit code: its failures and errors are zero exactly when the
/// run exits 0. Expected failures are skipped with the baseline's reason; stale baseline entries,
/// a run that tested nothing and an interrupted run are failures (or an error) of their own.
pub fn junit(
    report: &RunReport,
    baseline: Option<&BaselineOutcome>,
    ctx: &RunContext,
    corpus_hash: &str,
) -> String {
    let classname = format!("tep.{}", report.spec);
    let mut cases: Vec<Case> = Vec::new();
    for s in &report.scenarios {
        let comparison = baseline.and_then(|b| b.comparisons.get(&s.id));
        let outcome = match verdict_in(report, baseline, s) {
            Verdict::Passed | Verdict::Warned => CaseOutcome::Passed,
            Verdict::Skipped => CaseOutcome::Skipped(s.reason.clone().unwrap_or_default()),
            Verdict::ExpectedFailure => CaseOutcome::Skipped(format!(
                "expected failure (baseline): {}",
                comparison.map(|c| c.reasons.join("; ")).unwrap_or_default()
            )),
            Verdict::Failed => {
                let first = s.first_failing(report.strict);
                CaseOutcome::Failure {
                    kind: first
                        .map(|v| v.invariant.to_string())
                        .unwrap_or_else(|| "failed".to_owned()),
                    message: first.map(ToString::to_string).unwrap_or_default(),
                }
            }
            Verdict::Errored => CaseOutcome::Error {
                kind: "errored".to_owned(),
                message: s.reason.clone().unwrap_or_default(),
            },
            Verdict::Stale => CaseOutcome::Failure {
                kind: "stale-baseline-entry".to_owned(),
                message: comparison
                    .map(|c| {
                        c.stale
                            .iter()
                            .map(|e| format!("stale baseline entry {}: {}; remove it", e.id, e.why))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default(),
            },
        };
        let mut details = String::new();
        for v in &s.violations {
            let _ = writeln!(details, "[{}] {v}\n  {}", v.level, doc_line(v.invariant));
        }
        if !s.violations.is_empty() || outcome.fails() {
            let _ = writeln!(details, "rerun: {}", ctx.rerun_command(&s.id));
        }
        if let Some(path) = ctx.traces.get(&s.id) {
            let _ = writeln!(details, "trace: {}", path.display());
        }
        cases.push(Case {
            name: s.id.clone(),
            classname: classname.clone(),
            time: Some(s.duration.as_secs_f64()),
            outcome,
            details,
            stderr: s.stderr.clone(),
        });
    }
    let run_case = |name: &str, outcome: CaseOutcome| Case {
        name: name.to_owned(),
        classname: "tep.run".to_owned(),
        time: None,
        outcome,
        details: String::new(),
        stderr: None,
    };
    if let Some(b) = baseline {
        for scenario in &b.missing_scenarios {
            let message = b
                .stale
                .iter()
                .filter(|e| e.id.split(':').next() == Some(scenario.as_str()))
                .map(|e| stale_line(b, e))
                .collect::<Vec<_>>()
                .join("\n");
            cases.push(run_case(
                scenario,
                CaseOutcome::Failure {
                    kind: "unknown-baseline-entry".to_owned(),
                    message,
                },
            ));
        }
    }
    if !report.tested() {
        cases.push(run_case(
            "nothing-was-tested",
            CaseOutcome::Failure {
                kind: "nothing-was-tested".to_owned(),
                message: "no scenario passed or failed: a run that tests nothing is not conformant"
                    .to_owned(),
            },
        ));
    }
    if report.interrupted {
        cases.push(run_case(
            "interrupted",
            CaseOutcome::Error {
                kind: "interrupted".to_owned(),
                message: format!(
                    "interrupted: {} selected scenario(s) did not run: {}",
                    report.not_run.len(),
                    report.not_run.join(", ")
                ),
            },
        ));
    }
    let properties = [
        ("tep.version", crate::suite::VERSION.to_owned()),
        ("tep.corpus", corpus_hash.to_owned()),
        ("tep.spec", report.spec.to_string()),
        ("tep.observation", report.level.to_string()),
        ("tep.implementation", report.implementation().name.clone()),
        ("tep.interrupted", report.interrupted.to_string()),
        (
            "tep.coverage.edges",
            format!(
                "{}/{}",
                report.coverage.taken(),
                StageGraph::of(report.spec).edges().len()
            ),
        ),
        (
            "tep.coverage.observed",
            report.coverage.edges.len().to_string(),
        ),
        (
            "tep.coverage.implied",
            report.coverage.implied_edges.len().to_string(),
        ),
        (
            "tep.coverage.unseen",
            report.unseen_edges().len().to_string(),
        ),
    ];
    write_junit(
        &format!("tep conformance ({})", report.spec),
        &ctx.started_at,
        report.duration.as_secs_f64(),
        &properties,
        &cases,
    )
}

#[derive(Debug)]
enum CaseOutcome {
    Passed,
    Skipped(String),
    Failure { kind: String, message: String },
    Error { kind: String, message: String },
}

impl CaseOutcome {
    fn fails(&self) -> bool {
        matches!(
            self,
            CaseOutcome::Failure { .. } | CaseOutcome::Error { .. }
        )
    }
}

#[derive(Debug)]
struct Case {
    name: String,
    classname: String,
    time: Option<f64>,
    outcome: CaseOutcome,
    details: String,
    stderr: Option<String>,
}

/// `text` without the characters XML 1.0 cannot carry (control characters, such as the ANSI
/// escapes of an adapter's stderr); they become U+FFFD.
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || matches!(c, '\u{fffe}' | '\u{ffff}') => '\u{fffd}',
            c => c,
        })
        .collect()
}

fn write_junit(
    suite: &str,
    timestamp: &str,
    seconds: f64,
    properties: &[(&str, String)],
    cases: &[Case],
) -> String {
    use quick_xml::Writer;
    use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

    let count = |f: fn(&CaseOutcome) -> bool| cases.iter().filter(|c| f(&c.outcome)).count();
    let tests = cases.len().to_string();
    let failures = count(|o| matches!(o, CaseOutcome::Failure { .. })).to_string();
    let errors = count(|o| matches!(o, CaseOutcome::Error { .. })).to_string();
    let skipped = count(|o| matches!(o, CaseOutcome::Skipped(_))).to_string();
    let time = format!("{seconds:.3}");
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing XML into a Vec cannot fail; the results are ignored for that reason.
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let root = BytesStart::new("testsuites").with_attributes([
        ("name", "tep"),
        ("tests", tests.as_str()),
        ("failures", failures.as_str()),
        ("errors", errors.as_str()),
        ("time", time.as_str()),
    ]);
    let _ = w.write_event(Event::Start(root));
    let mut suite_tag = BytesStart::new("testsuite").with_attributes([
        ("name", suite),
        ("tests", tests.as_str()),
        ("failures", failures.as_str()),
        ("errors", errors.as_str()),
        ("skipped", skipped.as_str()),
        ("time", time.as_str()),
    ]);
    if !timestamp.is_empty() {
        suite_tag.push_attribute(("timestamp", timestamp));
    }
    let _ = w.write_event(Event::Start(suite_tag));
    let _ = w.write_event(Event::Start(BytesStart::new("properties")));
    for (name, value) in properties {
        let value = xml_text(value);
        let tag = BytesStart::new("property")
            .with_attributes([("name", *name), ("value", value.as_str())]);
        let _ = w.write_event(Event::Empty(tag));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("properties")));
    for case in cases {
        let name = xml_text(&case.name);
        let mut tag = BytesStart::new("testcase").with_attributes([
            ("name", name.as_str()),
            ("classname", case.classname.as_str()),
        ]);
        if let Some(time) = case.time {
            tag.push_attribute(("time", format!("{time:.3}").as_str()));
        }
        let body = !matches!(case.outcome, CaseOutcome::Passed)
            || case.stderr.is_some()
            || !case.details.is_empty();
        if !body {
            let _ = w.write_event(Event::Empty(tag));
            continue;
        }
        let _ = w.write_event(Event::Start(tag));
        let (element, kind, message) = match &case.outcome {
            CaseOutcome::Passed => ("", "", String::new()),
            CaseOutcome::Skipped(message) => ("skipped", "", xml_text(message)),
            CaseOutcome::Failure { kind, message } => ("failure", kind.as_str(), xml_text(message)),
            CaseOutcome::Error { kind, message } => ("error", kind.as_str(), xml_text(message)),
        };
        let details = xml_text(&case.details);
        if !element.is_empty() {
            let mut tag = BytesStart::new(element).with_attributes([("message", message.as_str())]);
            if !kind.is_empty() {
                tag.push_attribute(("type", kind));
            }
            if case.outcome.fails() && !details.is_empty() {
                let _ = w.write_event(Event::Start(tag));
                let _ = w.write_event(Event::Text(BytesText::new(&details)));
                let _ = w.write_event(Event::End(BytesEnd::new(element)));
            } else {
                let _ = w.write_event(Event::Empty(tag));
            }
        }
        if !case.outcome.fails() && !details.is_empty() {
            let _ = w.write_event(Event::Start(BytesStart::new("system-out")));
            let _ = w.write_event(Event::Text(BytesText::new(&details)));
            let _ = w.write_event(Event::End(BytesEnd::new("system-out")));
        }
        if let Some(stderr) = &case.stderr {
            let _ = w.write_event(Event::Start(BytesStart::new("system-err")));
            let _ = w.write_event(Event::Text(BytesText::new(&xml_text(stderr))));
            let _ = w.write_event(Event::End(BytesEnd::new("system-err")));
        }
        let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("testsuite")));
    let _ = w.write_event(Event::End(BytesEnd::new("testsuites")));
    let mut xml = String::from_utf8_lossy(&w.into_inner()).into_owned();
    xml.push('\n');
    xml
}
