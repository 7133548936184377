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
use tep_model::identity::{CallId, parse_arguments};
use tep_model::session::{EventBody, FileState, MessageSource, SessionEvent};
use tep_model::trace::{EventRecord, Mark, MarkKind, Observation, ObservationLevel, TraceRecord};

use crate::catalog::invariant;
use crate::checkability::{self, Checkability};
pub use crate::facts::state::scanned;
use crate::facts::state::{Batch, Call, Section};
use crate::facts::walk::{Step, Walker, bit};
pub use crate::facts::{CheckOptions, InvariantStatus, ScenarioFacts};
use crate::facts::{FsSeen, context_text};
use crate::invariants::{InvariantId, Level};
use crate::observation::{Expectations, level_of};
use crate::rules::{self, Claim, Cx, Finding, Read, Record, Refused, Rule, Visit};

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
pub struct Violation {
    pub invariant: InvariantId,
    pub level: Level,
    /// Witness lines (1-based), the offending one first.
    pub lines: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<CallId>,
    /// One plain sentence.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.message)
    }
}

/// Why a trace could not be read. Always names the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TraceError {
    pub line: usize,
    pub message: String,
}

impl TraceError {
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        TraceError {
            line,
            message: message.into(),
        }
    }
}

/// What the catalog says of an invariant under these options.
impl CheckOptions {
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

/// The outcome of checking a whole trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
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
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

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
    by_node: Vec<Vec<&'static Rule>>,
    audit: Vec<&'static Rule>,
    observer_marks: Vec<&'static Rule>,
    body_marks: Vec<&'static Rule>,
    events: Vec<&'static Rule>,
    settle: Vec<&'static Rule>,
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
        let visiting = |pred: &dyn Fn(&Rule) -> bool| -> Vec<&'static Rule> {
            runs.iter()
                .copied()
                .filter(|r| r.visit.is_some() && pred(r))
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
    session: FsSeen,
    seen_records: usize,
    found: Vec<Finding>,
    /// An exception escaped the pipeline: the open batch ended there.
    escaped: bool,
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
            session: FsSeen::default(),
            seen_records: 0,
            found: Vec::new(),
            escaped: false,
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

