//! How a fault is reported: once, under its own id, at its own line, in words that say what
//! broke. A refused step is named by the rule it breaks (not by the generic walk), with the words
//! that say which way it broke; an order rule does not report again what it has reported, or
//! what a refused step's own rule reports; a Code Mode fault is named where it happens.
//!
//! Each trace is the reference's, with one thing done wrong.

use std::collections::BTreeSet;

use crate::util::{
    drive_options, findings, is_binding_settled, is_event, is_stage, move_record, options,
    position, scenario, trace, trace_in, violations,
};
use tep_check::Violation;
use tep_check::invariants::InvariantId;
use tep_check::observation::thin;
use tep_model::graph::{NodeId, Revision};
use tep_model::identity::CallId;
use tep_model::trace::{ObservationLevel, TraceRecord};

fn of(found: &[Violation], id: InvariantId) -> Vec<&Violation> {
    found.iter().filter(|v| v.invariant == id).collect()
}

/// The messages of `id`'s violations, for a failing assertion to show.
fn said(found: &[Violation], id: InvariantId) -> Vec<&str> {
    of(found, id).iter().map(|v| v.message.as_str()).collect()
}

fn full(id: &str) -> tep_check::CheckOptions {
    options(id, ObservationLevel::Full)
}

/// Checks scenario `id`'s altered trace and asserts that one of `invariant`'s violations says
/// `words`.
fn assert_reported(id: &str, records: &[TraceRecord], invariant: InvariantId, words: &str) {
    let found = findings(&full(id), records);
    assert!(
        said(&found, invariant).iter().any(|m| m.contains(words)),
        "no {invariant} saying {words:?} in {found:#?}"
    );
}

/// Whether scenario `id`'s altered trace breaks `invariant`.
fn reports(id: &str, records: &[TraceRecord], invariant: InvariantId) -> bool {
    !of(&findings(&full(id), records), invariant).is_empty()
}

/// `record` with its JSON edited by `edit`.
fn rewritten(record: &TraceRecord, edit: impl FnOnce(&mut serde_json::Value)) -> TraceRecord {
    let mut json = serde_json::to_value(record).unwrap();
    edit(&mut json);
    serde_json::from_value(json).unwrap()
}

