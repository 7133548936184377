//! Order across the calls of a batch: calls start and commit in model order, the ordered stages
//! never interleave, only concurrency-safe bodies overlap, and an exclusive call is a barrier.
//!
//! The doc orders none of this (its flowchart follows one call); the reference semantics do, so
//! every rule here is SHOULD: reported, failing only a `--strict` run.

use tep_model::graph::NodeId as N;
use tep_model::identity::CallId;
use tep_model::trace::{Capability, TraceRecord};

use super::plant::{
    Records, call_of, declared, event_type, find, find_after, is_stage, move_record, stage,
    stage_mut,
};
use super::{Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::Batch,
    InvariantId as I,
    Level::Should,
    Read,
    Source::{Doc, Semantics},
    entry,
};
use crate::observation::ObservationLevel::{Events, Hooks};

/// The commit stages with a hook.
const COMMIT: [N; 4] = [N::Post, N::Finalize, N::Final, N::ToolResult];

pub(crate) const MODEL_ORDER_START: Rule = Rule::new(entry(
    I::ModelOrderStart,
    Should,
    "Calls start (`tool/call`) in model order.",
    &[
        Doc("Assistant message contains tool-call block"),
        Semantics(&[4, 5]),
    ],
    Batch,
    Events,
    &[Read::Node(N::ToolCall)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    if call.is_sub_call() || call.start.logged.is_some() {
        return;
    }
    let first = cx.batch.first_unstarted;
    if first < v.call {
        let message = format!(
            "{} before call {} started, which comes first in the batch (line {})",
            v.here(&call.id),
            cx.call(first).id,
            cx.batch.model_line
        );
        cx.report(
            I::ModelOrderStart,
            Some(v.call),
            vec![v.line, cx.batch.model_line],
            message,
        );
    }
})
.plants(|r| {
    let m = find(r, |x| is_stage(x, N::Model))?;
    let calls = stage_mut(&mut r[m])?.calls.as_mut()?;
    if calls.len() < 2 {
        return None;
    }
    calls.swap(0, 1);
    Some(())
});

pub(crate) const ORDERED_STAGES_SERIAL: Rule = Rule::new(entry(
    I::OrderedStagesSerial,
    Should,
    "Ordered stages never interleave between calls: once a call's prepare stages (`tool/call` to the decision) or commit stages (post-execute to `tool/result`) begin, no other call's ordered stage runs until they end. Records with no hook (`denied`, `normalized`) are not ordered stages.",
    &[Semantics(&[5])],
    Batch,
    Hooks,
    &[
        Read::Node(N::ToolCall),
        Read::Node(N::Pre),
        Read::Node(N::Approval),
        Read::Node(N::Guards),
        Read::Node(N::Post),
        Read::Node(N::Finalize),
        Read::Node(N::Final),
        Read::Node(N::ToolResult),
    ],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if cx.call(v.call).is_sub_call() {
        return;
    }
    let Some((holder, section, since)) = cx.batch.lane else {
        return;
    };
    if holder == v.call {
        return;
    }
    let message = format!(
        "{} while call {}'s {} stages are still running (since line {since})",
        v.here(&cx.call(v.call).id),
        cx.call(holder).id,
        section.name()
    );
    cx.report(I::OrderedStagesSerial, Some(v.call), vec![v.line, since], message);
})
.plants(|r| {
    let calls = declared(r);
    let (a, b) = (calls.first()?.clone(), calls.get(1)?.clone());
    let a_call = find(r, |x| {
        event_type(x) == Some("tool/call") && call_of(x) == Some(&a)
    })?;
    let b_call = find(r, |x| {
        event_type(x) == Some("tool/call") && call_of(x) == Some(&b)
    })?;
    // b starts while a is still preparing.
    move_record(r, b_call, a_call + 1);
    Some(())
});

pub(crate) const MODEL_ORDER_COMMIT: Rule = Rule::new(entry(
    I::ModelOrderCommit,
    Should,
    "Calls commit in model order: a call's commit stages begin only after every earlier call's `tool/result`, however the bodies finish.",
    &[Doc("recorded tool/result events complete"), Semantics(&[7])],
    Batch,
    Events,
    &[
        Read::Node(N::Post),
        Read::Node(N::Finalize),
        Read::Node(N::Final),
        Read::Node(N::ToolResult),
    ],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    let Some(node) = v.node else { return };
    if call.is_sub_call() || call.commit.started || !COMMIT.contains(&node) || v.step.is_refused() {
        return;
    }
    let first = cx.batch.first_unresulted;
    if first < v.call {
        let other = cx.call(first);
        let message = format!(
            "{} before call {}'s tool/result, which comes first in the batch",
            v.here(&call.id),
            other.id
        );
        cx.report(I::ModelOrderCommit, Some(v.call), vec![v.line, other.walk.last_line], message);
    }
})
.plants(|r| {
    // Move a later call's commit ahead of an earlier call's, where the later call's
    // execution was already over (a parallel pool).
    let calls = declared(r);
    let commit_nodes = [
        N::Post,
        N::Normalized,
        N::Finalize,
        N::Final,
        N::ToolResult,
        N::PresentResult,
    ];
    let in_commit = |x: &TraceRecord| x.node().is_some_and(|n| commit_nodes.contains(&n));
    for w in calls.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let a_start = find(r, |x| in_commit(x) && call_of(x) == Some(a))?;
        let b_block: Vec<usize> = (0..r.len())
            .filter(|&i| in_commit(&r[i]) && call_of(&r[i]) == Some(b))
            .collect();
        let b_first = *b_block.first()?;
        let b_last_other = (0..b_first).rev().find(|&i| call_of(&r[i]) == Some(b))?;
        if b_first > a_start && b_last_other < a_start {
            let moved: Vec<TraceRecord> = b_block.iter().map(|&i| r[i].clone()).collect();
            for &i in b_block.iter().rev() {
                r.remove(i);
            }
            for (k, rec) in moved.into_iter().enumerate() {
                r.insert(a_start + k, rec);
            }
            return Some(());
        }
    }
    None
});

