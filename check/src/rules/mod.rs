//! The rules: one per invariant, each beside its catalog entry.
//!
//! A rule is the invariant's catalog entry (id, level, statement, sources, revisions, the
//! capability and observation level it needs, the records it reads) and its check, written as
//! up to three callbacks the checker's core calls:
//!
//! - `claim`: when a visit is not a step of the graph, the core asks the rules in [`CLAIMS`]
//!   order (most specific first) whether the refused step is theirs; the first claim names the
//!   violation (`deny-skips-body` before the generic `stage-graph-walk`), so one fault is
//!   reported once, under its own id;
//! - `visit`: every visit of a node the rule [`Read`]s, before the core records it;
//! - `batch_end`: when the batch closes.
//!
//! Beside its check, each rule plants its invariant's breach in a valid trace (`plants`), the
//! way a faulty implementation would: [`crate::mutation::plant`] looks it up.
//!
//! Rules keep no state: the core (`crate::checker`) tracks calls and batches and hands every
//! rule the same facts ([`Cx`]). To find where an invariant is checked, open the file its
//! family is in; `docs/invariants.md` and `tep invariants` are printed from [`RULES`].

mod calls;
mod code_mode;
mod contexts;
mod decisions;
mod execute;
pub mod expectations;
mod finalize;
mod identity;
mod next_request;
mod notification;
mod order;
mod plant;
mod redispatch;
mod shapes;
mod throws;
mod walk;
mod waterfalls;

use tep_model::graph::{NodeId, Outcome, StageGraph, StepError};
use tep_model::identity::CallId;
use tep_model::session::SessionEvent;
use tep_model::trace::{Mark, NextRequest, Observation, TraceRecord};

use crate::facts::state::{Batch, Call, at};
use crate::facts::walk::Step;
use crate::facts::{CheckOptions, FsSeen};
use crate::invariants::{Invariant, InvariantId};

pub(crate) use crate::invariants::Read;

/// What a visit recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Record<'a> {
    Stage(&'a Observation),
    Event(&'a SessionEvent),
    Mark(&'a Mark),
}

/// One record of a call, as the rules see it.
#[derive(Debug)]
pub(crate) struct Visit<'a> {
    pub line: usize,
    /// The call's index in the batch.
    pub call: usize,
    /// The node observed (`None` for audit events and marks that are no visit).
    pub node: Option<NodeId>,
    pub outcome: Option<Outcome>,
    pub record: Record<'a>,
    pub step: &'a Step,
}

impl Visit<'_> {
    pub fn observation(&self) -> Option<&Observation> {
        match self.record {
            Record::Stage(o) => Some(o),
            _ => None,
        }
    }

    pub fn event(&self) -> Option<&SessionEvent> {
        match self.record {
            Record::Event(e) => Some(e),
            _ => None,
        }
    }

    pub fn mark(&self) -> Option<&Mark> {
        match self.record {
            Record::Mark(m) => Some(m),
            _ => None,
        }
    }

    /// "line 7 (toolBody, call c2)".
    pub fn here(&self, call: &CallId) -> String {
        match self.node {
            Some(node) => at(self.line, node, self.outcome, call),
            None => format!("line {} (call {call})", self.line),
        }
    }
}

/// A violation a rule found.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub invariant: InvariantId,
    pub call: Option<usize>,
    pub lines: Vec<usize>,
    pub message: String,
    /// Reported at most once per call.
    pub once: bool,
}

/// A rule's claim on a refused step.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub message: String,
    pub lines: Vec<usize>,
    /// The visit is an intrusion (a body after a denial, a stage run twice): the walk goes on
    /// from where it was rather than from the visited node.
    pub keep_position: bool,
}

/// What a rule is handed: the options, the open batch, and where to put what it finds.
pub(crate) struct Cx<'a> {
    pub options: &'a CheckOptions,
    pub batch: &'a Batch,
    pub fs: &'a FsSeen,
    pub found: &'a mut Vec<Finding>,
}