/// `records` with the record at `at` rewritten by `edit`.
fn edited(
    records: &[TraceRecord],
    at: usize,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Vec<TraceRecord> {
    let mut records = records.to_vec();
    records[at] = rewritten(&records[at], edit);
    records
}

#[test]
fn a_body_no_around_dispatched_is_named_as_such() {
    let id = "allow-runs-body";
    let mut records = trace(id);
    let body = position(&records, is_stage(NodeId::ToolBody, "c1"));
    assert!(is_stage(NodeId::Around, "c1")(&records[body - 1]));
    records.remove(body - 1);
    assert_reported(
        id,
        &records,
        InvariantId::BodyInsideExecute,
        "the body ran without an `around` dispatching it",
    );
}

#[test]
fn a_body_that_does_not_return_to_around_is_named_as_such() {
    let id = "allow-runs-body";
    let mut records = trace(id);
    // Both records of the waterfall's return (consecutive `around` records are one visit),
    // after the body's settled mark.
    let settled = position(&records, is_stage(NodeId::ToolBody, "c1")) + 1;
    assert!(matches!(records[settled], TraceRecord::Mark(_)));
    while is_stage(NodeId::Around, "c1")(&records[settled + 1]) {
        records.remove(settled + 1);
    }
    assert!(is_stage(NodeId::Post, "c1")(&records[settled + 1]));
    assert_reported(
        id,
        &records,
        InvariantId::BodyInsideExecute,
        "the body did not return to `around`",
    );
}

#[test]
fn an_fs_gate_outside_a_body_and_a_body_that_does_not_resume_are_told_apart() {
    let id = "fs-edit-after-read";
    let records = trace(id);
    let gate = position(&records, is_stage(NodeId::FsGate, "c1"));

    // The gate reached before any body ran.
    let mut early = records.clone();
    let first_around = position(&early, is_stage(NodeId::Around, "c1"));
    let copy = early[gate].clone();
    early.insert(first_around, copy);
    let found = findings(&full(id), &early);
    assert_eq!(
        said(&found, InvariantId::FsGateInsideBody),
        [format!(
            "line {} (fsGate allow, call c1) after line {} (guards allow, call c1): the fs gate is only reached from a running body",
            first_around + 1,
            first_around
        )],
        "{found:#?}"
    );

    // The body never resumes after the gate: the waterfall's return comes next.
    let mut stuck = records.clone();
    assert!(is_stage(NodeId::ToolBody, "c1")(&stuck[gate + 1]));
    stuck.remove(gate + 1);
    let found = findings(&full(id), &stuck);
    let claimed = said(&found, InvariantId::FsGateInsideBody);
    assert!(
        !claimed.is_empty()
            && claimed
                .iter()
                .all(|m| m.ends_with("the body resumes after the fs gate")),
        "{found:#?}"
    );
}

#[test]
fn a_call_started_out_of_model_order_is_reported_once() {
    let id = "contexts-fifo-when-a-later-call-finishes-first";
    let mut records = trace(id);
    // c2's tool/call before c1's, then logged a second time (a breach of its own).
    let c2 = position(&records, is_event("tool/call", "c2"));
    let c1 = position(&records, is_event("tool/call", "c1"));
    move_record(&mut records, c2, c1);
    let again = records[c1].clone();
    records.insert(c1 + 1, again);
    let found = findings(&full(id), &records);
    let reported = of(&found, InvariantId::ModelOrderStart);
    assert_eq!(reported.len(), 1, "{found:#?}");
    assert_eq!(reported[0].lines[0], c1 + 1);
}

#[test]
fn a_call_committing_out_of_model_order_is_reported_once() {
    let id = "contexts-fifo-when-a-later-call-finishes-first";
    let mut records = trace(id);
    // c2 commits (post, final, tool/result, its card) before c1 does.
    let c2_post = position(&records, is_stage(NodeId::Post, "c2"));
    let c1_post = position(&records, is_stage(NodeId::Post, "c1"));
    for k in 0..4 {
        move_record(&mut records, c2_post + k, c1_post + k);
    }
    assert!(is_stage(NodeId::Post, "c2")(&records[c1_post]));
    let found = findings(&full(id), &records);
    let reported = of(&found, InvariantId::ModelOrderCommit);
    assert_eq!(reported.len(), 1, "{found:#?}");
    assert_eq!(reported[0].lines[0], c1_post + 1);
}

#[test]
fn a_refused_commit_step_is_left_to_the_rule_it_breaks() {
    let id = "contexts-fifo-when-a-later-call-finishes-first";
    let mut records = trace(id);
    // c2's post-execute while its body still runs, before c1's result: the body did not return
    // to `around`. That is one fault, not also a commit out of model order.
    let body = position(&records, is_stage(NodeId::ToolBody, "c2"));
    let post = position(&records, is_stage(NodeId::Post, "c2"));
    let copy = records[post].clone();
    records.insert(body + 1, copy);
    assert!(position(&records, is_event("tool/result", "c1")) > body + 1);
    let found = findings(&full(id), &records);
    assert!(
        !of(&found, InvariantId::BodyInsideExecute).is_empty(),
        "{found:#?}"
    );
    assert!(
        of(&found, InvariantId::ModelOrderCommit).is_empty(),
        "{found:#?}"
    );
}

#[test]
fn an_exclusive_call_starting_before_an_earlier_result_is_reported_where_it_starts() {
    let id = "exclusive-call-is-a-barrier";
    let mut records = trace(id);
    // c3 (not concurrency-safe) runs whole between c1's result and c2's commit.
    let from = position(&records, is_event("tool/call", "c3"));
    let to = position(&records, is_stage(NodeId::PresentResult, "c3"));
    let at = position(&records, is_stage(NodeId::Post, "c2"));
    let block: Vec<TraceRecord> = records.drain(from..=to).collect();
    records.splice(at..at, block);
    let found = findings(&full(id), &records);
    let start = position(&records, is_event("tool/call", "c3"));
    let reported = of(&found, InvariantId::ExclusiveBarrier);
    assert!(
        reported.iter().any(|v| v.lines[0] == start + 1
            && v.message
                .contains("(an exclusive call) before call c2's tool/result")),
        "{found:#?}"
    );
}

/// The records with every mention of `from` (a call id) written `to`.
fn renamed(records: &[TraceRecord], from: &str, to: &str) -> Vec<TraceRecord> {
    records
        .iter()
        .map(|r| {
            let text = serde_json::to_string(r)
                .unwrap()
                .replace(&format!("\"{from}\""), &format!("\"{to}\""));
            serde_json::from_str(&text).unwrap()
        })
        .collect()
}

#[test]
fn a_misnumbered_sub_call_is_reported_at_its_first_record() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records = renamed(&trace(id), "c1:code:2", "c1:code:9");
    let first = position(&records, |r| {
        r.call().map(CallId::as_str) == Some("c1:code:9")
    });
    let found = findings(&full(id), &records);
    let reported = of(&found, InvariantId::SubCallIdScheme);
    assert_eq!(reported.len(), 1, "{found:#?}");
    assert_eq!(reported[0].lines, [first + 1], "{found:#?}");
    assert!(reported[0].message.contains("number it c1:code:2"));
}

