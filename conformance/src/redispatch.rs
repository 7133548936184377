//! Drive mode's check of `redispatch-through-wrappers` (its catalog entry is
//! `tep_check::rules`'): a retry's re-dispatch passes through the wrappers inside the retry.
//!
//! Which wrappers sit inside the retry is the scenario's; the evidence is the trace's. A context
//! wrapper adds its context to the result it hands up on every pass, so the result a
//! re-dispatched call hands post-execute carries the context of each context wrapper inside the
//! retry, once. Only context wrappers above every timeout count (a timeout that fires hands up
//! a result of its own, without the contexts below it), and only where the trace shows the body
//! dispatched twice and the result post-execute was handed; otherwise nothing is inferred.

use tep_check::Violation;
use tep_check::invariant;
use tep_check::invariants::InvariantId;
use tep_model::graph::NodeId;
use tep_model::identity::CallId;
use tep_model::result::ContextOrigin;
use tep_model::trace::{ObservationLevel, TraceRecord};

use crate::scenario::{Scenario, WrapperSpec};

/// The violations of `redispatch-through-wrappers` in `records` (record `i` is line `i + 1`),
/// a trace of `scenario` observed at `level`.
pub fn check(
    scenario: &Scenario,
    records: &[TraceRecord],
    level: ObservationLevel,
) -> Vec<Violation> {
    let id = InvariantId::RedispatchThroughWrappers;
    let Some(retry) = scenario
        .wrappers
        .iter()
        .position(|w| matches!(w, WrapperSpec::Retry { .. }))
    else {
        return Vec::new();
    };
    if level < invariant(id).observed {
        return Vec::new();
    }
    // A timeout's own result carries no context of the wrappers below it.
    let above_timeouts = scenario
        .wrappers
        .iter()
        .position(|w| matches!(w, WrapperSpec::Timeout))
        .unwrap_or(scenario.wrappers.len());
    let mut out = Vec::new();
    for call in &scenario.calls {
        let applies = |calls: &[CallId]| calls.is_empty() || calls.contains(&call.call_id);
        let contexts: Vec<(usize, &str)> = scenario.wrappers[..above_timeouts]
            .iter()
            .enumerate()
            .filter_map(|(k, w)| match w {
                WrapperSpec::Context { text, calls } if applies(calls) => Some((k, text.as_str())),
                _ => None,
            })
            .collect();
        let inside: Vec<&(usize, &str)> = contexts.iter().filter(|(k, _)| *k > retry).collect();
        if inside.is_empty() {
            continue;
        }
        let Some((dispatches, post)) = dispatches_and_post(records, &call.call_id) else {
            continue;
        };
        if dispatches < 2 {
            continue;
        }
        let (line, handed) = post;
        for &&(k, text) in &inside {
            let expected = contexts.iter().filter(|(_, t)| *t == text).count();
            let carried = handed.iter().filter(|t| *t == text).count();
            if carried < expected {
                out.push(Violation::new(
                    id,
                    vec![line],
                    Some(call.call_id.clone()),
                    format!(
                        "line {line} (post, call {}): the body was dispatched {dispatches} times, but the result handed to post-execute lacks the context \"{text}\" of wrapper {} inside the retry (wrapper {}): a re-dispatch did not pass through it",
                        call.call_id,
                        k + 1,
                        retry + 1,
                    ),
                ));
            }
        }
    }
    out
}

/// How many times `call`'s body was dispatched (a `toolBody` right after an `around`), and the
/// line and wrapper contexts of the last result post-execute was handed, if a `post` record
/// carries one.
fn dispatches_and_post(
    records: &[TraceRecord],
    call: &CallId,
) -> Option<(u32, (usize, Vec<String>))> {
    let mut dispatches = 0;
    let mut last = None;
    let mut post = None;
    for (i, record) in records.iter().enumerate() {
        let TraceRecord::Stage(obs) = record else {
            continue;
        };
        if obs.call.as_ref() != Some(call) {
            continue;
        }
        match obs.node {
            NodeId::ToolBody if last == Some(NodeId::Around) => dispatches += 1,
            NodeId::Post => {
                post = obs.result.as_ref().map(|r| {
                    let texts = r
                        .additional_contexts
                        .iter()
                        .filter(|c| c.origin == ContextOrigin::Wrapper)
                        .map(|c| c.text.clone())
                        .collect();
                    (i + 1, texts)
                });
            }
            _ => {}
        }
        if !matches!(
            obs.node,
            NodeId::Owned | NodeId::PresentCall | NodeId::PresentResult
        ) {
            last = Some(obs.node);
        }
    }
    post.map(|p| (dispatches, p))
}
