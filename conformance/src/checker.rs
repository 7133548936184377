//! The trace checker: one pass over a trace, reporting every invariant violation with the lines
//! that witness it.
//!
//! Each call has a *position* on the stage graph (its last non-leaf visit and that visit's
//! outcome). A visit is checked with [`StageGraph::step`]; a step the graph does not allow is
//! classified into the most specific invariant it breaks (`deny-skips-body` before the generic
//! `stage-graph-walk`), and the position then resynchronises on the visited node so one fault
//! is reported once. Cross-call invariants (model order, the ordered lane, overlapping bodies,
//! FIFO contexts) are checked against per-batch state.
//!
//! Memory is bounded by the calls of the open batch (plus one version per file the fs gate has
//! seen): a batch's state is dropped when the next `model` observation opens the next batch.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;

use serde::Serialize;
use serde_json::Value;
use tep_reference::graph::{
    EdgeId, GraphKind, NodeId, Outcome, Phase, Revision, Scope, StageGraph,
};
use tep_reference::identity::{CallId, Identity, parse_arguments};
use tep_reference::result::ToolResult;
use tep_reference::session::SessionEvent;
use tep_reference::session::{EventBody, FileState, ToolResultData};
use tep_reference::trace::{
    Capability, EventRecord, GuardVerdictKind, Mark, MarkKind, Observation, TraceRecord,
};

use crate::invariants::{InvariantId, Level, invariant};

/// At most this many violations are kept; the rest are counted.
pub const MAX_VIOLATIONS: usize = 1000;

/// One broken invariant, with the lines that witness it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// What to check a trace against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOptions {
    pub revision: Revision,
    /// The parts the implementation has; `None` means all. Invariants needing an absent part are
    /// not checked.
    pub capabilities: Option<BTreeSet<Capability>>,
}

impl CheckOptions {
    pub fn new(revision: Revision) -> Self {
        CheckOptions {
            revision,
            capabilities: None,
        }
    }

    pub fn checks(&self, id: InvariantId) -> bool {
        let inv = invariant(id);
        inv.applies_to(self.revision)
            && inv.requires.is_none_or(|cap| {
                self.capabilities
                    .as_ref()
                    .is_none_or(|caps| caps.contains(&cap))
            })
    }
}

/// The outcome of checking a whole trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub violations: Vec<Violation>,
    /// Violations beyond [`MAX_VIOLATIONS`], not kept.
    pub omitted: usize,
    /// Edges of the pipeline graph the trace took.
    pub edges: BTreeSet<EdgeId>,
    /// Edges of the Code Mode graph the trace's sub-calls took.
    pub code_mode_edges: BTreeSet<EdgeId>,
    /// How many records were checked.
    pub records: usize,
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
    let mut checker = Checker::new(options.clone());
    for (i, record) in records.iter().enumerate() {
        checker.feed(i + 1, record)?;
    }
    checker.finish()
}

/// A violation found while a call's state is borrowed: invariant, witness lines, sentence.
type Finding = (InvariantId, Vec<usize>, String);

/// The sections of the ordered lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Prepare,
    Commit,
}

fn section(phase: Phase) -> Option<Section> {
    match phase {
        Phase::Prepare => Some(Section::Prepare),
        Phase::Commit => Some(Section::Commit),
        _ => None,
    }
}

#[derive(Debug)]
struct CallState {
    id: CallId,
    name: String,
    safe: bool,
    /// The graph this call walks: the pipeline, or Code Mode for a sub-call.
    graph: &'static StageGraph,
    /// For a Code Mode sub-call: its `run_code` call.
    parent: Option<usize>,
    /// For a `run_code` call: how many sub-calls it started, and the one still running.
    sub_calls: usize,
    open_sub: Option<usize>,
    /// For a sub-call: the line of its `tool/code-dispatch`.
    dispatched: Option<usize>,
    position: NodeId,
    outcome: Option<Outcome>,
    position_line: usize,
    /// `tool/call` line and seq.
    started: Option<(usize, u64)>,
    args: Option<Value>,
    first_identity: Option<(Identity, usize)>,
    pre_line: Option<usize>,
    /// Line of the decision that denied the call.
    denied: Option<usize>,
    normalized: Option<usize>,
    post: Option<(Outcome, usize)>,
    finalized: Option<usize>,
    candidate: Option<(ToolResult, bool, usize)>,
    notified: Option<(ToolResult, usize)>,
    result: Option<usize>,
    commit_started: bool,
    body_running: Option<usize>,
    approval_asked: Option<usize>,
    approval_decided: Option<(Outcome, usize)>,
    approval_outcome: Option<Outcome>,
    marks: Vec<(usize, u64, String)>,
    /// Step invariants already reported for this call: one fault is reported once.
    step_reported: BTreeSet<InvariantId>,
    presented_call: u32,
    presented_result: u32,
    last_line: usize,
}

impl CallState {
    fn new(id: CallId, name: String, safe: bool, graph: &'static StageGraph, line: usize) -> Self {
        CallState {
            id,
            name,
            safe,
            graph,
            parent: None,
            sub_calls: 0,
            open_sub: None,
            dispatched: None,
            position: graph.entry(),
            outcome: None,
            position_line: line,
            started: None,
            args: None,
            first_identity: None,
            pre_line: None,
            denied: None,
            normalized: None,
            post: None,
            finalized: None,
            candidate: None,
            notified: None,
            result: None,
            commit_started: false,
            body_running: None,
            approval_asked: None,
            approval_decided: None,
            approval_outcome: None,
            marks: Vec::new(),
            step_reported: BTreeSet::new(),
            presented_call: 0,
            presented_result: 0,
            last_line: line,
        }
    }
}

#[derive(Debug)]
struct Batch {
    model_line: usize,
    calls: Vec<CallState>,
    index: HashMap<CallId, usize>,
    settled: Option<usize>,
    /// The call holding the ordered lane, its section and the line it took it.
    lane: Option<(usize, Section, usize)>,
    /// Contexts still to be injected, in order: (call, text, line of the outcome).
    expected_contexts: VecDeque<(usize, String, usize)>,
}

/// The streaming checker. Feed records in order with their line numbers, then [`Checker::finish`].
#[derive(Debug)]
pub struct Checker {
    options: CheckOptions,
    graph: &'static StageGraph,
    batch: Option<Batch>,
    fs_seen: HashMap<String, (u64, usize)>,
    last_seq: Option<(u64, usize)>,
    seen_records: usize,
    report: CheckReport,
}