#[test]
fn a_sub_call_numbered_right_under_another_parent_is_reported() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records = renamed(&trace(id), "c1:code:2", "c0:code:2");
    let found = findings(&full(id), &records);
    let reported = of(&found, InvariantId::SubCallIdScheme);
    assert_eq!(reported.len(), 1, "{found:#?}");
    assert!(reported[0].message.contains("number it c1:code:2"));
}

#[test]
fn a_sub_call_named_freely_is_placed_by_its_parent_and_reported_once() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records = renamed(&trace(id), "c1:code:1", "first-sub-call");
    let first = position(&records, |r| {
        r.call().map(CallId::as_str) == Some("first-sub-call")
    });
    // Its first record is the dispatch log, which names the parent.
    assert!(is_event("tool/code-dispatch-start", "first-sub-call")(
        &records[first]
    ));
    let found = findings(&full(id), &records);
    assert_eq!(
        found.iter().map(|v| v.invariant).collect::<Vec<_>>(),
        [InvariantId::SubCallIdScheme],
        "{found:#?}"
    );
    assert_eq!(found[0].lines, [first + 1]);
    // In a rev1 session log, the dispatch log is all there is of a sub-call.
    let rev1 = trace_in(id, Revision::Rev1);
    let log = renamed(
        &thin(&rev1, ObservationLevel::Events),
        "c1:code:1",
        "first-sub-call",
    );
    assert!(is_event("tool/code-dispatch", "first-sub-call")(
        &log[position(&log, |r| r.call().map(CallId::as_str)
            == Some("first-sub-call"))]
    ));
    let options = drive_options(scenario(id), Revision::Rev1, ObservationLevel::Events);
    assert_eq!(
        violations(&options, &log),
        BTreeSet::from([InvariantId::SubCallIdScheme])
    );
}

