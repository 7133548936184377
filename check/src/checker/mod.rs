//! The trace checker: one pass over a trace, reporting every invariant violation with the lines
//! that witness it.
//!
//! The core here tracks batches and calls: it reads each record, moves the call along its graph
//! ([`crate::facts::walk`]), and keeps the facts every rule reads ([`crate::facts`]). The invariants themselves are
//! the rules of [`crate::rules`], one per invariant beside its catalog entry: the core asks them
//! to name a step the graph does not allow (the most specific claim wins, so one fault is one
//! violation), hands them each visit of the records they read, and calls them when a batch
//! closes. Which rules run depends on the trace's revision, the implementation's capabilities
//! and the observation level ([`crate::observation`]); the others are reported as not
//! applicable or not checkable, never as passed.
//!
//! Memory is bounded by the calls of the open batch (plus one version per file the fs gate has
//! seen): a batch's state is dropped when the next `model` observation opens the next batch.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;
use tep_model::graph::{EdgeId, GraphKind, NodeId, NodeKind, Outcome, Scope, StageGraph};
use tep_model::identity::CallId;
use tep_model::session::{EventBody, FileState, SessionEvent};
use tep_model::trace::{
    EventRecord, Mark, MarkKind, NextRequest, Observation, ObservationLevel, TraceRecord,
};

use crate::catalog::invariant;
use crate::checkability::{self, Checkability};
#[cfg(any(test, feature = "testing"))]
pub use crate::facts::state::scanned;
use crate::facts::state::{Batch, Call, Section, Spare};
use crate::facts::walk::{Step, Walker, bit};
pub use crate::facts::{CheckOptions, InvariantStatus};
use crate::facts::{FsSeen, context_text};
use crate::invariants::{InvariantId, Level};
use crate::observation::{Expectations, level_of};
use crate::rules::{self, Claim, Cx, Finding, Read, Record, Refused, Rule, Visit, VisitFn};

mod batch;
mod learn;
mod records;
mod visit;

use batch::{fifo, open_sub_call};

/// At most this many violations are kept; the rest are counted.
pub const MAX_VIOLATIONS: usize = 1000;

/// A violation's message is cut past this many bytes: a message quotes what the trace handed
/// a stage (arguments, tokens, contents), and a trace line may be 16 MiB. With
/// [`MAX_VIOLATIONS`] this bounds a report's messages at 4 MiB, whatever the trace. The
/// corpus's longest message is under 1 KiB.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// At most this many records' steps are kept ([`Checker::keep_steps`]); the rest are counted
/// in [`CheckReport::steps_omitted`]. A drawn path of more would be unreadable, and a kept
/// step per record made a report grow with its trace (the corpus's longest trace has under
/// 200 records).
pub const MAX_STEPS: usize = 20_000;

/// One broken invariant, with the lines that witness it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Violation {
    /// The invariant broken.
    pub invariant: InvariantId,
    /// Its level in the catalog: MUST or SHOULD.
    pub level: Level,
    /// Witness lines (1-based), the offending one first.
    pub lines: Vec<usize>,
    /// The call it is about, when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<CallId>,
    /// One plain sentence.
    pub message: String,
}

impl Violation {
    /// A violation of `invariant` at its catalog level, witnessed by `lines` (the offending one
    /// first).
    pub fn new(
        invariant: InvariantId,
        lines: Vec<usize>,
        call: Option<CallId>,
        message: impl Into<String>,
    ) -> Self {
        Violation {
            invariant,
            level: crate::catalog::invariant(invariant).level,
            lines,
            call,
            message: message.into(),
        }
    }

    /// The same violation at another level (a test's planted SHOULD, say).
    #[cfg(test)]
    pub(crate) fn at_level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.message)
    }
}

/// Why a trace could not be read. Always names the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
#[non_exhaustive]
pub struct TraceError {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong, in words.
    pub message: String,
}

impl TraceError {
    /// An error at `line`.
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        TraceError {
            line,
            message: message.into(),
        }
    }
}

