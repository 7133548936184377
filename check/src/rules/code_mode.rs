//! Code Mode: `run_code` is reserved, its sub-calls run inside its body one at a time with its
//! token, are logged, settle their bindings, and keep their contexts out of the batch.

use std::sync::Arc;

use serde_json::json;
use tep_model::graph::NodeId as N;
use tep_model::result::ContentBlock;
use tep_model::session::{
    ContextMessage, EventBody, MessageSource, Role, ToolCallData, ToolResultData, UserMessage,
};
use tep_model::trace::{Capability, MarkKind, TraceRecord};

use super::plant::{
    call_of, event_type, find, first_sub_call, is_stage, move_record, nth_sub_call, parent_of,
    stage, stage_mut,
};
use super::{Claim, Cx, Rule, Visit};
use crate::facts::state::Call;
use crate::facts::walk::bit;
use crate::invariants::{
    CheckKind::{Batch, Stage, Step},
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Doc, Semantics},
    entry,
};
use crate::observation::ObservationLevel::{Events, Hooks};

/// Every record of a sub-call.
const SUB_CALL_RECORDS: &[Read] = &[
    Read::Node(N::DispatchStart),
    Read::Node(N::Pre),
    Read::Node(N::Approval),
    Read::Node(N::Guards),
    Read::Node(N::Denied),
    Read::Node(N::Around),
    Read::Node(N::ToolBody),
    Read::Node(N::FsGate),
    Read::Node(N::Owned),
    Read::Node(N::Post),
    Read::Node(N::Normalized),
    Read::Node(N::Finalize),
    Read::Node(N::Final),
    Read::Node(N::Dispatched),
    Read::Node(N::RunCode),
];

const RUN_CODE: &str = tep_model::RUN_CODE;

pub(crate) const RUN_CODE_RESERVED: Rule = Rule::new(
    entry(
        I::RunCodeReserved,
        Must,
        "`run_code` is reserved: a program's binding calls never reach it, so no sub-call is a `run_code` call.",
        &[Doc("the reserved `run_code` transport"), Semantics(&[43])],
        Stage,
        Events,
        &[Read::Node(N::DispatchStart), Read::Node(N::Pre)],
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    if !call.is_sub_call() {
        return;
    }
    let name = match (v.observation(), v.event().map(|e| &e.body)) {
        (Some(o), _) => o.identity.as_ref().map(|i| i.name.as_str()),
        (_, Some(EventBody::CodeDispatchStart(d))) => Some(d.name.as_str()),
        _ => None,
    };
    if name == Some(RUN_CODE) {
        let message = format!("line {}: sub-call {} calls run_code itself", v.line, call.id);
        cx.report_once(I::RunCodeReserved, v.call, vec![v.line], message);
    }
})
.plants(|r| {
    let at = find(r, |x| {
        stage(x).is_some_and(|o| o.parent.is_some() && o.identity.is_some())
    })?;
    Arc::make_mut(stage_mut(&mut r[at])?.identity.as_mut()?).name = "run_code".to_owned();
    Some(())
});

pub(crate) const CODE_DISPATCH_INSIDE_BODY: Rule = Rule::new(
    entry(
        I::CodeDispatchInsideBody,
        Must,
        "Sub-calls run inside their `run_code` call's body: every stage of a sub-call happens while the parent is in its body.",
        &[
            Doc("its serialized sub-calls through the pipeline"),
            Semantics(&[49]),
        ],
        Batch,
        Hooks,
        SUB_CALL_RECORDS,
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    let Some(p) = call.parent else { return };
    let parent = cx.call(p);
    if parent.body.since.is_some() {
        return;
    }
    let message = format!(
        "{} while its run_code call is not running its program (last at {})",
        v.here(&call.id),
        parent.at_position()
    );
    cx.report_once(I::CodeDispatchInsideBody, v.call, vec![v.line, parent.walk.position_line], message);
})
.plants(|r| {
    // The first sub-call runs after its run_code call left its body.
    let sub = first_sub_call(r)?;
    let parent = parent_of(r, &sub)?;
    let block: Vec<usize> = (0..r.len())
        .filter(|&i| call_of(&r[i]) == Some(&sub))
        .collect();
    let moved: Vec<TraceRecord> = block.iter().map(|&i| r[i].clone()).collect();
    for &i in block.iter().rev() {
        r.remove(i);
    }
    let post = find(r, |x| {
        is_stage(x, N::Post) && call_of(x) == Some(&parent)
    })?;
    for (k, rec) in moved.into_iter().enumerate() {
        r.insert(post + 1 + k, rec);
    }
    Some(())
});