#[test]
fn a_rejection_naming_another_tool_is_caught() {
    let id = "code-mode-rejection-fails-the-program";
    let mut records = trace(id);
    let at = position(
        &records,
        |r| matches!(r, TraceRecord::Mark(m) if m.rejection.is_some()),
    );
    let TraceRecord::Mark(mark) = &mut records[at] else {
        unreachable!()
    };
    let rejection = mark.rejection.as_mut().unwrap();
    assert_eq!(rejection.tool_name, "rm");
    // The message is still the sub-call's own: only the tool's name is wrong.
    rejection.tool_name = "read".to_owned();
    assert_reported(
        id,
        &records,
        InvariantId::BindingSettles,
        r#"rejected with {toolName: "read", message: "the owner forbids rm"}, expected {toolName: "rm""#,
    );
}

#[test]
fn a_batch_settled_after_its_contexts_is_caught_below_full() {
    // Below `full` `allResults` may be absent; when it is there, it still comes before the
    // contexts. (At `full` contexts-after-all-results reports the same fault.)
    let id = "contexts-fifo-after-all-results";
    let mut records = trace(id);
    let settled = position(
        &records,
        |r| matches!(r, TraceRecord::Stage(o) if o.node == NodeId::AllResults),
    );
    assert!(is_event("user/message", "c1")(&records[settled + 1]));
    let last = records.len();
    move_record(&mut records, settled, last);
    for level in [ObservationLevel::Events, ObservationLevel::Hooks] {
        let found = findings(&options(id, level), &records);
        assert!(
            said(&found, InvariantId::BatchSettles)
                .iter()
                .any(|m| m.contains("(allResults) after contexts were injected")),
            "{level}: {found:#?}"
        );
    }
}

#[test]
fn a_sub_calls_context_is_one_fault_not_also_a_fifo_breach() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records =
        tep_check::mutation::plant(InvariantId::SubCallContextsOmitted, &trace(id)).unwrap();
    let found = findings(&full(id), &records);
    assert!(
        !of(&found, InvariantId::SubCallContextsOmitted).is_empty(),
        "{found:#?}"
    );
    assert!(
        of(&found, InvariantId::ContextsFifo).is_empty(),
        "{found:#?}"
    );
}

/// The contexts of `contexts-fifo-after-all-results`, checked at `hooks`, with `edit` done.
fn contexts_at_hooks(edit: impl FnOnce(&mut Vec<TraceRecord>)) -> Vec<Violation> {
    let id = "contexts-fifo-after-all-results";
    let mut records = trace(id);
    edit(&mut records);
    findings(&options(id, ObservationLevel::Hooks), &records)
}

#[test]
fn at_hooks_contexts_are_matched_to_the_announced_outcomes_and_each_fault_told_once() {
    // Invented: a context no outcome announced, in place of one that is then owed. Three true
    // reports (the invented one, the one that came before what was owed, the owed one never
    // injected), and none for the contexts after it, which come in order.
    let found = contexts_at_hooks(|records| {
        let first = position(records, is_event("user/message", "c1"));
        records[first] = serde_json::from_str(
            &serde_json::to_string(&records[first])
                .unwrap()
                .replace("\"c1 tool\"", "\"invented\""),
        )
        .unwrap();
    });
    let reported = said(&found, InvariantId::ContextsFifo);
    assert_eq!(reported.len(), 3, "{found:#?}");
    assert!(reported[0].ends_with("\"invented\" for call c1, which no announced outcome carried"));
    assert!(reported[1].contains("the next context in FIFO order is \"c1 tool\""));
    assert!(
        reported[2].contains("\"c1 tool\" of call c1 (announced at line 13) was never injected")
    );

    // Lost: the last announced context never injected.
    let found = contexts_at_hooks(|records| {
        records.pop();
    });
    let reported = said(&found, InvariantId::ContextsFifo);
    assert_eq!(reported.len(), 1, "{found:#?}");
    assert!(reported[0].ends_with("was never injected"));

    // Two contexts swapped: one report, where the later one came first.
    let found = contexts_at_hooks(|records| {
        let first = position(records, is_event("user/message", "c1"));
        records.swap(first, first + 1);
    });
    let reported = said(&found, InvariantId::ContextsFifo);
    assert_eq!(reported.len(), 1, "{found:#?}");
    assert!(reported[0].contains("the next context in FIFO order is \"c1 tool\""));
}