/// What the catalog says of an invariant under these options.
impl CheckOptions {
    /// Whether `id` is checked under these options, and if not, why.
    pub fn status(&self, id: InvariantId) -> InvariantStatus {
        let inv = invariant(id);
        if !inv.applies_to(self.revision) {
            return InvariantStatus::NotApplicable(format!("not part of {}", self.revision));
        }
        if let Some(cap) = inv.requires.filter(|&c| !self.has(c)) {
            return InvariantStatus::NotApplicable(format!(
                "the implementation does not declare {cap}"
            ));
        }
        if inv.reads.contains(&Read::Scenario) && self.facts.is_none() {
            return InvariantStatus::NotCheckable("needs the scenario (drive mode)".to_owned());
        }
        if inv.observed > self.level {
            return InvariantStatus::NotCheckable(format!(
                "needs level {} (the trace is {})",
                inv.observed, self.level
            ));
        }
        // What its planted breaches showed at this level (`crate::checkability`).
        match checkability::at(id, self.level) {
            Checkability::Checked => InvariantStatus::Checked,
            Checkability::Partly => InvariantStatus::PartlyCheckable(
                checkability::partly(id, self.level)
                    .unwrap_or("some of its breaches are not recorded at this level")
                    .to_owned(),
            ),
            Checkability::NotCheckable => InvariantStatus::NotCheckable(format!(
                "its breach is not recorded at level {} (docs/invariants.md)",
                self.level
            )),
        }
    }

    /// Whether the invariant's rule runs (and its findings are kept): it applies, and the level
    /// holds the records it reads. A rule runs where its breaches are caught only in part, or
    /// not at all, too: what it finds there is still a breach.
    pub fn checks(&self, id: InvariantId) -> bool {
        match self.status(id) {
            InvariantStatus::NotApplicable(_) => false,
            InvariantStatus::Checked | InvariantStatus::PartlyCheckable(_) => true,
            InvariantStatus::NotCheckable(_) => {
                let inv = invariant(id);
                inv.observed <= self.level
                    && !(inv.reads.contains(&Read::Scenario) && self.facts.is_none())
            }
        }
    }

    /// Every invariant with its status.
    pub fn statuses(&self) -> Vec<(InvariantId, InvariantStatus)> {
        InvariantId::ALL
            .iter()
            .map(|&id| (id, self.status(id)))
            .collect()
    }
}

/// The outcome of checking a whole trace; [`CheckReport::verdict`] says what it means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Every violation found (MUST and SHOULD), in trace order; at most [`MAX_VIOLATIONS`].
    pub violations: Vec<Violation>,
    /// Violations beyond [`MAX_VIOLATIONS`], not kept.
    pub omitted: usize,
    /// Edges of the pipeline graph the trace took (directly recorded steps only).
    pub edges: BTreeSet<EdgeId>,
    /// Edges of the Code Mode graph the trace's sub-calls took.
    pub code_mode_edges: BTreeSet<EdgeId>,
    /// Edges of the pipeline graph the trace does not record but its records imply: at a level
    /// below `full`, the edges around a stage the level never records (an inferred `denied`),
    /// where only one way leads through it. None of them is in `edges`.
    pub implied_edges: BTreeSet<EdgeId>,
    /// Edges of the Code Mode graph implied so, none of them in `code_mode_edges`.
    pub implied_code_mode_edges: BTreeSet<EdgeId>,
    /// How many records were checked.
    pub records: usize,
    /// How many batches the trace holds: a trace without one checks nothing.
    pub batches: usize,
    /// Each record's step on its call's graph, in trace order; kept only when asked
    /// ([`Checker::keep_steps`]), so that a report can draw where a violation happened. At
    /// most [`MAX_STEPS`]: the first ones.
    pub steps: Vec<StepRecord>,
    /// Steps past [`MAX_STEPS`], not kept.
    pub steps_omitted: usize,
}

/// Where one record moved its call on the graph (or tried to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRecord {
    /// The record's line.
    pub line: usize,
    /// The graph the call walks: the pipeline's, or the Code Mode graph for a sub-call.
    pub graph: GraphKind,
    /// Where the step starts: the edge's source, or where the call stood.
    pub from: NodeId,
    /// The node the record visits.
    pub to: NodeId,
    /// The edge taken, when the step is one edge of the graph.
    pub edge: Option<EdgeId>,
    /// The graph does not allow the step (a violation claims it).
    pub refused: bool,
}

impl CheckReport {
    /// The distinct invariants violated.
    pub fn invariants(&self) -> BTreeSet<InvariantId> {
        self.violations.iter().map(|v| v.invariant).collect()
    }
}

