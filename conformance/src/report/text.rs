//! The text report: one line per scenario as it finishes, then the closing summary (failures by
//! invariant, witness lines, rerun commands).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use anstyle::{AnsiColor, Style};
use tep_model::graph::StageGraph;
use tep_model::trace::ObservationLevel;

use crate::baseline::{BaselineOutcome, ScenarioComparison};
use crate::excerpt::TraceExcerpt;
use crate::outcome::{RunReport, ScenarioResult, Status};
use crate::terminal::escape_controls as shown;
use tep_check::Violation;
use tep_check::invariant;
use tep_check::invariants::{InvariantId, Level};

use super::*;

/// What the reports need beyond the run: where its files are, how to rerun a scenario.
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// The command line that reruns a single scenario, up to (without) `--scenario ID`.
    pub rerun: Vec<String>,
    /// The command line the run was made with, as given (empty when not known).
    pub command: Vec<String>,
    /// Where each kept trace was written.
    pub traces: BTreeMap<String, PathBuf>,
    /// The directory the failing scenarios' traces were kept in, when any was.
    pub run_dir: Option<PathBuf>,
    /// What the reports quote of each failing scenario's trace (the trace itself is not kept
    /// in memory).
    pub excerpts: BTreeMap<String, TraceExcerpt>,
    /// The run is a deliberate part of the corpus (a selection, scenario files): the text
    /// report counts the edges it did not take rather than listing them.
    pub subset: bool,
    /// List every edge not taken, on a subset too (`--verbose`).
    pub verbose: bool,
}

impl RunContext {
    /// The command the run was made with, quoted for a POSIX shell (empty when not known).
    pub fn command_line(&self) -> String {
        self.command
            .iter()
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

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
        let text: String = if witnesses.contains(&n) {
            focused_line(text, &v.message)
        } else {
            cut(text, QUOTE_WIDTH)
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

fn cut(text: &str, width: usize) -> String {
    if text.chars().count() > width {
        text.chars().take(width).chain(['\u{2026}']).collect()
    } else {
        text.to_owned()
    }
}

/// The longest value a focused witness line quotes, in characters.
const FIELD_WIDTH: usize = 120;

/// A witness line as the violation needs it: whole when it is short; else what names the
/// record (`kind`, `node`, `type`, `call`, `outcome`, `reason`) and the fields the message speaks of, by
/// name or by a value it quotes, each `path=value` (an error result's text with its
/// `isError`), the rest elided. The field that differs is quoted wherever it sits in the line,
/// not cut off at [`QUOTE_WIDTH`].
pub(crate) fn focused_line(text: &str, message: &str) -> String {
    if text.chars().count() <= QUOTE_WIDTH {
        return text.to_owned();
    }
    let Ok(serde_json::Value::Object(record)) = serde_json::from_str::<serde_json::Value>(text)
    else {
        return cut(text, QUOTE_WIDTH);
    };
    let words: BTreeSet<&str> = message
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    // The values the message quotes ("hi", "c1 read"): at least two characters, to mean one.
    let quoted: Vec<&str> = message
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|q| q.chars().count() >= 2)
        .collect();
    let mut leaves = Vec::new();
    for (key, value) in &record {
        leaves_of(key.clone(), value, &mut leaves);
    }
    // What names the record, in this order, then the fields the message speaks of.
    const NAMING: [&str; 7] = [
        "kind",
        "node",
        "event.type",
        "call",
        "outcome",
        "reason",
        "event.seq",
    ];
    let errored: BTreeSet<String> = leaves
        .iter()
        .filter(|(path, v)| path.ends_with("isError") && v == &serde_json::Value::Bool(true))
        .map(|(path, _)| path.trim_end_matches("isError").to_owned())
        .collect();
    let field = |(path, value): &(String, serde_json::Value)| {
        format!("{path}={}", cut(&value.to_string(), FIELD_WIDTH))
    };
    let mut shown: Vec<String> = NAMING
        .iter()
        .filter_map(|n| leaves.iter().find(|(path, _)| path == n))
        .map(field)
        .collect();
    let named = shown.len();
    let spoken: Vec<String> = leaves
        .iter()
        .filter(|(path, _)| !NAMING.contains(&path.as_str()))
        .filter(|(path, value)| {
            let name = path
                .rsplit(['.', '['])
                .next()
                .unwrap_or(path)
                .trim_end_matches(']');
            let by_name = words.contains(name) && !name.chars().all(|c| c.is_ascii_digit());
            let by_value = value.as_str().is_some_and(|v| {
                quoted
                    .iter()
                    .any(|q| v.contains(q) || (v.chars().count() > 2 && q.contains(v)))
            });
            // An error result's reason is its text.
            let error_text = errored.iter().any(|prefix| {
                path.starts_with(prefix.as_str())
                    && (path.ends_with("].text") || path.ends_with(".error"))
            });
            by_name || by_value || error_text
        })
        .map(field)
        .collect();
    if named + spoken.len() < leaves.len() {
        shown.push("\u{2026}".to_owned());
    }
    shown.extend(spoken);
    shown.join(" ")
}

/// Every scalar of `value` (and each empty array or object) with its path: `result.isError`,
/// `content[0].text`.
fn leaves_of(path: String, value: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                leaves_of(format!("{path}.{key}"), v, out);
            }
        }
        serde_json::Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves_of(format!("{path}[{i}]"), v, out);
            }
        }
        _ => out.push((path, value.clone())),
    }
}