pub(crate) const ONLY_SAFE_BODIES_OVERLAP: Rule = Rule::new(
    entry(
        I::OnlySafeBodiesOverlap,
        Should,
        "Only tool bodies of concurrency-safe calls overlap; the body of any other call runs while no other body runs.",
        &[Semantics(&[2, 3, 5])],
        Batch,
        Hooks,
        &[Read::Node(N::ToolBody)],
    )
    .needs(Capability::Parallel),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    // A dispatch (not a resume after the fs gate) of a call of the batch.
    if call.is_sub_call() || call.walk.last_node != N::Around {
        return;
    }
    let running = if call.may_overlap() {
        &cx.batch.running_exclusive_bodies
    } else {
        &cx.batch.running_bodies
    };
    let Some(&k) = running.iter().find(|&&k| k != v.call) else {
        return;
    };
    let other = cx.call(k);
    let since = other.body.since.unwrap_or(other.walk.last_line);
    let message = format!(
        "{} while the body of call {} runs (since line {since}); only concurrency-safe calls may overlap",
        v.here(&call.id),
        other.id
    );
    cx.report(I::OnlySafeBodiesOverlap, Some(v.call), vec![v.line, since], message);
})
.plants(declare_a_pooled_call_unsafe);

pub(crate) const EXCLUSIVE_BARRIER: Rule = Rule::new(entry(
    I::ExclusiveBarrier,
    Should,
    "A call that is not concurrency-safe is a barrier: it starts after every earlier call's result, and nothing of another call happens until its own result.",
    &[Semantics(&[2])],
    Batch,
    Events,
    &[
        Read::Node(N::ToolCall),
        Read::Node(N::Pre),
        Read::Node(N::Approval),
        Read::Node(N::Guards),
        Read::Node(N::Around),
        Read::Node(N::ToolBody),
        Read::Node(N::Post),
        Read::Node(N::Finalize),
        Read::Node(N::Final),
        Read::Node(N::ToolResult),
    ],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    if call.is_sub_call() || call.commit.result.is_some() {
        return;
    }
    if v.node == Some(N::ToolCall) && call.safe == Some(false) && call.start.logged.is_none() {
        let first = cx.batch.first_unresulted;
        if first < v.call {
            let other = cx.call(first);
            let message = format!(
                "{} (an exclusive call) before call {}'s tool/result",
                v.here(&call.id),
                other.id
            );
            cx.report(I::ExclusiveBarrier, Some(v.call), vec![v.line, other.walk.last_line], message);
            return;
        }
    }
    if let Some(&x) = cx.batch.open_exclusive.iter().find(|&&x| x != v.call) {
        let other = cx.call(x);
        let message = format!(
            "{} while exclusive call {} is still running (last seen at line {})",
            v.here(&call.id),
            other.id,
            other.walk.last_line
        );
        cx.report_once(I::ExclusiveBarrier, v.call, vec![v.line, other.walk.last_line], message);
    }
})
.plants(declare_a_pooled_call_unsafe);