#[test]
fn a_context_injected_between_two_results_is_one_fault() {
    // The batch completes at c3's tool/result, not at the first: a context before it is
    // contexts-after-all-results and nothing else (not also an allResults after contexts, nor a
    // FIFO breach, nor owed again at the end). The one moved is c1's second, "wrapper note",
    // which c2 and c3 carry too: c1's first is still owed, and comes in its place.
    let found = contexts_at_hooks(|records| {
        let context = position(records, is_event("user/message", "c1")) + 1;
        assert!(is_event("user/message", "c1")(&records[context]));
        let result = position(records, is_event("tool/result", "c1"));
        move_record(records, context, result + 1);
    });
    let reported: BTreeSet<InvariantId> = found.iter().map(|v| v.invariant).collect();
    assert_eq!(
        reported,
        // The moved context keeps its seq, so the log's order is broken too.
        BTreeSet::from([
            InvariantId::ContextsAfterAllResults,
            InvariantId::SessionSeqIncreasing
        ]),
        "{found:#?}"
    );
    assert_eq!(found.len(), 2, "{found:#?}");
}

#[test]
fn a_repeated_tool_call_does_not_redefine_the_call() {
    // The call is the one its first tool/call logged: a repeat naming other arguments (or
    // another tool) is reported as the repeat, and the stages that follow are judged against
    // the first.
    let id = "allow-runs-body";
    let mut records = trace(id);
    let call = position(&records, is_event("tool/call", "c1"));
    let again = rewritten(&records[call], |j| {
        j["event"]["data"]["arguments"] = serde_json::json!("{\"path\":\"elsewhere.txt\"}");
        j["event"]["data"]["name"] = serde_json::json!("write");
    });
    records.insert(call + 2, again);
    for level in ObservationLevel::ALL {
        let found = findings(&options(id, level), &thin(&records, level));
        let reported: BTreeSet<InvariantId> = found.iter().map(|v| v.invariant).collect();
        // The repeat keeps the first one's seq, so the log's order is broken too.
        assert_eq!(
            reported,
            BTreeSet::from([InvariantId::ToolCallOnce, InvariantId::SessionSeqIncreasing]),
            "{level}: {found:#?}"
        );
    }
}

#[test]
fn a_repeated_tool_result_does_not_move_the_calls_outcome() {
    // After a repeated tool/result, a stage of the call is reported against the first one.
    let id = "allow-runs-body";
    let mut records = trace(id);
    let result = position(&records, is_event("tool/result", "c1"));
    let last_stage = position(&records, is_stage(NodeId::Post, "c1"));
    records.insert(result + 1, records[result].clone());
    records.insert(result + 2, records[last_stage].clone());
    let found = findings(&full(id), &records);
    // Lines count from 1.
    let first = result + 1;
    let lines = |id| -> Vec<&Vec<usize>> { of(&found, id).into_iter().map(|v| &v.lines).collect() };
    assert_eq!(
        lines(InvariantId::OneResultPerCall),
        [&vec![first + 1, first]],
        "{found:#?}"
    );
    assert_eq!(
        lines(InvariantId::NoStageAfterResult),
        [&vec![first + 2, first]],
        "{found:#?}"
    );
}

