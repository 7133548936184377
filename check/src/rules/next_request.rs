//! The model's next request after a batch (a `request` record, level `boundary`): one tool
//! message per call, in model order, each carrying its recorded `tool/result` (errors as their
//! error text), and the batch's contexts after all of them, in the order they were injected.
//!
//! These rules read only `request` records: a trace without one is never judged by them.

use tep_model::identity::CallId;
use tep_model::session::EventBody;
use tep_model::trace::{NextRequest, RequestMessage, RequestRole, TraceRecord};

use super::{Cx, Rule};
use crate::invariants::{
    CheckKind::Request,
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Doc, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Boundary;

/// The tool messages of a request: (index in the request, call id).
fn tool_messages(request: &NextRequest) -> impl Iterator<Item = (usize, &CallId)> {
    request
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == RequestRole::Tool)
        .filter_map(|(k, m)| m.call_id.as_ref().map(|c| (k, c)))
}

/// The batch's call (a call of the model's batch, not a Code Mode sub-call) named `id`.
fn top_level(cx: &Cx<'_>, id: &CallId) -> Option<usize> {
    cx.batch.find(id).filter(|&i| i < cx.batch.top)
}

pub(crate) const REQUEST_ONE_RESULT_PER_CALL: Rule = Rule::new(entry(
    I::RequestOneResultPerCall,
    Must,
    "The model's next request carries one tool message per call of the batch whose `tool/result` was recorded: none missing, none twice, none for a call the session recorded no outcome of.",
    &[Doc("single model-facing outcome")],
    Request,
    Boundary,
    &[Read::Request, Read::Node(tep_model::graph::NodeId::ToolResult)],
))
.on_request(|cx: &mut Cx<'_>, line: usize, request: &NextRequest| {
    let mut seen = vec![0usize; cx.batch.top];
    for (_, id) in tool_messages(request) {
        match top_level(cx, id) {
            Some(i) if cx.call(i).commit.result.is_some() => seen[i] += 1,
            Some(i) => cx.report(
                I::RequestOneResultPerCall,
                Some(i),
                vec![line],
                format!(
                    "line {line}: the model is sent a result for call {id}, whose tool/result the session never recorded"
                ),
            ),
            None => cx.report(
                I::RequestOneResultPerCall,
                None,
                vec![line],
                format!("line {line}: the model is sent a result for call {id}, which the batch does not have"),
            ),
        }
    }
    for (i, n) in seen.into_iter().enumerate() {
        let call = cx.call(i);
        let Some(result) = call.commit.result else {
            continue;
        };
        let id = call.id.clone();
        let message = match n {
            1 => continue,
            0 => format!(
                "line {line}: the model's next request has no tool message for call {id} (its tool/result is at line {result})"
            ),
            n => format!("line {line}: the model's next request has {n} tool messages for call {id}"),
        };
        cx.report(I::RequestOneResultPerCall, Some(i), vec![line, result], message);
    }
})
.plants(|r| {
    let at = last_request(r)?;
    let TraceRecord::Request(request) = &mut r[at] else {
        return None;
    };
    let k = request
        .messages
        .iter()
        .position(|m| m.role == RequestRole::Tool)?;
    request.messages.remove(k);
    Some(())
});

pub(crate) const REQUEST_MODEL_ORDER: Rule = Rule::new(entry(
    I::RequestModelOrder,
    Should,
    "The model's next request carries the batch's tool messages in model order, whatever order the calls settled in.",
    &[Semantics(&[6, 7])],
    Request,
    Boundary,
    &[Read::Request],
))
.on_request(|cx: &mut Cx<'_>, line: usize, request: &NextRequest| {
    let mut last: Option<(usize, &CallId)> = None;
    for (_, id) in tool_messages(request) {
        let Some(i) = top_level(cx, id) else {
            continue;
        };
        if let Some((j, before)) = last
            && j > i
        {
            let message = format!(
                "line {line}: the model's next request sends call {id}'s result after call {before}'s, but the model declared {id} first"
            );
            cx.report(I::RequestModelOrder, Some(i), vec![line, cx.batch.model_line], message);
            return;
        }
        last = Some((i, id));
    }
})
.plants(|r| {
    let at = last_request(r)?;
    let TraceRecord::Request(request) = &mut r[at] else {
        return None;
    };
    let tools: Vec<usize> = tool_messages(request).map(|(k, _)| k).collect();
    let (&a, &b) = (tools.first()?, tools.get(1)?);
    request.messages.swap(a, b);
    Some(())
});