/// Checks records already in memory; record `i` is line `i + 1`.
pub fn check_records(
    options: &CheckOptions,
    records: &[TraceRecord],
) -> Result<CheckReport, TraceError> {
    Checker::new(options.clone()).check(records)
}

/// The rules that run on a trace, indexed by what they read.
#[derive(Debug)]
struct Dispatch {
    // The visits are the checks every record runs: their functions are kept side by side,
    // not behind each rule's (large) entry.
    by_node: Vec<Vec<VisitFn>>,
    audit: Vec<VisitFn>,
    observer_marks: Vec<VisitFn>,
    body_marks: Vec<VisitFn>,
    events: Vec<&'static Rule>,
    settle: Vec<&'static Rule>,
    request: Vec<&'static Rule>,
    batch_end: Vec<&'static Rule>,
    claims: Vec<&'static Rule>,
}

impl Dispatch {
    fn new(options: &CheckOptions) -> Self {
        let runs: Vec<&'static Rule> = rules::RULES
            .iter()
            .copied()
            .filter(|r| options.checks(r.entry.id))
            .collect();
        let visiting = |pred: &dyn Fn(&Rule) -> bool| -> Vec<VisitFn> {
            runs.iter()
                .filter(|r| pred(r))
                .filter_map(|r| r.visit)
                .collect()
        };
        Dispatch {
            by_node: NodeId::ALL
                .iter()
                .map(|&n| visiting(&|r| r.reads_node(n)))
                .collect(),
            audit: visiting(&|r| r.reads(Read::Audit)),
            observer_marks: visiting(&|r| r.reads(Read::ObserverMark)),
            body_marks: visiting(&|r| r.reads(Read::BodyMark)),
            events: runs.iter().copied().filter(|r| r.event.is_some()).collect(),
            settle: runs
                .iter()
                .copied()
                .filter(|r| r.settle.is_some())
                .collect(),
            request: runs
                .iter()
                .copied()
                .filter(|r| r.request.is_some())
                .collect(),
            batch_end: runs
                .iter()
                .copied()
                .filter(|r| r.batch_end.is_some())
                .collect(),
            claims: rules::CLAIMS
                .iter()
                .copied()
                .filter(|r| options.checks(r.entry.id))
                .collect(),
        }
    }
}

/// The streaming checker. Feed records in order with their line numbers, then [`Checker::finish`].
#[derive(Debug)]
pub struct Checker {
    options: CheckOptions,
    graph: &'static StageGraph,
    walker: Walker,
    code_walker: Walker,
    dispatch: Dispatch,
    batch: Option<Batch>,
    /// The last closed batch's lists, for the next one.
    spare: Spare,
    session: FsSeen,
    seen_records: usize,
    found: Vec<Finding>,
    /// An exception escaped the pipeline: the open batch ended there.
    escaped: bool,
    /// The records stop inside the open batch (a log cut short, a turn a crash interrupted):
    /// what its end would owe is not judged.
    cut_short: bool,
    /// The invariants checked (bit per id): findings of the others are dropped.
    checked: u128,
    taken: Taken,
    /// The edges the records imply, per graph (bit per edge).
    implied: [u128; 2],
    /// Each visit's step, when a report wants them.
    steps: Option<Vec<StepRecord>>,
    report: CheckReport,
}

/// The edges taken so far, as bits: a record adds its edge to the report's sets only the first
/// time.
#[derive(Debug, Default)]
struct Taken {
    pipeline: u128,
    code_mode: u128,
}

impl Taken {
    fn take(&mut self, report: &mut CheckReport, kind: GraphKind, edge: EdgeId) {
        let (bits, edges) = match kind {
            GraphKind::Pipeline => (&mut self.pipeline, &mut report.edges),
            GraphKind::CodeMode => (&mut self.code_mode, &mut report.code_mode_edges),
        };
        // A graph with more edges than bits (none has) records the rest every time.
        let b = u32::try_from(edge.0)
            .ok()
            .and_then(|k| 1u128.checked_shl(k))
            .unwrap_or(0);
        if b == 0 || *bits & b == 0 {
            *bits |= b;
            edges.insert(edge);
        }
    }
}

/// The edges set in `bits` that `observed` does not hold.
fn implied_only(bits: u128, observed: &BTreeSet<EdgeId>) -> BTreeSet<EdgeId> {
    (0..128)
        .filter(|&k| bits & 1u128 << k != 0)
        .map(EdgeId)
        .filter(|e| !observed.contains(e))
        .collect()
}