impl Cx<'_> {
    pub fn call(&self, i: usize) -> &Call {
        &self.batch.calls[i]
    }

    /// The name a scenario's scripts give call `i`: its id, or for a Code Mode sub-call
    /// `<parent>:code:<n>` by its parent and its place in the run's dispatch order, whatever id
    /// the implementation recorded (docs/adapter-protocol.md).
    pub fn scripted_name(&self, i: usize) -> CallId {
        let call = self.call(i);
        match call.parent {
            Some(p) => self.call(p).id.code_sub_call(call.code.number),
            None => call.id.clone(),
        }
    }

    pub fn report(
        &mut self,
        id: InvariantId,
        call: Option<usize>,
        lines: Vec<usize>,
        message: String,
    ) {
        self.found.push(Finding {
            invariant: id,
            call,
            lines,
            message,
            once: false,
        });
    }

    /// Reports `id` for `call` unless it was reported for that call already.
    pub fn report_once(
        &mut self,
        id: InvariantId,
        call: usize,
        lines: Vec<usize>,
        message: String,
    ) {
        self.found.push(Finding {
            invariant: id,
            call: Some(call),
            lines,
            message,
            once: true,
        });
    }
}

/// The refused step a claim is asked about.
pub(crate) struct Refused<'a> {
    pub visit: &'a Visit<'a>,
    pub node: NodeId,
    pub call: &'a Call,
    pub graph: &'static StageGraph,
    pub error: &'a StepError,
    /// Required stages the trace did not record on the way.
    pub missing: &'a [NodeId],
    /// The trace's observation level.
    pub level: crate::observation::ObservationLevel,
}

impl Refused<'_> {
    pub fn here(&self) -> String {
        self.visit.here(&self.call.id)
    }

    /// The claim, positioned after the call's last position.
    pub fn claim(&self, message: String, keep_position: bool) -> Option<Claim> {
        Some(Claim {
            message,
            lines: vec![self.visit.line, self.call.walk.position_line],
            keep_position,
        })
    }
}