pub(crate) const SUB_CALLS_SERIALIZED: Rule = Rule::new(
    entry(
        I::SubCallsSerialized,
        Must,
        "Sub-calls run one at a time, in submission order: a sub-call starts only after the previous one's outcome is announced (`tools/result`).",
        &[Doc("its serialized sub-calls through the pipeline")],
        Batch,
        Hooks,
        SUB_CALL_RECORDS,
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    let Some(p) = call.parent else { return };
    let Some(j) = cx.call(p).code.open_sub.filter(|&j| j != v.call) else {
        return;
    };
    if call.has_visited(N::Final) {
        return;
    }
    let other = cx.call(j);
    let message = format!(
        "{} while sub-call {} of the same program is still running (last seen at line {})",
        v.here(&call.id),
        other.id,
        other.walk.last_line
    );
    cx.report_once(I::SubCallsSerialized, v.call, vec![v.line, other.walk.last_line], message);
})
.plants(|r| {
    // The second sub-call starts while the first is still running.
    let sub = first_sub_call(r)?;
    let parent = parent_of(r, &sub)?;
    let second = nth_sub_call(r, &parent, 2)?;
    let first_of_second = find(r, |x| call_of(x) == Some(&second))?;
    let first_of_first = find(r, |x| call_of(x) == Some(&sub))?;
    move_record(r, first_of_second, first_of_first + 1);
    Some(())
});

pub(crate) const SUB_CALL_CARRIES_PARENT_TOKEN: Rule = Rule::new(
    entry(
        I::SubCallCarriesParentToken,
        Must,
        "Every stage of a sub-call is handed the parent `run_code` execution's token.",
        &[Doc("sub-calls carry the parent token"), Semantics(&[44])],
        Stage,
        Hooks,
        SUB_CALL_RECORDS,
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    let (Some(p), Some(identity)) = (
        call.parent,
        v.observation().and_then(|o| o.identity.as_ref()),
    ) else {
        return;
    };
    let Some((parent_token, _)) = &cx.call(p).start.first_token else {
        return;
    };
    if identity.parent_token.as_ref() != Some(parent_token) {
        let message = format!(
            "line {} (sub-call {}) was handed parent token {}, but its run_code call's token is {}",
            v.line,
            call.id,
            identity.parent_token.as_deref().unwrap_or("none"),
            parent_token
        );
        cx.report(
            I::SubCallCarriesParentToken,
            Some(v.call),
            vec![v.line],
            message,
        );
    }
})
.plants(|r| {
    let at = find(r, |x| {
        stage(x).is_some_and(|o| o.parent.is_some() && o.identity.is_some())
    })?;
    Arc::make_mut(stage_mut(&mut r[at])?.identity.as_mut()?).parent_token =
        Some("tok-forged".to_owned());
    Some(())
});

