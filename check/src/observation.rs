//! The observation contract: which records a trace holds at each observation level, when each is
//! made, where it may appear, and what the checker assumes when it is absent.
//!
//! A conformance suite may only judge what an implementation can observe. A record made at a
//! public extension point (a waterfall listener, a guard, the body, an observer) can be made by
//! any harness's adapter; a record of something with no hook (`denied`, `normalized`,
//! `allResults`) can only be inferred, so it is expected only at level `full` and may sit
//! anywhere inside its window. [`RECORDS`] is the one statement of this contract: the checker's
//! walk reads it (through [`Expectations::required`]) and `cargo xtask docs` prints it into
//! `docs/adapter-protocol.md` and `docs/conformance.md`.

use std::collections::BTreeSet;

use tep_model::graph::{NodeId, Outcome};
use tep_model::identity::CallId;
use tep_model::session::EventBody;
pub use tep_model::trace::ObservationLevel;
use tep_model::trace::{Capability, TraceRecord};

use ObservationLevel::{Boundary, Events, Full, Hooks};

/// One kind of record and its contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSpec {
    /// How the record is written in a trace.
    pub record: &'static str,
    /// The stage-graph node it observes, if it is a visit.
    pub node: Option<NodeId>,
    /// The lowest level whose traces hold it.
    pub level: ObservationLevel,
    /// When it must be present, at its level and above.
    pub required: &'static str,
    /// The moment to record it.
    pub when: &'static str,
    /// Where in the call's records it may appear.
    pub window: &'static str,
    /// What the checker assumes when it is absent (at a level that does not require it).
    pub absent: &'static str,
}

const fn spec(
    record: &'static str,
    node: Option<NodeId>,
    level: ObservationLevel,
    required: &'static str,
    when: &'static str,
    window: &'static str,
    absent: &'static str,
) -> RecordSpec {
    RecordSpec {
        record,
        node,
        level,
        required,
        when,
        window,
        absent,
    }
}

use NodeId as N;