/// The edges into and out of `allResults` (bit per edge) when `level` does not record it: a
/// batch whose every call has its result settles there, and its contexts come from there.
fn unrecorded_settle(walker: &Walker, level: ObservationLevel) -> (u128, u128) {
    if level_of(NodeId::AllResults) <= level {
        return (0, 0);
    }
    let bit = |from, to| {
        walker
            .tables
            .edge(from, to)
            .filter(|e| e.0 < 128)
            .map_or(0, |e| 1u128 << e.0)
    };
    (
        bit(NodeId::ToolResult, NodeId::AllResults),
        bit(NodeId::AllResults, NodeId::Context),
    )
}

fn graph_index(kind: GraphKind) -> usize {
    match kind {
        GraphKind::Pipeline => 0,
        GraphKind::CodeMode => 1,
    }
}

impl Checker {
    /// A checker for one trace under `options`.
    pub fn new(options: CheckOptions) -> Self {
        let expect = Expectations::new(options.level, |c| options.has(c));
        let graph = StageGraph::of(options.revision);
        let checked = InvariantId::ALL
            .iter()
            .filter(|&&id| options.checks(id))
            .fold(0, |bits, &id| bits | 1u128 << (id as u32));
        Checker {
            graph,
            walker: Walker::new(graph, expect),
            code_walker: Walker::new(StageGraph::code_mode(options.revision), expect),
            dispatch: Dispatch::new(&options),
            options,
            batch: None,
            spare: Spare::default(),
            session: FsSeen::default(),
            seen_records: 0,
            found: Vec::new(),
            escaped: false,
            cut_short: false,
            checked,
            taken: Taken::default(),
            implied: [0; 2],
            steps: None,
            report: CheckReport::default(),
        }
    }

    /// Keeps every record's step for the report ([`CheckReport::steps`]): memory grows with
    /// the trace, so only reports that draw the steps ask for it.
    pub fn keep_steps(mut self) -> Self {
        self.steps = Some(Vec::new());
        self
    }

    /// The options it checks with.
    pub fn options(&self) -> &CheckOptions {
        &self.options
    }

    /// Violations found so far.
    pub fn violations(&self) -> &[Violation] {
        &self.report.violations
    }

    /// How many calls the checker holds state for: those of the open batch (with their Code Mode
    /// sub-calls). Everything earlier has been dropped.
    pub fn tracked_calls(&self) -> usize {
        self.batch.as_ref().map_or(0, |b| b.calls.len())
    }

    /// Checks one record.
    pub fn feed(&mut self, line: usize, record: &TraceRecord) -> Result<(), TraceError> {
        self.seen_records += 1;
        self.report.records += 1;
        match record {
            TraceRecord::Header(_) => {
                if self.seen_records != 1 {
                    return Err(TraceError::new(line, "a header may only be the first line"));
                }
                Ok(())
            }
            TraceRecord::Stage(obs) => self.stage(line, obs),
            TraceRecord::Event(ev) => self.event(line, ev),
            TraceRecord::Mark(mark) => self.mark(line, mark),
            TraceRecord::Request(request) => self.request(line, request),
        }
    }

    /// The run ended with an exception escaping the pipeline (the adapter said so) after the
    /// records fed so far: a breach of `throw-is-normalized`. The open batch never completed, so
    /// what its end would owe (results, contexts, dispatch logs) is not reported again.
    pub fn escape(&mut self, line: usize, message: &str) {
        self.found.push(Finding {
            invariant: InvariantId::ThrowIsNormalized,
            call: None,
            lines: vec![line],
            message: format!(
                "an exception escaped the pipeline after line {}: {message:?}; a throw must become an isError result",
                line.saturating_sub(1)
            ),
            once: false,
        });
        self.emit();
        self.escaped = true;
    }

    /// The records of the open batch stop here, not at its end: a session log cut short (a
    /// session still running, or killed mid-turn), or a turn a crash interrupted before the
    /// log goes on. What the batch's end would owe (a result per call, its contexts, its
    /// dispatch events) is not judged when it closes (at the next batch or at
    /// [`Checker::finish`]); what its records show still is. The next batch is judged whole.
    pub fn cut_short(&mut self) {
        self.cut_short = true;
    }

