//! Every breach the checkability table is measured with: each invariant's teeth
//! ([`crate::mutation::plant`]) and, for the invariants whose breaches differ in what a level
//! records, further ones. An invariant whose breaches a level catches only in part is *partly
//! checkable* there (`crate::checkability`).

use tep_model::graph::NodeId;
use tep_model::identity::CallId;
use tep_model::result::{AdditionalContext, ContentBlock, ContextOrigin};
use tep_model::session::{EventBody, MessageSource, Role, SessionEvent, UserMessage};
use tep_model::trace::{EventRecord, TraceRecord};

use crate::invariants::InvariantId;
use crate::mutation::plant;

type Plant = fn(&[TraceRecord]) -> Option<Vec<TraceRecord>>;

/// The breaches besides the teeth, by invariant.
const MORE: &[(InvariantId, Plant)] = &[
    (
        InvariantId::SubCallContextsOmitted,
        forwarded_sub_call_context,
    ),
    (InvariantId::ContextsFifo, invented_context),
    (InvariantId::ContextsFifo, contexts_out_of_order),
];

/// Every breach of `id` that can be planted in `records`: the teeth first.
pub fn breaches(id: InvariantId, records: &[TraceRecord]) -> Vec<Vec<TraceRecord>> {
    let more = MORE.iter().filter(|(i, _)| *i == id).map(|(_, f)| f);
    std::iter::once(plant(id, records))
        .chain(more.map(|f| f(records)))
        .flatten()
        .collect()
}

fn is_context(r: &TraceRecord) -> bool {
    matches!(r, TraceRecord::Event(e) if matches!(e.event.body, EventBody::UserMessage(_)))
}

fn final_of<'a>(
    records: &'a mut [TraceRecord],
    call: &CallId,
) -> Option<&'a mut tep_model::result::ToolResult> {
    records.iter_mut().rev().find_map(|r| match r {
        TraceRecord::Stage(o) if o.node == NodeId::Final && o.call.as_ref() == Some(call) => {
            o.result_mut()
        }
        _ => None,
    })
}

/// A context event of `call` carrying `text`, numbered after every event of `records`.
fn context_event(records: &[TraceRecord], call: &CallId, text: &str) -> Option<TraceRecord> {
    let seq = records
        .iter()
        .filter_map(|x| match x {
            TraceRecord::Event(e) => Some(e.event.seq),
            _ => None,
        })
        .max()?
        + 1;
    Some(TraceRecord::Event(Box::new(EventRecord {
        call: Some(call.clone()),
        event: SessionEvent {
            seq,
            time: 0,
            body: EventBody::UserMessage(UserMessage {
                id: "planted".to_owned(),
                role: Role::User,
                content: vec![ContentBlock::text(text)],
                source: MessageSource::Tool {
                    call_id: call.clone(),
                },
            }),
            surface_op: None,
            source_event_seqs: None,
        },
    })))
}

/// Appends a context of `call` to its announced outcome and injects it after the batch's last
/// context (or the batch's settlement).
fn announce_and_inject(
    records: &[TraceRecord],
    call: &CallId,
    text: &str,
) -> Option<Vec<TraceRecord>> {
    let mut r = records.to_vec();
    final_of(&mut r, call)?
        .additional_contexts
        .push(AdditionalContext {
            origin: ContextOrigin::Tool,
            text: text.to_owned(),
        });
    let last = r.iter().rposition(|x| {
        is_context(x)
            || matches!(x, TraceRecord::Stage(o) if o.node == NodeId::AllResults)
            || matches!(x, TraceRecord::Event(e) if e.event.body.type_name() == "tool/result")
    })?;
    let event = context_event(&r, call, text)?;
    r.insert(last + 1, event);
    Some(r)
}

/// A sub-call's context forwarded to its `run_code` call's outcome, and injected as the
/// `run_code` call's own.
fn forwarded_sub_call_context(records: &[TraceRecord]) -> Option<Vec<TraceRecord>> {
    // The sub-call's parent is the one its stage names, whatever the form of its id.
    let (parent, text) = records.iter().find_map(|r| match r {
        TraceRecord::Stage(o) if o.node == NodeId::Final => {
            let c = o.result.as_ref()?.additional_contexts.first()?;
            Some((o.parent.clone()?, c.text.clone()))
        }
        _ => None,
    })?;
    announce_and_inject(records, &parent, &text)
}

/// A context injected for a call that no announced outcome carried.
fn invented_context(records: &[TraceRecord]) -> Option<Vec<TraceRecord>> {
    let last = records.iter().rposition(is_context)?;
    let call = records[last].call()?.clone();
    let mut r = records.to_vec();
    let event = context_event(&r, &call, "invented by the pipeline")?;
    r.insert(last + 1, event);
    Some(r)
}

/// Two calls' contexts injected in the opposite order of their results.
fn contexts_out_of_order(records: &[TraceRecord]) -> Option<Vec<TraceRecord>> {
    let contexts: Vec<usize> = (0..records.len())
        .filter(|&i| is_context(&records[i]))
        .collect();
    let (&a, &b) = contexts
        .iter()
        .zip(contexts.iter().skip(1))
        .find(|&(&a, &b)| records[a].call() != records[b].call())?;
    let mut r = records.to_vec();
    // Swap the records, keeping each position's seq: the session log stays numbered in order.
    let seq = |x: &TraceRecord| match x {
        TraceRecord::Event(e) => e.event.seq,
        _ => 0,
    };
    let (sa, sb) = (seq(&r[a]), seq(&r[b]));
    r.swap(a, b);
    for (i, s) in [(a, sa), (b, sb)] {
        if let TraceRecord::Event(e) = &mut r[i] {
            e.event.seq = s;
        }
    }
    Some(r)
}