pub(crate) const SUB_CALL_ID_SCHEME: Rule = Rule::new(
    entry(
        I::SubCallIdScheme,
        Should,
        "Sub-calls are numbered `<parent>:code:<n>`, from 1, in the order they start (in each run of the program, or on across the runs of a retried one).",
        &[Semantics(&[44])],
        Batch,
        Events,
        SUB_CALL_RECORDS,
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    let Some(p) = call.parent else { return };
    // Checked at the sub-call's first record.
    if call.walk.visited != bit(call.graph.entry()) {
        return;
    }
    let parent = cx.call(p);
    // Numbered from 1 in each run of the program (the core counts them as they appear), or
    // on across the runs of a retried program: a harness's counter may keep counting.
    let n = call.code.number;
    // The number in an id of this scheme, and its digits (this rule alone reads the form of
    // an id).
    let digits = |id: &tep_model::identity::CallId| -> Option<(usize, bool)> {
        let (p, m) = id.as_str().rsplit_once(":code:")?;
        let number = (p == parent.id.as_str()).then(|| m.parse().ok()).flatten()?;
        Some((number, !m.starts_with(['0', '+'])))
    };
    let number = |id| digits(id).map(|(number, _)| number);
    // The id the reference semantics give it (`parent.id.code_sub_call(n)`), told without
    // building it: every valid sub-call ends here.
    if digits(&call.id) == Some((n, true)) {
        return;
    }
    let expected = parent.id.code_sub_call(n);
    // Numbers going on across runs: at least the run's, at most how many sub-calls the
    // program started in all its runs, and above the previous sub-call's.
    let subs = &parent.code.sub_calls;
    let previous = subs
        .len()
        .checked_sub(2)
        .and_then(|k| subs.get(k))
        .and_then(|&k| number(&cx.call(k).id))
        .unwrap_or(0);
    let continued =
        number(&call.id).is_some_and(|m| m >= n && m <= subs.len() && m > previous);
    if call.id != expected && !continued {
        let message = format!(
            "line {}: sub-call {} is the {n}th sub-call of {} to start; the reference semantics number it {expected}",
            v.line, call.id, parent.id
        );
        cx.report_once(I::SubCallIdScheme, v.call, vec![v.line], message);
    }
})
.plants(|r| {
    // The first sub-call is numbered as if others had started before it.
    let sub = first_sub_call(r)?;
    let parent = parent_of(r, &sub)?;
    let renamed = parent.code_sub_call(7);
    for rec in r.iter_mut().filter(|x| x.call() == Some(&sub)) {
        match rec {
            TraceRecord::Stage(o) => {
                o.call = Some(renamed.clone());
                if let Some(identity) = o.identity.as_mut() {
                    Arc::make_mut(identity).call_id = renamed.clone();
                }
            }
            TraceRecord::Event(e) => {
                e.call = Some(renamed.clone());
                match &mut e.event.body {
                    EventBody::CodeDispatchStart(d) => d.sub_call_id = renamed.clone(),
                    EventBody::CodeDispatch(d) => d.sub_call_id = renamed.clone(),
                    _ => {}
                }
            }
            TraceRecord::Mark(m) => m.call = renamed.clone(),
            TraceRecord::Header(_) | TraceRecord::Request(_) => {}
        }
    }
    Some(())
});

pub(crate) const SUB_CALL_START_LOGGED: Rule = Rule::new(
    entry(
        I::SubCallStartLogged,
        Should,
        "A sub-call logs `tool/code-dispatch-start` when it actually starts, before its first stage.",
        &[Semantics(&[46])],
        Step,
        Events,
        &[Read::Node(N::DispatchStart)],
    )
    .rev2()
    .needs(Capability::CodeMode),
)
.claims(|r| {
    (r.call.is_sub_call() && r.call.code.dispatch_started.is_none() && r.node != N::DispatchStart)
        .then_some(())?;
    r.claim(
        format!("{}: the sub-call did not log tool/code-dispatch-start first", r.here()),
        false,
    )
})
.at_batch_end(|cx: &mut Cx<'_>| {
    for (i, id, last) in unlogged_sub_calls(cx, |c| c.code.dispatch_started) {
        cx.report_once(
            I::SubCallStartLogged,
            i,
            vec![last],
            format!("sub-call {id} (last seen at line {last}) never logged tool/code-dispatch-start"),
        );
    }
})
.plants(|r| {
    let at = find(r, |x| event_type(x) == Some("tool/code-dispatch-start"))?;
    r.remove(at);
    Some(())
});