/// Every kind of record, in the order a call meets them.
pub const RECORDS: &[RecordSpec] = &[
    spec(
        "stage `model`",
        Some(N::Model),
        Events,
        "always: one per batch, before any record of its calls",
        "the assistant message's tool-call block is known, before any call starts",
        "first record of the batch",
        "nothing: a trace without it cannot be read",
    ),
    spec(
        "event `tool/call`",
        Some(N::ToolCall),
        Events,
        "for every call of the batch that starts",
        "the call is logged, before any other stage of it runs",
        "before every other record of the call",
        "—",
    ),
    spec(
        "stage `presentCall`",
        Some(N::PresentCall),
        Hooks,
        "with capability `ui`",
        "the pending card is shown",
        "any time after the call's `tool/call`",
        "not checked without `ui`",
    ),
    spec(
        "stage `pre`",
        Some(N::Pre),
        Hooks,
        "for every call that starts",
        "the `tools/pre-execute` waterfall has decided (record from a listener registered outermost: it sees the decision, or the throw, of `next()`)",
        "after `tool/call`, before anything else of the call",
        "at `events`: any decision",
    ),
    spec(
        "event `approval/asked`, `approval/decided`",
        None,
        Events,
        "when an ask is put to a mounted prompt (capability `approval`)",
        "the prompt is asked; then answered",
        "inside the approval stage: after `pre` decided `ask`, before the approval's outcome is acted on",
        "no prompt was mounted",
    ),
    spec(
        "stage `approval`",
        Some(N::Approval),
        Hooks,
        "when a mounted prompt answers an ask (at `full`: for every ask)",
        "the ask is resolved (record from the prompt you mount: its answer, or its throw)",
        "after `pre` decided `ask`, before `guards` or the denial",
        "no prompt was mounted: the ask was denied as `unavailable`",
    ),
    spec(
        "stage `guards`",
        Some(N::Guards),
        Hooks,
        "after a final allow (pre-execute `allow`, approval `allowed-once`)",
        "the guards have run: when one denies or throws, or after the last abstains (register an abstaining guard last to see that moment)",
        "after the allow, before `tools/execute`",
        "at `events`: any verdict",
    ),
    spec(
        "stage `denied`",
        Some(N::Denied),
        Full,
        "at `full`, for every denied call",
        "the call is refused and its body skipped",
        "anywhere after the denying decision (`pre` deny, approval refusal, `guards` deny) and before `post`",
        "the denial happened at the decision that denied",
    ),
    spec(
        "stage `around`",
        Some(N::Around),
        Hooks,
        "for every allowed call",
        "control enters the innermost dispatch (before the body), returns from the body to the innermost wrapper, and the `tools/execute` waterfall ends (`outcome: throw` if a wrapper threw); consecutive `around` records of a call are one visit, whose outcome is the last one's",
        "after `guards` allowed, before `post`",
        "at `events`: the call was dispatched or not",
    ),
    spec(
        "stage `toolBody`",
        Some(N::ToolBody),
        Hooks,
        "each time the body is dispatched, and when it resumes after the fs gate",
        "the body starts (or resumes)",
        "between the `around` that dispatches it and the `around` it returns to",
        "at `events`: unknown",
    ),
    spec(
        "stage `fsGate`",
        Some(N::FsGate),
        Hooks,
        "with capability `fs-gate`, for each gated mutation",
        "a `fs/write-intent` or `fs/edit-intent` listener decides",
        "while the body runs",
        "not checked without `fs-gate`",
    ),
    spec(
        "mark `body-settled`",
        None,
        Hooks,
        "for every dispatched body (protocol 2), and for a `run_code` call when its program ends",
        "the body's steps end: it returned, threw, or stopped after its cancellation",
        "after its `toolBody`, before the `around` it returns to; a body the pipeline abandons never records it",
        "protocol 1: the body's end is its return to `around`",
    ),
    spec(
        "events `todo/write`, `fs/observed`, `hook/invoked`, `hook/result`",
        Some(N::Owned),
        Events,
        "as the body records them (capability `owned-events`, `fs-gate` for `fs/observed`)",
        "the body records them",
        "while the body runs",
        "—",
    ),
    spec(
        "stage `post`",
        Some(N::Post),
        Hooks,
        "for every denied or executed call (not after a throw)",
        "the `tools/post-execute` waterfall has decided (record from a listener registered outermost); if the pipeline then fails applying the decision, the call is normalized next",
        "after `around` (or the denial), before `finalize`/`final`",
        "at `events`: any decision",
    ),
    spec(
        "stage `normalized`",
        Some(N::Normalized),
        Full,
        "at `full`, for every throw",
        "a throw is caught and turned into an `isError` result",
        "anywhere after the throw and before the call's `finalize` (or `final`); it is not a commit stage",
        "normalization happened at the throw",
    ),
    spec(
        "stage `finalize`",
        Some(N::Finalize),
        Hooks,
        "when the call's definition has `finalizeContent` (the scenario says which tools have one; unknown in replay: optional)",
        "`finalizeContent` was called (record from the callback: its candidate, or its throw)",
        "after `post` (or the throw), before `final`",
        "the definition has no `finalizeContent`",
    ),
    spec(
        "stage `final`",
        Some(N::Final),
        Hooks,
        "for every call (and every Code Mode sub-call)",
        "a `tools/result` observer is notified, with the frozen outcome",
        "after `finalize`, before `tool/result`",
        "at `events`: the recorded `tool/result` is the outcome",
    ),
    spec(
        "event `tool/result`",
        Some(N::ToolResult),
        Events,
        "for every call that started",
        "the outcome is recorded",
        "after `final`; in model order (a SHOULD)",
        "—",
    ),
    spec(
        "stage `presentResult`",
        Some(N::PresentResult),
        Hooks,
        "with capability `ui`",
        "the completed card is shown",
        "any time after the call's `tool/result`",
        "not checked without `ui`",
    ),
    spec(
        "stage `allResults`",
        Some(N::AllResults),
        Full,
        "at `full`, once per batch",
        "every call of the batch has its `tool/result`",
        "after the batch's last `tool/result`, before its first injected context",
        "the batch settled at its last `tool/result`",
    ),
    spec(
        "event `user/message` (rev1: `context/message`)",
        Some(N::Context),
        Events,
        "one per additional context of the batch's outcomes",
        "a context is injected",
        "after every `tool/result` of the batch, FIFO by call",
        "—",
    ),
    spec(
        "request",
        None,
        Boundary,
        "at `boundary` and above when the recording sees the model's boundary: one per batch the model was answered for (optional: a trace without it is not judged by the rules that read it)",
        "the harness sends the model its next request after the batch",
        "after every record of its batch, before the next `model`",
        "not checked: the model's next request was not observed",
    ),
    spec(
        "mark `observer-settled`",
        None,
        Hooks,
        "for each scripted `tools/result` observer with work to do",
        "the observer's asynchronous work ends",
        "after the call's `final`",
        "—",
    ),
    spec(
        "event `tool/code-dispatch-start` (rev2)",
        Some(N::DispatchStart),
        Events,
        "with capability `code-mode`, for every sub-call that starts",
        "the sub-call actually starts",
        "before any stage of the sub-call",
        "—",
    ),
    spec(
        "event `tool/code-dispatch`",
        Some(N::Dispatched),
        Events,
        "with capability `code-mode`, for every sub-call",
        "the sub-call is committed (the log is side work)",
        "after the sub-call's `final`, in any order with its binding's settlement, while the `run_code` body runs",
        "—",
    ),
    spec(
        "mark `binding-resolved` / `binding-rejected`",
        Some(N::RunCode),
        Hooks,
        "with capability `code-mode`, for every sub-call with an outcome",
        "the program's binding call resolves or rejects",
        "after the sub-call's `final`",
        "at `events`: unknown",
    ),
];

