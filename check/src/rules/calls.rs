//! A call's life: logged once and first, pre-execute once, one outcome, nothing after it, and
//! its UI cards.

use tep_model::graph::NodeId as N;
use tep_model::trace::Capability;

use super::plant::{call_of, event_type, find, find_after, is_stage, move_record};
use super::{Claim, Cx, Refused, Rule};
use crate::invariants::{
    CheckKind::{BatchEnd, Step},
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::{Events, Hooks};

pub(crate) const TOOL_CALL_FIRST: Rule = Rule::new(entry(
    I::ToolCallFirst,
    Must,
    "The `tool/call` session event is logged before any other stage of its call.",
    &[
        Doc("logged before execution"),
        Edge(N::Model, N::ToolCall),
        Edge(N::ToolCall, N::Pre),
        Semantics(&[4]),
    ],
    Step,
    Events,
    &[Read::Node(N::ToolCall), Read::Node(N::ToolResult)],
))
.claims(|r| {
    if r.call.is_sub_call() || r.call.start.logged.is_some() {
        return None;
    }
    let message = if r.node == N::ToolCall {
        format!(
            "{}: the call's stages began before it was logged (first at {})",
            r.here(),
            r.call.at_position()
        )
    } else {
        format!("{} before the call's tool/call", r.here())
    };
    // A late tool/call is itself the intrusion; any other early stage is where the walk goes on.
    r.claim(message, r.node == N::ToolCall)
})
.plants(|r| {
    let tc = find(r, |x| event_type(x) == Some("tool/call"))?;
    let call = call_of(&r[tc])?.clone();
    let pre = find_after(r, tc, &call, |x| is_stage(x, N::Pre))?;
    move_record(r, tc, pre + 1);
    Some(())
});

pub(crate) const TOOL_CALL_ONCE: Rule = Rule::new(entry(
    I::ToolCallOnce,
    Must,
    "A call is logged once: there is one `tool/call` per call id.",
    &[Doc("logged before execution"), Semantics(&[4])],
    Step,
    Events,
    &[Read::Node(N::ToolCall)],
))
.claims(|r| {
    let (line, _) = r.call.start.logged.filter(|_| r.node == N::ToolCall)?;
    Some(Claim {
        message: format!("{}: the call was already logged at line {line}", r.here()),
        lines: vec![r.visit.line, line],
        keep_position: true,
    })
})
.plants(|r| {
    let tc = find(r, |x| event_type(x) == Some("tool/call"))?;
    let dup = r[tc].clone();
    r.insert(tc + 1, dup);
    Some(())
});

pub(crate) const PRE_EXECUTE_ONCE: Rule = Rule::new(entry(
    I::PreExecuteOnce,
    Must,
    "`tools/pre-execute` runs once per call, right after its `tool/call`.",
    &[Edge(N::ToolCall, N::Pre), Semantics(&[41])],
    Step,
    Hooks,
    &[Read::Node(N::Pre)],
))
.claims(|r| {
    let line = r.call.decisions.pre.filter(|_| r.node == N::Pre)?;
    Some(Claim {
        message: format!("{}: pre-execute already ran at line {line}", r.here()),
        lines: vec![r.visit.line, line],
        keep_position: true,
    })
})
.plants(|r| {
    let pre = find(r, |x| is_stage(x, N::Pre))?;
    let dup = r[pre].clone();
    r.insert(pre + 1, dup);
    Some(())
});

pub(crate) const ONE_RESULT_PER_CALL: Rule = Rule::new(entry(
    I::OneResultPerCall,
    Must,
    "Every call of the batch gets exactly one `tools/result` notification and one `tool/result` event.",
    &[Doc("single model-facing outcome"), Semantics(&[40])],
    Step,
    Events,
    &[Read::Node(N::ToolResult), Read::Node(N::Final)],
))
.claims(|r| {
    let earlier = match r.node {
        N::ToolResult => r.call.commit.result,
        N::Final => r.call.commit.notified.as_ref().map(|(_, l)| *l),
        _ => None,
    }?;
    Some(Claim {
        message: format!(
            "{}: the call already has its outcome (line {earlier})",
            r.here()
        ),
        lines: vec![r.visit.line, earlier],
        keep_position: true,
    })
})
.at_batch_end(|cx: &mut Cx<'_>| {
    let model = cx.batch.model_line;
    let missing: Vec<(usize, String, usize)> = cx
        .batch
        .top_level()
        .filter(|(_, c)| c.commit.result.is_none())
        .map(|(i, c)| (i, c.id.to_string(), c.walk.last_line))
        .collect();
    for (i, id, last) in missing {
        cx.report(
            I::OneResultPerCall,
            Some(i),
            vec![last, model],
            format!("call {id} (declared at line {model}) never got a tool/result"),
        );
    }
})
.plants(|r| {
    let tr = find(r, |x| event_type(x) == Some("tool/result"))?;
    let dup = r[tr].clone();
    r.insert(tr + 1, dup);
    Some(())
});

