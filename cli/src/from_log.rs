//! `tep check --from SOURCE`: a harness's own session log, read as a trace at level `events`.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};

use clap::ValueEnum;
use tep_check::deepseek_harness::{self, Converted, Options, Summary};
use tep_check::invariants::InvariantId;
use tep_check::{CheckReport, MAX_VIOLATIONS};
use tep_check::{InvariantStatus, TraceError};
use tep_conformance::listing::{
    InterruptedTurn, RewrittenResults, SessionLogJson, UnknownField, UnknownType, ZstdJson,
};

/// Whose session log `--from` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogSource {
    /// deepseek-harness's JSONL session log, as written (`session.jsonl.zstd`) or uncompressed.
    DeepseekHarness,
}

impl LogSource {
    pub fn name(self) -> &'static str {
        match self {
            LogSource::DeepseekHarness => "deepseek-harness",
        }
    }
}

/// What `--from` reads with.
#[derive(Debug, Clone)]
pub struct FromLog {
    pub source: LogSource,
    pub options: Options,
    /// The log was read through a Zstandard decoder (the harness's default
    /// `session.jsonl.zstd`): how many frames, and whether the last broke off.
    pub zstd: Option<ZstdJson>,
}

impl FromLog {
    pub fn new(source: LogSource, safe: Option<Vec<String>>) -> Self {
        let safe = safe.map(|tools| {
            tools
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<BTreeSet<_>>()
        });
        FromLog {
            source,
            options: Options { safe },
            zstd: None,
        }
    }

    /// How many threads are worth parsing a log of `bytes` (`None`: not known) on this
    /// machine while this thread applies and checks its lines.
    pub fn parsing_workers(&self, bytes: Option<u64>) -> usize {
        match self.source {
            LogSource::DeepseekHarness => deepseek_harness::parsing_workers(bytes),
        }
    }

    /// Reads the log and calls `f` with what each line makes (a trace record, or a cut:
    /// [`Converted`]) and the line of the log it came from, the lines parsed on `workers`
    /// threads (none: on this one).
    pub fn read(
        &self,
        reader: impl BufRead,
        workers: usize,
        f: impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
    ) -> Result<Summary, TraceError> {
        match self.source {
            LogSource::DeepseekHarness => {
                deepseek_harness::convert_parallel(reader, self.options.clone(), workers, f)
                    .map_err(Into::into)
            }
        }
    }

    /// Adds what reading the log found broken (hook events outside their stage, dispatch
    /// events after their program's result) to the checker's report, in line order.
    pub fn add_breaches(&self, report: &mut CheckReport, summary: &Summary) {
        for breach in &summary.breaches {
            if report.violations.len() >= MAX_VIOLATIONS {
                report.omitted += 1;
            } else {
                report.violations.push(breach.clone());
            }
        }
        report.omitted += summary.breaches_omitted;
        report
            .violations
            .sort_by_key(|v| v.lines.first().copied().unwrap_or(0));
    }

    /// The checker's statuses, with the invariants this log cannot show marked not checkable,
    /// and those its hook and dispatch events show in part marked so.
    pub fn statuses(
        &self,
        mut statuses: Vec<(InvariantId, InvariantStatus)>,
    ) -> Vec<(InvariantId, InvariantStatus)> {
        for (id, why) in deepseek_harness::partly_checkable() {
            for (i, status) in statuses.iter_mut() {
                if *i == id && matches!(status, InvariantStatus::NotCheckable(_)) {
                    *status = InvariantStatus::PartlyCheckable(why.clone());
                }
            }
        }
        for (id, why) in deepseek_harness::not_checkable(&self.options) {
            for (i, status) in statuses.iter_mut() {
                // What this log cannot show, it cannot show even in part.
                if *i == id
                    && matches!(
                        status,
                        InvariantStatus::Checked | InvariantStatus::PartlyCheckable(_)
                    )
                {
                    *status = InvariantStatus::NotCheckable(why.clone());
                }
            }
        }
        statuses
    }

