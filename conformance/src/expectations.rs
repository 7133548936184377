//! Drive mode's oracle: does a trace end the way the scenario's scripts determine?
//!
//! The catalog entries (`expected-outcome`, `expected-content`) are `tep_check::rules`'; this
//! is their check, which needs the scenario and so lives with the corpus. A corpus scenario's
//! `expect` block is written by hand; `tep fuzz` writes one from the reference's run
//! ([`crate::oracle`]), and the same check judges both, worded for each ([`Source`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use tep_check::Violation;
use tep_check::invariants::InvariantId as I;
use tep_model::graph::NodeId;
use tep_model::identity::CallId;
use tep_model::result::content_text;
use tep_model::session::EventBody;
use tep_model::trace::{ObservationLevel, TraceRecord};

use crate::scenario::{CallExpectation, Scenario, WrapperSpec};

/// Something worth showing that is not a verdict: the reference words a text differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<CallId>,
    pub lines: Vec<usize>,
    pub message: String,
}

/// Who wrote the expectations: the corpus, or the built-in reference's run of the scenario
/// (the fuzzing oracle). Only the wording differs: the oracle names its check and shows the
/// reference's value beside yours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Corpus,
    Reference,
}

/// The oracle's comparisons, by name: the rows of `docs/conformance.md`, "What the oracle
/// compares". A violation of the reference's expectations carries the one it fails (an
/// [`Unmet`]), so that shrinking can keep the same cause without reading the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OracleCheck {
    BodyRuns,
    PostRuns,
    PreRuns,
    ApprovalRuns,
    GuardRuns,
    IsError,
    Content,
    Contexts,
}

impl OracleCheck {
    /// Its name, as messages and reports print it (`body-runs`).
    pub fn as_str(self) -> &'static str {
        match self {
            OracleCheck::BodyRuns => "body-runs",
            OracleCheck::PostRuns => "post-runs",
            OracleCheck::PreRuns => "pre-runs",
            OracleCheck::ApprovalRuns => "approval-runs",
            OracleCheck::GuardRuns => "guard-runs",
            OracleCheck::IsError => "is-error",
            OracleCheck::Content => "content",
            OracleCheck::Contexts => "contexts",
        }
    }
}

impl std::fmt::Display for OracleCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A violation of a scenario's expectations, and when the reference wrote them and a named
/// value differs, the oracle's check it fails.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmet {
    pub violation: Violation,
    /// Set only for expectations from [`Source::Reference`], on a comparison the oracle names.
    pub oracle: Option<OracleCheck>,
}

/// One call's outcome, as its trace shows it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Seen {
    pub body_runs: u32,
    pub post_runs: bool,
    pub pre_runs: u32,
    pub approval_runs: u32,
    pub guard_runs: u32,
    last_node: Option<NodeId>,
    /// line, isError, text, error code.
    pub result: Option<(usize, bool, String, Option<String>)>,
}

/// What the trace shows: each call's outcome, and the injected contexts (line, call, text).
pub(crate) type Observed = (BTreeMap<CallId, Seen>, Vec<(usize, CallId, String)>);

pub(crate) fn observe(records: &[TraceRecord]) -> Observed {
    let mut seen: BTreeMap<CallId, Seen> = BTreeMap::new();
    let mut contexts = Vec::new();
    let mut names = ScriptedNames::default();
    for (i, record) in records.iter().enumerate() {
        let line = i + 1;
        let (Some(node), Some(call)) = (record.node(), record.call()) else {
            continue;
        };
        let call = &names.of(record, call);
        let entry = seen.entry(call.clone()).or_default();
        let stage = matches!(record, TraceRecord::Stage(_));
        match node {
            NodeId::ToolBody if entry.last_node == Some(NodeId::Around) => entry.body_runs += 1,
            NodeId::Post => entry.post_runs = true,
            NodeId::Pre if stage => entry.pre_runs += 1,
            NodeId::Approval if stage => entry.approval_runs += 1,
            NodeId::Guards if stage => entry.guard_runs += 1,
            _ => {}
        }
        if let TraceRecord::Event(e) = record {
            match &e.event.body {
                EventBody::ToolResult(data) => {
                    entry.result = Some((
                        line,
                        data.is_error(),
                        content_text(&data.content()),
                        data.error().map(|e| e.code.clone()),
                    ));
                }
                // A Code Mode sub-call's outcome is what its dispatch event records.
                EventBody::CodeDispatch(d) => {
                    let text = match (&d.content, &d.result_summary) {
                        (Some(content), _) => content_text(content),
                        (None, Some(summary)) => summary.clone(),
                        (None, None) => String::new(),
                    };
                    entry.result = Some((line, d.is_error, text, None));
                }
                EventBody::UserMessage(m) => {
                    contexts.push((line, call.clone(), content_text(&m.content)))
                }
                EventBody::ContextMessage(m) => {
                    contexts.push((line, call.clone(), content_text(&m.content)))
                }
                _ => {}
            }
        }
        if !matches!(
            node,
            NodeId::Owned | NodeId::PresentCall | NodeId::PresentResult
        ) {
            entry.last_node = Some(node);
        }
    }
    (seen, contexts)
}