/// The contract of the record that observes `node`.
pub fn record_of(node: NodeId) -> Option<&'static RecordSpec> {
    RECORDS.iter().find(|r| r.node == Some(node))
}

/// The level from which the record of `node` is expected (`full` for a node no record observes).
pub fn level_of(node: NodeId) -> ObservationLevel {
    record_of(node).map_or(Full, |r| r.level)
}

/// Whether a trace at `level` records both ends of `edge`, so that a run that took it shows it:
/// an edge the level cannot see is never reported as not taken (it may still be implied).
pub fn sees_edge(level: ObservationLevel, edge: &tep_model::graph::Edge) -> bool {
    level_of(edge.from) <= level && level_of(edge.to) <= level
}

/// Whether `node` is made at a public extension point or is a session event: the stages whose
/// order between calls is a guarantee (`denied`, `normalized` and `allResults` have no hook, so
/// they neither hold nor take the ordered lane).
pub fn has_hook(node: NodeId) -> bool {
    level_of(node) <= Hooks
}

/// What the checker knows, for one call, beyond the trace: the facts a scenario states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallFacts {
    /// Whether the call's definition has `finalizeContent` (`None`: unknown).
    pub finalizer: Option<bool>,
    /// Whether an approval prompt is mounted (`None`: unknown).
    pub prompt: Option<bool>,
}

/// Which records a trace of a given level must hold for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectations {
    /// The trace's level.
    pub level: ObservationLevel,
    /// Whether the implementation has a UI (its cards are then expected).
    pub ui: bool,
}

impl Expectations {
    /// The expectations at `level` for an implementation with `capabilities`.
    pub fn new(level: ObservationLevel, capabilities: impl Fn(Capability) -> bool) -> Self {
        Expectations {
            level,
            ui: capabilities(Capability::Ui),
        }
    }