pub(super) fn doc_line(id: InvariantId) -> String {
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
        write_coverage(out, report, ctx)?;
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

/// The edge coverage of both graphs, and the edges not taken or not seen: listed for a whole
/// run, counted on one line for a subset or an interrupted run (whose untaken edges are
/// expected), unless `--verbose`.
fn write_coverage(out: &mut String, report: &RunReport, ctx: &RunContext) -> std::fmt::Result {
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
    let list = ctx.verbose || !(ctx.subset || report.interrupted);
    // With no trace judged, every edge is missing and listing them says nothing.
    if report.tested() {
        below_full(out, report, c.edges.len(), c.implied_edges.len());
        untaken(
            out,
            report,
            list,
            &report.missing_edges(),
            &report.unseen_edges(),
        )?;
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
        untaken(
            out,
            report,
            list,
            &report.missing_code_mode_edges(),
            &report.unseen_code_mode_edges(),
        )?;
    }
    Ok(())
}

/// The edges not taken and not seen: each on its line, or their counts on one.
fn untaken(
    out: &mut String,
    report: &RunReport,
    list: bool,
    missing: &[String],
    unseen: &[String],
) -> std::fmt::Result {
    if list {
        for edge in missing {
            writeln!(out, "  not taken: {edge}")?;
        }
        for edge in unseen {
            writeln!(out, "  not seen at level {}: {edge}", report.level)?;
        }
        return Ok(());
    }
    if missing.is_empty() && unseen.is_empty() {
        return Ok(());
    }
    let what = if report.interrupted {
        "this interrupted run"
    } else {
        "this subset"
    };
    let unseen = if unseen.is_empty() {
        String::new()
    } else {
        format!(", {} not seen at level {}", unseen.len(), report.level)
    };
    writeln!(
        out,
        "  {} edge(s) not taken by {what}{unseen} (--verbose lists them, as the JSON and HTML reports do)",
        missing.len()
    )
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
    let gap = &report.protocol_gap;
    if !gap.scenarios.is_empty() {
        let ids: Vec<&str> = gap.invariants.iter().map(|i| i.as_str()).collect();
        writeln!(
            out,
            "{} the adapter declares protocol {}: {} scenario(s) use newer constructs and were not sent, so breaches of {} went unchecked (protocol {} receives them)",
            paint(AnsiColor::Yellow.on_default().bold(), "older protocol:"),
            gap.declared,
            gap.scenarios.len(),
            if ids.is_empty() {
                "no invariant".to_owned()
            } else {
                ids.join(", ")
            },
            crate::protocol::PROTOCOL_VERSION
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept trace's line of an un-awaited guard in a kit adapter (newcomer review 2, N-M5):
    /// the cause sits past the first 160 characters.
    const LONG: &str = r#"{"kind":"stage","node":"final","call":"c1","identity":{"token":"tok-1","callId":"c1","name":"read","arguments":{"path":"notes.txt","padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}},"result":{"isError":true,"content":[{"type":"text","text":"Error: [object Promise]"}]}}"#;

    #[test]
    fn a_witness_quotes_the_field_the_message_speaks_of() {
        assert!(LONG.chars().count() > QUOTE_WIDTH);
        assert!(!cut(LONG, QUOTE_WIDTH).contains("[object Promise]"));
        let line = focused_line(LONG, "call c1: isError is true, expected false");
        assert_eq!(
            line,
            "kind=\"stage\" node=\"final\" call=\"c1\" \u{2026} \
             result.content[0].text=\"Error: [object Promise]\" result.isError=true"
        );
        // By a value the message quotes, wherever it is.
        let line = focused_line(
            LONG,
            r#"content[0].text "Error: [object Promise]", announced "hi""#,
        );
        assert!(
            line.contains(r#" result.content[0].text="Error: [object Promise]""#),
            "{line}"
        );
        // A short line is quoted whole; one that is not JSON is cut.
        assert_eq!(
            focused_line("{\"kind\":\"stage\"}", "x"),
            "{\"kind\":\"stage\"}"
        );
        let garbage = "x".repeat(200);
        assert_eq!(focused_line(&garbage, "x").chars().count(), QUOTE_WIDTH + 1);
    }
}
