//! Trace mutations: the bugs the checker must catch, planted in valid traces.
//!
//! [`plant`] breaks one named invariant in a trace (when the trace has the stages needed), the
//! way a faulty implementation would: a body after a deny, a context before a result, a result
//! that differs from the announced outcome. The corpus tests plant every invariant each scenario
//! claims to exercise and require the checker to report exactly that id; the property tests use
//! the structural mutations ([`Structural`]) at random.

use std::sync::Arc;

use serde_json::json;
use tep_model::graph::{NodeId, Outcome};
use tep_model::identity::CallId;
use tep_model::result::{AdditionalContext, ContentBlock, ContextOrigin};
use tep_model::session::{
    ContextMessage, EventBody, FlatToolResult, MessageSource, Role, ToolResultData,
    ToolResultMessage, ToolResultRecord, UserMessage,
};
use tep_model::trace::{MarkKind, Observation, TraceRecord};

use crate::invariants::InvariantId;

type Records = Vec<TraceRecord>;

fn is_stage(r: &TraceRecord, node: NodeId) -> bool {
    matches!(r, TraceRecord::Stage(o) if o.node == node)
}

fn stage(r: &TraceRecord) -> Option<&Observation> {
    match r {
        TraceRecord::Stage(o) => Some(o),
        _ => None,
    }
}

fn stage_mut(r: &mut TraceRecord) -> Option<&mut Observation> {
    match r {
        TraceRecord::Stage(o) => Some(o),
        _ => None,
    }
}

fn event_type(r: &TraceRecord) -> Option<&'static str> {
    match r {
        TraceRecord::Event(e) => Some(e.event.body.type_name()),
        _ => None,
    }
}

fn call_of(r: &TraceRecord) -> Option<&CallId> {
    r.call()
}

/// The first record matching `pred`.
fn find(records: &Records, pred: impl Fn(&TraceRecord) -> bool) -> Option<usize> {
    records.iter().position(pred)
}

/// The first record of `call` after `from` matching `pred`.
fn find_after(
    records: &Records,
    from: usize,
    call: &CallId,
    pred: impl Fn(&TraceRecord) -> bool,
) -> Option<usize> {
    (from + 1..records.len()).find(|&i| call_of(&records[i]) == Some(call) && pred(&records[i]))
}

fn observation(node: NodeId, call: &CallId) -> TraceRecord {
    TraceRecord::Stage(Box::new(Observation::at(node).call(call)))
}

fn outcome_of(r: &TraceRecord) -> Option<Outcome> {
    stage(r).and_then(|o| o.outcome)
}

/// The calls declared by the first `model` observation, in model order.
fn declared(records: &Records) -> Vec<CallId> {
    records
        .iter()
        .find_map(|r| {
            stage(r)
                .filter(|o| o.node == NodeId::Model)
                .and_then(|o| o.calls.clone())
        })
        .map(|calls| calls.into_iter().map(|c| c.call_id).collect())
        .unwrap_or_default()
}