    /// Whether a walk must visit `node` rather than pass over it unrecorded.
    pub fn required(&self, node: NodeId, facts: CallFacts) -> bool {
        if level_of(node) > self.level {
            return false;
        }
        match node {
            N::PresentCall | N::PresentResult => self.ui,
            N::Approval => self.level == Full || facts.prompt == Some(true),
            N::Finalize => facts.finalizer == Some(true),
            _ => true,
        }
    }

    /// The outcome a walk assumes for a stage it passes over: `None` for any outcome (the level
    /// cannot see the stage), or the one outcome its absence implies.
    pub fn assumed(&self, node: NodeId) -> Option<Outcome> {
        match node {
            // An ask with no recorded answer had no prompt to answer it.
            N::Approval if level_of(node) <= self.level => Some(Outcome::Unavailable),
            _ => None,
        }
    }
}

/// The trace an implementation observing at `level` would record of the same run: the records
/// the level does not hold are dropped, and the header says the level. (An approval record with
/// no `approval/asked` before it is the `unavailable` of an ask no prompt answered: only `full`
/// holds it.)
pub fn thin(records: &[TraceRecord], level: ObservationLevel) -> Vec<TraceRecord> {
    let mut asked: BTreeSet<CallId> = BTreeSet::new();
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let keep = match record {
            TraceRecord::Header(_) | TraceRecord::Event(_) => true,
            TraceRecord::Request(_) => level >= Boundary,
            TraceRecord::Mark(_) => level >= Hooks,
            TraceRecord::Stage(o) => match o.node {
                N::Approval if level < Full => {
                    level >= Hooks && o.call.as_ref().is_some_and(|c| asked.contains(c))
                }
                node => level_of(node) <= level,
            },
        };
        if let TraceRecord::Event(e) = record
            && let EventBody::ApprovalAsked(_) = e.event.body
            && let Some(call) = record.call()
        {
            asked.insert(call.clone());
        }
        if !keep {
            continue;
        }
        let mut record = record.clone();
        if let TraceRecord::Header(h) = &mut record {
            h.observation = Some(level);
        }
        out.push(record);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_model::graph::{Revision, StageGraph};

    #[test]
    fn every_node_of_every_graph_has_a_contract() {
        for rev in Revision::ALL {
            for g in [StageGraph::of(rev), StageGraph::code_mode(rev)] {
                for node in g.nodes() {
                    assert!(record_of(node.id).is_some(), "{rev}: {}", node.id);
                }
            }
        }
    }

    #[test]
    fn only_records_without_a_hook_wait_for_full() {
        let full: Vec<NodeId> = RECORDS
            .iter()
            .filter(|r| r.level == Full)
            .filter_map(|r| r.node)
            .collect();
        assert_eq!(full, vec![N::Denied, N::Normalized, N::AllResults]);
        assert!(has_hook(N::Post) && !has_hook(N::Normalized));
    }

    #[test]
    fn levels_decide_what_a_walk_may_pass_over() {
        let none = CallFacts::default();
        let events = Expectations::new(Events, |_| true);
        assert!(events.required(N::ToolResult, none) && !events.required(N::Pre, none));
        let hooks = Expectations::new(Hooks, |_| false);
        assert!(hooks.required(N::Pre, none) && !hooks.required(N::Denied, none));
        assert!(!hooks.required(N::PresentCall, none), "no ui, no cards");
        assert!(!hooks.required(N::Approval, none), "no prompt known");
        let mounted = CallFacts {
            prompt: Some(true),
            ..none
        };
        assert!(hooks.required(N::Approval, mounted));
        let full = Expectations::new(Full, |_| true);
        assert!(full.required(N::Normalized, none) && full.required(N::Approval, none));
        assert!(!full.required(N::Finalize, none), "no finalizer known");
        assert_eq!(hooks.assumed(N::Approval), Some(Outcome::Unavailable));
        assert_eq!(events.assumed(N::Approval), None);
    }
}
