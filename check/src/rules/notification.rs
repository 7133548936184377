//! The `tools/result` notification: before the recorded `tool/result`, synchronous in rev2 and
//! awaited in rev1, and the frozen outcome is what gets recorded.

use tep_model::graph::NodeId as N;
use tep_model::session::EventBody;

use super::{Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::{Stage, Step},
    InvariantId as I,
    Level::Must,
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const NOTIFICATION_BEFORE_RESULT: Rule = Rule::new(entry(
    I::NotificationBeforeResult,
    Must,
    "The `tools/result` notification precedes the call's `tool/result` session event.",
    &[Edge(N::Final, N::ToolResult), Semantics(&[8])],
    Step,
    Hooks,
    &[Read::Node(N::ToolResult)],
))
.claims(|r| {
    (r.node == N::ToolResult && r.call.notified.is_none()).then_some(())?;
    // The early record is the intrusion: the walk goes on to the notification.
    r.claim(
        format!(
            "{} after {}: tools/result was not notified before the outcome was recorded",
            r.here(),
            r.call.at_position()
        ),
        true,
    )
});

pub(crate) const NOTIFICATION_SYNCHRONOUS: Rule = Rule::new(
    entry(
        I::NotificationSynchronous,
        Must,
        "`tools/result` is a synchronous notification: recording `tool/result` does not wait for an observer's asynchronous work.",
        &[Doc("synchronous notification"), Semantics(&[39])],
        Stage,
        Hooks,
        &[Read::Node(N::ToolResult), Read::ObserverMark],
    )
    .rev2(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if v.node != Some(N::ToolResult) {
        return;
    }
    let call = cx.call(v.call);
    let waited: Vec<(usize, u64, String)> = call
        .observer_marks
        .iter()
        .filter(|(_, after, _)| *after > 0)
        .cloned()
        .collect();
    let id = call.id.clone();
    for (ml, after, by) in waited {
        cx.report(
            I::NotificationSynchronous,
            Some(v.call),
            vec![v.line, ml],
            format!(
                "{} waited for observer {by}'s {after} ms of work (settled at line {ml})",
                v.here(&id)
            ),
        );
    }
});

pub(crate) const NOTIFICATION_AWAITED: Rule = Rule::new(
    entry(
        I::NotificationAwaited,
        Must,
        "`tools/result` is a parallel notification: the observers' work is awaited before `tool/result` is recorded.",
        &[
            Doc("parallel notification"),
            Doc("The awaited `tools/result` notification"),
        ],
        Stage,
        Hooks,
        &[Read::ObserverMark],
    )
    .rev1_only(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(mark) = v.mark() else { return };
    let call = cx.call(v.call);
    if let Some(result_line) = call.result {
        let id = call.id.clone();
        cx.report(
            I::NotificationAwaited,
            Some(v.call),
            vec![v.line, result_line],
            format!(
                "line {} (observer {} settled, call {id}) after line {result_line} (tool/result): the notification was not awaited",
                v.line, mark.by
            ),
        );
    }
});

pub(crate) const FROZEN_OUTCOME: Rule = Rule::new(entry(
    I::FrozenOutcome,
    Must,
    "The `tool/result` event (a sub-call's `tool/code-dispatch`) records exactly the outcome `tools/result` announced: content, `isError` and error code.",
    &[Doc("frozen authoritative outcome"), Semantics(&[39])],
    Stage,
    Hooks,
    &[Read::Node(N::ToolResult), Read::Node(N::Dispatched)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(event) = v.event() else { return };
    let call = cx.call(v.call);
    let Some((announced, nl)) = &call.notified else {
        return;
    };
    let differs = match &event.body {
        EventBody::ToolResult(data) => {
            data.content() != announced.content
                || data.is_error() != announced.is_error
                || data.error().map(|e| e.code.as_str()) != announced.error_code()
        }
        EventBody::CodeDispatch(data) => {
            data.is_error != announced.is_error
                || data.content.as_ref().is_some_and(|c| *c != announced.content)
        }
        _ => false,
    };
    if differs {
        let message = format!(
            "line {} ({}, call {}) differs from the outcome tools/result announced at line {nl}",
            v.line,
            event.body.type_name(),
            call.id
        );
        cx.report(I::FrozenOutcome, Some(v.call), vec![v.line, *nl], message);
    }
});