#[test]
fn a_sub_call_handed_another_identity_once_is_reported_there_only() {
    // The sub-call is what its dispatch start logged: one stage handed another tool name or
    // other arguments is that stage's fault, and the stages after it, handed the logged
    // identity again, are not.
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    for (field, value) in [
        ("name", serde_json::json!("rm")),
        ("arguments", serde_json::json!({"path": "elsewhere"})),
    ] {
        let records = trace(id);
        let guards = position(&records, is_stage(NodeId::Guards, "c1:code:1"));
        let records = edited(&records, guards, |j| j["identity"][field] = value);
        for level in [ObservationLevel::Hooks, ObservationLevel::Full] {
            let found = findings(&options(id, level), &thin(&records, level));
            let lines: Vec<&Vec<usize>> = found.iter().map(|v| &v.lines).collect();
            assert_eq!(
                found.iter().map(|v| v.invariant).collect::<Vec<_>>(),
                [InvariantId::IdentityUnchanged],
                "{field} at {level}: {found:#?}"
            );
            let line = thin(&records, level)
                .iter()
                .position(is_stage(NodeId::Guards, "c1:code:1"))
                .unwrap()
                + 1;
            assert_eq!(lines, [&vec![line]], "{field} at {level}");
        }
    }
}

#[test]
fn a_body_resumed_after_the_fs_gate_runs_since_its_dispatch() {
    // c1's body is dispatched, gated twice, resumed twice; c2's body starts while it runs. The
    // overlap points at c1's dispatch, not at a resume (a resume is not a new dispatch).
    let id = "fs-write-then-edit-a-new-file";
    let mut records = trace(id);
    records[1] = rewritten(&records[1], |model| {
        let mut second = model["calls"][0].clone();
        second["callId"] = serde_json::json!("c2");
        model["calls"].as_array_mut().unwrap().push(second);
    });
    let dispatch = position(&records, is_stage(NodeId::ToolBody, "c1"));
    let resumed = records
        .iter()
        .rposition(is_stage(NodeId::ToolBody, "c1"))
        .unwrap();
    assert!(resumed > dispatch + 1);
    let c1: Vec<TraceRecord> = records[2..=dispatch]
        .iter()
        .filter(|r| r.call().map(CallId::as_str) == Some("c1"))
        .cloned()
        .collect();
    let c2 = renamed(&renamed(&c1, "c1", "c2"), "tok-1", "tok-2");
    let at = resumed + 1;
    records.splice(at..at, c2.iter().cloned());
    let started = at + c2.len();
    let found = findings(&full(id), &records);
    let overlap = of(&found, InvariantId::OnlySafeBodiesOverlap);
    assert_eq!(overlap.len(), 1, "{found:#?}");
    // Lines count from 1.
    assert_eq!(overlap[0].lines, [started, dispatch + 1], "{found:#?}");
}

#[test]
fn a_stage_breaking_into_another_calls_lane_names_the_section() {
    let id = "parallel-results-commit-in-model-order";
    let records = trace(id);
    // Prepare: c2's call logged while c1's prepare stages run.
    let planted = tep_check::mutation::plant(InvariantId::OrderedStagesSerial, &records).unwrap();
    let found = findings(&full(id), &planted);
    let words = said(&found, InvariantId::OrderedStagesSerial);
    assert!(
        words[0].ends_with("while call c1's prepare stages are still running (since line 3)"),
        "{found:#?}"
    );
    // Commit: c2's post between c1's post and its final.
    let mut records = records;
    let c1_post = position(&records, is_stage(NodeId::Post, "c1"));
    let c2_post = position(&records, is_stage(NodeId::Post, "c2"));
    assert!(c2_post > c1_post + 1);
    move_record(&mut records, c2_post, c1_post + 1);
    let found = findings(&full(id), &records);
    let words = said(&found, InvariantId::OrderedStagesSerial);
    // Lines count from 1: c1's post, then c2's.
    let line = c1_post + 1;
    assert_eq!(
        words[0],
        format!(
            "line {} (post accept, call c2) while call c1's commit stages are still running (since line {line})",
            line + 1
        ),
        "{found:#?}"
    );
}

