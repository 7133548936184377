//! What the rules' planted faults are written with: finding a record, moving one, reading a
//! stage or a result. Each rule plants its own breach beside its check (`Rule::plants`);
//! [`crate::mutation::plant`] looks the fault up.

use tep_model::graph::{NodeId, Outcome};
use tep_model::identity::CallId;
use tep_model::session::{EventBody, ToolResultData};
use tep_model::trace::{Observation, TraceRecord};

/// A trace being broken.
pub(super) type Records = Vec<TraceRecord>;

pub(super) fn is_stage(r: &TraceRecord, node: NodeId) -> bool {
    matches!(r, TraceRecord::Stage(o) if o.node == node)
}

pub(super) fn stage(r: &TraceRecord) -> Option<&Observation> {
    match r {
        TraceRecord::Stage(o) => Some(o),
        _ => None,
    }
}

pub(super) fn stage_mut(r: &mut TraceRecord) -> Option<&mut Observation> {
    match r {
        TraceRecord::Stage(o) => Some(o),
        _ => None,
    }
}

pub(super) fn event_type(r: &TraceRecord) -> Option<&'static str> {
    match r {
        TraceRecord::Event(e) => Some(e.event.body.type_name()),
        _ => None,
    }
}

pub(super) fn call_of(r: &TraceRecord) -> Option<&CallId> {
    r.call()
}

/// The first record matching `pred`.
pub(super) fn find(records: &Records, pred: impl Fn(&TraceRecord) -> bool) -> Option<usize> {
    records.iter().position(pred)
}

/// The first record of `call` after `from` matching `pred`.
pub(super) fn find_after(
    records: &Records,
    from: usize,
    call: &CallId,
    pred: impl Fn(&TraceRecord) -> bool,
) -> Option<usize> {
    (from + 1..records.len()).find(|&i| call_of(&records[i]) == Some(call) && pred(&records[i]))
}

pub(super) fn observation(node: NodeId, call: &CallId) -> TraceRecord {
    TraceRecord::Stage(Box::new(Observation::at(node).call(call)))
}

pub(super) fn outcome_of(r: &TraceRecord) -> Option<Outcome> {
    stage(r).and_then(|o| o.outcome)
}

/// The calls declared by the first `model` observation, in model order.
pub(super) fn declared(records: &Records) -> Vec<CallId> {
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

pub(super) fn move_record(records: &mut Records, from: usize, to: usize) {
    let r = records.remove(from);
    let to = if to > from { to - 1 } else { to };
    records.insert(to, r);
}

pub(super) fn result_data_mut(r: &mut TraceRecord) -> Option<&mut ToolResultData> {
    match r {
        TraceRecord::Event(e) => match &mut e.event.body {
            EventBody::ToolResult(d) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a record is a stage of a call of the batch (not of a Code Mode sub-call, which names
/// its `run_code` call as its `parent`).
pub(super) fn is_top_level(r: &TraceRecord) -> bool {
    match r {
        TraceRecord::Stage(o) => o.call.is_some() && o.parent.is_none(),
        _ => false,
    }
}

/// The Code Mode sub-calls of a trace with their `run_code` call, in the order they start: found
/// by what the trace says (a stage's `parent`, a dispatch event's `parentCallId`), never by the
/// form of their ids, which the implementation chooses.
pub(super) fn sub_calls(records: &Records) -> Vec<(CallId, CallId)> {
    let mut out: Vec<(CallId, CallId)> = Vec::new();
    for r in records {
        let found = match r {
            TraceRecord::Stage(o) => o.call.clone().zip(o.parent.clone()),
            TraceRecord::Event(e) => match &e.event.body {
                EventBody::CodeDispatchStart(d) => {
                    Some((d.sub_call_id.clone(), d.parent_call_id.clone()))
                }
                EventBody::CodeDispatch(d) => {
                    Some((d.sub_call_id.clone(), d.parent_call_id.clone()))
                }
                _ => None,
            },
            _ => None,
        };
        if let Some((sub, parent)) = found
            && !out.iter().any(|(s, _)| *s == sub)
        {
            out.push((sub, parent));
        }
    }
    out
}

/// The first Code Mode sub-call in the trace.
pub(super) fn first_sub_call(records: &Records) -> Option<CallId> {
    sub_calls(records).into_iter().next().map(|(sub, _)| sub)
}

/// The `run_code` call a sub-call of the trace belongs to.
pub(super) fn parent_of(records: &Records, sub: &CallId) -> Option<CallId> {
    sub_calls(records)
        .into_iter()
        .find(|(s, _)| s == sub)
        .map(|(_, parent)| parent)
}

/// The `n`th sub-call (from 1) of `parent` to start.
pub(super) fn nth_sub_call(records: &Records, parent: &CallId, n: usize) -> Option<CallId> {
    sub_calls(records)
        .into_iter()
        .filter(|(_, p)| p == parent)
        .nth(n.checked_sub(1)?)
        .map(|(sub, _)| sub)
}