pub(crate) const POOL_CAP: Rule = Rule::new(
    entry(
        I::PoolCap,
        Should,
        "A parallel pool is capped: no more than `maxParallel` calls of the batch execute at once (the scenario's cap, or the implementation's; default 10).",
        &[Semantics(&[2])],
        Batch,
        Hooks,
        &[Read::Node(N::ToolBody), Read::Scenario],
    )
    .needs(Capability::Parallel),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    // Only a cap the scenario states is checked: an implementation's own default may differ.
    let Some(cap) = cx.options.facts.as_ref().and_then(|f| f.max_parallel) else {
        return;
    };
    let call = cx.call(v.call);
    // A dispatch of a call of the batch; a body in flight counts against the pool (bodies in
    // flight are at most the calls executing, so counting them never over-counts).
    if call.is_sub_call() || call.walk.last_node != N::Around {
        return;
    }
    let running: Vec<usize> = cx
        .batch
        .running_bodies
        .iter()
        .copied()
        .filter(|&k| k != v.call)
        .collect();
    if running.len() < cap {
        return;
    }
    let others: Vec<String> = running.iter().map(|&k| cx.call(k).id.to_string()).collect();
    let since: Vec<usize> = running
        .iter()
        .map(|&k| {
            let other = cx.call(k);
            other.body.since.unwrap_or(other.walk.last_line)
        })
        .collect();
    let message = format!(
        "{} while {} other bodies run ({}); the pool's cap is {cap}",
        v.here(&call.id),
        running.len(),
        others.join(", ")
    );
    let mut lines = vec![v.line];
    lines.extend(since);
    cx.report(I::PoolCap, Some(v.call), lines, message);
})
.plants(pool_overflow);

/// Declares a call that ran in a parallel pool as not concurrency-safe: the breach of both
/// `only-safe-bodies-overlap` and `exclusive-barrier`.
fn declare_a_pooled_call_unsafe(r: &mut Records) -> Option<()> {
    let m = find(r, |x| is_stage(x, N::Model))?;
    let calls = stage_mut(&mut r[m])?.calls.as_mut()?;
    let safe: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i].concurrency_safe == Some(true))
        .collect();
    if safe.len() < 2 {
        return None;
    }
    calls[safe[1]].concurrency_safe = Some(false);
    Some(())
}

/// A parallel pool that lets one more body in: a body that returned before a later call's
/// dispatch returns only after it, so both (and whatever else ran) are in flight at once.
fn pool_overflow(r: &mut Records) -> Option<()> {
    // The dispatches of the batch's bodies: a `toolBody` right after the call's `around`.
    let mut last: std::collections::HashMap<CallId, N> = Default::default();
    let mut dispatches: Vec<(usize, CallId)> = Vec::new();
    for (i, x) in r.iter().enumerate() {
        let (Some(o), Some(call)) = (stage(x), call_of(x)) else {
            continue;
        };
        if o.node == N::ToolBody && last.get(call) == Some(&N::Around) {
            dispatches.push((i, call.clone()));
        }
        last.insert(call.clone(), o.node);
    }
    // X dispatched, X's body returned (its next `around`), then Y dispatched.
    for (dx, x) in &dispatches {
        let Some(back) = find_after(r, *dx, x, |o| is_stage(o, N::Around)) else {
            continue;
        };
        let Some((dy, _)) = dispatches.iter().find(|(d, y)| *d > back && y != x) else {
            continue;
        };
        let moved: Vec<usize> = (back..*dy).filter(|&i| call_of(&r[i]) == Some(x)).collect();
        let records: Vec<TraceRecord> = moved.iter().rev().map(|&i| r.remove(i)).collect();
        let at = *dy - moved.len() + 1;
        for record in records {
            r.insert(at, record);
        }
        return Some(());
    }
    None
}