pub(crate) type ClaimFn = fn(&Refused<'_>) -> Option<Claim>;
pub(crate) type VisitFn = fn(&mut Cx<'_>, &Visit<'_>);
/// Every session event, attributed to a call or not: the line, the event, the call's index.
pub(crate) type EventFn = fn(&mut Cx<'_>, usize, &SessionEvent, Option<usize>);
/// The batch's `allResults` record, at this line.
pub(crate) type SettleFn = fn(&mut Cx<'_>, usize);
/// The model's next request after the batch (a `request` record), at this line.
pub(crate) type RequestFn = fn(&mut Cx<'_>, usize, &NextRequest);
pub(crate) type BatchEndFn = fn(&mut Cx<'_>);
/// Plants the invariant's breach in a copy of a valid trace; `None` when the trace has nothing
/// to break it with (what the records were left as is then thrown away).
pub(crate) type PlantFn = fn(&mut Vec<TraceRecord>) -> Option<()>;

/// One invariant and its check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    pub entry: Invariant,
    pub claim: Option<ClaimFn>,
    pub visit: Option<VisitFn>,
    pub event: Option<EventFn>,
    pub settle: Option<SettleFn>,
    pub request: Option<RequestFn>,
    pub batch_end: Option<BatchEndFn>,
    /// The invariant's breach (the checker's teeth): every rule has one.
    pub plant: Option<PlantFn>,
}

impl Rule {
    pub(crate) const fn new(entry: Invariant) -> Self {
        Rule {
            entry,
            claim: None,
            visit: None,
            event: None,
            settle: None,
            request: None,
            batch_end: None,
            plant: None,
        }
    }

    pub(crate) const fn on_event(mut self, f: EventFn) -> Self {
        self.event = Some(f);
        self
    }

    pub(crate) const fn on_settle(mut self, f: SettleFn) -> Self {
        self.settle = Some(f);
        self
    }

    pub(crate) const fn on_request(mut self, f: RequestFn) -> Self {
        self.request = Some(f);
        self
    }

    pub(crate) const fn claims(mut self, f: ClaimFn) -> Self {
        self.claim = Some(f);
        self
    }

    pub(crate) const fn visits(mut self, f: VisitFn) -> Self {
        self.visit = Some(f);
        self
    }

    pub(crate) const fn at_batch_end(mut self, f: BatchEndFn) -> Self {
        self.batch_end = Some(f);
        self
    }

    pub(crate) const fn plants(mut self, f: PlantFn) -> Self {
        self.plant = Some(f);
        self
    }

    pub fn reads_node(&self, node: NodeId) -> bool {
        self.entry.reads.contains(&Read::Node(node))
    }

    pub fn reads(&self, read: Read) -> bool {
        self.entry.reads.contains(&read)
    }
}

/// Every rule, in catalog order (the order of [`InvariantId`]).
pub(crate) const RULES: &[&Rule] = &[
    &walk::STAGE_GRAPH_WALK,
    &calls::TOOL_CALL_FIRST,
    &calls::TOOL_CALL_ONCE,
    &calls::PRE_EXECUTE_ONCE,
    &waterfalls::WATERFALL_REGISTRATION_ORDER,
    &decisions::APPROVAL_ONLY_AFTER_ASK,
    &decisions::APPROVAL_ABSENT_DENIES,
    &decisions::APPROVAL_ONCE,
    &decisions::GUARDS_ONLY_AFTER_ALLOW,
    &decisions::ALLOW_REACHES_GUARDS,
    &decisions::GUARD_DENY_BINDS,
    &decisions::DENY_SKIPS_BODY,
    &decisions::DENIAL_REACHES_POST,
    &decisions::DENIAL_IS_ERROR,
    &throws::THROW_SKIPS_POST,
    &throws::THROW_IS_NORMALIZED,
    &throws::GUARD_THROW_IS_NORMALIZED,
    &throws::THROW_IS_ERROR,
    &execute::BODY_INSIDE_EXECUTE,
    &execute::BODY_SETTLES_BEFORE_COMMIT,
    &execute::BODY_THROW_IS_A_RESULT,
    &contexts::DEFERRED_CONTEXTS_SURVIVE_A_THROW,
    &redispatch::REDISPATCH_THROUGH_WRAPPERS,
    &execute::FS_GATE_INSIDE_BODY,
    &execute::READ_BEFORE_EDIT,
    &execute::OWNED_EVENTS_INSIDE_BODY,
    &identity::IDENTITY_UNCHANGED,
    &finalize::FINALIZE_ONCE,
    &finalize::FINALIZE_BEFORE_NOTIFICATION,
    &finalize::FINALIZE_CONTENT_ONLY,
    &notification::NOTIFICATION_BEFORE_RESULT,
    &notification::NOTIFICATION_SYNCHRONOUS,
    &notification::NOTIFICATION_AWAITED,
    &notification::FROZEN_OUTCOME,
    &calls::ONE_RESULT_PER_CALL,
    &calls::NO_STAGE_AFTER_RESULT,
    &shapes::RESULT_NAMES_ITS_CALL,
    &shapes::TOOL_RESULT_MESSAGE_SHAPE,
    &shapes::TOOL_RESULT_FLAT_SHAPE,
    &order::MODEL_ORDER_START,
    &order::ORDERED_STAGES_SERIAL,
    &order::MODEL_ORDER_COMMIT,
    &order::ONLY_SAFE_BODIES_OVERLAP,
    &order::EXCLUSIVE_BARRIER,
    &order::POOL_CAP,
    &contexts::BATCH_SETTLES,
    &contexts::CONTEXTS_AFTER_ALL_RESULTS,
    &contexts::CONTEXTS_FIFO,
    &contexts::CONTEXT_ORIGIN_ORDER,
    &contexts::BLOCK_DROPS_CONTEXTS,
    &shapes::CONTEXTS_AS_USER_MESSAGES,
    &shapes::CONTEXTS_AS_CONTEXT_MESSAGES,
    &decisions::APPROVAL_AUDITED,
    &calls::UI_PRESENTS_EACH_CALL,
    &shapes::SESSION_SEQ_INCREASING,
    &code_mode::RUN_CODE_RESERVED,
    &code_mode::CODE_DISPATCH_INSIDE_BODY,
    &code_mode::SUB_CALLS_SERIALIZED,
    &code_mode::SUB_CALL_CARRIES_PARENT_TOKEN,
    &code_mode::SUB_CALL_ID_SCHEME,
    &code_mode::SUB_CALL_START_LOGGED,
    &code_mode::SUB_CALL_LOGS_DISPATCH,
    &code_mode::SUB_CALL_LOGS_NO_CALL_OR_RESULT,
    &code_mode::BINDING_SETTLES,
    &code_mode::REJECTION_IS_TOOL_CALL_ERROR,
    &code_mode::SUB_CALL_CONTEXTS_OMITTED,
    &shapes::DISPATCH_NOT_MODEL_FACING,
    &shapes::CODE_DISPATCH_CONTENT_SHAPE,
    &shapes::CODE_DISPATCH_SUMMARY_SHAPE,
    &next_request::REQUEST_ONE_RESULT_PER_CALL,
    &next_request::REQUEST_MODEL_ORDER,
    &next_request::REQUEST_ERRORS_AS_ERRORS,
    &next_request::REQUEST_CONTEXTS_AFTER_RESULTS,
    &expectations::EXPECTED_OUTCOME,
    &expectations::EXPECTED_CONTENT,
];

/// The catalog entries of [`RULES`], in the same order.
pub(crate) const CATALOG: [Invariant; RULES.len()] = {
    let mut out = [RULES[0].entry; RULES.len()];
    let mut i = 0;
    while i < RULES.len() {
        out[i] = RULES[i].entry;
        i += 1;
    }
    out
};

/// The rules that claim refused steps, most specific first.
pub(crate) const CLAIMS: &[&Rule] = &[
    &code_mode::SUB_CALL_LOGS_NO_CALL_OR_RESULT,
    &calls::TOOL_CALL_ONCE,
    &calls::TOOL_CALL_FIRST,
    &calls::ONE_RESULT_PER_CALL,
    &calls::NO_STAGE_AFTER_RESULT,
    &decisions::DENY_SKIPS_BODY,
    &code_mode::BINDING_SETTLES,
    &code_mode::SUB_CALL_LOGS_DISPATCH,
    &code_mode::SUB_CALL_START_LOGGED,
    &calls::PRE_EXECUTE_ONCE,
    &decisions::APPROVAL_ONCE,
    &decisions::APPROVAL_ONLY_AFTER_ASK,
    &decisions::GUARDS_ONLY_AFTER_ALLOW,
    &decisions::ALLOW_REACHES_GUARDS,
    &throws::THROW_SKIPS_POST,
    &throws::THROW_IS_NORMALIZED,
    &decisions::DENIAL_REACHES_POST,
    &finalize::FINALIZE_ONCE,
    &finalize::FINALIZE_BEFORE_NOTIFICATION,
    &notification::NOTIFICATION_BEFORE_RESULT,
    &execute::BODY_INSIDE_EXECUTE,
    &execute::FS_GATE_INSIDE_BODY,
    &calls::UI_PRESENTS_EACH_CALL,
    // Always claims: a step the graph does not allow that nothing more specific explains.
    &walk::STAGE_GRAPH_WALK,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_in_id_order_and_every_id_has_one() {
        let ids: Vec<InvariantId> = RULES.iter().map(|r| r.entry.id).collect();
        assert_eq!(ids, InvariantId::ALL.to_vec());
    }

    #[test]
    fn every_rule_checks_something_and_every_claimant_can_claim() {
        for r in RULES {
            assert!(
                r.claim.is_some()
                    || r.visit.is_some()
                    || r.event.is_some()
                    || r.settle.is_some()
                    || r.request.is_some()
                    || r.batch_end.is_some()
                    || r.entry.reads == [Read::Scenario],
                "{} has no check",
                r.entry.id
            );
            assert!(!r.entry.reads.is_empty(), "{} reads nothing", r.entry.id);
        }
        for r in CLAIMS {
            assert!(r.claim.is_some(), "{} is listed as a claimant", r.entry.id);
        }
        for r in RULES.iter().filter(|r| r.claim.is_some()) {
            assert!(
                CLAIMS.iter().any(|c| c.entry.id == r.entry.id),
                "{} claims but is not in CLAIMS",
                r.entry.id
            );
        }
    }

    #[test]
    fn every_rule_plants_its_breach() {
        let without: Vec<InvariantId> = RULES
            .iter()
            .filter(|r| r.plant.is_none())
            .map(|r| r.entry.id)
            .collect();
        assert_eq!(without, [], "invariants with no planted fault");
    }
}
