//! The model's next request (level `boundary`): a correct request is accepted at every level
//! that holds it, each invariant's planted breach is caught under its own id, and a trace
//! without the record is never judged by these rules.

use crate::util::{corpus, drive_options, findings, trace_in, violations};

use std::collections::BTreeSet;

use tep_check::invariants::InvariantId;
use tep_check::mutation::plant;
use tep_check::observation::thin;
use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::trace::{NextRequest, ObservationLevel, RequestMessage, RequestRole, TraceRecord};

const REQUEST_RULES: [InvariantId; 4] = [
    InvariantId::RequestOneResultPerCall,
    InvariantId::RequestModelOrder,
    InvariantId::RequestErrorsAsErrors,
    InvariantId::RequestContextsAfterResults,
];

/// Scenarios with several results, an error among them, and contexts.
const SCENARIOS: [(&str, Revision); 4] = [
    (
        "contexts-fifo-when-a-later-call-finishes-first",
        Revision::Rev1,
    ),
    (
        "contexts-fifo-when-a-later-call-finishes-first",
        Revision::Rev2,
    ),
    ("deferred-context-survives-a-failing-body", Revision::Rev2),
    ("mixed-batch", Revision::Rev2),
];

fn with_request(id: &str, revision: Revision) -> Vec<TraceRecord> {
    NextRequest::add_to(&trace_in(id, revision))
}

fn request_mut(records: &mut [TraceRecord]) -> &mut NextRequest {
    records
        .iter_mut()
        .rev()
        .find_map(|r| match r {
            TraceRecord::Request(q) => Some(&mut **q),
            _ => None,
        })
        .expect("a request record")
}

fn at_boundary(
    id: &str,
    revision: Revision,
    records: &[TraceRecord],
) -> Vec<(InvariantId, String)> {
    let s = crate::util::scenario(id);
    let options = drive_options(s, revision, ObservationLevel::Boundary);
    findings(&options, &thin(records, ObservationLevel::Boundary))
        .into_iter()
        .map(|v| (v.invariant, v.message))
        .collect()
}

#[test]
fn the_request_a_correct_harness_sends_is_accepted_at_every_level_that_holds_it() {
    let mut checked = 0;
    for s in corpus() {
        for revision in s.revisions.iter().copied() {
            let records = NextRequest::add_to(&trace_in(&s.id, revision));
            assert!(records.iter().any(|r| matches!(r, TraceRecord::Request(_))));
            for level in ObservationLevel::ALL {
                let options = drive_options(s, revision, level);
                let found = violations(&options, &thin(&records, level));
                let ours: Vec<InvariantId> = found
                    .into_iter()
                    .filter(|i| REQUEST_RULES.contains(i))
                    .collect();
                assert_eq!(ours, [], "{} ({revision}) at {level}", s.id);
                checked += 1;
            }
        }
    }
    assert!(checked > 400, "{checked}");
}

#[test]
fn each_planted_breach_is_caught_under_its_id_at_boundary_and_above() {
    for (id, revision) in SCENARIOS {
        for inv in REQUEST_RULES {
            let Some(broken) = plant(inv, &with_request(id, revision)) else {
                // Model order needs two results; the single-call scenario has one.
                assert_eq!(
                    (id, inv),
                    (
                        "deferred-context-survives-a-failing-body",
                        InvariantId::RequestModelOrder
                    )
                );
                continue;
            };
            for level in ObservationLevel::ALL {
                let s = crate::util::scenario(id);
                let found = violations(&drive_options(s, revision, level), &thin(&broken, level));
                let expected = level >= ObservationLevel::Boundary;
                assert_eq!(
                    found.contains(&inv),
                    expected,
                    "{inv} in {id} ({revision}) at {level}: {found:?}"
                );
                let ours: BTreeSet<_> =
                    found.intersection(&REQUEST_RULES.into()).copied().collect();
                if expected {
                    assert_eq!(
                        ours,
                        [inv].into(),
                        "{inv} in {id} ({revision}): one fault, one id"
                    );
                }
            }
        }
    }
}

#[test]
fn a_trace_without_the_request_is_never_judged_by_these_rules() {
    // Even a trace whose results and contexts are out of order: the request rules read only
    // the request, and a recording that did not see the model's boundary has none.
    for (id, revision) in SCENARIOS {
        let records = trace_in(id, revision);
        for level in ObservationLevel::ALL {
            let options = drive_options(crate::util::scenario(id), revision, level);
            let found = violations(&options, &thin(&records, level));
            assert!(
                found.is_disjoint(&REQUEST_RULES.into()),
                "{id} at {level}: {found:?}"
            );
        }
    }
}

#[test]
fn a_missing_a_repeated_and_an_unknown_tool_message_are_each_named() {
    let id = "contexts-fifo-when-a-later-call-finishes-first";
    let mut records = with_request(id, Revision::Rev2);
    let request = request_mut(&mut records);
    let first = request.messages[0].clone();
    let second = request.messages.remove(1);
    assert_eq!(second.role, RequestRole::Tool);
    request.messages.insert(1, first.clone());
    request.messages.insert(
        2,
        RequestMessage::tool(&CallId::new("zz".to_owned()), "who?"),
    );
    let found = at_boundary(id, Revision::Rev2, &records);
    let messages: Vec<&str> = found
        .iter()
        .filter(|(i, _)| *i == InvariantId::RequestOneResultPerCall)
        .map(|(_, m)| m.as_str())
        .collect();
    let callee = second.call_id.unwrap();
    let caller = first.call_id.unwrap();
    assert_eq!(messages.len(), 3, "{found:?}");
    assert!(
        messages
            .iter()
            .any(|m| m.contains("zz") && m.contains("does not have"))
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains(&format!("no tool message for call {callee}")))
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains(&format!("2 tool messages for call {caller}")))
    );
}