#[test]
fn a_passed_over_context_that_comes_late_is_matched_by_call_and_text() {
    // c1's first context is lost and its second ("wrapper note", which c2 and c3 carry too)
    // comes last: the one never injected is "c1 tool", not another passed-over one.
    let found = contexts_at_hooks(|records| {
        let first = position(records, is_event("user/message", "c1"));
        records.remove(first);
        let late = records.remove(first);
        records.push(late);
    });
    let never: Vec<&str> = said(&found, InvariantId::ContextsFifo)
        .into_iter()
        .filter(|m| m.ends_with("was never injected"))
        .collect();
    assert_eq!(never.len(), 1, "{found:#?}");
    assert!(never[0].contains("\"c1 tool\" of call c1"), "{found:#?}");
}

#[test]
fn a_sub_calls_fault_found_at_the_batch_end_names_the_sub_call() {
    // The second sub-call's binding never settles: reported when the batch ends, under it.
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let mut records = trace(id);
    let settled = position(&records, is_binding_settled("c1:code:2"));
    records.remove(settled);
    let found = findings(&full(id), &records);
    let unsettled = of(&found, InvariantId::BindingSettles);
    assert_eq!(unsettled.len(), 1, "{found:#?}");
    assert_eq!(
        unsettled[0].call.as_ref().map(CallId::as_str),
        Some("c1:code:2"),
        "{found:#?}"
    );
}

#[test]
fn a_stage_before_the_tool_call_is_named_as_such() {
    // c1's tool/call logged after its pre-execute: the first stage before it is the fault.
    let id = "allow-runs-body";
    let mut records = trace(id);
    let call = position(&records, is_event("tool/call", "c1"));
    let pre = position(&records, is_stage(NodeId::Pre, "c1"));
    move_record(&mut records, call, pre + 1);
    let found = findings(&full(id), &records);
    assert_eq!(
        said(&found, InvariantId::ToolCallFirst),
        [format!(
            "line {} (presentCall, call c1) before the call's tool/call",
            call + 1
        )],
        "{found:#?}"
    );
}

#[test]
fn a_completed_card_shown_before_the_result_says_so() {
    // (A pending card before the tool/call is tool-call-first's, which claims it first.)
    let id = "allow-runs-body";
    let mut records = trace(id);
    let card = position(&records, is_stage(NodeId::PresentResult, "c1"));
    let result = position(&records, is_event("tool/result", "c1"));
    move_record(&mut records, card, result);
    assert_reported(
        id,
        &records,
        InvariantId::UiPresentsEachCall,
        "(presentResult, call c1) before the call's tool/result",
    );
}

#[test]
fn a_sub_calls_stage_after_its_binding_settled_is_named_as_such() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let mut records = trace(id);
    let settled = position(&records, is_binding_settled("c1:code:1"));
    let post = position(&records, is_stage(NodeId::Post, "c1:code:1"));
    records.insert(settled + 1, records[post].clone());
    let found = findings(&full(id), &records);
    assert_eq!(
        said(&found, InvariantId::NoStageAfterResult),
        [format!(
            "line {} (post accept, call c1:code:1) after the call's binding settled at line {}",
            settled + 2,
            settled + 1
        )],
        "{found:#?}"
    );
}

#[test]
fn an_owned_event_after_the_result_is_the_owned_events_rule_not_a_stage_after_it() {
    let id = "owned-events-inside-the-body";
    let mut records = trace(id);
    let owned = records
        .iter()
        .position(|r| r.node() == Some(NodeId::Owned))
        .unwrap();
    let result = position(&records, is_event("tool/result", "c1"));
    move_record(&mut records, owned, result + 1);
    let found = findings(&full(id), &records);
    assert!(
        !of(&found, InvariantId::OwnedEventsInsideBody).is_empty(),
        "{found:#?}"
    );
    assert!(
        of(&found, InvariantId::NoStageAfterResult).is_empty(),
        "{found:#?}"
    );
}