/// How a visit is described in messages: "line 7 (tool body, call c2)".
fn at(line: usize, node: NodeId, outcome: Option<Outcome>, call: &CallId) -> String {
    match outcome {
        Some(o) => format!("line {line} ({} {o}, call {call})", node.describe()),
        None => format!("line {line} ({}, call {call})", node.describe()),
    }
}

impl Checker {
    pub fn new(options: CheckOptions) -> Self {
        Checker {
            graph: StageGraph::of(options.revision),
            options,
            batch: None,
            fs_seen: HashMap::new(),
            last_seq: None,
            seen_records: 0,
            report: CheckReport::default(),
        }
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

    fn violate_all(&mut self, call: &CallId, found: Vec<Finding>) {
        for (id, lines, message) in found {
            self.violate(id, lines, Some(call), message);
        }
    }

    fn violate(
        &mut self,
        id: InvariantId,
        lines: Vec<usize>,
        call: Option<&CallId>,
        message: String,
    ) {
        if !self.options.checks(id) {
            return;
        }
        if self.report.violations.len() >= MAX_VIOLATIONS {
            self.report.omitted += 1;
            return;
        }
        self.report.violations.push(Violation {
            invariant: id,
            level: invariant(id).level,
            lines,
            call: call.cloned(),
            message,
        });
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

    /// Closes the last batch and returns the report.
    pub fn finish(mut self) -> Result<CheckReport, TraceError> {
        self.close_batch();
        Ok(self.report)
    }

    // -----------------------------------------------------------------------------------------
    // Record kinds

    fn stage(&mut self, line: usize, obs: &Observation) -> Result<(), TraceError> {
        let node = obs.node;
        let kind = self.graph.node(node).map(|n| n.kind);
        if matches!(
            kind,
            Some(tep_reference::graph::NodeKind::SessionEvent)
                | Some(tep_reference::graph::NodeKind::OwnedEvents)
                | Some(tep_reference::graph::NodeKind::ContextInjection)
        ) {
            return Err(TraceError::new(
                line,
                format!(
                    "stage `{node}` is observed through its session event, not as a stage record"
                ),
            ));
        }
        if node == NodeId::Model {
            return self.open_batch(line, obs);
        }
        let scope = self
            .graph
            .node(node)
            .map(|n| n.scope)
            .unwrap_or(Scope::Call);
        if scope == Scope::Batch {
            if obs.call.is_some() {
                return Err(TraceError::new(
                    line,
                    format!("stage `{node}` is per batch and takes no `call`"),
                ));
            }
            return self.batch_visit(line, node);
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
        if let Some(field) = required_fields(self.graph, node)
            .into_iter()
            .find(|f| !present(f))
        {
            let mut message = format!("stage `{node}` needs a `{field}`");
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
        let i = self.resolve_call(line, call)?;
        self.visit(line, i, node, obs.outcome);
        self.after_stage(line, i, obs);
        Ok(())
    }

    fn event(&mut self, line: usize, rec: &EventRecord) -> Result<(), TraceError> {
        let event = &rec.event;
        if let Some((prev, prev_line)) = self.last_seq
            && event.seq <= prev
        {
            self.violate(
                InvariantId::SessionSeqIncreasing,
                vec![line, prev_line],
                rec.call.as_ref(),
                format!(
                    "line {line} has seq {} after line {prev_line} with seq {prev}",
                    event.seq
                ),
            );
        }
        self.last_seq = Some((event.seq, line));
        // The call the event belongs to: the trace's attribution, or the event's own id.
        let own = match &event.body {
            EventBody::ToolCall(data) => Some(data.call_id.clone()),
            EventBody::ToolResult(data) => data.call_id().cloned(),
            EventBody::ApprovalAsked(data) => data.call_id.clone(),
            EventBody::CodeDispatchStart(data) => Some(data.sub_call_id.clone()),
            EventBody::CodeDispatch(data) => Some(data.sub_call_id.clone()),
            _ => None,
        };
        // A tool/result that names another call is `result-names-its-call`, checked below; any
        // other disagreement means the trace cannot be attributed.
        if let (Some(given), Some(own)) = (&rec.call, &own)
            && given != own
            && !matches!(event.body, EventBody::ToolResult(_))
        {
            return Err(TraceError::new(
                line,
                format!(
                    "the record is attributed to call {given} but its {} names call {own}",
                    event.body.type_name()
                ),
            ));
        }
        let call = rec.call.clone().or(own).ok_or_else(|| {
            TraceError::new(
                line,
                format!("a `{}` event needs a `call`", event.body.type_name()),
            )
        })?;
        let i = self.resolve_call(line, &call)?;
        let is_sub_call = self
            .batch
            .as_ref()
            .is_some_and(|b| b.calls[i].parent.is_some());
        let node = if is_sub_call {
            EventBody::code_mode_node_of(event.body.type_name())
        } else {
            event.body.node()
        };
        match node {
            Some(node) => {
                self.visit(line, i, node, None);
                self.after_event(line, i, event);
            }
            None => self.audit_event(line, i, &event.body),
        }
        Ok(())
    }

    fn mark(&mut self, line: usize, mark: &Mark) -> Result<(), TraceError> {
        let i = self.resolve_call(line, &mark.call)?;
        if mark.mark != MarkKind::ObserverSettled {
            return self.binding_mark(line, i, mark);
        }
        let revision = self.options.revision;
        let Some(batch) = self.batch.as_mut() else {
            return Ok(());
        };
        let call = &mut batch.calls[i];
        call.marks.push((line, mark.after_ms, mark.by.clone()));
        if let Some(result_line) = call.result
            && revision == Revision::Rev1
        {
            let id = call.id.clone();
            self.violate(
                InvariantId::NotificationAwaited,
                vec![line, result_line],
                Some(&id),
                format!(
                    "line {line} (observer {} settled, call {id}) after line {result_line} (tool/result, call {id}): the notification was not awaited",
                    mark.by
                ),
            );
        }
        Ok(())
    }

    /// A Code Mode program reports how a binding settled: the sub-call's walk returns to the
    /// program, and the settlement must match the sub-call's announced outcome.
    fn binding_mark(&mut self, line: usize, i: usize, mark: &Mark) -> Result<(), TraceError> {
        let is_sub_call = self
            .batch
            .as_ref()
            .is_some_and(|b| b.calls[i].parent.is_some());
        if !is_sub_call {
            return Err(TraceError::new(
                line,
                format!(
                    "a `{}` mark is for a Code Mode sub-call, not call {}",
                    serde_json::to_value(mark.mark)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    mark.call
                ),
            ));
        }
        let rejected = mark.mark == MarkKind::BindingRejected;
        self.visit(
            line,
            i,
            NodeId::RunCode,
            Some(if rejected {
                Outcome::Reject
            } else {
                Outcome::Resolve
            }),
        );
        let Some(batch) = self.batch.as_ref() else {
            return Ok(());
        };
        let call = &batch.calls[i];
        let id = call.id.clone();
        let problem = match (&call.notified, rejected, &mark.rejection) {
            (Some((result, _)), false, _) if result.is_error => {
                Some("resolved, but the sub-call ended as an error".to_owned())
            }
            (Some((result, _)), true, _) if !result.is_error => {
                Some("rejected, but the sub-call succeeded".to_owned())
            }
            (Some(_), true, None) => Some("rejected without saying with what".to_owned()),
            (Some((result, _)), true, Some(rejection)) => {
                let message = result
                    .error
                    .as_ref()
                    .map_or_else(|| result.text(), |e| e.message.clone());
                (rejection.tool_name != call.name || rejection.message != message).then(|| {
                    format!(
                        "rejected with {{toolName: {:?}, message: {:?}}}, expected {{toolName: {:?}, message: {:?}}}",
                        rejection.tool_name, rejection.message, call.name, message
                    )
                })
            }
            _ => None,
        };
        if let Some(problem) = problem {
            let at = call.notified.as_ref().map_or(line, |(_, l)| *l);
            self.violate(
                InvariantId::BindingSettles,
                vec![line, at],
                Some(&id),
                format!(
                    "line {line} (binding of sub-call {id}): {problem} (announced at line {at})"
                ),
            );
        }
        Ok(())
    }

    /// The index of `call` in the open batch. A Code Mode sub-call (`<parent>:code:<n>` of a
    /// call of the batch) is added the first time it appears.
    fn resolve_call(&mut self, line: usize, call: &CallId) -> Result<usize, TraceError> {
        let revision = self.options.revision;
        let batch = self.batch.as_mut().ok_or_else(|| {
            TraceError::new(
                line,
                "a record before the first `model` observation (every trace starts with the batch)",
            )
        })?;
        if let Some(&i) = batch.index.get(call) {
            return Ok(i);
        }
        let unknown = || {
            TraceError::new(
                line,
                format!(
                    "unknown call {call}: the batch declared at line {} does not list it (nor is it a sub-call `<call>:code:<n>` of one)",
                    batch.model_line
                ),
            )
        };
        let (parent_id, n) = call.as_str().rsplit_once(":code:").ok_or_else(unknown)?;
        let n: usize = n.parse().map_err(|_| unknown())?;
        let parent = *batch
            .index
            .get(&CallId::from(parent_id))
            .ok_or_else(unknown)?;
        if batch.calls[parent].parent.is_some() {
            return Err(unknown());
        }
        let i = batch.calls.len();
        batch.calls[parent].sub_calls += 1;
        let expected = batch.calls[parent].sub_calls;
        let mut sub = CallState::new(
            call.clone(),
            String::new(),
            false,
            StageGraph::code_mode(revision),
            line,
        );
        sub.parent = Some(parent);
        batch.calls.push(sub);
        batch.index.insert(call.clone(), i);
        if n != expected {
            self.violate(
                InvariantId::SubCallIdScheme,
                vec![line],
                Some(call),
                format!("line {line}: sub-call {call} is the {expected}th sub-call of {parent_id} to start; expected id {parent_id}:code:{expected}"),
            );
        }
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
        self.close_batch();
        let mut index = HashMap::new();
        let mut calls = Vec::with_capacity(declared.len());
        for (i, d) in declared.iter().enumerate() {
            if index.insert(d.call_id.clone(), i).is_some() {
                return Err(TraceError::new(
                    line,
                    format!("duplicate call id {} in the batch", d.call_id),
                ));
            }
            calls.push(CallState::new(
                d.call_id.clone(),
                d.name.clone(),
                d.concurrency_safe,
                self.graph,
                line,
            ));
        }
        self.batch = Some(Batch {
            model_line: line,
            calls,
            index,
            settled: None,
            lane: None,
            expected_contexts: VecDeque::new(),
        });
        Ok(())
    }

    fn batch_visit(&mut self, line: usize, node: NodeId) -> Result<(), TraceError> {
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
        let mut found = Vec::new();
        if let Some(earlier) = batch.settled {
            found.push((
                InvariantId::BatchSettles,
                vec![line, earlier],
                None,
                format!("line {line} settles the batch again after line {earlier}"),
            ));
        }
        batch.settled = Some(line);
        let mut edges = Vec::new();
        for call in batch.calls.iter_mut().filter(|c| c.parent.is_none()) {
            match self.graph.step(call.position, call.outcome, NodeId::AllResults) {
                Ok((edge, _)) => edges.push(edge),
                Err(_) if call.result.is_none() => found.push((
                    InvariantId::BatchSettles,
                    vec![line, call.last_line],
                    Some(call.id.clone()),
                    format!("line {line} (batch settled) before call {}'s tool/result (last seen at line {})", call.id, call.last_line),
                )),
                Err(err) => found.push((
                    InvariantId::StageGraphWalk,
                    vec![line, call.position_line],
                    Some(call.id.clone()),
                    format!("line {line} (batch settled) after {}: {err}", at(call.position_line, call.position, call.outcome, &call.id)),
                )),
            }
            call.position = NodeId::AllResults;
            call.outcome = None;
            call.position_line = line;
        }
        // The FIFO the injections must follow: each call's announced contexts, in model order.
        let expected: VecDeque<(usize, String, usize)> = batch
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.parent.is_none())
            .flat_map(|(i, c)| {
                c.notified.iter().flat_map(move |(result, l)| {
                    result
                        .additional_contexts
                        .iter()
                        .map(move |ctx| (i, ctx.text.clone(), *l))
                })
            })
            .collect();
        batch.expected_contexts = expected;
        self.report.edges.extend(edges);
        for (id, lines, call, message) in found {
            self.violate(id, lines, call.as_ref(), message);
        }
        Ok(())
    }

    fn close_batch(&mut self) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        let mut found = Vec::new();
        if batch.settled.is_none() {
            found.push((
                InvariantId::BatchSettles,
                vec![batch.model_line],
                None,
                format!(
                    "the batch declared at line {} never settled (no allResults)",
                    batch.model_line
                ),
            ));
        }
        for call in batch.calls.iter().filter(|c| c.parent.is_some()) {
            if call.dispatched.is_none() {
                found.push((
                    InvariantId::SubCallLogsDispatch,
                    vec![call.last_line],
                    Some(call.id.clone()),
                    format!(
                        "sub-call {} (last seen at line {}) was never logged as tool/code-dispatch",
                        call.id, call.last_line
                    ),
                ));
            } else if call.position != NodeId::RunCode {
                found.push((
                    InvariantId::BindingSettles,
                    vec![call.last_line],
                    Some(call.id.clone()),
                    format!("sub-call {} was logged (line {}) but its binding never settled in the program", call.id, call.last_line),
                ));
            }
        }
        for call in batch.calls.iter().filter(|c| c.parent.is_none()) {
            if call.result.is_none() {
                found.push((
                    InvariantId::OneResultPerCall,
                    vec![call.last_line, batch.model_line],
                    Some(call.id.clone()),
                    format!(
                        "call {} (declared at line {}) never got a tool/result",
                        call.id, batch.model_line
                    ),
                ));
            }
            if call.started.is_some() && (call.presented_call != 1 || call.presented_result != 1) {
                found.push((
                    InvariantId::UiPresentsEachCall,
                    vec![call.last_line],
                    Some(call.id.clone()),
                    format!(
                        "call {} was presented {} time(s) as pending and {} time(s) as completed; expected once each",
                        call.id, call.presented_call, call.presented_result
                    ),
                ));
            }
            // A prompt that threw was never answered: there is no decision to audit.
            if let (Some(asked), None) = (call.approval_asked, call.approval_decided)
                && call.approval_outcome != Some(Outcome::Throw)
            {
                found.push((
                    InvariantId::ApprovalAudited,
                    vec![asked],
                    Some(call.id.clone()),
                    format!(
                        "line {asked} (approval/asked, call {}) has no approval/decided",
                        call.id
                    ),
                ));
            }
        }
        for (i, text, l) in &batch.expected_contexts {
            let id = &batch.calls[*i].id;
            found.push((
                InvariantId::ContextsFifo,
                vec![*l],
                Some(id.clone()),
                format!("context {text:?} of call {id} (announced at line {l}) was never injected"),
            ));
        }
        for (id, lines, call, message) in found {
            self.violate(id, lines, call.as_ref(), message);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Visits

    /// The step check, its classification, the position update and the cross-call checks.
    fn visit(&mut self, line: usize, i: usize, node: NodeId, outcome: Option<Outcome>) {
        let revision = self.options.revision;
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let mut found: Vec<Finding> = Vec::new();
        let call_id = batch.calls[i].id.clone();
        let graph = batch.calls[i].graph;
        // Sub-calls live inside their parent's body: the batch-level order checks are the
        // parent's; theirs are the Code Mode ones below.
        let top_level = batch.calls[i].parent.is_none();

        // Cross-call checks first: they look at the other calls as they were before this visit.
        let phase = graph.node(node).map(|n| n.phase);
        let is_leaf = graph.is_leaf(node);
        if node == NodeId::ToolCall {
            if let Some(j) = (0..i).find(|&j| batch.calls[j].started.is_none()) {
                found.push((
                    InvariantId::ModelOrderStart,
                    vec![line, batch.model_line],
                    format!("line {line} (tool/call, call {call_id}) before call {} started, which comes first in the batch (line {})", batch.calls[j].id, batch.model_line),
                ));
            }
            if !batch.calls[i].safe
                && let Some(j) = (0..i).find(|&j| batch.calls[j].result.is_none())
            {
                let other = &batch.calls[j];
                found.push((
                    InvariantId::ExclusiveBarrier,
                    vec![line, other.last_line],
                    format!("line {line} (tool/call, exclusive call {call_id}) before call {}'s tool/result", other.id),
                ));
            }
        }
        if let Some(x) = batch.calls.iter().position(|c| {
            c.parent.is_none() && !c.safe && c.started.is_some() && c.result.is_none()
        }) && top_level
            && x != i
            && batch.calls[i].result.is_none()
        {
            let other = &batch.calls[x];
            found.push((
                InvariantId::ExclusiveBarrier,
                vec![line, other.last_line],
                format!(
                    "{} while exclusive call {} is still running (last seen at line {})",
                    at(line, node, outcome, &call_id),
                    other.id,
                    other.last_line
                ),
            ));
        }
        if top_level
            && !is_leaf
            && let Some(sec) = phase.and_then(section)
        {
            if let Some((holder, held, since)) = batch.lane
                && holder != i
            {
                let other = &batch.calls[holder].id;
                found.push((
                    InvariantId::OrderedStagesSerial,
                    vec![line, since],
                    format!(
                        "{} while call {other}'s {} stages are still running (since line {since})",
                        at(line, node, outcome, &call_id),
                        if held == Section::Prepare {
                            "prepare"
                        } else {
                            "commit"
                        }
                    ),
                ));
            }
            if sec == Section::Commit && !batch.calls[i].commit_started {
                batch.calls[i].commit_started = true;
                if let Some(j) = (0..i).find(|&j| batch.calls[j].result.is_none()) {
                    let other = &batch.calls[j];
                    found.push((
                        InvariantId::ModelOrderCommit,
                        vec![line, other.last_line],
                        format!(
                            "{} before call {}'s tool/result, which comes first in the batch",
                            at(line, node, outcome, &call_id),
                            other.id
                        ),
                    ));
                }
            }
            // Holds the lane until no next stop stays in this section.
            let stays = graph
                .next_stops(node, outcome)
                .iter()
                .any(|&n| graph.node(n).and_then(|d| section(d.phase)) == Some(sec));
            batch.lane = if stays { Some((i, sec, line)) } else { None };
        }
        if top_level
            && node == NodeId::ToolBody
            && batch.calls[i].position == NodeId::Around
            && let Some(k) = batch.calls.iter().position(|c| {
                c.parent.is_none()
                    && c.body_running.is_some()
                    && c.id != call_id
                    && !(c.safe && batch.calls[i].safe)
            })
        {
            let other = &batch.calls[k];
            found.push((
                    InvariantId::OnlySafeBodiesOverlap,
                    vec![line, other.body_running.unwrap_or(other.last_line)],
                    format!(
                        "{} while the body of call {} runs (since line {}); only concurrency-safe calls may overlap",
                        at(line, node, outcome, &call_id),
                        other.id,
                        other.body_running.unwrap_or(other.last_line)
                    ),
                ));
        }

        if let Some(p) = batch.calls[i].parent {
            let parent = &batch.calls[p];
            if parent.body_running.is_none()
                && !batch.calls[i]
                    .step_reported
                    .contains(&InvariantId::CodeDispatchInsideBody)
            {
                found.push((
                    InvariantId::CodeDispatchInsideBody,
                    vec![line, parent.position_line],
                    format!(
                        "{} while its run_code call is not running its program (last at {})",
                        at(line, node, outcome, &call_id),
                        at(
                            parent.position_line,
                            parent.position,
                            parent.outcome,
                            &parent.id
                        )
                    ),
                ));
            }
            if let Some(j) = parent.open_sub.filter(|&j| j != i)
                && !batch.calls[i]
                    .step_reported
                    .contains(&InvariantId::SubCallsSerialized)
            {
                let other = &batch.calls[j];
                found.push((
                    InvariantId::SubCallsSerialized,
                    vec![line, other.last_line],
                    format!(
                        "{} while sub-call {} of the same program is still running (last seen at line {}, not yet logged as tool/code-dispatch)",
                        at(line, node, outcome, &call_id),
                        other.id,
                        other.last_line
                    ),
                ));
            }
            let running = batch.calls[i].dispatched.is_none()
                && node != NodeId::Dispatched
                && node != NodeId::RunCode;
            if running && batch.calls[p].open_sub.is_none() {
                batch.calls[p].open_sub = Some(i);
            }
            if node == NodeId::Dispatched && batch.calls[p].open_sub == Some(i) {
                batch.calls[p].open_sub = None;
            }
            for (id, _, _) in &found {
                if matches!(
                    id,
                    InvariantId::CodeDispatchInsideBody | InvariantId::SubCallsSerialized
                ) {
                    batch.calls[i].step_reported.insert(*id);
                }
            }
        }

        // The step itself.
        let call = &mut batch.calls[i];
        if !graph.contains(node) {
            let id = if node == NodeId::Context && !top_level {
                InvariantId::SubCallContextsOmitted
            } else {
                InvariantId::StageGraphWalk
            };
            found.push((
                id,
                vec![line],
                format!(
                    "{}: {revision} has no stage `{node}`",
                    at(line, node, outcome, &call_id)
                ),
            ));
        } else {
            match graph.step(call.position, call.outcome, node) {
                Ok((edge, _)) => {
                    match graph.kind() {
                        GraphKind::Pipeline => self.report.edges.insert(edge),
                        GraphKind::CodeMode => self.report.code_mode_edges.insert(edge),
                    };
                }
                Err(err) => {
                    let id = classify(graph, call, node);
                    if call.step_reported.insert(id) {
                        let before = at(call.position_line, call.position, call.outcome, &call_id);
                        let message = explain(
                            id,
                            &at(line, node, outcome, &call_id),
                            &before,
                            &err.to_string(),
                            call,
                        );
                        let mut lines = vec![line, call.position_line];
                        if let Some(d) = call.denied.filter(|_| id == InvariantId::DenySkipsBody) {
                            lines = vec![line, d];
                        }
                        found.push((id, lines, message));
                    }
                    // A stray visit (a body after a denial, a stage after the result, a stage
                    // run twice) does not move the call: the walk goes on from where it was.
                    if keeps_position(id) {
                        call.last_line = line;
                        track_body(call, node, line);
                        self.violate_all(&call_id, found);
                        return;
                    }
                }
            }
        }
        if graph.contains(node) && !is_leaf {
            call.position = node;
            call.outcome = outcome;
            call.position_line = line;
        }
        call.last_line = line;
        track_body(call, node, line);
        // A denial decided here.
        let denial = matches!(
            (node, outcome),
            (NodeId::Pre, Some(Outcome::Deny))
                | (NodeId::Guards, Some(Outcome::Deny))
                | (
                    NodeId::Approval,
                    Some(Outcome::Rejected | Outcome::Cancelled | Outcome::Unavailable)
                )
                | (NodeId::Denied, _)
        );
        if denial && call.denied.is_none() {
            call.denied = Some(line);
        }
        self.violate_all(&call_id, found);
    }

    /// Checks that need a stage record's fields.
    fn after_stage(&mut self, line: usize, i: usize, obs: &Observation) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let call = &mut batch.calls[i];
        let call_id = call.id.clone();
        let mut found: Vec<Finding> = Vec::new();
        if let Some(identity) = &obs.identity {
            // A sub-call is first named by what its stages are handed.
            if call.parent.is_some() && call.name.is_empty() {
                call.name = identity.name.clone();
                call.args.get_or_insert_with(|| identity.arguments.clone());
            }
            if let Some(problem) = identity_problem(call, identity, line) {
                found.push(problem);
            }
            if call.first_identity.is_none() {
                call.first_identity = Some((identity.clone(), line));
            }
        }
        if let (Some(p), Some(identity)) = (batch.calls[i].parent, &obs.identity) {
            let parent = &batch.calls[p];
            let expected = parent
                .first_identity
                .as_ref()
                .map(|(id, _)| id.token.clone());
            if expected.is_some() && identity.parent_token != expected {
                found.push((
                    InvariantId::SubCallCarriesParentToken,
                    vec![line],
                    format!(
                        "line {line} (sub-call {call_id}) was handed parent token {}, but its run_code call's token is {}",
                        identity.parent_token.as_deref().unwrap_or("none"),
                        expected.unwrap_or_default()
                    ),
                ));
            }
            if identity.name == tep_reference::pipeline::RUN_CODE {
                found.push((
                    InvariantId::RunCodeReserved,
                    vec![line],
                    format!("line {line}: sub-call {call_id} calls run_code itself"),
                ));
            }
        }
        let call = &mut batch.calls[i];
        match obs.node {
            NodeId::Pre => call.pre_line = Some(line),
            NodeId::Approval => {
                call.approval_outcome = obs.outcome;
                if let (Some((decided, dl)), Some(outcome)) = (call.approval_decided, obs.outcome)
                    && decided != outcome
                {
                    found.push((
                        InvariantId::ApprovalAudited,
                        vec![line, dl],
                        format!("line {line} (approval {outcome}, call {call_id}) but line {dl} recorded approval/decided {decided}"),
                    ));
                }
            }
            NodeId::Guards => {
                let first_deny = obs
                    .verdicts
                    .iter()
                    .flatten()
                    .take_while(|v| v.verdict != GuardVerdictKind::Throw)
                    .find(|v| v.verdict == GuardVerdictKind::Deny);
                if let Some(deny) = first_deny {
                    let wrong_outcome = obs.outcome != Some(Outcome::Deny);
                    let wrong_reason = obs.reason.is_some() && obs.reason != deny.reason;
                    if wrong_outcome || wrong_reason {
                        found.push((
                            InvariantId::GuardDenyBinds,
                            vec![line],
                            format!(
                                "line {line} (guards {}, call {call_id}): guard {} denied ({}), so the guards must deny with that reason",
                                obs.outcome.map_or("without outcome", |o| o.as_str()),
                                deny.guard,
                                deny.reason.as_deref().unwrap_or("no reason")
                            ),
                        ));
                    }
                }
            }
            NodeId::FsGate => {
                if let (Some(intent), Some(Outcome::Allow)) = (&obs.intent, obs.outcome)
                    && let Some(version) = intent.version
                {
                    let seen = self.fs_seen.get(&intent.target).copied();
                    if seen.map(|(v, _)| v) != Some(version) {
                        let mut lines = vec![line];
                        let why = match seen {
                            Some((v, l)) => {
                                lines.push(l);
                                format!("the agent last observed version {v} at line {l}")
                            }
                            None => "the agent never observed it".to_owned(),
                        };
                        found.push((
                            InvariantId::ReadBeforeEdit,
                            lines,
                            format!(
                                "line {line} ({} allowed, call {call_id}) for {} at version {version}, but {why}",
                                intent.intent.event_name(),
                                intent.target
                            ),
                        ));
                    }
                }
            }
            NodeId::Post => {
                if let Some(o) = obs.outcome {
                    call.post = Some((o, line));
                }
            }
            NodeId::Normalized => call.normalized = Some(line),
            NodeId::Finalize => {
                call.finalized = Some(line);
                if let Some(result) = &obs.result {
                    call.candidate =
                        Some((result.clone(), obs.outcome == Some(Outcome::Throw), line));
                }
            }
            NodeId::Final => {
                if let Some(result) = &obs.result {
                    found.extend(outcome_problems(call, result, line));
                    call.notified = Some((result.clone(), line));
                    // A run_code call must not carry its sub-calls' contexts forward.
                    let forwarded =
                        batch
                            .calls
                            .iter()
                            .filter(|c| c.parent == Some(i))
                            .find_map(|sub| {
                                let (announced, at) = sub.notified.as_ref()?;
                                announced
                                    .additional_contexts
                                    .iter()
                                    .find(|c| {
                                        result.additional_contexts.iter().any(|r| r.text == c.text)
                                    })
                                    .map(|c| (sub.id.clone(), c.text.clone(), *at))
                            });
                    if let Some((sub, text, at)) = forwarded {
                        found.push((
                            InvariantId::SubCallContextsOmitted,
                            vec![line, at],
                            format!("line {line} (tools/result, call {call_id}) carries {text:?}, a context of sub-call {sub} (line {at})"),
                        ));
                    }
                }
            }
            NodeId::PresentCall => call.presented_call += 1,
            NodeId::PresentResult => call.presented_result += 1,
            _ => {}
        }
        self.violate_all(&call_id, found);
    }

    /// Checks that need a node event's data.
    fn after_event(&mut self, line: usize, i: usize, event: &SessionEvent) {
        let (body, seq, sources) = (&event.body, event.seq, event.source_event_seqs.as_deref());
        let revision = self.options.revision;
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let mut found: Vec<Finding> = Vec::new();
        let call = &mut batch.calls[i];
        let call_id = call.id.clone();
        match body {
            EventBody::ToolCall(data) if call.started.is_none() => {
                call.started = Some((line, seq));
                call.args = Some(parse_arguments(&data.arguments));
                call.name = data.name.clone();
            }
            EventBody::ToolResult(data) => {
                if call.result.is_none() {
                    call.result = Some(line);
                }
                if let Some((announced, nl)) = &call.notified {
                    let recorded_code = data.error().map(|e| e.code.as_str());
                    if data.content() != announced.content
                        || data.is_error() != announced.is_error
                        || recorded_code != announced.error_code()
                    {
                        found.push((
                            InvariantId::FrozenOutcome,
                            vec![line, *nl],
                            format!("line {line} (tool/result, call {call_id}) differs from the outcome tools/result announced at line {nl}"),
                        ));
                    }
                }
                let names_call = data.call_id() == Some(&call_id);
                let answers = matches!((call.started, sources), (Some((_, call_seq)), Some(s)) if s == [call_seq]);
                if !names_call || !answers {
                    found.push((
                        InvariantId::ResultNamesItsCall,
                        vec![line],
                        format!("line {line} (tool/result, call {call_id}) does not name its call and its tool/call event"),
                    ));
                }
                match (revision, data) {
                    (Revision::Rev2, ToolResultData::Flat(_)) => found.push((
                        InvariantId::ToolResultMessageShape,
                        vec![line],
                        format!("line {line} (tool/result, call {call_id}) has rev1's flat data; rev2 records a ToolResultMessage"),
                    )),
                    (Revision::Rev1, ToolResultData::Message(_)) => found.push((
                        InvariantId::ToolResultFlatShape,
                        vec![line],
                        format!("line {line} (tool/result, call {call_id}) has rev2's message data; rev1 records the flat fields"),
                    )),
                    _ => {}
                }
                if revision == Revision::Rev2 {
                    for (ml, after, by) in &call.marks {
                        if *after > 0 {
                            found.push((
                                InvariantId::NotificationSynchronous,
                                vec![line, *ml],
                                format!("line {line} (tool/result, call {call_id}) waited for observer {by}'s {after} ms of work (settled at line {ml})"),
                            ));
                        }
                    }
                }
            }
            EventBody::CodeDispatchStart(data) => {
                if call.name.is_empty() {
                    call.name = data.name.clone();
                    call.args = Some(data.arguments.clone());
                }
                if data.name == tep_reference::pipeline::RUN_CODE {
                    found.push((
                        InvariantId::RunCodeReserved,
                        vec![line],
                        format!("line {line}: sub-call {call_id} calls run_code itself"),
                    ));
                }
                if event.surface_op.is_some() {
                    found.push((
                        InvariantId::DispatchNotModelFacing,
                        vec![line],
                        format!("line {line} (tool/code-dispatch-start, sub-call {call_id}) carries a surface operation"),
                    ));
                }
            }
            EventBody::CodeDispatch(data) => {
                call.dispatched.get_or_insert(line);
                if call.name.is_empty() {
                    call.name = data.name.clone();
                    call.args = Some(data.arguments.clone());
                }
                if event.surface_op.is_some() {
                    found.push((
                        InvariantId::DispatchNotModelFacing,
                        vec![line],
                        format!("line {line} (tool/code-dispatch, sub-call {call_id}) carries a surface operation: a model-facing message"),
                    ));
                }
                if let Some((announced, nl)) = &call.notified {
                    let content_differs = data
                        .content
                        .as_ref()
                        .is_some_and(|c| *c != announced.content);
                    if data.is_error != announced.is_error || content_differs {
                        found.push((
                            InvariantId::FrozenOutcome,
                            vec![line, *nl],
                            format!("line {line} (tool/code-dispatch, sub-call {call_id}) differs from the outcome tools/result announced at line {nl}"),
                        ));
                    }
                }
                match revision {
                    Revision::Rev2 if data.root_call_id.is_none() || data.content.is_none() => found.push((
                        InvariantId::CodeDispatchContentShape,
                        vec![line],
                        format!("line {line} (tool/code-dispatch, sub-call {call_id}) lacks rootCallId or content"),
                    )),
                    Revision::Rev1
                        if data.root_call_id.is_some()
                            || data.result_summary.as_ref().is_none_or(|r| r.chars().count() > 200) =>
                    {
                        found.push((
                            InvariantId::CodeDispatchSummaryShape,
                            vec![line],
                            format!("line {line} (tool/code-dispatch, sub-call {call_id}) is not rev1's shape (a resultSummary of at most 200 characters, no rootCallId)"),
                        ))
                    }
                    _ => {}
                }
            }
            EventBody::FsObserved(data) => match data.state {
                FileState::Present { version } => {
                    self.fs_seen.insert(data.target.clone(), (version, line));
                }
                FileState::Absent => {
                    self.fs_seen.remove(&data.target);
                }
            },
            EventBody::UserMessage(_) | EventBody::ContextMessage(_) => {
                let text = match body {
                    EventBody::UserMessage(m) => tep_reference::result::content_text(&m.content),
                    EventBody::ContextMessage(m) => tep_reference::result::content_text(&m.content),
                    _ => String::new(),
                };
                match (revision, body) {
                    (Revision::Rev2, EventBody::ContextMessage(_)) => found.push((
                        InvariantId::ContextsAsUserMessages,
                        vec![line],
                        format!("line {line} (context/message, call {call_id}): rev2 injects contexts as user/message"),
                    )),
                    (Revision::Rev1, EventBody::UserMessage(_)) => found.push((
                        InvariantId::ContextsAsContextMessages,
                        vec![line],
                        format!("line {line} (user/message, call {call_id}): rev1 injects contexts as context/message"),
                    )),
                    _ => {}
                }
                if batch.settled.is_some() {
                    match batch.expected_contexts.front() {
                        Some((j, expected, l)) if *j == i && *expected == text => {
                            batch.expected_contexts.pop_front();
                        }
                        Some((j, expected, l)) => {
                            let (j, expected, l) = (*j, expected.clone(), *l);
                            let owner = batch.calls[j].id.clone();
                            found.push((
                                InvariantId::ContextsFifo,
                                vec![line, l],
                                format!(
                                    "line {line} injects {text:?} for call {call_id}, but the next context in FIFO order is {expected:?} of call {owner} (announced at line {l})"
                                ),
                            ));
                            // Resynchronise: drop the expected entry this injection matches, if any.
                            if let Some(pos) = batch.expected_contexts.iter().position(|(k, t, _)| *k == i && *t == text) {
                                batch.expected_contexts.remove(pos);
                            }
                        }
                        None => found.push((
                            InvariantId::ContextsFifo,
                            vec![line],
                            format!("line {line} injects {text:?} for call {call_id}, which no announced outcome carried"),
                        )),
                    }
                }
            }
            _ => {}
        }
        self.violate_all(&call_id, found);
    }

    /// Approval audit events: part of the approval stage, not nodes of their own.
    fn audit_event(&mut self, line: usize, i: usize, body: &EventBody) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let call = &mut batch.calls[i];
        let call_id = call.id.clone();
        let mut found = Vec::new();
        match body {
            EventBody::ApprovalAsked(_) => {
                if call.outcome != Some(Outcome::Ask) || call.position != NodeId::Pre {
                    found.push((
                        InvariantId::ApprovalOnlyAfterAsk,
                        vec![line, call.position_line],
                        format!("line {line} (approval/asked, call {call_id}) but pre-execute did not ask"),
                    ));
                }
                call.approval_asked = Some(line);
            }
            EventBody::ApprovalDecided(data) => {
                if call.approval_asked.is_none() {
                    found.push((
                        InvariantId::ApprovalAudited,
                        vec![line],
                        format!(
                            "line {line} (approval/decided, call {call_id}) without approval/asked"
                        ),
                    ));
                } else if call.position != NodeId::Pre {
                    // The decision is audited inside the approval stage, before it ends.
                    found.push((
                        InvariantId::ApprovalAudited,
                        vec![line, call.position_line],
                        format!(
                            "line {line} (approval/decided, call {call_id}) after {} ended the approval stage",
                            at(call.position_line, call.position, call.outcome, &call_id)
                        ),
                    ));
                }
                call.approval_decided = Some((data.outcome, line));
            }
            _ => {}
        }
        self.violate_all(&call_id, found);
    }
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

/// The most specific invariant a step the graph does not allow breaks.
fn classify(graph: &StageGraph, call: &CallState, node: NodeId) -> InvariantId {
    use InvariantId as I;
    // A throw that has a throw edge to take (rev2's dotted edges into normalization).
    let threw = call.outcome == Some(Outcome::Throw)
        && graph
            .decisive_outcomes(call.position)
            .contains(&Outcome::Throw);
    let has_finalize = graph.contains(NodeId::Finalize);
    match node {
        NodeId::Context => I::ContextsAfterAllResults,
        NodeId::ToolCall if call.started.is_some() => I::ToolCallOnce,
        _ if call.started.is_none() && call.parent.is_none() => I::ToolCallFirst,
        NodeId::ToolResult if call.result.is_some() => I::OneResultPerCall,
        NodeId::Final if call.notified.is_some() => I::OneResultPerCall,
        _ if call.result.is_some() && !matches!(node, NodeId::PresentResult | NodeId::Context) => {
            I::NoStageAfterResult
        }
        _ if call.dispatched.is_some() && node != NodeId::RunCode => I::NoStageAfterResult,
        NodeId::Around | NodeId::ToolBody | NodeId::FsGate | NodeId::Owned
            if call.denied.is_some() =>
        {
            I::DenySkipsBody
        }
        NodeId::RunCode if call.position == NodeId::Final => I::SubCallLogsDispatch,
        NodeId::Pre
            if call.position == NodeId::RunCode && graph.contains(NodeId::DispatchStart) =>
        {
            I::SubCallStartLogged
        }
        NodeId::Pre if call.pre_line.is_some() => I::PreExecuteOnce,
        NodeId::Approval => I::ApprovalOnlyAfterAsk,
        NodeId::Guards => I::GuardsOnlyAfterAllow,
        NodeId::Post if threw => I::ThrowSkipsPost,
        _ if threw && node != NodeId::Normalized => I::ThrowIsNormalized,
        _ if call.position == NodeId::Denied && node != NodeId::Post => I::DenialReachesPost,
        NodeId::Finalize if call.finalized.is_some() => I::FinalizeOnce,
        NodeId::Final if call.finalized.is_none() && has_finalize => I::FinalizeBeforeNotification,
        NodeId::ToolResult if call.notified.is_none() => I::NotificationBeforeResult,
        NodeId::ToolBody => I::BodyInsideExecute,
        NodeId::FsGate => I::FsGateInsideBody,
        NodeId::Owned => I::OwnedEventsInsideBody,
        _ => I::StageGraphWalk,
    }
}

/// Bodies run from dispatch (or resume) until control returns to the wrappers.
fn track_body(call: &mut CallState, node: NodeId, line: usize) {
    match node {
        NodeId::ToolBody if call.body_running.is_none() => call.body_running = Some(line),
        NodeId::Around => call.body_running = None,
        _ => {}
    }
}

/// Whether a visit classified as `id` is an intrusion the walk should step over.
fn keeps_position(id: InvariantId) -> bool {
    use InvariantId as I;
    matches!(
        id,
        I::DenySkipsBody
            | I::NoStageAfterResult
            | I::OneResultPerCall
            | I::ToolCallOnce
            | I::PreExecuteOnce
            | I::FinalizeOnce
    )
}

/// One plain sentence for a classified step violation.
fn explain(id: InvariantId, this: &str, before: &str, step: &str, call: &CallState) -> String {
    use InvariantId as I;
    match id {
        I::ToolCallFirst => format!("{this} before the call's tool/call"),
        I::ToolCallOnce => format!("{this}: the call was already logged"),
        I::DenySkipsBody => match call.denied {
            Some(d) => format!("{this} after line {d} denied the call"),
            None => format!("{this} after a denial"),
        },
        I::NoStageAfterResult => match call.result {
            Some(r) => format!("{this} after the call's tool/result at line {r}"),
            None => format!("{this} after the call's tool/result"),
        },
        I::OneResultPerCall => format!("{this}: the call already has its outcome"),
        I::ThrowSkipsPost => format!("{this} after {before} threw"),
        I::ThrowIsNormalized => {
            format!("{this} after {before} threw, instead of outer normalization")
        }
        I::DenialReachesPost => {
            format!("{this} after {before}; a denied call goes to post-execute")
        }
        _ => format!("{this} after {before}: {step}"),
    }
}

/// Identity checks: the call id, the tool name, the arguments of the `tool/call`, one token.
fn identity_problem(
    call: &CallState,
    identity: &Identity,
    line: usize,
) -> Option<(InvariantId, Vec<usize>, String)> {
    let mut differs = Vec::new();
    if identity.call_id != call.id {
        differs.push(format!("call id {}", identity.call_id));
    }
    if identity.name != call.name {
        differs.push(format!("tool name {:?}", identity.name));
    }
    if let Some(args) = &call.args
        && &identity.arguments != args
    {
        differs.push(format!("arguments {}", identity.arguments));
    }
    let mut lines = vec![line];
    if let Some((first, first_line)) = &call.first_identity
        && first.token != identity.token
    {
        differs.push(format!(
            "token {} (line {first_line} saw {})",
            identity.token, first.token
        ));
        lines.push(*first_line);
    }
    if differs.is_empty() {
        return None;
    }
    Some((
        InvariantId::IdentityUnchanged,
        lines,
        format!(
            "line {line} (call {}): the stage was handed {}",
            call.id,
            differs.join(", ")
        ),
    ))
}

/// Checks on the announced outcome against what the call went through.
fn outcome_problems(call: &CallState, result: &ToolResult, line: usize) -> Vec<Finding> {
    use InvariantId as I;
    let id = &call.id;
    let mut found = Vec::new();
    if let Some(d) = call.denied
        && !result.is_error
    {
        found.push((I::DenialIsError, vec![line, d], format!("line {line} (tools/result, call {id}) announces a success for the call denied at line {d}")));
    }
    if let Some(n) = call.normalized
        && !result.is_error
    {
        found.push((I::ThrowIsError, vec![line, n], format!("line {line} (tools/result, call {id}) announces a success for the throw normalized at line {n}")));
    }
    if let Some((candidate, threw, fl)) = &call.candidate
        && !threw
    {
        let same = candidate.is_error == result.is_error
            && candidate.error == result.error
            && candidate.meta == result.meta
            && candidate.additional_contexts == result.additional_contexts;
        if !same {
            found.push((I::FinalizeContentOnly, vec![line, *fl], format!("line {line} (tools/result, call {id}) differs from the finalizeContent candidate at line {fl} in more than content")));
        }
    }
    let origins: Vec<_> = result
        .additional_contexts
        .iter()
        .map(|c| c.origin)
        .collect();
    if origins.windows(2).any(|w| w[0] > w[1]) {
        found.push((I::ContextOriginOrder, vec![line], format!("line {line} (tools/result, call {id}) orders its contexts {origins:?}; expected tool, then wrapper, then post")));
    }
    if let Some((Outcome::Block, pl)) = call.post
        && result
            .additional_contexts
            .iter()
            .any(|c| c.origin != tep_reference::result::ContextOrigin::Post)
    {
        found.push((I::BlockDropsContexts, vec![line, pl], format!("line {line} (tools/result, call {id}) keeps contexts from before the block at line {pl}")));
    }
    found
}
