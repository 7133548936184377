//! Drive mode's oracle: does a trace end the way the scenario's scripts determine?
//!
//! The catalog entries (`expected-outcome`, `expected-content`) are `tep_check::rules`'; this
//! is their check, which needs the scenario and so lives with the corpus.

use std::collections::BTreeMap;

use serde::Serialize;
use tep_check::catalog::invariant;
use tep_check::checker::Violation;
use tep_check::invariants::InvariantId as I;
use tep_model::graph::NodeId;
use tep_model::identity::CallId;
use tep_model::result::content_text;
use tep_model::session::EventBody;
use tep_model::trace::{ObservationLevel, TraceRecord};

use crate::scenario::Scenario;

/// Something worth showing that is not a verdict: the reference words a text differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<CallId>,
    pub lines: Vec<usize>,
    pub message: String,
}

#[derive(Debug, Default)]
struct Seen {
    body_runs: u32,
    post_runs: bool,
    last_node: Option<NodeId>,
    /// line, isError, text, error code.
    result: Option<(usize, bool, String, Option<String>)>,
}

/// What a scenario's expectations say about a trace (record `i` is line `i + 1`) observed at
/// `level`: the violations, and notes on wording nothing fixes.
pub fn check_expectations(
    scenario: &Scenario,
    records: &[TraceRecord],
    level: ObservationLevel,
) -> (Vec<Violation>, Vec<Note>) {
    let mut seen: BTreeMap<CallId, Seen> = BTreeMap::new();
    let mut contexts: Vec<(usize, CallId, String)> = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let line = i + 1;
        let (Some(node), Some(call)) = (record.node(), record.call()) else {
            continue;
        };
        let entry = seen.entry(call.clone()).or_default();
        match node {
            NodeId::ToolBody if entry.last_node == Some(NodeId::Around) => entry.body_runs += 1,
            NodeId::Post => entry.post_runs = true,
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

    let hooks = level >= ObservationLevel::Hooks;
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut fail = |id: I, lines: Vec<usize>, call: Option<&CallId>, message: String| {
        out.push(Violation {
            invariant: id,
            level: invariant(id).level,
            lines,
            call: call.cloned(),
            message,
        });
    };
    // The calls of the batch, then their Code Mode sub-calls.
    let ids: Vec<CallId> = scenario
        .calls
        .iter()
        .map(|c| c.call_id.clone())
        .chain(scenario.all_sub_calls().into_iter().map(|(id, _)| id))
        .collect();
    for id in &ids {
        let Some(expected) = scenario.expect.calls.get(id.as_str()) else {
            continue;
        };
        let got = seen.remove(id).unwrap_or_default();
        let at = got.result.as_ref().map_or_else(Vec::new, |r| vec![r.0]);
        if hooks && got.body_runs != expected.body_runs {
            fail(
                I::ExpectedOutcome,
                at.clone(),
                Some(id),
                format!(
                    "call {id}: the body ran {} time(s), expected {}",
                    got.body_runs, expected.body_runs
                ),
            );
        }
        if let Some(post) = expected.post_runs.filter(|_| hooks)
            && post != got.post_runs
        {
            fail(
                I::ExpectedOutcome,
                at.clone(),
                Some(id),
                format!(
                    "call {id}: post-execute {}, expected it {}",
                    if got.post_runs { "ran" } else { "did not run" },
                    if post { "to run" } else { "not to run" }
                ),
            );
        }
        let Some((line, is_error, text, code)) = got.result else {
            // A missing result is `one-result-per-call`; nothing more to compare.
            continue;
        };
        if is_error != expected.is_error {
            fail(
                I::ExpectedOutcome,
                vec![line],
                Some(id),
                format!(
                    "line {line} (call {id}): isError is {is_error}, expected {}",
                    expected.is_error
                ),
            );
        }
        if let Some(content) = &expected.content
            && &text != content
        {
            fail(
                I::ExpectedContent,
                vec![line],
                Some(id),
                format!("line {line} (call {id}): content {text:?}, expected {content:?}"),
            );
        }
        if let Some(part) = &expected.content_includes
            && !text.contains(part.as_str())
        {
            fail(
                I::ExpectedContent,
                vec![line],
                Some(id),
                format!("line {line} (call {id}): content {text:?} does not include {part:?}"),
            );
        }
        if let Some(expected_code) = &expected.error_code
            && code.as_ref() != Some(expected_code)
            && !scenario.all_sub_calls().iter().any(|(s, _)| s == id)
        {
            fail(
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
            && &text != reference
        {
            notes.push(Note {
                call: Some(id.clone()),
                lines: vec![line],
                message: format!(
                    "call {id}: content {text:?}; the reference says {reference:?} (wording nothing fixes, shown for information)"
                ),
            });
        }
    }
    let got: Vec<(&CallId, &str)> = contexts.iter().map(|(_, c, t)| (c, t.as_str())).collect();
    let want: Vec<(&CallId, &str)> = scenario
        .expect
        .contexts
        .iter()
        .map(|c| (&c.call, c.text.as_str()))
        .collect();
    if got != want {
        let show = |list: &[(&CallId, &str)]| {
            if list.is_empty() {
                return "none".to_owned();
            }
            list.iter()
                .map(|(c, t)| format!("{t:?} (call {c})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        fail(
            I::ExpectedOutcome,
            contexts.iter().map(|(l, _, _)| *l).collect(),
            None,
            format!(
                "injected contexts: {}; expected: {}",
                show(&got),
                show(&want)
            ),
        );
    }
    (out, notes)
}