pub(crate) const REQUEST_ERRORS_AS_ERRORS: Rule = Rule::new(entry(
    I::RequestErrorsAsErrors,
    Must,
    "Each tool message of the model's next request carries its call's recorded `tool/result` text exactly: an `isError` result reaches the model as its error text, a success as its content (checked for results of one text block).",
    &[Doc("single model-facing outcome")],
    Request,
    Boundary,
    &[Read::Request, Read::Node(tep_model::graph::NodeId::ToolResult)],
))
.on_request(|cx: &mut Cx<'_>, line: usize, request: &NextRequest| {
    let mut compared = vec![false; cx.batch.top];
    for (k, id) in tool_messages(request) {
        let Some(i) = top_level(cx, id) else {
            continue;
        };
        let call = cx.call(i);
        // The first tool message of a call is its result; a second is another rule's breach.
        let (Some(result), Some((_, is_error)), false) =
            (call.commit.result, &call.commit.recorded, compared[i])
        else {
            continue;
        };
        compared[i] = true;
        // How a harness joins several blocks into one message is its own: only one text block
        // is compared, exactly.
        let Some(want) = call.recorded_text() else {
            continue;
        };
        let got = request.messages[k].content.as_str();
        if want == got {
            continue;
        }
        let what = if *is_error {
            "isError result"
        } else {
            "result"
        };
        let message = format!(
            "line {line}: call {id}'s {what} reaches the model as {got:?}, not as its recorded text {want:?} (line {result})"
        );
        cx.report(I::RequestErrorsAsErrors, Some(i), vec![line, result], message);
    }
})
.plants(|r| {
    // An error result the model is told as something else (any result when none failed).
    let failed = r.iter().find_map(|x| match x {
        TraceRecord::Event(e) => match &e.event.body {
            EventBody::ToolResult(d) if d.is_error() => d.call_id().cloned(),
            _ => None,
        },
        _ => None,
    });
    let at = last_request(r)?;
    let TraceRecord::Request(request) = &mut r[at] else {
        return None;
    };
    let message = request
        .messages
        .iter_mut()
        .filter(|m| m.role == RequestRole::Tool)
        .find(|m| failed.is_none() || m.call_id == failed)?;
    message.content = format!("ok: {}", message.content.trim_start_matches("Error: "));
    Some(())
});

pub(crate) const REQUEST_CONTEXTS_AFTER_RESULTS: Rule = Rule::new(entry(
    I::RequestContextsAfterResults,
    Must,
    "The model's next request carries every context the batch injected after all of its tool messages, in the order they were injected (FIFO); other messages may stand between them.",
    &[
        Doc("injected user/message after recorded tool results"),
        Doc("Active-batch additionalContexts FIFO"),
        Semantics(&[9]),
    ],
    Request,
    Boundary,
    &[Read::Request, Read::Node(tep_model::graph::NodeId::Context)],
))
.on_request(|cx: &mut Cx<'_>, line: usize, request: &NextRequest| {
    let messages = &request.messages;
    let after = messages
        .iter()
        .rposition(|m| m.role == RequestRole::Tool)
        .map_or(0, |k| k + 1);
    let is_context = |m: &RequestMessage, text: &str| m.role != RequestRole::Tool && m.content == text;
    // Each injected context, matched in order among the messages after the results.
    let mut cursor = after;
    let mut previous: Option<&str> = None;
    let mut found = Vec::new();
    for (i, text, l) in &cx.batch.injected {
        if let Some(k) = (cursor..messages.len()).find(|&k| is_context(&messages[k], text)) {
            cursor = k + 1;
            previous = Some(text);
            continue;
        }
        let id = &cx.call(*i).id;
        let message = if (after..cursor).any(|k| is_context(&messages[k], text)) {
            format!(
                "line {line}: the model is sent call {id}'s context {text:?} (injected at line {l}) before {:?}, which was injected earlier",
                previous.unwrap_or_default()
            )
        } else if messages[..after].iter().any(|m| is_context(m, text)) {
            format!(
                "line {line}: the model is sent call {id}'s context {text:?} (injected at line {l}) before a tool result of the batch"
            )
        } else {
            format!(
                "line {line}: call {id}'s context {text:?} (injected at line {l}) is not in the model's next request"
            )
        };
        found.push((*i, *l, message));
    }
    for (i, l, message) in found {
        cx.report(I::RequestContextsAfterResults, Some(i), vec![line, l], message);
    }
})
.plants(|r| {
    // The first context sent before the batch's results.
    let at = last_request(r)?;
    let TraceRecord::Request(request) = &mut r[at] else {
        return None;
    };
    let first_tool = request
        .messages
        .iter()
        .position(|m| m.role == RequestRole::Tool)?;
    let context = request
        .messages
        .iter()
        .rposition(|m| m.role != RequestRole::Tool)
        .filter(|&k| k > first_tool)?;
    let message = request.messages.remove(context);
    request.messages.insert(first_tool, message);
    Some(())
});

/// The last `request` record of a trace.
fn last_request(r: &[TraceRecord]) -> Option<usize> {
    r.iter().rposition(|x| matches!(x, TraceRecord::Request(_)))
}
