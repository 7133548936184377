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

/// Whether a record belongs to a call of the batch (not a Code Mode sub-call).
pub(super) fn is_top_level(r: &TraceRecord) -> bool {
    call_of(r).is_some_and(|c| !c.as_str().contains(":code:"))
}

/// The first Code Mode sub-call in the trace.
pub(super) fn first_sub_call(records: &Records) -> Option<CallId> {
    records
        .iter()
        .filter_map(|r| r.call())
        .find(|c| c.as_str().contains(":code:"))
        .cloned()
}

/// The `run_code` call a sub-call id belongs to.
pub(super) fn parent_of(sub: &CallId) -> Option<CallId> {
    sub.as_str()
        .rsplit_once(":code:")
        .map(|(p, _)| CallId::from(p))
}