#[test]
fn an_error_told_as_something_else_and_a_changed_success_are_caught_an_equal_text_is_not() {
    let id = "mixed-batch";
    let records = with_request(id, Revision::Rev2);
    assert_eq!(at_boundary(id, Revision::Rev2, &records), []);
    let mut broken = records.clone();
    let request = request_mut(&mut broken);
    let error = request
        .messages
        .iter_mut()
        .find(|m| m.content.starts_with("Error: "))
        .expect("mixed-batch has a failing call");
    // The harness drops the error's marker: the model reads it as a success.
    error.content = error.content.trim_start_matches("Error: ").to_owned();
    let found = at_boundary(id, Revision::Rev2, &broken);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, InvariantId::RequestErrorsAsErrors);
    assert!(
        found[0].1.contains("isError result reaches the model as"),
        "{}",
        found[0].1
    );
}

#[test]
fn contexts_out_of_fifo_order_before_a_result_or_never_sent_are_each_named() {
    let id = "contexts-fifo-when-a-later-call-finishes-first";
    let records = with_request(id, Revision::Rev2);
    let contexts = |r: &NextRequest| -> Vec<usize> {
        (0..r.messages.len())
            .filter(|&k| r.messages[k].role != RequestRole::Tool)
            .collect()
    };
    let case = |edit: &dyn Fn(&mut NextRequest)| {
        let mut broken = records.clone();
        edit(request_mut(&mut broken));
        at_boundary(id, Revision::Rev2, &broken)
    };
    // Swapped: the one injected second reaches the model first.
    let found = case(&|r| {
        let k = contexts(r);
        r.messages.swap(k[0], k[1]);
    });
    assert!(
        found
            .iter()
            .all(|(i, _)| *i == InvariantId::RequestContextsAfterResults)
    );
    assert!(
        found
            .iter()
            .any(|(_, m)| m.contains("which was injected earlier")),
        "{found:?}"
    );
    // Before a result.
    let found = case(&|r| {
        let k = contexts(r)[0];
        let m = r.messages.remove(k);
        r.messages.insert(0, m);
    });
    assert!(
        found
            .iter()
            .any(|(_, m)| m.contains("before a tool result")),
        "{found:?}"
    );
    // Never sent.
    let found = case(&|r| {
        let k = contexts(r)[1];
        r.messages.remove(k);
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].1.contains("is not in the model's next request"),
        "{found:?}"
    );
    // Another message between the contexts is the harness's own: not a breach.
    let found = case(&|r| {
        let k = contexts(r)[1];
        r.messages
            .insert(k, RequestMessage::of(RequestRole::User, "runtime snapshot"));
        r.messages
            .push(RequestMessage::of(RequestRole::System, "a reminder"));
    });
    assert_eq!(found, []);
}

#[test]
fn a_result_recorded_other_than_announced_is_what_the_request_must_carry() {
    use tep_model::result::ContentBlock;
    use tep_model::session::{EventBody, ToolResultData};
    let id = "mixed-batch";
    let mut records = with_request(id, Revision::Rev2);
    // The first `tool/result` records another text than `tools/result` announced (a
    // frozen-outcome breach); the request is then held to the recorded text.
    let (call, announced) = records
        .iter_mut()
        .find_map(|r| match r {
            TraceRecord::Event(e) => match &mut e.event.body {
                EventBody::ToolResult(ToolResultData::Message(m)) => {
                    let block = m.message.content.first_mut()?;
                    let [text] = block.content.as_mut_slice() else {
                        return None;
                    };
                    let announced = text.as_text().to_owned();
                    *text = ContentBlock::text("recorded otherwise");
                    Some((block.tool_call_id.clone(), announced))
                }
                _ => None,
            },
            _ => None,
        })
        .expect("mixed-batch records a result of one text block");
    // At `boundary` the announced outcome is not recorded; at `full` it is, and the text
    // recorded is kept apart from it.
    let request_ids = |records: &[TraceRecord]| {
        [ObservationLevel::Boundary, ObservationLevel::Full].map(|level| {
            let options = drive_options(crate::util::scenario(id), Revision::Rev2, level);
            findings(&options, &thin(records, level))
                .into_iter()
                .map(|v| v.invariant)
                .filter(|i| REQUEST_RULES.contains(i))
                .collect::<Vec<_>>()
        })
    };
    let message_of = |records: &mut Vec<TraceRecord>, text: &str| {
        let request = request_mut(records);
        let m = request
            .messages
            .iter_mut()
            .find(|m| m.call_id.as_ref() == Some(&call))
            .expect("the call's tool message");
        m.content = text.to_owned();
    };
    // The request carries the announced text: not what was recorded.
    let mut told_announced = records.clone();
    message_of(&mut told_announced, &announced);
    let breach = vec![InvariantId::RequestErrorsAsErrors];
    assert_eq!(request_ids(&told_announced), [breach.clone(), breach]);
    // The request carries the recorded text: that is what the model must read.
    message_of(&mut records, "recorded otherwise");
    assert_eq!(request_ids(&records), [vec![], vec![]]);
}