#[test]
fn finalize_faults_are_told_where_they_are_and_only_for_a_finalizer() {
    // A finalize after the announcement is finalize-before-notification's.
    let id = "finalize-content-runs-last";
    let mut records = trace(id);
    let finalize = position(&records, is_stage(NodeId::Finalize, "c1"));
    let announced = position(&records, is_stage(NodeId::Final, "c1"));
    move_record(&mut records, finalize, announced + 1);
    // Lines count from 1: the final now stands at line `announced`, the finalize after it.
    assert_reported(
        id,
        &records,
        InvariantId::FinalizeBeforeNotification,
        &format!(
            "line {} (finalize, call c1): finalizeContent ran after tools/result announced the outcome at line {announced}",
            announced + 1
        ),
    );
    // A tool without finalizeContent: a misplaced final is no finalize fault.
    let id = "unknown-tool-is-an-error-result";
    let mut records = trace(id);
    let post = position(&records, is_stage(NodeId::Post, "c1"));
    let last = position(&records, is_stage(NodeId::Final, "c1"));
    move_record(&mut records, last, post);
    let found = findings(&full(id), &records);
    assert!(!found.is_empty());
    assert!(
        of(&found, InvariantId::FinalizeOnce).is_empty(),
        "{found:#?}"
    );
}

#[test]
fn a_recorded_outcome_differing_in_any_one_part_is_not_the_frozen_one() {
    let id = "allow-runs-body";
    let records = trace(id);
    let result = position(&records, is_event("tool/result", "c1"));
    let frozen = |records: &[TraceRecord]| reports(id, records, InvariantId::FrozenOutcome);
    assert!(!frozen(&records));
    // Only isError differs.
    assert!(frozen(&edited(&records, result, |j| {
        j["event"]["data"]["message"]["content"][0]["isError"] = serde_json::json!(true);
    })));
    // Only the error code differs.
    assert!(frozen(&edited(&records, result, |j| {
        j["event"]["data"]["error"] = serde_json::json!({"name": "Error", "code": "OOPS"});
    })));

    // A sub-call's dispatch log: only isError, or only the content.
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records = trace(id);
    let logged = position(&records, is_event("tool/code-dispatch", "c1:code:1"));
    let frozen = |records: &[TraceRecord]| reports(id, records, InvariantId::FrozenOutcome);
    assert!(!frozen(&records));
    assert!(frozen(&edited(&records, logged, |j| {
        let e = &mut j["event"]["data"]["isError"];
        *e = serde_json::json!(!e.as_bool().unwrap());
    })));
    assert!(frozen(&edited(&records, logged, |j| {
        j["event"]["data"]["content"] = serde_json::json!([{"type": "text", "text": "other"}]);
    })));
}

#[test]
fn a_rev1_result_summary_may_hold_200_characters_and_no_more() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records = trace_in(id, Revision::Rev1);
    let logged = position(&records, is_event("tool/code-dispatch", "c1:code:1"));
    let options = drive_options(scenario(id), Revision::Rev1, ObservationLevel::Full);
    let summary = |n: usize| {
        let records = edited(&records, logged, |j| {
            j["event"]["data"]["resultSummary"] = serde_json::json!("x".repeat(n));
        });
        violations(&options, &records).contains(&InvariantId::CodeDispatchSummaryShape)
    };
    assert!(!summary(200));
    assert!(summary(201));
}

#[test]
fn a_throw_that_goes_on_to_a_stage_no_throw_leads_to_is_named_as_such() {
    let id = "pre-throws";
    let mut records = trace(id);
    let pre = position(&records, is_stage(NodeId::Pre, "c1"));
    // The denial branch, which no throw leads to.
    let denied: TraceRecord = serde_json::from_value(serde_json::json!(
        {"kind": "stage", "node": "denied", "call": "c1", "reason": "boom"}
    ))
    .unwrap();
    records.insert(pre + 1, denied);
    assert_reported(
        id,
        &records,
        InvariantId::ThrowIsNormalized,
        &format!(
            "line {} (denied, call c1) after line {} (pre threw), instead of outer normalization",
            pre + 2,
            pre + 1
        ),
    );
}