/// The sub-calls of the batch with no line for `logged` (a dispatch event): index, id, and the
/// last line seen of each.
fn unlogged_sub_calls(
    cx: &Cx<'_>,
    logged: impl Fn(&Call) -> Option<usize>,
) -> Vec<(usize, String, usize)> {
    cx.batch
        .sub_calls()
        .filter(|(_, c)| logged(c).is_none())
        .map(|(i, c)| (i, c.id.to_string(), c.walk.last_line))
        .collect()
}

pub(crate) const SUB_CALL_LOGS_DISPATCH: Rule = Rule::new(
    entry(
        I::SubCallLogsDispatch,
        Must,
        "Every sub-call is logged as `tool/code-dispatch` after its `tools/result` notification; the log is side work, in any order with the binding's settlement.",
        &[Doc("log `tool/code-dispatch`"), Semantics(&[46])],
        Step,
        Events,
        &[Read::Node(N::Dispatched)],
    )
    .needs(Capability::CodeMode),
)
.claims(|r| {
    (r.node == N::Dispatched).then_some(())?;
    Some(Claim {
        message: format!(
            "{}: the sub-call was logged before tools/result announced its outcome",
            r.here()
        ),
        lines: vec![r.visit.line, r.call.walk.position_line],
        keep_position: true,
    })
})
.at_batch_end(|cx: &mut Cx<'_>| {
    for (i, id, last) in unlogged_sub_calls(cx, |c| c.code.dispatched) {
        cx.report(
            I::SubCallLogsDispatch,
            Some(i),
            vec![last],
            format!("sub-call {id} (last seen at line {last}) was never logged as tool/code-dispatch"),
        );
    }
})
.plants(|r| {
    let at = find(r, |x| event_type(x) == Some("tool/code-dispatch"))?;
    r.remove(at);
    Some(())
});

pub(crate) const SUB_CALL_LOGS_NO_CALL_OR_RESULT: Rule = Rule::new(
    entry(
        I::SubCallLogsNoCallOrResult,
        Should,
        "A Code Mode sub-call is logged by its dispatch events only: it logs no `tool/call` and no `tool/result` of its own, which would put a call the model never made among the model's calls and results.",
        &[
            Doc("log `tool/code-dispatch`"),
            Doc("to preserve call/result adjacency"),
            Semantics(&[46, 50]),
        ],
        Step,
        Events,
        &[Read::Node(N::ToolCall), Read::Node(N::ToolResult)],
    )
    .needs(Capability::CodeMode),
)
.claims(|r| {
    (r.call.is_sub_call() && matches!(r.node, N::ToolCall | N::ToolResult)).then_some(())?;
    let event = if r.node == N::ToolCall {
        "tool/call"
    } else {
        "tool/result"
    };
    r.claim(
        format!(
            "{}: sub-call {} logs a {event} of its own; a sub-call is logged by tool/code-dispatch-start and tool/code-dispatch, never as a model's call",
            r.here(),
            r.call.id
        ),
        true,
    )
})
.plants(|r| {
    // The sub-call logged as a `tool/call` too, beside its dispatch log.
    let sub = first_sub_call(r)?;
    let d = find(r, |x| {
        event_type(x) == Some("tool/code-dispatch") && call_of(x) == Some(&sub)
    })?;
    let mut logged = r[d].clone();
    let TraceRecord::Event(e) = &mut logged else {
        return None;
    };
    let EventBody::CodeDispatch(data) = &e.event.body else {
        return None;
    };
    e.event.body = EventBody::ToolCall(ToolCallData {
        turn: 1,
        step: 1,
        call_id: sub.clone(),
        name: data.name.clone(),
        arguments: data.arguments.to_string(),
    });
    // It takes the dispatch log's seq; the log moves up by one from there.
    let seq = e.event.seq;
    for record in r.iter_mut().skip(d) {
        if let TraceRecord::Event(later) = record {
            later.event.seq += 1;
            for s in later.event.source_event_seqs.iter_mut().flatten() {
                if *s >= seq {
                    *s += 1;
                }
            }
        }
    }
    r.insert(d, logged);
    Some(())
});