/// A parallel pool that lets one more body in: a body that returned before a later call's
/// dispatch returns only after it, so both (and whatever else ran) are in flight at once.
fn pool_overflow(mut r: Records) -> Option<Records> {
    // The dispatches of the batch's bodies: a `toolBody` right after the call's `around`.
    let mut last: std::collections::HashMap<CallId, NodeId> = Default::default();
    let mut dispatches: Vec<(usize, CallId)> = Vec::new();
    for (i, x) in r.iter().enumerate() {
        let (Some(o), Some(call)) = (stage(x), call_of(x)) else {
            continue;
        };
        if o.node == NodeId::ToolBody && last.get(call) == Some(&NodeId::Around) {
            dispatches.push((i, call.clone()));
        }
        last.insert(call.clone(), o.node);
    }
    // X dispatched, X's body returned (its next `around`), then Y dispatched.
    for (dx, x) in &dispatches {
        let Some(back) = find_after(&r, *dx, x, |o| is_stage(o, NodeId::Around)) else {
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
        return Some(r);
    }
    None
}

fn move_record(records: &mut Records, from: usize, to: usize) {
    let r = records.remove(from);
    let to = if to > from { to - 1 } else { to };
    records.insert(to, r);
}

fn result_data_mut(r: &mut TraceRecord) -> Option<&mut ToolResultData> {
    match r {
        TraceRecord::Event(e) => match &mut e.event.body {
            EventBody::ToolResult(d) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a record belongs to a call of the batch (not a Code Mode sub-call).
fn is_top_level(r: &TraceRecord) -> bool {
    call_of(r).is_some_and(|c| !c.as_str().contains(":code:"))
}

/// The first Code Mode sub-call in the trace.
fn first_sub_call(records: &Records) -> Option<CallId> {
    records
        .iter()
        .filter_map(|r| r.call())
        .find(|c| c.as_str().contains(":code:"))
        .cloned()
}

/// The `run_code` call a sub-call id belongs to.
fn parent_of(sub: &CallId) -> Option<CallId> {
    sub.as_str()
        .rsplit_once(":code:")
        .map(|(p, _)| CallId::from(p))
}

/// Plants a breach of `id` in `records`; `None` when the trace has nothing to break it with
/// (a scenario that claims to exercise `id` must always allow it).
pub fn plant(id: InvariantId, records: &[TraceRecord]) -> Option<Vec<TraceRecord>> {
    use InvariantId as I;
    let mut r: Records = records.to_vec();
    match id {
        I::StageGraphWalk => {
            // An allowed call whose guards were never recorded: pre-execute straight to
            // tools/execute.
            let g = find(&r, |x| {
                is_stage(x, NodeId::Guards) && outcome_of(x) == Some(Outcome::Allow)
            })?;
            r.remove(g);
        }
        I::ToolCallFirst => {
            let tc = find(&r, |x| event_type(x) == Some("tool/call"))?;
            let call = call_of(&r[tc])?.clone();
            let pre = find_after(&r, tc, &call, |x| is_stage(x, NodeId::Pre))?;
            move_record(&mut r, tc, pre + 1);
        }
        I::ToolCallOnce => {
            let tc = find(&r, |x| event_type(x) == Some("tool/call"))?;
            let dup = r[tc].clone();
            r.insert(tc + 1, dup);
        }
        I::PreExecuteOnce => {
            let pre = find(&r, |x| is_stage(x, NodeId::Pre))?;
            let dup = r[pre].clone();
            r.insert(pre + 1, dup);
        }
        I::ApprovalOnlyAfterAsk => {
            let pre = find(&r, |x| {
                is_stage(x, NodeId::Pre) && outcome_of(x) == Some(Outcome::Allow)
            })?;
            let call = call_of(&r[pre])?.clone();
            let mut approval = Observation::at(NodeId::Approval).call(&call);
            approval.outcome = Some(Outcome::AllowedOnce);
            r.insert(pre + 1, TraceRecord::Stage(Box::new(approval)));
        }
        I::ApprovalAbsentDenies => {
            // No prompt is mounted, yet the ask is allowed: the call goes on to the guards and
            // its body instead of the denial.
            let a = find(&r, |x| {
                is_stage(x, NodeId::Approval) && outcome_of(x) == Some(Outcome::Unavailable)
            })?;
            let call = call_of(&r[a])?.clone();
            let post = find_after(&r, a, &call, |x| is_stage(x, NodeId::Post))?;
            let identity = stage(&r[post])?.identity.clone();
            {
                let o = stage_mut(&mut r[a])?;
                o.outcome = Some(Outcome::AllowedOnce);
                o.reason = None;
            }
            let denied: Vec<usize> = (a + 1..post)
                .filter(|&i| call_of(&r[i]) == Some(&call))
                .collect();
            for i in denied.into_iter().rev() {
                r.remove(i);
            }
            let visit = |node: NodeId, outcome: Option<Outcome>| {
                let mut o = Observation::at(node).call(&call);
                o.outcome = outcome;
                o.identity = identity.clone();
                TraceRecord::Stage(Box::new(o))
            };
            let settled = TraceRecord::Mark(tep_model::trace::Mark {
                call: call.clone(),
                mark: MarkKind::BodySettled,
                by: "body".to_owned(),
                after_ms: 0,
                rejection: None,
            });
            let ran = [
                visit(NodeId::Guards, Some(Outcome::Allow)),
                visit(NodeId::Around, None),
                visit(NodeId::ToolBody, None),
                settled,
                visit(NodeId::Around, None),
            ];
            for (k, record) in ran.into_iter().enumerate() {
                r.insert(a + 1 + k, record);
            }
        }
        I::GuardsOnlyAfterAllow => {
            let pre = find(&r, |x| {
                is_stage(x, NodeId::Pre)
                    && matches!(outcome_of(x), Some(Outcome::Deny | Outcome::Ask))
            })?;
            let call = call_of(&r[pre])?.clone();
            let mut guards = Observation::at(NodeId::Guards).call(&call);
            guards.outcome = Some(Outcome::Allow);
            r.insert(pre + 1, TraceRecord::Stage(Box::new(guards)));
        }
        I::GuardDenyBinds => {
            let g = find(&r, |x| {
                is_stage(x, NodeId::Guards) && outcome_of(x) == Some(Outcome::Deny)
            })?;
            stage_mut(&mut r[g])?.outcome = Some(Outcome::Allow);
        }
        I::DenySkipsBody => {
            let d = find(&r, |x| is_stage(x, NodeId::Denied))?;
            let call = call_of(&r[d])?.clone();
            r.insert(d + 1, observation(NodeId::ToolBody, &call));
        }
        I::DenialReachesPost => {
            let d = find(&r, |x| is_stage(x, NodeId::Denied))?;
            let call = call_of(&r[d])?.clone();
            let post = find_after(&r, d, &call, |x| is_stage(x, NodeId::Post))?;
            r.remove(post);
        }
        I::DenialIsError => {
            let d = find(&r, |x| is_stage(x, NodeId::Denied))?;
            let call = call_of(&r[d])?.clone();
            let f = find_after(&r, d, &call, |x| is_stage(x, NodeId::Final))?;
            stage_mut(&mut r[f])?.result.as_mut()?.is_error = false;
        }
        I::ThrowSkipsPost => {
            let n = find(&r, |x| is_stage(x, NodeId::Normalized))?;
            let call = call_of(&r[n])?.clone();
            // Only where post-execute did not itself throw.
            let before = (0..n)
                .rev()
                .find(|&i| call_of(&r[i]) == Some(&call) && stage(&r[i]).is_some())?;
            if is_stage(&r[before], NodeId::Post) {
                return None;
            }
            r.insert(n, observation(NodeId::Post, &call));
        }
        I::ThrowIsNormalized => {
            let n = find(&r, |x| is_stage(x, NodeId::Normalized))?;
            r.remove(n);
        }
        I::ThrowIsError => {
            let n = find(&r, |x| is_stage(x, NodeId::Normalized))?;
            let call = call_of(&r[n])?.clone();
            let f = find_after(&r, n, &call, |x| is_stage(x, NodeId::Final))?;
            stage_mut(&mut r[f])?.result.as_mut()?.is_error = false;
        }
        I::BodyInsideExecute => {
            let b = find(&r, |x| is_stage(x, NodeId::ToolBody))?;
            if !is_stage(&r[b - 1], NodeId::Around) || call_of(&r[b - 1]) != call_of(&r[b]) {
                return None;
            }
            r.remove(b - 1);
        }
        I::BodySettlesBeforeCommit => {
            // The pipeline moves on to post-execute before the body stopped.
            let m = find(
                &r,
                |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::BodySettled),
            )?;
            let call = call_of(&r[m])?.clone();
            let post = find_after(&r, m, &call, |x| is_stage(x, NodeId::Post))?;
            move_record(&mut r, m, post + 1);
        }
        I::BodyThrowIsAResult => {
            // A failing body's throw reaches the wrappers as a throw: the waterfall throws,
            // post-execute is skipped and the throw is normalized.
            let m = find(
                &r,
                |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::BodySettled),
            )?;
            let call = call_of(&r[m])?.clone();
            let around = find_after(&r, m, &call, |x| is_stage(x, NodeId::Around))?;
            let post = find_after(&r, around, &call, |x| is_stage(x, NodeId::Post))?;
            let handed = stage(&r[post])?.result.clone()?;
            if !handed.is_error {
                return None;
            }
            let message = handed.error.as_ref()?.message.clone();
            let o = stage_mut(&mut r[around])?;
            o.outcome = Some(Outcome::Throw);
            o.reason = Some(message.clone());
            o.result = None;
            // Drop the later records of the waterfall and post-execute; normalize instead.
            let later: Vec<usize> = (around + 1..=post)
                .filter(|&i| {
                    call_of(&r[i]) == Some(&call)
                        && (is_stage(&r[i], NodeId::Around) || is_stage(&r[i], NodeId::Post))
                })
                .collect();
            for i in later.into_iter().rev() {
                r.remove(i);
            }
            let mut normalized = Observation::at(NodeId::Normalized).call(&call);
            normalized.reason = Some(message);
            r.insert(around + 1, TraceRecord::Stage(Box::new(normalized)));
        }
        I::FsGateInsideBody => {
            let g = find(&r, |x| is_stage(x, NodeId::FsGate))?;
            let call = call_of(&r[g])?.clone();
            let first_around = find(&r, |x| {
                is_stage(x, NodeId::Around) && call_of(x) == Some(&call)
            })?;
            let dup = r[g].clone();
            r.insert(first_around, dup);
        }
        I::ReadBeforeEdit => {
            let g = find(&r, |x| {
                stage(x).is_some_and(|o| {
                    o.node == NodeId::FsGate
                        && o.outcome == Some(Outcome::Allow)
                        && o.intent.as_ref().is_some_and(|i| i.version.is_some())
                })
            })?;
            let target = stage(&r[g])?.intent.as_ref()?.target.clone();
            let observed = |x: &TraceRecord| matches!(x, TraceRecord::Event(e) if matches!(&e.event.body, EventBody::FsObserved(o) if o.target == target));
            let before: Vec<usize> = (0..g).filter(|&i| observed(&r[i])).collect();
            if before.is_empty() {
                return None;
            }
            for i in before.into_iter().rev() {
                r.remove(i);
            }
        }
        I::OwnedEventsInsideBody => {
            let o = find(&r, |x| {
                matches!(
                    event_type(x),
                    Some("todo/write" | "hook/invoked" | "fs/observed")
                )
            })?;
            let call = call_of(&r[o])?.clone();
            let first_around = find(&r, |x| {
                is_stage(x, NodeId::Around) && call_of(x) == Some(&call)
            })?;
            let moved = r.remove(o);
            r.insert(first_around.min(r.len()), moved);
        }
        I::IdentityUnchanged => {
            let g = find(&r, |x| {
                stage(x).is_some_and(|o| o.node == NodeId::Post && o.identity.is_some())
            })?;
            Arc::make_mut(stage_mut(&mut r[g])?.identity.as_mut()?).arguments =
                json!({"rewritten": true});
        }
        I::FinalizeOnce => {
            let f = find(&r, |x| is_stage(x, NodeId::Finalize))?;
            let dup = r[f].clone();
            r.insert(f + 1, dup);
        }
        I::FinalizeBeforeNotification => {
            // finalizeContent runs after the notification.
            let f = find(&r, |x| is_stage(x, NodeId::Finalize))?;
            let call = call_of(&r[f])?.clone();
            let fin = find_after(&r, f, &call, |x| is_stage(x, NodeId::Final))?;
            move_record(&mut r, f, fin + 1);
        }
        I::FinalizeContentOnly => {
            let f = find(&r, |x| {
                is_stage(x, NodeId::Finalize) && outcome_of(x) != Some(Outcome::Throw)
            })?;
            let call = call_of(&r[f])?.clone();
            let fin = find_after(&r, f, &call, |x| is_stage(x, NodeId::Final))?;
            stage_mut(&mut r[fin])?.result.as_mut()?.meta =
                Some(json!({"changed": "by finalizeContent"}));
        }
        I::NotificationBeforeResult => {
            let f = find(&r, |x| is_stage(x, NodeId::Final))?;
            let call = call_of(&r[f])?.clone();
            let tr = find_after(&r, f, &call, |x| event_type(x) == Some("tool/result"))?;
            move_record(&mut r, tr, f);
        }
        I::NotificationSynchronous => {
            let m = find(
                &r,
                |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::ObserverSettled && m.after_ms > 0),
            )?;
            let call = call_of(&r[m])?.clone();
            let tr = find(&r, |x| {
                event_type(x) == Some("tool/result") && call_of(x) == Some(&call)
            })?;
            if m < tr {
                return None;
            }
            move_record(&mut r, m, tr);
        }
        I::NotificationAwaited => {
            let m = find(
                &r,
                |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::ObserverSettled),
            )?;
            let call = call_of(&r[m])?.clone();
            let tr = find(&r, |x| {
                event_type(x) == Some("tool/result") && call_of(x) == Some(&call)
            })?;
            if m > tr {
                return None;
            }
            move_record(&mut r, m, tr + 1);
        }
        I::FrozenOutcome => {
            let tr = find(&r, |x| event_type(x) == Some("tool/result"))?;
            match result_data_mut(&mut r[tr])? {
                ToolResultData::Message(m) => m
                    .message
                    .content
                    .first_mut()?
                    .content
                    .push(ContentBlock::text("tampered")),
                ToolResultData::Flat(f) => f.content.push(ContentBlock::text("tampered")),
            }
        }
        I::OneResultPerCall => {
            let tr = find(&r, |x| event_type(x) == Some("tool/result"))?;
            let dup = r[tr].clone();
            r.insert(tr + 1, dup);
        }
        I::NoStageAfterResult => {
            let tr = find(&r, |x| event_type(x) == Some("tool/result"))?;
            let call = call_of(&r[tr])?.clone();
            let pre = find(&r, |x| {
                is_stage(x, NodeId::Pre) && call_of(x) == Some(&call)
            })?;
            let dup = r[pre].clone();
            r.insert(tr + 1, dup);
        }
        I::ResultNamesItsCall => {
            let tr = find(&r, |x| event_type(x) == Some("tool/result"))?;
            if let TraceRecord::Event(e) = &mut r[tr] {
                e.event.source_event_seqs = Some(vec![9999]);
            }
        }
        I::ToolResultMessageShape => {
            let tr = find(&r, |x| event_type(x) == Some("tool/result"))?;
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
        }
        I::ToolResultFlatShape => {
            let tr = find(&r, |x| event_type(x) == Some("tool/result"))?;
            let data = result_data_mut(&mut r[tr])?;
            let ToolResultData::Flat(f) = data else {
                return None;
            };
            *data = ToolResultData::Message(ToolResultRecord {
                turn: 1,
                step: 1,
                message: ToolResultMessage {
                    id: format!("result-{}", f.call_id),
                    role: Role::User,
                    source: MessageSource::Tool {
                        call_id: f.call_id.clone(),
                    },
                    content: vec![tep_model::session::ToolResultBlock {
                        kind: tep_model::session::ToolResultBlockType::ToolResult,
                        tool_call_id: f.call_id.clone(),
                        content: f.content.clone(),
                        is_error: f.is_error,
                    }],
                },
                error: f.error.clone(),
                meta: f.meta.clone(),
            });
        }
        I::ModelOrderStart => {
            let m = find(&r, |x| is_stage(x, NodeId::Model))?;
            let calls = stage_mut(&mut r[m])?.calls.as_mut()?;
            if calls.len() < 2 {
                return None;
            }
            calls.swap(0, 1);
        }
        I::OrderedStagesSerial => {
            let calls = declared(&r);
            let (a, b) = (calls.first()?.clone(), calls.get(1)?.clone());
            let a_call = find(&r, |x| {
                event_type(x) == Some("tool/call") && call_of(x) == Some(&a)
            })?;
            let b_call = find(&r, |x| {
                event_type(x) == Some("tool/call") && call_of(x) == Some(&b)
            })?;
            // b starts while a is still preparing.
            move_record(&mut r, b_call, a_call + 1);
        }
        I::ModelOrderCommit => {
            // Move a later call's commit ahead of an earlier call's, where the later call's
            // execution was already over (a parallel pool).
            let calls = declared(&r);
            let commit_nodes = [
                NodeId::Post,
                NodeId::Normalized,
                NodeId::Finalize,
                NodeId::Final,
                NodeId::ToolResult,
                NodeId::PresentResult,
            ];
            let in_commit = |x: &TraceRecord| x.node().is_some_and(|n| commit_nodes.contains(&n));
            for w in calls.windows(2) {
                let (a, b) = (&w[0], &w[1]);
                let a_start = find(&r, |x| in_commit(x) && call_of(x) == Some(a))?;
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
                    return Some(r);
                }
            }
            return None;
        }
        I::OnlySafeBodiesOverlap | I::ExclusiveBarrier => {
            // Declare a call that ran in a parallel pool as not concurrency-safe.
            let m = find(&r, |x| is_stage(x, NodeId::Model))?;
            let calls = stage_mut(&mut r[m])?.calls.as_mut()?;
            let safe: Vec<usize> = (0..calls.len())
                .filter(|&i| calls[i].concurrency_safe == Some(true))
                .collect();
            if safe.len() < 2 {
                return None;
            }
            calls[safe[1]].concurrency_safe = Some(false);
        }
        I::PoolCap => return pool_overflow(r),
        I::BatchSettles => {
            let a = find(&r, |x| is_stage(x, NodeId::AllResults))?;
            r.remove(a);
        }
        I::ContextsAfterAllResults => {
            let c = find(&r, |x| {
                matches!(event_type(x), Some("user/message" | "context/message"))
            })?;
            let tr = find(&r, |x| event_type(x) == Some("tool/result"))?;
            move_record(&mut r, c, tr);
        }
        I::ContextsFifo => {
            let c = find(&r, |x| {
                matches!(event_type(x), Some("user/message" | "context/message"))
            })?;
            r.remove(c);
        }
        I::ContextOriginOrder => {
            let f = find(&r, |x| {
                stage(x).is_some_and(|o| {
                    o.node == NodeId::Final
                        && o.result.as_ref().is_some_and(|res| {
                            res.additional_contexts
                                .windows(2)
                                .any(|w| w[0].origin != w[1].origin)
                        })
                })
            })?;
            stage_mut(&mut r[f])?
                .result
                .as_mut()?
                .additional_contexts
                .reverse();
        }
        I::BlockDropsContexts => {
            let p = find(&r, |x| {
                is_stage(x, NodeId::Post) && outcome_of(x) == Some(Outcome::Block)
            })?;
            let call = call_of(&r[p])?.clone();
            let f = find_after(&r, p, &call, |x| is_stage(x, NodeId::Final))?;
            stage_mut(&mut r[f])?
                .result
                .as_mut()?
                .additional_contexts
                .insert(
                    0,
                    AdditionalContext {
                        origin: ContextOrigin::Tool,
                        text: "kept despite the block".to_owned(),
                    },
                );
        }
        I::ContextsAsUserMessages => {
            let c = find(&r, |x| event_type(x) == Some("user/message"))?;
            if let TraceRecord::Event(e) = &mut r[c]
                && let EventBody::UserMessage(m) = &e.event.body
            {
                e.event.body = EventBody::ContextMessage(ContextMessage {
                    content: m.content.clone(),
                    source: m.source.clone(),
                });
            }
        }
        I::ContextsAsContextMessages => {
            let c = find(&r, |x| event_type(x) == Some("context/message"))?;
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
        }
        I::ApprovalOnce => {
            // The prompt asked a second time for the same ask.
            let a = find(&r, |x| is_stage(x, NodeId::Approval))?;
            let dup = r[a].clone();
            r.insert(a + 1, dup);
        }
        I::ApprovalAudited => {
            let d = find(&r, |x| event_type(x) == Some("approval/decided"))?;
            if let TraceRecord::Event(e) = &mut r[d]
                && let EventBody::ApprovalDecided(data) = &mut e.event.body
            {
                data.outcome = if data.outcome == Outcome::Rejected {
                    Outcome::AllowedOnce
                } else {
                    Outcome::Rejected
                };
            }
        }
        I::UiPresentsEachCall => {
            let p = find(&r, |x| is_stage(x, NodeId::PresentResult))?;
            let dup = r[p].clone();
            r.insert(p + 1, dup);
        }
        I::SessionSeqIncreasing => {
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
        }
        I::RunCodeReserved => {
            let at = find(&r, |x| {
                stage(x).is_some_and(|o| o.parent.is_some() && o.identity.is_some())
            })?;
            Arc::make_mut(stage_mut(&mut r[at])?.identity.as_mut()?).name = "run_code".to_owned();
        }
        I::CodeDispatchInsideBody => {
            // The first sub-call runs after its run_code call left its body.
            let sub = first_sub_call(&r)?;
            let parent = parent_of(&sub)?;
            let block: Vec<usize> = (0..r.len())
                .filter(|&i| call_of(&r[i]) == Some(&sub))
                .collect();
            let moved: Vec<TraceRecord> = block.iter().map(|&i| r[i].clone()).collect();
            for &i in block.iter().rev() {
                r.remove(i);
            }
            let post = find(&r, |x| {
                is_stage(x, NodeId::Post) && call_of(x) == Some(&parent)
            })?;
            for (k, rec) in moved.into_iter().enumerate() {
                r.insert(post + 1 + k, rec);
            }
        }
        I::SubCallsSerialized => {
            // The second sub-call starts while the first is still running.
            let sub = first_sub_call(&r)?;
            let parent = parent_of(&sub)?;
            let second = parent.code_sub_call(2);
            let first_of_second = find(&r, |x| call_of(x) == Some(&second))?;
            let first_of_first = find(&r, |x| call_of(x) == Some(&sub))?;
            move_record(&mut r, first_of_second, first_of_first + 1);
        }
        I::SubCallCarriesParentToken => {
            let at = find(&r, |x| {
                stage(x).is_some_and(|o| o.parent.is_some() && o.identity.is_some())
            })?;
            Arc::make_mut(stage_mut(&mut r[at])?.identity.as_mut()?).parent_token =
                Some("tok-forged".to_owned());
        }
        I::SubCallIdScheme => {
            // The first sub-call is numbered as if others had started before it.
            let sub = first_sub_call(&r)?;
            let parent = parent_of(&sub)?;
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
                    TraceRecord::Header(_) => {}
                }
            }
        }
        I::SubCallStartLogged => {
            let at = find(&r, |x| event_type(x) == Some("tool/code-dispatch-start"))?;
            r.remove(at);
        }
        I::SubCallLogsDispatch => {
            let at = find(&r, |x| event_type(x) == Some("tool/code-dispatch"))?;
            r.remove(at);
        }
        I::BindingSettles => {
            let at = find(
                &r,
                |x| matches!(x, TraceRecord::Mark(m) if m.mark != MarkKind::ObserverSettled),
            )?;
            if let TraceRecord::Mark(m) = &mut r[at] {
                m.mark = match m.mark {
                    MarkKind::BindingRejected => MarkKind::BindingResolved,
                    _ => MarkKind::BindingRejected,
                };
            }
        }
        I::RejectionIsToolCallError => {
            // The program is handed the sub-call's content besides its name and message.
            let at = find(
                &r,
                |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::BindingRejected),
            )?;
            if let TraceRecord::Mark(m) = &mut r[at] {
                m.rejection.as_mut()?.other.insert(
                    "content".to_owned(),
                    json!([{"type": "text", "text": "leaked"}]),
                );
            }
        }
        I::SubCallContextsOmitted => {
            // A sub-call's context injected after the batch.
            let sub = first_sub_call(&r)?;
            let settled = find(&r, |x| is_stage(x, NodeId::AllResults))?;
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
        }
        I::DispatchNotModelFacing => {
            let at = find(&r, |x| event_type(x) == Some("tool/code-dispatch"))?;
            if let TraceRecord::Event(e) = &mut r[at] {
                e.event.surface_op = Some(tep_model::session::SurfaceOp::Append);
            }
        }
        I::CodeDispatchContentShape | I::CodeDispatchSummaryShape => {
            let at = find(&r, |x| event_type(x) == Some("tool/code-dispatch"))?;
            if let TraceRecord::Event(e) = &mut r[at]
                && let EventBody::CodeDispatch(d) = &mut e.event.body
            {
                if id == I::CodeDispatchContentShape {
                    d.content = None;
                } else {
                    d.result_summary = None;
                }
            }
        }
        I::ExpectedOutcome => {
            // The first call's outcome flips, as a pipeline that lost track of it would record.
            let f = find(&r, |x| is_stage(x, NodeId::Final) && is_top_level(x))?;
            let call = call_of(&r[f])?.clone();
            let tr = find_after(&r, f, &call, |x| event_type(x) == Some("tool/result"))?;
            for i in [f, tr] {
                match &mut r[i] {
                    TraceRecord::Stage(o) => {
                        let res = o.result.as_mut()?;
                        res.is_error = !res.is_error;
                    }
                    other => match result_data_mut(other)? {
                        ToolResultData::Message(m) => {
                            let b = m.message.content.first_mut()?;
                            b.is_error = !b.is_error;
                        }
                        ToolResultData::Flat(fl) => fl.is_error = !fl.is_error,
                    },
                }
            }
        }
        I::ExpectedContent => {
            let f = find(&r, |x| is_stage(x, NodeId::Final) && is_top_level(x))?;
            let call = call_of(&r[f])?.clone();
            let tr = find_after(&r, f, &call, |x| event_type(x) == Some("tool/result"))?;
            let replace = |content: &mut Vec<ContentBlock>| {
                *content = vec![ContentBlock::text("something else")]
            };
            match &mut r[f] {
                TraceRecord::Stage(o) => replace(&mut o.result.as_mut()?.content),
                _ => return None,
            }
            match result_data_mut(&mut r[tr])? {
                ToolResultData::Message(m) => replace(&mut m.message.content.first_mut()?.content),
                ToolResultData::Flat(fl) => replace(&mut fl.content),
            }
        }
    }
    Some(r)
}

/// Structural mutations for property tests: what goes wrong when records are lost, repeated or
/// reordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Structural {
    /// Drop record `i`.
    Drop(usize),
    /// Repeat record `i` right after itself.
    Duplicate(usize),
    /// Swap records `i` and `i + 1`.
    SwapWithNext(usize),
}

impl Structural {
    pub fn apply(self, records: &[TraceRecord]) -> Vec<TraceRecord> {
        let mut r = records.to_vec();
        match self {
            Structural::Drop(i) if i < r.len() => {
                r.remove(i);
            }
            Structural::Duplicate(i) if i < r.len() => {
                let dup = r[i].clone();
                r.insert(i + 1, dup);
            }
            Structural::SwapWithNext(i) if i + 1 < r.len() => r.swap(i, i + 1),
            _ => {}
        }
        r
    }
}