    /// The lines of the text report that say how the log was read and what it cannot show.
    pub fn write_text(
        &self,
        out: &mut impl Write,
        summary: &Summary,
        statuses: &[(InvariantId, InvariantStatus)],
    ) -> std::io::Result<()> {
        writeln!(
            out,
            "read as a {} session log (session {}): {} line(s), {} trace record(s), {} line(s) passed over (not pipeline events)",
            self.source.name(),
            summary.session,
            summary.lines,
            summary.records,
            summary.passed_over
        )?;
        if let Some(zstd) = &self.zstd {
            writeln!(
                out,
                "decompressed from {} Zstandard frame(s); lines are those of the decompressed log",
                zstd.frames
            )?;
            if zstd.broken_off {
                writeln!(
                    out,
                    "its last frame breaks off (a session killed while writing it): the log ends where that frame stopped decoding"
                )?;
            }
        }
        for (kind, (count, first)) in &summary.unknown {
            writeln!(
                out,
                "passed over {count} event(s) of unknown type `{kind}` (first at line {first})"
            )?;
        }
        for ((kind, field), (count, first)) in &summary.unknown_fields {
            writeln!(
                out,
                "passed over `{field}` in {count} `{kind}` event(s), a field tep does not read (first at line {first})"
            )?;
        }
        if let Some((count, first)) = summary.rewritten_results {
            writeln!(
                out,
                "passed over {count} `tool/result` event(s) that rewrite a result the model already sees (`surfaceOp` `replace`: the harness's compaction pruning it), no call's outcome (first at line {first})"
            )?;
        }
        if summary.unattributed_count > 0 {
            let listed = summary.unattributed.len();
            let first = if listed < summary.unattributed_count {
                format!(" (the first {listed})")
            } else {
                String::new()
            };
            writeln!(
                out,
                "{} owned or hook event(s) logged while no single call was running (or no call was open), at line(s) {}{first}: attributed to no call",
                summary.unattributed_count,
                joined(&summary.unattributed)
            )?;
        }
        for cut in &summary.interrupted {
            let turn = match cut.turn {
                Some(line) => format!("the turn begun at line {line}"),
                None => "the turn the log begins inside".to_owned(),
            };
            let how = match cut.recovered.as_slice() {
                [] => format!(
                    "the next turn begins at line {} without its `turn/end`",
                    cut.at
                ),
                lines => format!(
                    "the harness closed it when it reloaded the session, with result(s) for calls that never finished at line(s) {} (not pipeline events)",
                    joined(lines)
                ),
            };
            writeln!(
                out,
                "{turn} was interrupted (a crash): {how}; its batch is cut short at line {}, so what that batch's end would owe (a result per call, contexts, dispatch events) is not judged",
                cut.at
            )?;
        }
        if let Some(line) = summary.torn_tail {
            writeln!(
                out,
                "the last line ({line}) breaks off, with no newline (a session killed while writing it): passed over, as the harness drops it when it reloads the session"
            )?;
        }
        if let Some(line) = summary.ends_inside_turn {
            writeln!(
                out,
                "the log ends inside the turn begun at line {line} (no `turn/end`): cut short, so what its last batch's end would owe (a result per call, contexts, dispatch events) is not judged"
            )?;
        }
        if summary.hook_stage_events > 0 {
            writeln!(
                out,
                "{} hook event(s) read as their call's pre- or post-execute stage (by `point` and `handlerId`)",
                summary.hook_stage_events
            )?;
        }
        let limits = deepseek_harness::not_checkable(&self.options);
        for (id, why) in &limits {
            if statuses
                .iter()
                .any(|(i, s)| i == id && matches!(s, InvariantStatus::NotCheckable(_)))
            {
                writeln!(out, "not checkable from this log: {id}: {why}")?;
            }
        }
        Ok(())
    }

    /// The `sessionLog` member of the JSON report.
    pub fn json(&self, summary: &Summary) -> SessionLogJson {
        SessionLogJson {
            source: self.source.name().to_owned(),
            session: summary.session.clone(),
            lines: summary.lines,
            records: summary.records,
            passed_over: summary.passed_over,
            unknown_types: summary
                .unknown
                .iter()
                .map(|(kind, (count, first))| UnknownType {
                    kind: kind.clone(),
                    count: *count,
                    first_line: *first,
                })
                .collect(),
            unknown_fields: summary
                .unknown_fields
                .iter()
                .map(|((kind, field), (count, first))| UnknownField {
                    kind: kind.clone(),
                    field: field.clone(),
                    count: *count,
                    first_line: *first,
                })
                .collect(),
            unattributed: summary.unattributed.clone(),
            unattributed_count: summary.unattributed_count,
            ends_inside_turn: summary.ends_inside_turn,
            torn_tail: summary.torn_tail,
            zstd: self.zstd.clone(),
            rewritten_results: summary
                .rewritten_results
                .map(|(count, first_line)| RewrittenResults { count, first_line }),
            interrupted_turns: summary
                .interrupted
                .iter()
                .map(|i| InterruptedTurn {
                    turn_line: i.turn,
                    cut_line: i.at,
                    recovered_results: i.recovered.clone(),
                })
                .collect(),
            safe: self
                .options
                .safe
                .as_ref()
                .map(|s| s.iter().cloned().collect()),
        }
    }
}

/// Line numbers as the reports list them: `3, 7, 12`.
fn joined(lines: &[usize]) -> String {
    lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