/// The names a scenario's scripts give the calls of a trace: a call's id, and for a Code Mode
/// sub-call `<parent>:code:<n>`, by its `run_code` call (a stage's `parent`, a dispatch event's
/// `parentCallId`) and its place in the dispatch order of its program's run (a new `toolBody`
/// of the `run_code` call starts a new run), whatever ids the implementation recorded: its own,
/// or numbers that continue across a retried program (docs/adapter-protocol.md).
#[derive(Default)]
struct ScriptedNames {
    /// Each sub-call of the current runs: its name.
    names: HashMap<CallId, CallId>,
    /// Per `run_code` call: the sub-calls of its current run, in dispatch order.
    runs: HashMap<CallId, Vec<CallId>>,
}

impl ScriptedNames {
    fn of(&mut self, record: &TraceRecord, call: &CallId) -> CallId {
        let parent = match record {
            TraceRecord::Stage(o) if o.node == NodeId::ToolBody && o.parent.is_none() => {
                // The program runs (again): its sub-calls are numbered from 1.
                for sub in self.runs.remove(call).unwrap_or_default() {
                    self.names.remove(&sub);
                }
                None
            }
            TraceRecord::Stage(o) => o.parent.as_ref(),
            TraceRecord::Event(e) => match &e.event.body {
                EventBody::CodeDispatchStart(d) => Some(&d.parent_call_id),
                EventBody::CodeDispatch(d) => Some(&d.parent_call_id),
                _ => None,
            },
            _ => None,
        };
        if let Some(name) = self.names.get(call) {
            return name.clone();
        }
        let Some(parent) = parent else {
            return call.clone();
        };
        let run = self.runs.entry(parent.clone()).or_default();
        run.push(call.clone());
        let name = parent.code_sub_call(run.len());
        self.names.insert(call.clone(), name.clone());
        name
    }
}

/// Collects the violations and notes, worded for the expectations' source.
struct Verdicts {
    source: Source,
    violations: Vec<Unmet>,
    notes: Vec<Note>,
}

impl Verdicts {
    fn fail(&mut self, id: I, lines: Vec<usize>, call: Option<&CallId>, message: String) {
        self.unmet(id, lines, call, message, None);
    }

    fn unmet(
        &mut self,
        id: I,
        lines: Vec<usize>,
        call: Option<&CallId>,
        message: String,
        oracle: Option<OracleCheck>,
    ) {
        self.violations.push(Unmet {
            violation: Violation::new(id, lines, call.cloned(), message),
            oracle,
        });
    }

    /// A value that differs: the corpus says "expected"; the oracle names its check (the rows of
    /// `docs/conformance.md`, "What the oracle compares") and shows both values.
    fn differs(
        &mut self,
        id: I,
        check: OracleCheck,
        lines: Vec<usize>,
        call: Option<&CallId>,
        corpus: String,
        (yours, reference): (String, String),
    ) {
        match self.source {
            Source::Corpus => self.fail(id, lines, call, corpus),
            Source::Reference => {
                let whose = call.map_or_else(String::new, |c| format!(", call {c}"));
                let message =
                    format!("oracle {check}{whose}: yours {yours}; the reference's {reference}");
                self.unmet(id, lines, call, message, Some(check));
            }
        }
    }
}

/// What a scenario's expectations say about a trace (record `i` is line `i + 1`) observed at
/// `level`: the violations, and notes on wording nothing fixes.
pub fn check_expectations(
    scenario: &Scenario,
    records: &[TraceRecord],
    level: ObservationLevel,
) -> (Vec<Violation>, Vec<Note>) {
    let (unmet, notes) = judge(scenario, records, level, Source::Corpus);
    (unmet.into_iter().map(|u| u.violation).collect(), notes)
}