    /// Feeds records already in memory (record `i` is line `i + 1`), then finishes.
    pub fn check(self, records: &[TraceRecord]) -> Result<CheckReport, TraceError> {
        self.check_escaped(records, None)
    }

    /// [`Checker::check`] of a run that ended with `escaped` escaping the pipeline after the
    /// records (an adapter says so in drive mode): see [`Checker::escape`].
    pub fn check_escaped(
        mut self,
        records: &[TraceRecord],
        escaped: Option<&str>,
    ) -> Result<CheckReport, TraceError> {
        for (i, record) in records.iter().enumerate() {
            self.feed(i + 1, record)?;
        }
        if let Some(message) = escaped {
            self.escape(records.len() + 1, message);
        }
        self.finish()
    }

    /// Closes the last batch and returns the report.
    pub fn finish(mut self) -> Result<CheckReport, TraceError> {
        self.close_batch()?;
        self.report.steps = self.steps.take().unwrap_or_default();
        let [pipeline, code_mode] = self.implied;
        self.report.implied_edges = implied_only(pipeline, &self.report.edges);
        self.report.implied_code_mode_edges = implied_only(code_mode, &self.report.code_mode_edges);
        Ok(self.report)
    }

    // -----------------------------------------------------------------------------------------
    // Record kinds

    /// Moves what the rules found into the report, once per call where asked.
    fn emit(&mut self) {
        if self.found.is_empty() {
            return;
        }
        for finding in std::mem::take(&mut self.found) {
            if self.checked & (1u128 << (finding.invariant as u32)) == 0 {
                continue;
            }
            let call = match (finding.call, self.batch.as_mut()) {
                (Some(i), Some(batch)) => {
                    let call = &mut batch.calls[i];
                    if finding.once && !call.mark_reported(finding.invariant) {
                        continue;
                    }
                    Some(call.id.clone())
                }
                _ => None,
            };
            if self.report.violations.len() >= MAX_VIOLATIONS {
                self.report.omitted += 1;
                continue;
            }
            self.report.violations.push(Violation::new(
                finding.invariant,
                finding.lines,
                call,
                cut_message(finding.message),
            ));
        }
    }
}

/// Keeps `step` unless [`MAX_STEPS`] are kept already.
fn push_step(steps: &mut Vec<StepRecord>, omitted: &mut usize, step: StepRecord) {
    if steps.len() < MAX_STEPS {
        steps.push(step);
    } else {
        *omitted += 1;
    }
}

/// `message`, cut past [`MAX_MESSAGE_BYTES`] (at a character) with how long it was.
pub fn cut_message(mut message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let len = message.len();
    let mut cut = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message.push_str(&format!("\u{2026} (message cut at {cut} of {len} bytes)"));
    message
}