pub(crate) const BINDING_SETTLES: Rule = Rule::new(
    entry(
        I::BindingSettles,
        Must,
        "Every sub-call settles its binding in the program once its outcome is announced: it resolves for a success, and a denial or failure rejects it with the tool name and message.",
        &[
            Doc("return denials as binding rejections"),
            Semantics(&[47]),
        ],
        Stage,
        Hooks,
        &[Read::Node(N::RunCode), Read::Node(N::Final)],
    )
    .needs(Capability::CodeMode),
)
.claims(|r| {
    (r.node == N::RunCode).then_some(())?;
    r.claim(
        format!(
            "{} after {}: the binding settled before tools/result announced the sub-call's outcome",
            r.here(),
            r.call.at_position()
        ),
        false,
    )
})
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let (Some(mark), Some(N::RunCode)) = (v.mark(), v.node) else {
        return;
    };
    let call = cx.call(v.call);
    let Some((result, announced)) = &call.commit.notified else {
        return;
    };
    let rejected = mark.mark == tep_model::trace::MarkKind::BindingRejected;
    let problem = match (rejected, &mark.rejection) {
        (false, _) if result.is_error => Some("resolved, but the sub-call ended as an error".to_owned()),
        (true, _) if !result.is_error => Some("rejected, but the sub-call succeeded".to_owned()),
        (true, None) => Some("rejected without saying with what".to_owned()),
        (true, Some(rejection)) => {
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
        (false, _) => None,
    };
    if let Some(problem) = problem {
        let message = format!(
            "line {} (binding of sub-call {}): {problem} (announced at line {announced})",
            v.line, call.id
        );
        cx.report(I::BindingSettles, Some(v.call), vec![v.line, *announced], message);
    }
})
.at_batch_end(|cx: &mut Cx<'_>| {
    let unsettled: Vec<(usize, String, usize)> = cx
        .batch
        .sub_calls()
        .filter(|(_, c)| c.code.binding.is_none() && c.commit.notified.is_some())
        .map(|(i, c)| (i, c.id.to_string(), c.walk.last_line))
        .collect();
    for (i, id, last) in unsettled {
        cx.report(
            I::BindingSettles,
            Some(i),
            vec![last],
            format!("sub-call {id}'s outcome was announced but its binding never settled in the program (last seen at line {last})"),
        );
    }
})
.plants(|r| {
    let at = find(
        r,
        |x| matches!(x, TraceRecord::Mark(m) if m.mark != MarkKind::ObserverSettled),
    )?;
    if let TraceRecord::Mark(m) = &mut r[at] {
        m.mark = match m.mark {
            MarkKind::BindingRejected => MarkKind::BindingResolved,
            _ => MarkKind::BindingRejected,
        };
    }
    Some(())
});

pub(crate) const REJECTION_IS_TOOL_CALL_ERROR: Rule = Rule::new(
    entry(
        I::RejectionIsToolCallError,
        Should,
        "A rejected binding hands the program a tool-call error with the tool's name and the message only: never the result's content, error codes or anything else.",
        &[Semantics(&[47])],
        Stage,
        Hooks,
        &[Read::Node(N::RunCode)],
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(rejection) = v.mark().and_then(|m| m.rejection.as_ref()) else {
        return;
    };
    if rejection.other.is_empty() {
        return;
    }
    let fields: Vec<&str> = rejection.other.keys().map(String::as_str).collect();
    let message = format!(
        "line {} (binding of sub-call {}): the program was handed {} besides toolName and message",
        v.line,
        cx.call(v.call).id,
        fields.join(", ")
    );
    cx.report(I::RejectionIsToolCallError, Some(v.call), vec![v.line], message);
})
.plants(|r| {
    // The program is handed the sub-call's content besides its name and message.
    let at = find(
        r,
        |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::BindingRejected),
    )?;
    if let TraceRecord::Mark(m) = &mut r[at] {
        m.rejection.as_mut()?.other.insert(
            "content".to_owned(),
            json!([{"type": "text", "text": "leaked"}]),
        );
    }
    Some(())
});