/// [`check_expectations`], worded for expectations from `source`.
pub fn judge(
    scenario: &Scenario,
    records: &[TraceRecord],
    level: ObservationLevel,
    source: Source,
) -> (Vec<Unmet>, Vec<Note>) {
    let (mut seen, contexts) = observe(records);
    let mut out = Verdicts {
        source,
        violations: Vec::new(),
        notes: Vec::new(),
    };
    // Below `hooks` no record shows where a retried program's run starts: an implementation
    // whose numbering goes on across runs records ids that say nothing of the run either. Where
    // a retry may run a program again, its sub-calls' outcomes are left free at that level.
    let retried = scenario
        .wrappers
        .iter()
        .any(|w| matches!(w, WrapperSpec::Retry { attempts, .. } if *attempts > 1));
    let unaligned: BTreeSet<CallId> = if level < ObservationLevel::Hooks && retried {
        scenario
            .all_sub_calls()
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    } else {
        BTreeSet::new()
    };
    let sub_calls: Vec<CallId> = scenario
        .all_sub_calls()
        .into_iter()
        .map(|(id, _)| id)
        .filter(|id| !unaligned.contains(id))
        .collect();
    // The calls of the batch, then their Code Mode sub-calls.
    let ids = scenario
        .calls
        .iter()
        .map(|c| c.call_id.clone())
        .chain(sub_calls.iter().cloned());
    for id in ids {
        let Some(expected) = scenario.expect.calls.get(id.as_str()) else {
            continue;
        };
        let got = seen.remove(&id).unwrap_or_default();
        let is_sub_call = sub_calls.contains(&id);
        if level >= ObservationLevel::Hooks {
            compare_stages(&mut out, &id, expected, &got);
        }
        compare_result(&mut out, &id, expected, &got, is_sub_call);
    }
    compare_contexts(&mut out, scenario, &contexts);
    (out.violations, out.notes)
}

/// How often each stage ran: the records of level `hooks`.
fn compare_stages(out: &mut Verdicts, id: &CallId, expected: &CallExpectation, got: &Seen) {
    let at = got.result.as_ref().map_or_else(Vec::new, |r| vec![r.0]);
    if got.body_runs != expected.body_runs {
        out.differs(
            I::ExpectedOutcome,
            OracleCheck::BodyRuns,
            at.clone(),
            Some(id),
            format!(
                "call {id}: the body ran {} time(s), expected {}",
                got.body_runs, expected.body_runs
            ),
            (got.body_runs.to_string(), expected.body_runs.to_string()),
        );
    }
    if let Some(post) = expected.post_runs
        && post != got.post_runs
    {
        let ran = |b: bool| if b { "ran" } else { "did not run" };
        out.differs(
            I::ExpectedOutcome,
            OracleCheck::PostRuns,
            at.clone(),
            Some(id),
            format!(
                "call {id}: post-execute {}, expected it {}",
                ran(got.post_runs),
                if post { "to run" } else { "not to run" }
            ),
            (ran(got.post_runs).to_owned(), ran(post).to_owned()),
        );
    }
    let counts = [
        (
            OracleCheck::PreRuns,
            "pre-execute",
            expected.pre_runs,
            got.pre_runs,
        ),
        (
            OracleCheck::ApprovalRuns,
            "the approval prompt",
            expected.approval_runs,
            got.approval_runs,
        ),
        (
            OracleCheck::GuardRuns,
            "the guards",
            expected.guard_runs,
            got.guard_runs,
        ),
    ];
    for (check, stage, want, runs) in counts {
        let Some(want) = want.filter(|&w| w != runs) else {
            continue;
        };
        out.differs(
            I::ExpectedOutcome,
            check,
            at.clone(),
            Some(id),
            format!("call {id}: {stage} ran {runs} time(s), expected {want}"),
            (format!("{runs} time(s)"), format!("{want} time(s)")),
        );
    }
}