/// The fields a stage record of `node` must carry (besides `node`, and `call` for per-call
/// nodes): `outcome` where every edge out is labeled, the frozen `result` at `final`, the gated
/// `intent` and its `outcome` at `fsGate`, the batch's `calls` at `model`.
pub fn required_fields(graph: &StageGraph, node: NodeId) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if graph.requires_outcome(node) || node == NodeId::FsGate {
        fields.push("outcome");
    }
    match node {
        NodeId::Final => fields.push("result"),
        NodeId::FsGate => fields.push("intent"),
        NodeId::Model => fields.push("calls"),
        _ => {}
    }
    fields
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use tep_model::graph::Revision;

    #[test]
    fn a_long_message_is_cut_at_a_character_and_says_how_long_it_was() {
        let short = "x".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(cut_message(short.clone()), short);
        // A two-byte character straddles the limit: the cut goes before it.
        let long = format!("{}é{}", "a".repeat(MAX_MESSAGE_BYTES - 1), "b".repeat(9000));
        let cut = cut_message(long.clone());
        let kept = MAX_MESSAGE_BYTES - 1;
        assert_eq!(&cut[..kept], &long[..kept]);
        assert_eq!(
            &cut[kept..],
            format!("\u{2026} (message cut at {kept} of {} bytes)", long.len())
        );
    }

    #[test]
    fn steps_past_the_limit_are_counted_not_kept() {
        let step = StepRecord {
            line: 1,
            graph: GraphKind::Pipeline,
            from: NodeId::Model,
            to: NodeId::Model,
            edge: None,
            refused: false,
        };
        let (mut steps, mut omitted) = (Vec::new(), 0);
        for _ in 0..MAX_STEPS + 3 {
            push_step(&mut steps, &mut omitted, step);
        }
        assert_eq!((steps.len(), omitted), (MAX_STEPS, 3));
    }

    /// Checks a one-call batch: its `model` line, then `rest`.
    fn check_batch(rest: &[String]) -> Result<CheckReport, TraceError> {
        let model = r#"{"kind":"stage","node":"model","calls":[{"callId":"c1","name":"t","concurrencySafe":false}]}"#;
        let text = [&[model.to_owned()][..], rest].concat().join("\n");
        crate::trace_io::check_reader(&CheckOptions::new(Revision::Rev2), text.as_bytes())
    }

    #[test]
    fn a_record_that_cannot_be_placed_is_refused_in_words_naming_its_line() {
        let call = r#"{"kind":"event","call":"c1","event":{"seq":1,"time":0,"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"t","arguments":"{}"}}}"#;
        let pre = r#"{"kind":"stage","node":"pre","call":"c1","outcome":"allow"}"#;
        let body = r#"{"kind":"stage","node":"toolBody","call":"c1"}"#;
        // Inside a body: the call's records so far, then `last`.
        let in_body = |last: &str| vec![call.into(), pre.into(), body.into(), last.to_owned()];
        let after_call = |last: &str| vec![call.into(), last.to_owned()];
        let alone = |only: &str| vec![only.to_owned()];
        let cases: Vec<(Vec<String>, &str)> = vec![
            (
                alone(r#"{"kind":"stage","node":"toolCall","call":"c1"}"#),
                "line 2: stage `toolCall` is observed through its session event, not as a stage record",
            ),
            (
                alone(r#"{"kind":"stage","node":"owned","call":"c1"}"#),
                "line 2: stage `owned` is observed through its session event",
            ),
            (
                alone(r#"{"kind":"stage","node":"context"}"#),
                "line 2: stage `context` is observed through its session event",
            ),
            (
                alone(r#"{"kind":"stage","node":"dispatched","call":"c1"}"#),
                "line 2: stage `dispatched` is observed through its session event",
            ),
            (
                alone(r#"{"kind":"stage","node":"dispatchStart","call":"c1"}"#),
                "line 2: stage `dispatchStart` is observed through its session event",
            ),
            (
                alone(r#"{"kind":"stage","node":"runCode","call":"c1"}"#),
                "line 2: stage `runCode` is observed through a binding mark",
            ),
            (
                alone(r#"{"kind":"stage","node":"allResults","call":"c1"}"#),
                "line 2: stage `allResults` is per batch and takes no `call`",
            ),
            (
                alone(r#"{"kind":"stage","node":"presentCall"}"#),
                "line 2: stage `presentCall` needs a `call`",
            ),
            (
                after_call(r#"{"kind":"stage","node":"pre","call":"c1"}"#),
                "line 3: stage `pre` needs an `outcome` (one of: allow, deny, ask, throw)",
            ),
            (
                after_call(r#"{"kind":"stage","node":"final","call":"c1"}"#),
                "line 3: stage `final` needs a `result`",
            ),
            (
                in_body(
                    r#"{"kind":"stage","node":"fsGate","call":"c1","intent":{"intent":"write","target":"a.txt"}}"#,
                ),
                "line 5: stage `fsGate` needs an `outcome` (one of: allow, deny)",
            ),
            (
                in_body(r#"{"kind":"stage","node":"fsGate","call":"c1","outcome":"allow"}"#),
                "line 5: stage `fsGate` needs an `intent`",
            ),
        ];
        for (rest, words) in cases {
            match check_batch(&rest) {
                Ok(report) => panic!("{rest:?} accepted: {:?}", report.violations),
                Err(e) => assert!(e.to_string().starts_with(words), "{rest:?}: {e}"),
            }
        }
        // With the field, each record is read and placed.
        for rest in [
            after_call(pre),
            after_call(
                r#"{"kind":"stage","node":"final","call":"c1","result":{"isError":false,"content":[]}}"#,
            ),
            in_body(
                r#"{"kind":"stage","node":"fsGate","call":"c1","outcome":"allow","intent":{"intent":"write","target":"a.txt"}}"#,
            ),
        ] {
            check_batch(&rest).unwrap_or_else(|e| panic!("{rest:?}: {e}"));
        }
    }
}