    /// Feeds records already in memory (record `i` is line `i + 1`), then finishes.
    pub fn check(mut self, records: &[TraceRecord]) -> Result<CheckReport, TraceError> {
        for (i, record) in records.iter().enumerate() {
            self.feed(i + 1, record)?;
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

    fn stage(&mut self, line: usize, obs: &Observation) -> Result<(), TraceError> {
        let node = obs.node;
        let tables = &self.walker.tables;
        let kind = tables.kind(node);
        if matches!(
            kind,
            Some(NodeKind::SessionEvent | NodeKind::OwnedEvents | NodeKind::ContextInjection)
        ) || matches!(node, NodeId::DispatchStart | NodeId::Dispatched)
        {
            return Err(TraceError::new(
                line,
                format!(
                    "stage `{node}` is observed through its session event, not as a stage record"
                ),
            ));
        }
        if node == NodeId::RunCode {
            return Err(TraceError::new(
                line,
                "stage `runCode` is observed through a binding mark (`binding-resolved` or `binding-rejected`)",
            ));
        }
        if node == NodeId::Model {
            return self.open_batch(line, obs);
        }
        let scope = tables.scope(node).unwrap_or(Scope::Call);
        if scope == Scope::Batch {
            if obs.call.is_some() {
                return Err(TraceError::new(
                    line,
                    format!("stage `{node}` is per batch and takes no `call`"),
                ));
            }
            return self.settle(line, node);
        }
        let call = obs
            .call
            .as_ref()
            .ok_or_else(|| TraceError::new(line, format!("stage `{node}` needs a `call`")))?;
        let present = |field: &str| match field {
            "outcome" => obs.outcome.is_some(),
            "result" => obs.result.is_some(),
            "intent" => obs.intent.is_some(),
            _ => true,
        };
        // Only a record that lacks a field pays for finding which.
        let lacks = ((tables.requires_outcome(node) || node == NodeId::FsGate)
            && obs.outcome.is_none())
            || (node == NodeId::Final && obs.result.is_none())
            || (node == NodeId::FsGate && obs.intent.is_none());
        if lacks
            && let Some(field) = required_fields(self.graph, node)
                .into_iter()
                .find(|f| !present(f))
        {
            let article = if field.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            let mut message = format!("stage `{node}` needs {article} `{field}`");
            if field == "outcome" {
                let outcomes: Vec<&str> = match node {
                    NodeId::FsGate => vec!["allow", "deny"],
                    _ => self
                        .graph
                        .decisive_outcomes(node)
                        .iter()
                        .map(|o| o.as_str())
                        .collect(),
                };
                message = format!(
                    "stage `{node}` needs an `outcome` (one of: {})",
                    outcomes.join(", ")
                );
            }
            return Err(TraceError::new(line, message));
        }
        let i = self.resolve_call(line, call, obs.parent.as_ref(), node == NodeId::Pre)?;
        self.visit(line, i, Some(node), obs.outcome, Record::Stage(obs));
        Ok(())
    }

    fn event(&mut self, line: usize, rec: &EventRecord) -> Result<(), TraceError> {
        let event = &rec.event;
        // The call the event belongs to: the trace's attribution, or the event's own id.
        let own = match &event.body {
            EventBody::ToolCall(data) => Some(&data.call_id),
            EventBody::ToolResult(data) => data.call_id(),
            EventBody::ApprovalAsked(data) => data.call_id.as_ref(),
            EventBody::CodeDispatchStart(data) => Some(&data.sub_call_id),
            EventBody::CodeDispatch(data) => Some(&data.sub_call_id),
            EventBody::UserMessage(m) => tool_source(&m.source),
            EventBody::ContextMessage(m) => tool_source(&m.source),
            _ => None,
        };
        let parent = match &event.body {
            EventBody::CodeDispatchStart(data) => Some(&data.parent_call_id),
            EventBody::CodeDispatch(data) => Some(&data.parent_call_id),
            _ => None,
        };
        // A tool/result or an injected context that names another call is a violation
        // (`result-names-its-call`); any other disagreement means the trace cannot be attributed.
        if let (Some(given), Some(own)) = (&rec.call, own)
            && given != own
            && !matches!(
                event.body,
                EventBody::ToolResult(_) | EventBody::UserMessage(_) | EventBody::ContextMessage(_)
            )
        {
            return Err(TraceError::new(
                line,
                format!(
                    "the record is attributed to call {given} but its {} names call {own}",
                    event.body.type_name()
                ),
            ));
        }
        let call = rec.call.as_ref().or(own);
        self.session_event(line, event, call);
        let Some(call) = call else {
            // Not a call's event: a user's own message, or an event a recording could not
            // attribute. Nothing but the session log's order applies to it.
            return match &event.body {
                EventBody::ToolCall(_) | EventBody::ToolResult(_) => Err(TraceError::new(
                    line,
                    format!("a `{}` event needs a call id", event.body.type_name()),
                )),
                _ => Ok(()),
            };
        };
        let starts = matches!(event.body, EventBody::CodeDispatchStart(_));
        let i = self.resolve_call(line, call, parent, starts)?;
        let is_sub_call = self
            .batch
            .as_ref()
            .is_some_and(|b| b.calls[i].is_sub_call());
        let node = if is_sub_call {
            EventBody::code_mode_node_of(event.body.type_name())
        } else {
            event.body.node()
        };
        self.visit(line, i, node, None, Record::Event(event));
        Ok(())
    }

    fn mark(&mut self, line: usize, mark: &Mark) -> Result<(), TraceError> {
        let i = self.resolve_call(line, &mark.call, None, false)?;
        let (node, outcome) = match mark.mark {
            MarkKind::ObserverSettled | MarkKind::BodySettled => (None, None),
            MarkKind::BindingResolved | MarkKind::BindingRejected => {
                let is_sub_call = self
                    .batch
                    .as_ref()
                    .is_some_and(|b| b.calls[i].is_sub_call());
                if !is_sub_call {
                    return Err(TraceError::new(
                        line,
                        format!(
                            "a binding mark is for a Code Mode sub-call, not call {}",
                            mark.call
                        ),
                    ));
                }
                let outcome = if mark.mark == MarkKind::BindingRejected {
                    Outcome::Reject
                } else {
                    Outcome::Resolve
                };
                (Some(NodeId::RunCode), Some(outcome))
            }
        };
        self.visit(line, i, node, outcome, Record::Mark(mark));
        Ok(())
    }

    /// Rules that read every session event (the log's own order), attributed or not.
    fn session_event(&mut self, line: usize, event: &SessionEvent, call: Option<&CallId>) {
        if self.dispatch.events.is_empty() {
            self.session.last_seq = Some((event.seq, line));
            return;
        }
        let index = call.and_then(|c| self.batch.as_ref()?.find(c));
        let Some(batch) = self.batch.as_ref() else {
            self.session.last_seq = Some((event.seq, line));
            return;
        };
        let mut cx = Cx {
            options: &self.options,
            batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in &self.dispatch.events {
            if let Some(f) = rule.event {
                f(&mut cx, line, event, index);
            }
        }
        self.session.last_seq = Some((event.seq, line));
        self.emit();
    }

    /// The index of `call` in the open batch. A Code Mode sub-call is added the first time it
    /// appears: its parent is the record's (`parent`, `parentCallId`), or read from the id
    /// scheme `<parent>:code:<n>`. A record that `starts` a sub-call (its dispatch start, or its
    /// pre-execute) after its program ran again names a new sub-call.
    fn resolve_call(
        &mut self,
        line: usize,
        call: &CallId,
        parent: Option<&CallId>,
        starts: bool,
    ) -> Result<usize, TraceError> {
        let revision = self.options.revision;
        let batch = self.batch.as_mut().ok_or_else(|| {
            TraceError::new(
                line,
                "a record before the first `model` observation (every trace starts with the batch)",
            )
        })?;
        if let Some(i) = batch.find(call) {
            // A sub-call id names a new sub-call when its program runs again (a retry
            // dispatches the `run_code` body anew, and its numbering starts over).
            // (Later records of the earlier run's sub-call, an observer's mark, still name it.)
            let again = starts
                && batch.calls[i].parent.is_some_and(|p| {
                    batch.calls[p].code.dispatches != batch.calls[i].code.parent_dispatch
                });
            if !again {
                return Ok(i);
            }
        }
        let unknown = || {
            TraceError::new(
                line,
                format!(
                    "unknown call {call}: the batch declared at line {} does not list it (nor is it a Code Mode sub-call of one: no `parent`, and not `<call>:code:<n>`)",
                    batch.model_line
                ),
            )
        };
        let parent_id = match parent {
            Some(p) => p.clone(),
            None => CallId::from(call.as_str().rsplit_once(":code:").ok_or_else(unknown)?.0),
        };
        let p = *batch.index.get(&parent_id).ok_or_else(unknown)?;
        if batch.calls[p].is_sub_call() {
            return Err(unknown());
        }
        let i = batch.calls.len();
        let mut sub = Call::new(
            call.clone(),
            String::new(),
            None,
            StageGraph::code_mode(revision),
            line,
        );
        sub.parent = Some(p);
        sub.code.parent_dispatch = batch.calls[p].code.dispatches;
        // The sub-calls of one run of the program are the last ones of its list.
        sub.code.number = match batch.calls[p].code.sub_calls.last() {
            Some(&k) if batch.calls[k].code.parent_dispatch == sub.code.parent_dispatch => {
                batch.calls[k].code.number + 1
            }
            _ => 1,
        };
        batch.calls[p].code.sub_calls.push(i);
        batch.calls.push(sub);
        batch.index_call(call.clone(), i);
        Ok(i)
    }

    // -----------------------------------------------------------------------------------------
    // Batches

    fn open_batch(&mut self, line: usize, obs: &Observation) -> Result<(), TraceError> {
        if obs.call.is_some() {
            return Err(TraceError::new(
                line,
                "stage `model` is per batch and takes no `call`",
            ));
        }
        let declared = obs.calls.as_ref().ok_or_else(|| {
            TraceError::new(
                line,
                "stage `model` needs `calls` (the batch, in model order)",
            )
        })?;
        self.close_batch()?;
        let mut ids = BTreeSet::new();
        let mut calls = Vec::with_capacity(declared.len());
        for d in declared {
            if !ids.insert(&d.call_id) {
                return Err(TraceError::new(
                    line,
                    format!("duplicate call id {} in the batch", d.call_id),
                ));
            }
            let mut call = Call::new(
                d.call_id.clone(),
                d.name.clone(),
                d.concurrency_safe,
                self.graph,
                line,
            );
            call.facts = self.options.call_facts(&d.name);
            calls.push(call);
        }
        self.batch = Some(Batch::new(line, calls));
        self.report.batches += 1;
        Ok(())
    }

    /// The batch-level `allResults` record.
    fn settle(&mut self, line: usize, node: NodeId) -> Result<(), TraceError> {
        if node != NodeId::AllResults {
            return Err(TraceError::new(
                line,
                format!(
                    "stage `{node}` is not a batch stage of {}",
                    self.options.revision
                ),
            ));
        }
        let Some(batch) = self.batch.as_mut() else {
            return Err(TraceError::new(
                line,
                "a record before the first `model` observation",
            ));
        };
        let mut cx = Cx {
            options: &self.options,
            batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in &self.dispatch.settle {
            if let Some(f) = rule.settle {
                f(&mut cx, line);
            }
        }
        if batch.settled.is_none() {
            batch.settled = Some(line);
            let edge = self
                .walker
                .tables
                .edge(NodeId::ToolResult, NodeId::AllResults);
            if let Some(edge) = edge.filter(|_| batch.is_complete()) {
                self.taken.take(&mut self.report, GraphKind::Pipeline, edge);
            }
            if let Some(steps) = self.steps.as_mut() {
                push_step(
                    steps,
                    &mut self.report.steps_omitted,
                    StepRecord {
                        line,
                        graph: GraphKind::Pipeline,
                        from: NodeId::ToolResult,
                        to: NodeId::AllResults,
                        edge,
                        refused: false,
                    },
                );
            }
        }
        self.emit();
        Ok(())
    }

    /// A batch every call of which has its result, at a level that does not record
    /// `allResults`, settled there: the edge into it is implied.
    fn imply_settled(&mut self, batch: &Batch) {
        if batch.settled.is_none() && batch.is_complete() {
            self.implied[0] |= unrecorded_settle(&self.walker, self.options.level).0;
        }
    }

    fn close_batch(&mut self) -> Result<(), TraceError> {
        let Some(batch) = self.batch.take() else {
            return Ok(());
        };
        if self.options.level >= ObservationLevel::Hooks && looks_like_a_session_log(&batch) {
            return Err(TraceError::new(
                batch.model_line,
                format!(
                    "the batch declared here has session events but no stage record at all: this looks like a session log (level `events`), not a trace at level `{}`; check it with `--observed events`, or say so in its header (\"observation\": \"events\")",
                    self.options.level
                ),
            ));
        }
        if self.escaped {
            return Ok(());
        }
        self.imply_settled(&batch);
        let mut cx = Cx {
            options: &self.options,
            batch: &batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in &self.dispatch.batch_end {
            if let Some(f) = rule.batch_end {
                f(&mut cx);
            }
        }
        self.batch = Some(batch);
        self.emit();
        self.batch = None;
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Visits

    /// A record of call `i`: the step on its graph, the claim on a refused step, the rules that
    /// read it, then the facts it adds.
    fn visit(
        &mut self,
        line: usize,
        i: usize,
        node: Option<NodeId>,
        outcome: Option<Outcome>,
        record: Record<'_>,
    ) {
        let Some(batch) = self.batch.as_ref() else {
            return;
        };
        let call = &batch.calls[i];
        let walker = if call.is_sub_call() {
            &self.code_walker
        } else {
            &self.walker
        };
        let step = match node {
            // Contexts and tool-owned events are placed by their own rules.
            None | Some(NodeId::Context | NodeId::Owned) => Step::Side(None),
            Some(n) if !walker.tables.contains(n) => Step::Refused {
                error: tep_model::graph::StepError::NoEdge {
                    from: call.walk.position,
                    to: n,
                },
                missing: Vec::new(),
            },
            Some(n) => walker.step(
                call.walk.position,
                call.walk.outcome,
                n,
                call.facts,
                call.walk.visited,
            ),
        };
        if let (Step::Inferred, Some(to)) = (&step, node) {
            self.implied[graph_index(call.graph.kind())] |=
                walker.implied(call.walk.position, call.walk.outcome, to, call.facts);
        }
        if let (Some(steps), Some(to)) = (self.steps.as_mut(), node) {
            let edge = match step {
                Step::Direct(e) | Step::Side(Some(e)) => Some(e),
                _ => None,
            };
            push_step(
                steps,
                &mut self.report.steps_omitted,
                StepRecord {
                    line,
                    graph: call.graph.kind(),
                    from: edge
                        .and_then(|e| call.graph.edges().get(e.0))
                        .map_or(call.walk.position, |e| e.from),
                    to,
                    edge,
                    refused: step.is_refused(),
                },
            );
        }
        let visit = Visit {
            line,
            call: i,
            node,
            outcome,
            record,
            step: &step,
        };
        let mut claimed: Option<(InvariantId, Claim)> = None;
        if let (Step::Refused { error, missing }, Some(n)) = (&step, node) {
            let refused = Refused {
                visit: &visit,
                node: n,
                call,
                graph: call.graph,
                error,
                missing,
                level: self.options.level,
            };
            claimed = self.dispatch.claims.iter().find_map(|rule| {
                rule.claim
                    .and_then(|f| f(&refused))
                    .map(|c| (rule.entry.id, c))
            });
        }
        let readers = match (node, record) {
            (Some(n), _) => &self.dispatch.by_node[n as usize],
            (None, Record::Mark(m)) if m.mark == MarkKind::BodySettled => &self.dispatch.body_marks,
            (None, Record::Mark(_)) => &self.dispatch.observer_marks,
            (None, _) => &self.dispatch.audit,
        };
        let mut cx = Cx {
            options: &self.options,
            batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in readers {
            if let Some(f) = rule.visit {
                f(&mut cx, &visit);
            }
        }
        let keep = match claimed {
            Some((id, claim)) => {
                let keep = claim.keep_position;
                self.found.insert(
                    0,
                    Finding {
                        invariant: id,
                        call: Some(i),
                        lines: claim.lines,
                        message: claim.message,
                        once: true,
                    },
                );
                keep
            }
            None => false,
        };
        self.apply(line, i, node, outcome, record, &step, keep);
        self.emit();
    }

    /// Records what a visit adds to the call and the batch.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        line: usize,
        i: usize,
        node: Option<NodeId>,
        outcome: Option<Outcome>,
        record: Record<'_>,
        step: &Step,
        keep: bool,
    ) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let before = batch.calls[i].walk.last_node;
        let top_level = !batch.calls[i].is_sub_call();
        let kind = batch.calls[i].graph.kind();
        if let Step::Direct(edge) | Step::Side(Some(edge)) = step {
            self.taken.take(&mut self.report, kind, *edge);
        }
        {
            let tables = if top_level {
                &self.walker.tables
            } else {
                &self.code_walker.tables
            };
            let call = &mut batch.calls[i];
            call.walk.last_line = line;
            if let Some(n) = node {
                let moves = match step {
                    Step::Direct(_) | Step::Inferred => true,
                    Step::Refused { .. } => !keep && tables.contains(n),
                    // The last of consecutive `around` records is where the waterfall stands:
                    // its outcome (a wrapper's throw, or none) is the visit's.
                    Step::Stay => {
                        call.walk.outcome = outcome;
                        call.walk.position_line = line;
                        false
                    }
                    Step::Side(_) => false,
                };
                if moves && !tables.is_leaf(n) {
                    call.walk.position = n;
                    call.walk.outcome = outcome;
                    call.walk.position_line = line;
                }
                if tables.contains(n) && !tables.is_leaf(n) {
                    call.walk.last_node = n;
                }
                call.walk.visited |= bit(n);
            }
        }
        let call_facts = batch.calls[i].facts;
        match record {
            Record::Stage(obs) => self.stage_facts(line, i, obs, before),
            Record::Event(event) => self.event_facts(line, i, event),
            Record::Mark(mark) => {
                let call = &mut batch.calls[i];
                match mark.mark {
                    MarkKind::ObserverSettled => {
                        call.presented
                            .observer_marks
                            .push((line, mark.after_ms, mark.by.clone()));
                    }
                    MarkKind::BindingResolved | MarkKind::BindingRejected => {
                        call.code.binding.get_or_insert(line);
                    }
                    MarkKind::BodySettled => {
                        call.body.steps = None;
                        call.body.just_settled = true;
                    }
                }
            }
        }
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        // The ordered lane: the stages with a hook, in the prepare and commit phases.
        let tables = &self.walker.tables;
        if let Some(n) = node
            && top_level
            && !tables.is_leaf(n)
            && tables.has_hook(n)
            && !matches!(step, Step::Refused { .. } if keep)
            && let Some(sec) = tables.section(n)
        {
            if sec == Section::Commit {
                batch.calls[i].commit.started = true;
            }
            // Held until no ordered stage of the same section can come next (records without a
            // hook are looked past: they are not ordered stages; an ordered stage the call
            // already recorded, out of order, does not come again).
            let visited = batch.calls[i].walk.visited;
            let stays = self.walker.lane_stops(n, outcome, call_facts, sec) & !visited != 0;
            batch.lane = if stays { Some((i, sec, line)) } else { None };
        }
    }

    fn stage_facts(&mut self, line: usize, i: usize, obs: &Observation, before: NodeId) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let node = obs.node;
        let outcome = obs.outcome;
        let call = &mut batch.calls[i];
        call.body.just_settled = false;
        if let Some(identity) = &obs.identity {
            if call.is_sub_call() && call.name.is_empty() {
                call.name = identity.name.clone();
                call.facts = self.options.call_facts(&identity.name);
            }
            if call.is_sub_call() && call.start.args.is_none() {
                call.start.args = Some(identity.arguments.clone());
            }
            if call.start.first_token.is_none() {
                call.start.first_token = Some((identity.token.clone(), line));
            }
        }
        let denial = matches!(
            (node, outcome),
            (NodeId::Pre | NodeId::Guards, Some(Outcome::Deny))
                | (
                    NodeId::Approval,
                    Some(Outcome::Rejected | Outcome::Cancelled | Outcome::Unavailable)
                )
                | (NodeId::Denied, _)
        );
        if denial {
            call.decisions.denied.get_or_insert(line);
        }
        if outcome == Some(Outcome::Throw)
            && matches!(
                node,
                NodeId::Pre | NodeId::Approval | NodeId::Guards | NodeId::Around | NodeId::Post
            )
        {
            call.decisions.threw.get_or_insert((node, line));
        }
        match node {
            NodeId::Pre => {
                call.decisions.pre = Some(line);
                if outcome == Some(Outcome::Ask) {
                    call.decisions.pre_asked.get_or_insert(line);
                }
            }
            NodeId::Approval => call.approval.outcome = outcome,
            NodeId::Around if before == NodeId::ToolBody => {
                // The body returned to the wrappers.
                call.body.since = None;
                batch.running_bodies.remove(&i);
                batch.running_exclusive_bodies.remove(&i);
            }
            NodeId::ToolBody if before == NodeId::Around => {
                call.body.since = Some(line);
                call.code.dispatches += 1;
                if self.options.body_marks {
                    call.body.steps = Some(line);
                }
                if !call.is_sub_call() {
                    batch.running_bodies.insert(i);
                    if !call.may_overlap() {
                        batch.running_exclusive_bodies.insert(i);
                    }
                }
            }
            NodeId::Post => {
                if let Some(o) = outcome {
                    call.decisions.post = Some((o, line));
                }
            }
            // The pipeline failed applying post-execute's decision.
            NodeId::Normalized if before == NodeId::Post => {
                call.decisions.threw.get_or_insert((NodeId::Post, line));
            }
            NodeId::Finalize => {
                call.decisions.finalized.get_or_insert(line);
                if let Some(result) = &obs.result {
                    call.decisions.candidate =
                        Some((result.clone(), outcome == Some(Outcome::Throw), line));
                }
            }
            NodeId::Final => {
                if let Some(result) = &obs.result {
                    call.commit.notified.get_or_insert((result.clone(), line));
                }
                let parent = call.parent;
                if let Some(p) = parent
                    && batch.calls[p].code.open_sub == Some(i)
                {
                    batch.calls[p].code.open_sub = None;
                }
                if parent.is_none() && batch.completed.is_some() && batch.first_context.is_none() {
                    // An outcome announced after the batch completed (its result came first: a
                    // violation already) still owes its contexts.
                    batch.fifo = fifo(batch).into();
                }
            }
            NodeId::PresentCall => call.presented.call += 1,
            NodeId::PresentResult => call.presented.result += 1,
            _ => {}
        }
        open_sub_call(batch, i, node);
    }

    fn event_facts(&mut self, line: usize, i: usize, event: &SessionEvent) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let call = &mut batch.calls[i];
        match &event.body {
            EventBody::ToolCall(data) if call.start.logged.is_none() => {
                call.start.logged = Some((line, event.seq));
                call.start.args = Some(parse_arguments(&data.arguments));
                call.name = data.name.clone();
                call.facts = self.options.call_facts(&data.name);
                if call.safe == Some(false) {
                    batch.open_exclusive.insert(i);
                }
                batch.advance_cursors();
            }
            EventBody::ToolResult(_) if call.commit.result.is_none() && !call.is_sub_call() => {
                call.commit.result = Some(line);
                batch.open_exclusive.remove(&i);
                batch.advance_cursors();
                if batch.is_complete() && batch.completed.is_none() {
                    batch.completed = Some(line);
                    let mut expected = fifo(batch);
                    // Contexts injected too early were reported then; they are not owed again.
                    for (c, text) in std::mem::take(&mut batch.early_contexts) {
                        if let Some(k) = expected.iter().position(|(i, t, _)| *i == c && *t == text)
                        {
                            expected.remove(k);
                        }
                    }
                    batch.fifo = expected.into();
                }
            }
            EventBody::UserMessage(_) | EventBody::ContextMessage(_) => {
                if let Some(text) = context_text(&event.body) {
                    batch.consume_context(i, &text);
                }
                batch.last_injected = Some(i);
                batch.first_context.get_or_insert(line);
                if batch.settled.is_none() && batch.is_complete() {
                    let settled = unrecorded_settle(&self.walker, self.options.level);
                    self.implied[0] |= settled.0 | settled.1;
                }
                if let (Some(_), Some(edge)) = (
                    batch.settled,
                    self.walker.tables.edge(NodeId::AllResults, NodeId::Context),
                ) {
                    self.taken.take(&mut self.report, GraphKind::Pipeline, edge);
                }
            }
            EventBody::ApprovalAsked(_) => {
                call.approval.asked.get_or_insert(line);
            }
            EventBody::ApprovalDecided(data) => {
                call.approval.decided.get_or_insert((data.outcome, line));
            }
            EventBody::CodeDispatchStart(data) => {
                call.code.dispatch_started.get_or_insert(line);
                if call.name.is_empty() {
                    call.name = data.name.clone();
                    call.start.args = Some(data.arguments.clone());
                    call.facts = self.options.call_facts(&data.name);
                }
            }
            EventBody::CodeDispatch(data) => {
                call.code.dispatched.get_or_insert(line);
                if call.name.is_empty() {
                    call.name = data.name.clone();
                    call.start.args = Some(data.arguments.clone());
                }
            }
            EventBody::FsObserved(data) => match data.state {
                FileState::Present { version } => {
                    self.session
                        .files
                        .insert(data.target.clone(), (version, line));
                }
                FileState::Absent => {
                    self.session.files.remove(&data.target);
                }
            },
            _ => {}
        }
        // A tool-owned event recorded while the body runs takes the edge into the side branch.
        if event.body.node() == Some(NodeId::Owned) && batch.calls[i].body.since.is_some() {
            let kind = batch.calls[i].graph.kind();
            let tables = match kind {
                GraphKind::Pipeline => &self.walker.tables,
                GraphKind::CodeMode => &self.code_walker.tables,
            };
            if let Some(edge) = tables.edge(NodeId::ToolBody, NodeId::Owned) {
                self.taken.take(&mut self.report, kind, edge);
            }
        }
        let node = if batch.calls[i].is_sub_call() {
            EventBody::code_mode_node_of(event.body.type_name())
        } else {
            event.body.node()
        };
        if let Some(n) = node {
            open_sub_call(batch, i, n);
        }
    }

    /// Moves what the rules found into the report, once per call where asked.
    fn emit(&mut self) {
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
            self.report.violations.push(Violation {
                invariant: finding.invariant,
                level: invariant(finding.invariant).level,
                lines: finding.lines,
                call,
                message: cut_message(finding.message),
            });
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

/// A sub-call holds its program's lane from its first record until its `tools/result`.
fn open_sub_call(batch: &mut Batch, i: usize, node: NodeId) {
    let Some(p) = batch.calls[i].parent else {
        return;
    };
    let call = &batch.calls[i];
    let running = call.commit.notified.is_none()
        && !call.has_visited(NodeId::Final)
        && !matches!(node, NodeId::Final | NodeId::Dispatched | NodeId::RunCode);
    if running && batch.calls[p].code.open_sub.is_none() {
        batch.calls[p].code.open_sub = Some(i);
    }
}

/// The contexts the announced outcomes carry, in call order and each call's order.
fn fifo(batch: &Batch) -> Vec<(usize, String, usize)> {
    batch
        .top_level()
        .flat_map(|(i, c)| {
            c.commit.notified.iter().flat_map(move |(result, l)| {
                result
                    .additional_contexts
                    .iter()
                    .map(move |ctx| (i, ctx.text.clone(), *l))
            })
        })
        .collect()
}

fn tool_source(source: &MessageSource) -> Option<&CallId> {
    match source {
        MessageSource::Tool { call_id } => Some(call_id),
        _ => None,
    }
}

/// A batch whose calls have session events but not one stage record.
fn looks_like_a_session_log(batch: &Batch) -> bool {
    let hooks: u32 = NodeId::ALL
        .iter()
        .filter(|&&n| {
            crate::observation::level_of(n) == ObservationLevel::Hooks
                || crate::observation::level_of(n) == ObservationLevel::Full
        })
        .filter(|&&n| n != NodeId::AllResults && n != NodeId::RunCode)
        .fold(0, |acc, &n| acc | bit(n));
    let started = batch.top_level().any(|(_, c)| c.start.logged.is_some());
    started && batch.calls.iter().all(|c| c.walk.visited & hooks == 0)
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
    use tep_conformance::scenario::corpus;
    use tep_conformance::scripted::run_reference;
    use tep_model::graph::Revision;
    use tep_reference::mutant::Mutant;

    fn checked(id: &str, mutants: &[Mutant], keep: bool) -> CheckReport {
        let scenario = corpus().unwrap().into_iter().find(|s| s.id == id).unwrap();
        let records = run_reference(&scenario, Revision::Rev2, mutants).unwrap();
        let checker = Checker::new(CheckOptions::new(Revision::Rev2));
        let checker = if keep { checker.keep_steps() } else { checker };
        checker.check(&records).unwrap()
    }

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

    #[test]
    fn steps_are_kept_only_when_asked() {
        assert!(checked("allow-runs-body", &[], false).steps.is_empty());
        let report = checked("allow-runs-body", &[], true);
        assert!(report.violations.is_empty());
        // A clean walk: every step is an edge (or a side branch), and its edges are the
        // report's coverage.
        let graph = StageGraph::of(Revision::Rev2);
        assert!(!report.steps.is_empty());
        for step in &report.steps {
            assert!(!step.refused, "{step:?}");
            if let Some(edge) = step.edge {
                let e = &graph.edges()[edge.0];
                assert_eq!((e.from, e.to), (step.from, step.to), "{step:?}");
            }
        }
        let edges: BTreeSet<EdgeId> = report.steps.iter().filter_map(|s| s.edge).collect();
        assert_eq!(edges, report.edges);
        // Lines in trace order, one step per record that visits a node.
        assert!(report.steps.windows(2).all(|w| w[0].line < w[1].line));
    }

    #[test]
    fn a_refused_step_is_kept_where_the_violation_points() {
        let report = checked("pre-deny-skips-body", &[Mutant::RunBodyAfterDeny], true);
        let violation = report
            .violations
            .iter()
            .find(|v| v.invariant == InvariantId::DenySkipsBody)
            .unwrap();
        let step = report
            .steps
            .iter()
            .find(|s| s.line == violation.lines[0])
            .unwrap();
        assert_eq!(
            (step.graph, step.from, step.to, step.edge, step.refused),
            (
                GraphKind::Pipeline,
                NodeId::Denied,
                NodeId::Around,
                None,
                true
            )
        );
    }
}
