//! The shapes of recorded events: what each revision records, seqs, and which events are model
//! facing.

use tep_model::graph::NodeId as N;
use tep_model::session::{
    ContextMessage, EventBody, FlatToolResult, Role, SessionEvent, ToolResultData,
    ToolResultRecord, UserMessage,
};
use tep_model::trace::{Capability, TraceRecord};

use super::plant::{event_type, find, result_data_mut};
use super::{Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::Stage,
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Doc, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Events;

pub(crate) const RESULT_NAMES_ITS_CALL: Rule = Rule::new(entry(
    I::ResultNamesItsCall,
    Should,
    "A `tool/result` names its call and the `tool/call` event it answers (`sourceEventSeqs: [callSeq]`).",
    &[Semantics(&[8])],
    Stage,
    Events,
    &[Read::Node(N::ToolResult)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(event) = v.event() else { return };
    let EventBody::ToolResult(data) = &event.body else {
        return;
    };
    let call = cx.call(v.call);
    let names_call = data.call_id() == Some(&call.id);
    let answers = matches!(
        (call.start.logged, event.source_event_seqs.as_deref()),
        (Some((_, seq)), Some(s)) if s == [seq]
    );
    if !names_call || !answers {
        let message = format!(
            "{} does not name its call and its tool/call event",
            v.here(&call.id)
        );
        cx.report(I::ResultNamesItsCall, Some(v.call), vec![v.line], message);
    }
})
.plants(|r| {
    let tr = find(r, |x| event_type(x) == Some("tool/result"))?;
    if let TraceRecord::Event(e) = &mut r[tr] {
        e.event.source_event_seqs = Some(vec![9999]);
    }
    Some(())
});

/// Reports `checking` when the `tool/result` data has the other revision's shape (the words
/// are formatted only then).
fn tool_result_shape(cx: &mut Cx<'_>, v: &Visit<'_>, checking: I) {
    let Some(event) = v.event() else { return };
    let EventBody::ToolResult(data) = &event.body else {
        return;
    };
    let wrong = match data {
        ToolResultData::Flat(_) => I::ToolResultMessageShape,
        ToolResultData::Message(_) => I::ToolResultFlatShape,
    };
    if wrong != checking {
        return;
    }
    let here = v.here(&cx.call(v.call).id);
    match data {
        ToolResultData::Flat(_) => cx.report(
            I::ToolResultMessageShape,
            Some(v.call),
            vec![v.line],
            format!("{here} has rev1's flat data; rev2 records a ToolResultMessage"),
        ),
        ToolResultData::Message(_) => cx.report(
            I::ToolResultFlatShape,
            Some(v.call),
            vec![v.line],
            format!("{here} has rev2's message data; rev1 records the flat fields"),
        ),
    }
}

pub(crate) const TOOL_RESULT_MESSAGE_SHAPE: Rule = Rule::new(
    entry(
        I::ToolResultMessageShape,
        Should,
        "The `tool/result` data is `{turn, step, message: ToolResultMessage, error?, meta?}`.",
        &[Semantics(&[8])],
        Stage,
        Events,
        &[Read::Node(N::ToolResult)],
    )
    .rev2(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| tool_result_shape(cx, v, I::ToolResultMessageShape))
.plants(|r| {
    let tr = find(r, |x| event_type(x) == Some("tool/result"))?;
    let data = result_data_mut(&mut r[tr])?;
    let ToolResultData::Message(m) = data else {
        return None;
    };
    let block = m.message.content.first()?.clone();
    *data = ToolResultData::Flat(FlatToolResult {
        call_id: block.tool_call_id,
        content: block.content,
        is_error: block.is_error,
        error: m.error.clone(),
        meta: m.meta.clone(),
    });
    Some(())
});

pub(crate) const TOOL_RESULT_FLAT_SHAPE: Rule = Rule::new(
    entry(
        I::ToolResultFlatShape,
        Should,
        "The rev1 `tool/result` data is the flat `{callId, content, isError, error?, meta?}`.",
        &[Semantics(&[8])],
        Stage,
        Events,
        &[Read::Node(N::ToolResult)],
    )
    .rev1_only(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| tool_result_shape(cx, v, I::ToolResultFlatShape))
.plants(|r| {
    let tr = find(r, |x| event_type(x) == Some("tool/result"))?;
    let data = result_data_mut(&mut r[tr])?;
    let ToolResultData::Flat(f) = data else {
        return None;
    };
    *data = ToolResultData::Message(ToolResultRecord::from_flat(f.clone(), 1));
    Some(())
});

/// Reports `checking` when a context is injected as the other revision's event (the words are
/// formatted only then).
fn context_shape(cx: &mut Cx<'_>, v: &Visit<'_>, checking: I) {
    let Some(event) = v.event() else { return };
    let wrong = match &event.body {
        EventBody::ContextMessage(_) => I::ContextsAsUserMessages,
        EventBody::UserMessage(_) => I::ContextsAsContextMessages,
        _ => return,
    };
    if wrong != checking {
        return;
    }
    let here = v.here(&cx.call(v.call).id);
    match &event.body {
        EventBody::ContextMessage(_) => cx.report(
            I::ContextsAsUserMessages,
            Some(v.call),
            vec![v.line],
            format!("{here}: rev2 injects contexts as user/message, not context/message"),
        ),
        EventBody::UserMessage(_) => cx.report(
            I::ContextsAsContextMessages,
            Some(v.call),
            vec![v.line],
            format!("{here}: rev1 injects contexts as context/message, not user/message"),
        ),
        _ => {}
    }
}

pub(crate) const CONTEXTS_AS_USER_MESSAGES: Rule = Rule::new(
    entry(
        I::ContextsAsUserMessages,
        Must,
        "Contexts are injected as `user/message` session events.",
        &[Doc("injected user/message after recorded tool results")],
        Stage,
        Events,
        &[Read::Node(N::Context)],
    )
    .rev2(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| context_shape(cx, v, I::ContextsAsUserMessages))
.plants(|r| {
    let c = find(r, |x| event_type(x) == Some("user/message"))?;
    if let TraceRecord::Event(e) = &mut r[c]
        && let EventBody::UserMessage(m) = &e.event.body
    {
        e.event.body = EventBody::ContextMessage(ContextMessage {
            content: m.content.clone(),
            source: m.source.clone(),
        });
    }
    Some(())
});

pub(crate) const CONTEXTS_AS_CONTEXT_MESSAGES: Rule = Rule::new(
    entry(
        I::ContextsAsContextMessages,
        Must,
        "Contexts are injected as buffered `context/message` session events.",
        &[Doc("context/message after all tool results")],
        Stage,
        Events,
        &[Read::Node(N::Context)],
    )
    .rev1_only(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| context_shape(cx, v, I::ContextsAsContextMessages))
.plants(|r| {
    let c = find(r, |x| event_type(x) == Some("context/message"))?;
    if let TraceRecord::Event(e) = &mut r[c]
        && let EventBody::ContextMessage(m) = &e.event.body
    {
        e.event.body = EventBody::UserMessage(UserMessage {
            id: "context".to_owned(),
            role: Role::User,
            content: m.content.clone(),
            source: m.source.clone(),
        });
    }
    Some(())
});

pub(crate) const SESSION_SEQ_INCREASING: Rule = Rule::new(entry(
    I::SessionSeqIncreasing,
    Should,
    "Session events carry strictly increasing `seq` numbers.",
    &[Semantics(&[8])],
    Stage,
    Events,
    &[
        Read::Node(N::ToolCall),
        Read::Node(N::ToolResult),
        Read::Node(N::Owned),
        Read::Node(N::Context),
        Read::Audit,
    ],
))
.on_event(
    |cx: &mut Cx<'_>, line: usize, event: &SessionEvent, call: Option<usize>| {
        if let Some((prev, prev_line)) = cx.fs.last_seq
            && event.seq <= prev
        {
            cx.report(
                I::SessionSeqIncreasing,
                call,
                vec![line, prev_line],
                format!(
                    "line {line} ({}) has seq {} after line {prev_line} with seq {prev}",
                    event.body.type_name(),
                    event.seq
                ),
            );
        }
    },
)
.plants(|r| {
    let events: Vec<usize> = (0..r.len())
        .filter(|&i| event_type(&r[i]).is_some())
        .collect();
    let (a, b) = (*events.first()?, *events.get(1)?);
    let first_seq = match &r[a] {
        TraceRecord::Event(e) => e.event.seq,
        _ => return None,
    };
    if let TraceRecord::Event(e) = &mut r[b] {
        e.event.seq = first_seq;
    }
    Some(())
});

pub(crate) const DISPATCH_NOT_MODEL_FACING: Rule = Rule::new(
    entry(
        I::DispatchNotModelFacing,
        Should,
        "Dispatch events never become model messages: they carry no surface operation.",
        &[Semantics(&[50])],
        Stage,
        Events,
        &[Read::Node(N::DispatchStart), Read::Node(N::Dispatched)],
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(event) = v.event() else { return };
    if event.surface_op.is_some() {
        let message = format!(
            "line {} ({}, sub-call {}) carries a surface operation: a model-facing message",
            v.line,
            event.body.type_name(),
            cx.call(v.call).id
        );
        cx.report(
            I::DispatchNotModelFacing,
            Some(v.call),
            vec![v.line],
            message,
        );
    }
})
.plants(|r| {
    let at = find(r, |x| event_type(x) == Some("tool/code-dispatch"))?;
    if let TraceRecord::Event(e) = &mut r[at] {
        e.event.surface_op = Some(tep_model::session::SurfaceOp::Append);
    }
    Some(())
});

pub(crate) const CODE_DISPATCH_CONTENT_SHAPE: Rule = Rule::new(
    entry(
        I::CodeDispatchContentShape,
        Should,
        "The rev2 `tool/code-dispatch` data carries `rootCallId` and the full `content`.",
        &[Semantics(&[46])],
        Stage,
        Events,
        &[Read::Node(N::Dispatched)],
    )
    .rev2()
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(EventBody::CodeDispatch(data)) = v.event().map(|e| &e.body) else {
        return;
    };
    if data.root_call_id.is_none() || data.content.is_none() {
        let message = format!(
            "line {} (tool/code-dispatch, sub-call {}) lacks rootCallId or content",
            v.line,
            cx.call(v.call).id
        );
        cx.report(
            I::CodeDispatchContentShape,
            Some(v.call),
            vec![v.line],
            message,
        );
    }
})
.plants(|r| {
    let at = find(r, |x| event_type(x) == Some("tool/code-dispatch"))?;
    if let TraceRecord::Event(e) = &mut r[at]
        && let EventBody::CodeDispatch(d) = &mut e.event.body
    {
        d.content = None;
    }
    Some(())
});

pub(crate) const CODE_DISPATCH_SUMMARY_SHAPE: Rule = Rule::new(
    entry(
        I::CodeDispatchSummaryShape,
        Should,
        "The rev1 `tool/code-dispatch` data carries a `resultSummary` of at most 200 characters and no `rootCallId`.",
        &[Semantics(&[46])],
        Stage,
        Events,
        &[Read::Node(N::Dispatched)],
    )
    .rev1_only()
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(EventBody::CodeDispatch(data)) = v.event().map(|e| &e.body) else {
        return;
    };
    if data.root_call_id.is_some()
        || data
            .result_summary
            .as_ref()
            .is_none_or(|r| r.chars().count() > 200)
    {
        let message = format!(
            "line {} (tool/code-dispatch, sub-call {}) is not rev1's shape (a resultSummary of at most 200 characters, no rootCallId)",
            v.line,
            cx.call(v.call).id
        );
        cx.report(I::CodeDispatchSummaryShape, Some(v.call), vec![v.line], message);
    }
})
.plants(|r| {
    let at = find(r, |x| event_type(x) == Some("tool/code-dispatch"))?;
    if let TraceRecord::Event(e) = &mut r[at]
        && let EventBody::CodeDispatch(d) = &mut e.event.body
    {
        d.result_summary = None;
    }
    Some(())
});
