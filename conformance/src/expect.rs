//! Drive-mode oracle: does a trace end the way the scenario's scripts determine?
//!
//! Everything is read from the trace itself (dispatches, post-execute visits, the recorded
//! `tool/result` events, the injected contexts), so an adapter reports nothing but its trace.

use std::collections::BTreeMap;

use tep_reference::graph::NodeId;
use tep_reference::identity::CallId;
use tep_reference::result::content_text;
use tep_reference::session::EventBody;
use tep_reference::trace::TraceRecord;

use crate::checker::Violation;
use crate::invariants::{InvariantId, invariant};
use crate::scenario::Scenario;

#[derive(Debug, Default)]
struct Seen {
    body_runs: u32,
    post_runs: bool,
    last_node: Option<NodeId>,
    result: Option<(usize, bool, String, Option<String>)>,
}

/// Compares a trace (record `i` is line `i + 1`) with the scenario's expectations.
pub fn check_expectations(scenario: &Scenario, records: &[TraceRecord]) -> Vec<Violation> {
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

    let mut out = Vec::new();
    let mut fail = |id: InvariantId, lines: Vec<usize>, call: Option<&CallId>, message: String| {
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
        if got.body_runs != expected.body_runs {
            fail(
                InvariantId::ExpectedOutcome,
                at.clone(),
                Some(id),
                format!(
                    "call {id}: the body ran {} time(s), expected {}",
                    got.body_runs, expected.body_runs
                ),
            );
        }
        if let Some(post) = expected.post_runs
            && post != got.post_runs
        {
            fail(
                InvariantId::ExpectedOutcome,
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
                InvariantId::ExpectedOutcome,
                vec![line],
                Some(id),
                format!(
                    "line {line} (tool/result, call {id}): isError is {is_error}, expected {}",
                    expected.is_error
                ),
            );
        }
        if let Some(content) = &expected.content
            && &text != content
        {
            fail(
                InvariantId::ExpectedContent,
                vec![line],
                Some(id),
                format!(
                    "line {line} (tool/result, call {id}): content {text:?}, expected {content:?}"
                ),
            );
        }
        if let Some(part) = &expected.content_includes
            && !text.contains(part.as_str())
        {
            fail(
                InvariantId::ExpectedContent,
                vec![line],
                Some(id),
                format!(
                    "line {line} (tool/result, call {id}): content {text:?} does not include {part:?}"
                ),
            );
        }
        if let Some(expected_code) = &expected.error_code
            && code.as_ref() != Some(expected_code)
        {
            fail(
                InvariantId::ExpectedContent,
                vec![line],
                Some(id),
                format!(
                    "line {line} (tool/result, call {id}): error code {}, expected {expected_code}",
                    code.as_deref().unwrap_or("none")
                ),
            );
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
        fail(
            InvariantId::ExpectedOutcome,
            contexts.iter().map(|(l, _, _)| *l).collect(),
            None,
            format!("injected contexts {got:?}, expected {want:?}"),
        );
    }
    out
}