/// The call's recorded outcome: whether it is an error, its text, its error code.
fn compare_result(
    out: &mut Verdicts,
    id: &CallId,
    expected: &CallExpectation,
    got: &Seen,
    is_sub_call: bool,
) {
    let Some((line, is_error, text, code)) = &got.result else {
        // A missing result is `one-result-per-call`; nothing more to compare.
        return;
    };
    let line = *line;
    if *is_error != expected.is_error {
        out.differs(
            I::ExpectedOutcome,
            OracleCheck::IsError,
            vec![line],
            Some(id),
            format!(
                "line {line} (call {id}): isError is {is_error}, expected {}",
                expected.is_error
            ),
            (
                format!("isError {is_error}"),
                format!("isError {}", expected.is_error),
            ),
        );
    }
    if let Some(content) = &expected.content
        && text != content
    {
        out.differs(
            I::ExpectedContent,
            OracleCheck::Content,
            vec![line],
            Some(id),
            format!("line {line} (call {id}): content {text:?}, expected {content:?}"),
            (format!("{text:?}"), format!("{content:?}")),
        );
    }
    if let Some(part) = &expected.content_includes
        && !text.contains(part.as_str())
    {
        out.fail(
            I::ExpectedContent,
            vec![line],
            Some(id),
            format!("line {line} (call {id}): content {text:?} does not include {part:?}"),
        );
    }
    if let Some(expected_code) = &expected.error_code
        && code.as_ref() != Some(expected_code)
        && !is_sub_call
    {
        out.fail(
            I::ExpectedContent,
            vec![line],
            Some(id),
            format!(
                "line {line} (call {id}): error code {}, expected {expected_code}",
                code.as_deref().unwrap_or("none")
            ),
        );
    }
    if let Some(reference) = &expected.reference_content
        && text != reference
    {
        out.notes.push(Note {
            call: Some(id.clone()),
            lines: vec![line],
            message: format!(
                "call {id}: content {text:?}; the reference says {reference:?} (wording nothing fixes, shown for information)"
            ),
        });
    }
}

/// The injected contexts: their calls, texts and order.
fn compare_contexts(out: &mut Verdicts, scenario: &Scenario, contexts: &[(usize, CallId, String)]) {
    if scenario.expect.undetermined.contexts {
        return;
    }
    let got: Vec<(&CallId, &str)> = contexts.iter().map(|(_, c, t)| (c, t.as_str())).collect();
    let want: Vec<(&CallId, &str)> = scenario
        .expect
        .contexts
        .iter()
        .map(|c| (&c.call, c.text.as_str()))
        .collect();
    if got == want {
        return;
    }
    let show = |list: &[(&CallId, &str)]| {
        if list.is_empty() {
            return "none".to_owned();
        }
        list.iter()
            .map(|(c, t)| format!("{t:?} (call {c})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.differs(
        I::ExpectedOutcome,
        OracleCheck::Contexts,
        contexts.iter().map(|(l, _, _)| *l).collect(),
        None,
        format!(
            "injected contexts: {}; expected: {}",
            show(&got),
            show(&want)
        ),
        (show(&got), show(&want)),
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::scenario::corpus;
    use crate::scripted::run_reference;
    use tep_model::graph::Revision;

    /// A corpus scenario whose first call's expected outcome is changed: the body ran once
    /// more, and the opposite `isError`, with an error code the trace does not have.
    fn altered() -> (Scenario, Vec<TraceRecord>) {
        let corpus = corpus().unwrap();
        let scenario = corpus
            .iter()
            .find(|s| s.id == "pre-deny-skips-body")
            .unwrap();
        let records = run_reference(scenario, Revision::Rev2, &[]).unwrap();
        let mut altered = scenario.clone();
        let first = altered.expect.calls.values_mut().next().unwrap();
        first.body_runs += 1;
        first.is_error = !first.is_error;
        first.error_code = Some("NOT_THIS_ONE".to_owned());
        (altered, records)
    }

    #[test]
    fn the_reference_s_expectations_carry_the_oracle_check_their_message_names() {
        let (scenario, records) = altered();
        let (unmet, _) = judge(
            &scenario,
            &records,
            ObservationLevel::Full,
            Source::Reference,
        );
        let checks: Vec<Option<OracleCheck>> = unmet.iter().map(|u| u.oracle).collect();
        assert_eq!(
            checks,
            [
                Some(OracleCheck::BodyRuns),
                Some(OracleCheck::IsError),
                None
            ],
            "{unmet:?}"
        );
        for u in &unmet {
            match u.oracle {
                Some(check) => assert!(
                    u.violation
                        .message
                        .starts_with(&format!("oracle {check}, call ")),
                    "{u:?}"
                ),
                // An error code is compared under no name of the oracle's.
                None => assert!(!u.violation.message.starts_with("oracle "), "{u:?}"),
            }
        }
    }

    #[test]
    fn the_corpus_s_expectations_carry_no_oracle_check() {
        let (scenario, records) = altered();
        let (unmet, _) = judge(&scenario, &records, ObservationLevel::Full, Source::Corpus);
        assert_eq!(unmet.len(), 3, "{unmet:?}");
        assert!(unmet.iter().all(|u| u.oracle.is_none()), "{unmet:?}");
    }
}