pub(crate) const NO_STAGE_AFTER_RESULT: Rule = Rule::new(entry(
    I::NoStageAfterResult,
    Must,
    "After a call's `tool/result` only its completed card and its injected contexts follow; no stage of it runs again. After a sub-call's binding settles, no stage of the sub-call runs again.",
    &[
        Doc("single model-facing outcome"),
        Edge(N::ToolResult, N::AllResults),
    ],
    Step,
    Events,
    &[Read::Node(N::ToolResult), Read::Node(N::RunCode)],
))
.claims(|r| {
    let (what, line) = match (r.call.commit.result, r.call.code.binding) {
        (Some(line), _) if !r.graph.is_leaf(r.node) => ("tool/result", line),
        (_, Some(line)) if r.call.is_sub_call() && !r.graph.is_leaf(r.node) => {
            ("binding settled", line)
        }
        _ => return None,
    };
    Some(Claim {
        message: format!("{} after the call's {what} at line {line}", r.here()),
        lines: vec![r.visit.line, line],
        keep_position: true,
    })
})
.plants(|r| {
    let tr = find(r, |x| event_type(x) == Some("tool/result"))?;
    let call = call_of(&r[tr])?.clone();
    let pre = find(r, |x| {
        is_stage(x, N::Pre) && call_of(x) == Some(&call)
    })?;
    let dup = r[pre].clone();
    r.insert(tr + 1, dup);
    Some(())
});

pub(crate) const UI_PRESENTS_EACH_CALL: Rule = Rule::new(
    entry(
        I::UiPresentsEachCall,
        Should,
        "Each call is shown once as pending (`presentCall`, after its `tool/call`) and once as completed (`presentResult`, after its `tool/result`).",
        &[Doc("UI pending card"), Doc("UI completed card")],
        BatchEnd,
        Hooks,
        &[Read::Node(N::PresentCall), Read::Node(N::PresentResult)],
    )
    .needs(Capability::Ui),
)
.claims(|r: &Refused<'_>| {
    let before = match r.node {
        N::PresentCall => "tool/call",
        N::PresentResult => "tool/result",
        _ => return None,
    };
    r.claim(format!("{} before the call's {before}", r.here()), true)
})
.at_batch_end(|cx: &mut Cx<'_>| {
    let wrong: Vec<(usize, String, usize, u32, u32)> = cx
        .batch
        .top_level()
        .filter(|(_, c)| c.start.logged.is_some() && (c.presented.call != 1 || c.presented.result != 1))
        .map(|(i, c)| (i, c.id.to_string(), c.walk.last_line, c.presented.call, c.presented.result))
        .collect();
    for (i, id, last, pending, completed) in wrong {
        cx.report(
            I::UiPresentsEachCall,
            Some(i),
            vec![last],
            format!(
                "call {id} was presented {pending} time(s) as pending and {completed} time(s) as completed; expected once each"
            ),
        );
    }
})
.plants(|r| {
    let p = find(r, |x| is_stage(x, N::PresentResult))?;
    let dup = r[p].clone();
    r.insert(p + 1, dup);
    Some(())
});