pub(crate) const SUB_CALL_CONTEXTS_OMITTED: Rule = Rule::new(
    entry(
        I::SubCallContextsOmitted,
        Must,
        "A sub-call's additional contexts are omitted: never injected, and not forwarded to the `run_code` call.",
        &[Doc(
            "omit `additionalContexts` to preserve call/result adjacency",
        )],
        Stage,
        Events,
        &[Read::Node(N::Context), Read::Node(N::Final)],
    )
    .needs(Capability::CodeMode),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    match v.node {
        Some(N::Context) if call.is_sub_call() => {
            let message = format!("line {} injects a context of sub-call {}", v.line, call.id);
            cx.report(I::SubCallContextsOmitted, Some(v.call), vec![v.line], message);
        }
        Some(N::Final) if !call.is_sub_call() && !call.code.sub_calls.is_empty() => {
            let Some(result) = v.observation().and_then(|o| o.result.as_ref()) else {
                return;
            };
            // A forwarded context is the run_code body's own (deferred, origin `tool`: the
            // original defers them onto the outer result); the run_code call's wrapper and
            // post-execute contexts are its own even when a sub-call has one with the same text.
            let forwarded = call.code.sub_calls.iter().find_map(|&k| {
                let sub = cx.call(k);
                let (announced, at) = sub.commit.notified.as_ref()?;
                announced
                    .additional_contexts
                    .iter()
                    .find(|c| {
                        result.additional_contexts.iter().any(|r| {
                            r.text == c.text && r.origin == tep_model::result::ContextOrigin::Tool
                        })
                    })
                    .map(|c| (sub.id.clone(), c.text.clone(), *at))
            });
            if let Some((sub, text, at)) = forwarded {
                let message = format!(
                    "{} carries {text:?}, a context of sub-call {sub} (line {at})",
                    v.here(&call.id)
                );
                cx.report(I::SubCallContextsOmitted, Some(v.call), vec![v.line, at], message);
            }
        }
        _ => {}
    }
})
.plants(|r| {
    // A sub-call's context injected after the batch.
    let sub = first_sub_call(r)?;
    let settled = find(r, |x| is_stage(x, N::AllResults))?;
    let seq = r
        .iter()
        .filter_map(|x| match x {
            TraceRecord::Event(e) => Some(e.event.seq),
            _ => None,
        })
        .max()?
        + 1;
    let content = vec![ContentBlock::text("a sub-call's context")];
    let source = MessageSource::Tool {
        call_id: sub.clone(),
    };
    let rev1 = r.iter().any(|x| event_type(x) == Some("tool/result") && matches!(x, TraceRecord::Event(e) if matches!(&e.event.body, EventBody::ToolResult(ToolResultData::Flat(_)))));
    let body = if rev1 {
        EventBody::ContextMessage(ContextMessage { content, source })
    } else {
        EventBody::UserMessage(UserMessage {
            id: "injected".to_owned(),
            role: Role::User,
            content,
            source,
        })
    };
    r.insert(
        settled + 1,
        TraceRecord::Event(Box::new(tep_model::trace::EventRecord {
            call: Some(sub),
            event: tep_model::session::SessionEvent {
                seq,
                time: 0,
                body,
                surface_op: None,
                source_event_seqs: None,
            },
        })),
    );
    Some(())
});
