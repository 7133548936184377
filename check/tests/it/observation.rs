//! The observation contract: the suite judges only what an implementation can observe.
//!
//! Each of the six findings of two correct implementations the checker used to fail is here as a
//! trace such an implementation records, accepted; beside it, the breach the same shape must
//! still catch. Then a harness's own session log, checked at level `events`, and the reference
//! at every level.

use crate::util::{
    corpus, drive_options, is_binding_settled, is_event, is_stage, move_record, options, position,
    trace, trace_in, violations,
};

use std::collections::BTreeSet;

use tep_check::invariants::InvariantId;
use tep_check::observation::thin;
use tep_check::{CheckOptions, Checker, InvariantStatus, check_records};
use tep_model::graph::{NodeId, Outcome, Revision, StageGraph};
use tep_model::identity::CallId;
use tep_model::session::{EventBody, ToolResultData};
use tep_model::trace::{Capability, MarkKind, ObservationLevel, TraceRecord};

// ---------------------------------------------------------------------------------------------
// 1. finalizeContent is the definition's: a call whose definition has none has no finalize stage.

#[test]
fn a_call_without_a_finalizer_needs_no_finalize_record() {
    for id in ["unknown-tool-is-an-error-result", "pre-deny-skips-body"] {
        let records = trace(id);
        assert!(
            !records.iter().any(|r| r.node() == Some(NodeId::Finalize)),
            "{id}: no definition here has finalizeContent"
        );
        for level in ObservationLevel::ALL {
            assert_eq!(
                violations(&options(id, level), &thin(&records, level)),
                BTreeSet::new(),
                "{id} at {level}"
            );
        }
        // Replayed without the scenario, the finalizer is unknown: still accepted.
        assert_eq!(
            violations(&CheckOptions::new(Revision::Rev2), &records),
            BTreeSet::new()
        );
    }
    // A definition that has one must call it: a trace without it is finalize-once.
    let id = "finalize-content-runs-last";
    let mut records = trace(id);
    records.retain(|r| r.node() != Some(NodeId::Finalize));
    assert!(
        violations(&options(id, ObservationLevel::Hooks), &records)
            .contains(&InvariantId::FinalizeOnce)
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Code Mode: a binding may settle before its tool/code-dispatch is logged.

#[test]
fn a_binding_may_settle_before_its_dispatch_is_logged() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let mut records = trace(id);
    for n in 1..=4 {
        let sub = format!("c1:code:{n}");
        let Some(mark) = records.iter().position(is_binding_settled(&sub)) else {
            continue;
        };
        let logged = position(&records, is_event("tool/code-dispatch", &sub));
        if mark > logged {
            move_record(&mut records, mark, logged);
        }
    }
    assert_eq!(
        violations(&options(id, ObservationLevel::Full), &records),
        BTreeSet::new()
    );
    // Settling before the sub-call's outcome is announced is still a breach.
    let mut early = trace(id);
    let mark = position(
        &early,
        |r| matches!(r, TraceRecord::Mark(m) if m.call.as_str() == "c1:code:1" && m.mark != MarkKind::BodySettled),
    );
    let fin = position(&early, is_stage(NodeId::Final, "c1:code:1"));
    move_record(&mut early, mark, fin);
    assert!(
        violations(&options(id, ObservationLevel::Full), &early)
            .contains(&InvariantId::BindingSettles)
    );
}

// ---------------------------------------------------------------------------------------------
// 3. A pre-execute throw may be normalized when it is caught, before an earlier call commits.

#[test]
fn normalization_is_not_a_commit_stage() {
    let id = "mixed-batch";
    let mut records = trace(id);
    // c2's pre-execute throws; normalize it right away, while c1 has not committed yet.
    let threw = position(&records, |r| {
        is_stage(NodeId::Pre, "c2")(r)
            && matches!(r, TraceRecord::Stage(o) if o.outcome == Some(Outcome::Throw))
    });
    let normalized = position(&records, is_stage(NodeId::Normalized, "c2"));
    assert!(
        normalized > threw + 1,
        "the reference normalizes at commit time"
    );
    move_record(&mut records, normalized, threw + 1);
    let c1_result = position(&records, is_event("tool/result", "c1"));
    assert!(threw + 1 < c1_result, "normalized before c1 committed");
    assert_eq!(
        violations(&options(id, ObservationLevel::Full), &records),
        BTreeSet::new()
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Records an implementation can only infer sit anywhere inside their window, or are absent.

#[test]
fn a_denial_may_be_recorded_at_post_execute_entry() {
    let id = "denied-call-in-a-parallel-pool";
    let mut records = trace(id);
    let denied = position(&records, is_stage(NodeId::Denied, "c2"));
    let post = position(&records, is_stage(NodeId::Post, "c2"));
    move_record(&mut records, denied, post);
    assert_eq!(
        violations(&options(id, ObservationLevel::Full), &records),
        BTreeSet::new()
    );
    // ... but not after post-execute: then it is out of its window.
    let mut late = trace(id);
    let denied = position(&late, is_stage(NodeId::Denied, "c2"));
    let post = position(&late, is_stage(NodeId::Post, "c2"));
    move_record(&mut late, denied, post + 1);
    assert!(!violations(&options(id, ObservationLevel::Full), &late).is_empty());
}

#[test]
fn an_approval_decision_may_be_logged_right_after_the_prompt_returned() {
    // A harness logs approval/decided when its prompt returns; an adapter recording the approval
    // stage at that same return puts the stage record first.
    let id = "ask-allowed-once";
    let after_the_stage = |records: &mut Vec<TraceRecord>| {
        let decided = position(records, is_event("approval/decided", "c1"));
        let approval = position(records, is_stage(NodeId::Approval, "c1"));
        assert!(decided < approval, "the reference logs it inside the stage");
        move_record(records, decided, approval + 1);
    };
    for level in [ObservationLevel::Hooks, ObservationLevel::Full] {
        let mut records = trace(id);
        after_the_stage(&mut records);
        assert_eq!(violations(&options(id, level), &records), BTreeSet::new());
    }
    // Its outcome must still be the stage's ...
    let mut records = trace(id);
    after_the_stage(&mut records);
    for r in &mut records {
        if let TraceRecord::Event(e) = r
            && let EventBody::ApprovalDecided(d) = &mut e.event.body
        {
            d.outcome = Outcome::Rejected;
        }
    }
    assert_eq!(
        violations(&options(id, ObservationLevel::Full), &records),
        BTreeSet::from([InvariantId::ApprovalAudited])
    );
    // ... and it comes before the next stage (guards here).
    let mut records = trace(id);
    let decided = position(&records, is_event("approval/decided", "c1"));
    let guards = position(&records, is_stage(NodeId::Guards, "c1"));
    move_record(&mut records, decided, guards + 1);
    assert_eq!(
        violations(&options(id, ObservationLevel::Full), &records),
        BTreeSet::from([InvariantId::ApprovalAudited])
    );
}

#[test]
fn a_prompt_asked_after_pre_execute_allowed_is_caught() {
    // approval/asked where pre-execute decided allow: the prompt is consulted only after an ask.
    let asked = trace("ask-allowed-once")
        .into_iter()
        .find(is_event("approval/asked", "c1"))
        .unwrap();
    let id = "allow-runs-body";
    let mut records = trace(id);
    let pre = position(&records, is_stage(NodeId::Pre, "c1"));
    records.insert(pre + 1, asked);
    assert!(
        violations(&options(id, ObservationLevel::Full), &records)
            .contains(&InvariantId::ApprovalOnlyAfterAsk)
    );
}

#[test]
fn a_sub_call_of_run_code_is_caught_from_the_session_log_alone() {
    // At `events` the dispatch-start event is the only place the sub-call's tool is named.
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let mut log = thin(&trace(id), ObservationLevel::Events);
    assert!(violations(&options(id, ObservationLevel::Events), &log).is_empty());
    let start = position(&log, is_event("tool/code-dispatch-start", "c1:code:1"));
    if let TraceRecord::Event(e) = &mut log[start]
        && let EventBody::CodeDispatchStart(d) = &mut e.event.body
    {
        d.name = "run_code".to_owned();
    }
    assert!(
        violations(&options(id, ObservationLevel::Events), &log)
            .contains(&InvariantId::RunCodeReserved)
    );
}

#[test]
fn a_binding_rejected_for_a_successful_sub_call_is_caught() {
    // Even a rejection that names the tool and the sub-call's own content: a success resolves.
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let mut records = trace(id);
    let last_final = records
        .iter()
        .rposition(is_stage(NodeId::Final, "c1:code:1"))
        .unwrap();
    let TraceRecord::Stage(fin) = &records[last_final] else {
        unreachable!()
    };
    let result = fin.result.clone().unwrap();
    assert!(!result.is_error);
    let name = fin.identity.as_ref().unwrap().name.clone();
    let mark = records
        .iter()
        .position(|r| matches!(r, TraceRecord::Mark(m) if m.call.as_str() == "c1:code:1" && m.mark == MarkKind::BindingResolved))
        .unwrap();
    if let TraceRecord::Mark(m) = &mut records[mark] {
        m.mark = MarkKind::BindingRejected;
        m.rejection = Some(tep_model::trace::Rejection {
            tool_name: name,
            message: result.text(),
            other: Default::default(),
        });
    }
    assert!(
        violations(&options(id, ObservationLevel::Full), &records)
            .contains(&InvariantId::BindingSettles)
    );
}

#[test]
fn an_unanswered_ask_needs_no_approval_record_below_full() {
    let id = "ask-without-approval-denies";
    let records = trace(id);
    let hooks = thin(&records, ObservationLevel::Hooks);
    assert!(!hooks.iter().any(|r| r.node() == Some(NodeId::Approval)));
    assert_eq!(
        violations(&options(id, ObservationLevel::Hooks), &hooks),
        BTreeSet::new()
    );
    // At full the record is required.
    assert!(!violations(&options(id, ObservationLevel::Full), &hooks).is_empty());
}

#[test]
fn post_execute_may_decide_and_then_fail_to_apply() {
    // The registry throws applying `accept{value}` to a failed result: an adapter's outermost
    // listener saw the decision, not the throw.
    let id = "post-value-on-a-failure-throws";
    let mut records = trace(id);
    let post = position(&records, is_stage(NodeId::Post, "c1"));
    if let TraceRecord::Stage(o) = &mut records[post] {
        assert_eq!(o.outcome, Some(Outcome::Throw));
        o.outcome = Some(Outcome::Accept);
        o.reason = None;
    }
    for level in [ObservationLevel::Hooks, ObservationLevel::Full] {
        assert_eq!(
            violations(&options(id, level), &thin(&records, level)),
            BTreeSet::new(),
            "{level}"
        );
    }
    // The failure to apply is still a throw: announcing a success after it is caught.
    let last = position(&records, is_stage(NodeId::Final, "c1"));
    if let TraceRecord::Stage(o) = &mut records[last] {
        o.result_mut().unwrap().is_error = false;
    }
    assert!(
        violations(&options(id, ObservationLevel::Full), &records)
            .contains(&InvariantId::ThrowIsError)
    );
}

#[test]
fn around_is_one_visit_across_retries_and_wrapper_throws() {
    for id in [
        "retry-dispatches-again",
        "wrapper-throws-after-dispatch",
        "timeout-cancels-a-hanging-body",
    ] {
        let records = trace(id);
        let arounds = records
            .iter()
            .filter(|r| r.node() == Some(NodeId::Around))
            .count();
        assert!(arounds >= 3, "{id}: into the body, back, and the end");
        assert_eq!(
            violations(&options(id, ObservationLevel::Hooks), &records),
            BTreeSet::new(),
            "{id}"
        );
    }
    // A wrapper throwing after the body returned: the last around carries the throw.
    let id = "wrapper-throws-after-dispatch";
    let records = trace(id);
    let last_around = records
        .iter()
        .rposition(|r| r.node() == Some(NodeId::Around))
        .unwrap();
    assert!(
        matches!(&records[last_around], TraceRecord::Stage(o) if o.outcome == Some(Outcome::Throw))
    );
}

#[test]
fn a_binding_may_resolve_while_the_next_sub_call_runs() {
    // Sub-calls of a group run one at a time; the program learns of the first one's outcome
    // whenever its scheduler gets to it, which may be while the second one runs.
    let id = "code-mode-group-runs-one-at-a-time";
    let mut records = trace(id);
    let resolved = position(
        &records,
        |r| matches!(r, TraceRecord::Mark(m) if m.mark == MarkKind::BindingResolved && m.call.as_str() == "c1:code:1"),
    );
    let second = position(&records, is_stage(NodeId::Pre, "c1:code:2"));
    move_record(&mut records, resolved, second + 1);
    for level in [ObservationLevel::Hooks, ObservationLevel::Full] {
        assert_eq!(
            violations(&options(id, level), &thin(&records, level)),
            BTreeSet::new(),
            "{level}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 5. A harness's own session log is checked at level `events`.

/// A realistic session: a model turn with two parallel calls, their results, and one context
/// each, injected as user messages naming their call by `source` (no `call` attribution).
fn session_log() -> Vec<TraceRecord> {
    let lines = [
        r#"{"kind":"header","spec":"rev2","implementation":"my-harness 1.4","observation":"events"}"#,
        r#"{"kind":"stage","node":"model","calls":[{"callId":"call_1","name":"read_file"},{"callId":"call_2","name":"grep"}]}"#,
        r#"{"kind":"event","event":{"seq":11,"time":1000,"type":"tool/call","data":{"turn":3,"step":1,"callId":"call_1","name":"read_file","arguments":"{\"path\":\"a.rs\"}"}}}"#,
        r#"{"kind":"event","event":{"seq":12,"time":1001,"type":"tool/call","data":{"turn":3,"step":1,"callId":"call_2","name":"grep","arguments":"{\"pattern\":\"fn\"}"}}}"#,
        r#"{"kind":"event","event":{"seq":13,"time":1040,"type":"tool/result","data":{"turn":3,"step":1,"message":{"id":"m13","role":"user","source":{"kind":"tool","callId":"call_1"},"content":[{"type":"tool-result","toolCallId":"call_1","content":[{"type":"text","text":"fn main() {}"}],"isError":false}]}},"surfaceOp":"append","sourceEventSeqs":[11]}}"#,
        r#"{"kind":"event","event":{"seq":14,"time":1041,"type":"tool/result","data":{"turn":3,"step":1,"message":{"id":"m14","role":"user","source":{"kind":"tool","callId":"call_2"},"content":[{"type":"tool-result","toolCallId":"call_2","content":[{"type":"text","text":"a.rs:1"}],"isError":false}]}},"surfaceOp":"append","sourceEventSeqs":[12]}}"#,
        r#"{"kind":"event","event":{"seq":15,"time":1042,"type":"user/message","data":{"id":"m15","role":"user","content":[{"type":"text","text":"a.rs is generated"}],"source":{"kind":"tool","callId":"call_1"}},"surfaceOp":"append"}}"#,
        r#"{"kind":"event","event":{"seq":16,"time":1042,"type":"user/message","data":{"id":"m16","role":"user","content":[{"type":"text","text":"grep skipped target/"}],"source":{"kind":"tool","callId":"call_2"}},"surfaceOp":"append"}}"#,
        r#"{"kind":"event","event":{"seq":17,"time":2000,"type":"user/message","data":{"id":"m17","role":"user","content":[{"type":"text","text":"thanks, now fix it"}],"source":{"kind":"user"}},"surfaceOp":"append"}}"#,
    ];
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| tep_check::parse_record(i + 1, l).unwrap())
        .collect()
}

fn events() -> CheckOptions {
    CheckOptions::new(Revision::Rev2).observed(ObservationLevel::Events)
}

#[test]
fn a_session_log_is_checked_at_level_events() {
    let log = session_log();
    let report = check_records(&events(), &log).unwrap();
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    assert_eq!(report.batches, 1);
    let status = |id| events().status(id);
    for id in [
        InvariantId::ModelOrderStart,
        InvariantId::ModelOrderCommit,
        InvariantId::OneResultPerCall,
        InvariantId::ContextsAfterAllResults,
        InvariantId::ResultNamesItsCall,
        InvariantId::SessionSeqIncreasing,
    ] {
        assert_eq!(status(id), InvariantStatus::Checked, "{id}");
    }
    // A session log orders the contexts, but holds no announced outcome to say which were lost
    // or invented.
    assert!(matches!(
        status(InvariantId::ContextsFifo),
        InvariantStatus::PartlyCheckable(what) if what.contains("lost or invented")
    ));
    for id in [
        InvariantId::DenySkipsBody,
        InvariantId::OrderedStagesSerial,
        InvariantId::FrozenOutcome,
    ] {
        assert!(
            matches!(status(id), InvariantStatus::NotCheckable(_)),
            "{id}"
        );
    }
}

#[test]
fn a_session_log_with_results_out_of_order_or_an_early_context_is_rejected() {
    // The two results swapped: call_2's outcome recorded before call_1's (model order is a
    // SHOULD), while the contexts still come in model order: FIFO follows the recorded outcomes.
    let mut swapped = session_log();
    swapped.swap(4, 5);
    renumber(&mut swapped);
    assert_eq!(
        violations(&events(), &swapped),
        BTreeSet::from([InvariantId::ModelOrderCommit, InvariantId::ContextsFifo])
    );
    // A harness that commits in completion order, contexts following: only the SHOULD remains.
    swapped.swap(6, 7);
    renumber(&mut swapped);
    assert_eq!(
        violations(&events(), &swapped),
        BTreeSet::from([InvariantId::ModelOrderCommit])
    );
    // A context injected before the last result.
    let mut early = session_log();
    move_record(&mut early, 6, 5);
    renumber(&mut early);
    assert_eq!(
        violations(&events(), &early),
        BTreeSet::from([InvariantId::ContextsAfterAllResults])
    );
    // The contexts of the two calls injected in the wrong order.
    let mut reversed = session_log();
    reversed.swap(6, 7);
    renumber(&mut reversed);
    assert_eq!(
        violations(&events(), &reversed),
        BTreeSet::from([InvariantId::ContextsFifo])
    );
}

/// The log's seqs in the order its events now stand, as the harness would have numbered them.
fn renumber(log: &mut [TraceRecord]) {
    let mut seqs: Vec<u64> = log
        .iter()
        .filter_map(|r| match r {
            TraceRecord::Event(e) => Some(e.event.seq),
            _ => None,
        })
        .collect();
    seqs.sort_unstable();
    let mut next = seqs.into_iter();
    for r in log.iter_mut() {
        if let TraceRecord::Event(e) = r {
            e.event.seq = next.next().unwrap();
        }
    }
}

#[test]
fn a_session_log_checked_at_hooks_is_refused_with_a_way_out() {
    let err = check_records(
        &CheckOptions::new(Revision::Rev2).observed(ObservationLevel::Hooks),
        &session_log(),
    )
    .unwrap_err();
    assert_eq!(err.line, 2);
    assert!(err.message.contains("--observed events"), "{err}");

    // A Code Mode log with the program's binding marks is still a log: the marks are not
    // stage records. With one stage record it is a trace, judged as one.
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records = trace(id);
    let binding = |r: &TraceRecord| matches!(r, TraceRecord::Mark(m) if matches!(m.mark, MarkKind::BindingResolved | MarkKind::BindingRejected));
    let log: Vec<TraceRecord> = records
        .iter()
        .filter(|r| {
            matches!(r, TraceRecord::Event(_)) || r.node() == Some(NodeId::Model) || binding(r)
        })
        .cloned()
        .collect();
    assert!(log.iter().any(binding));
    let hooks = options(id, ObservationLevel::Hooks);
    let err = check_records(&hooks, &log).unwrap_err();
    assert!(err.message.contains("--observed events"), "{err}");
    let mut with_a_stage = log.clone();
    let pre = position(&records, is_stage(NodeId::Pre, "c1"));
    with_a_stage.insert(3, records[pre].clone());
    assert!(check_records(&hooks, &with_a_stage).is_ok());
}

// ---------------------------------------------------------------------------------------------
// An event that names its own call needs no `call` beside it.

#[test]
fn events_that_name_their_call_are_placed_without_the_records_call() {
    // The events whose data names the call (or the sub-call) they belong to.
    const NAMING: [&str; 7] = [
        "tool/call",
        "tool/result",
        "approval/asked",
        "tool/code-dispatch-start",
        "tool/code-dispatch",
        "user/message",
        "context/message",
    ];
    let mut stripped_types = BTreeSet::new();
    for s in corpus() {
        for revision in Revision::ALL.into_iter().filter(|&r| s.applies_to(r)) {
            let records = trace_in(&s.id, revision);
            let mut bare = records.clone();
            for record in &mut bare {
                if let TraceRecord::Event(e) = record
                    && NAMING.contains(&e.event.body.type_name())
                    && e.call.take().is_some()
                {
                    stripped_types.insert(e.event.body.type_name());
                }
            }
            let options = drive_options(s, revision, ObservationLevel::Full);
            let checked = |records: &[TraceRecord]| {
                Checker::new(options.clone())
                    .keep_steps()
                    .check(records)
                    .unwrap()
            };
            let (with, without) = (checked(&records), checked(&bare));
            assert_eq!(without.violations, with.violations, "{} {revision}", s.id);
            assert_eq!(without.steps, with.steps, "{} {revision}", s.id);
        }
    }
    // The corpus holds each kind, so each was placed by its own id.
    assert_eq!(stripped_types, BTreeSet::from(NAMING));
}

#[test]
fn an_event_attributed_to_another_call_than_it_names() {
    let id = "mixed-batch";
    let mut records = trace(id);
    let call = position(&records, is_event("tool/call", "c1"));
    let result = position(&records, is_event("tool/result", "c1"));
    let other = CallId::from("c2");
    // A result filed under another call is that call's fault to report, not an unreadable trace.
    if let TraceRecord::Event(e) = &mut records[result] {
        e.call = Some(other.clone());
    }
    assert!(
        violations(&options(id, ObservationLevel::Full), &records)
            .contains(&InvariantId::ResultNamesItsCall)
    );
    // A call logged under another id cannot be placed.
    if let TraceRecord::Event(e) = &mut records[call] {
        e.call = Some(other);
    }
    let error = check_records(&options(id, ObservationLevel::Full), &records).unwrap_err();
    assert_eq!(error.line, call + 1);
    assert!(
        error
            .message
            .contains("attributed to call c2 but its tool/call names call c1"),
        "{error}"
    );
}

#[test]
fn a_result_that_names_no_call_and_is_given_none_is_refused() {
    let id = "allow-runs-body";
    let mut records = trace(id);
    let result = position(&records, is_event("tool/result", "c1"));
    let TraceRecord::Event(e) = &mut records[result] else {
        unreachable!()
    };
    e.call = None;
    let EventBody::ToolResult(ToolResultData::Message(m)) = &mut e.event.body else {
        panic!("a rev2 result")
    };
    // Its message carries no tool-result block, so nothing in it names the call.
    m.message.content.clear();
    let error = check_records(&options(id, ObservationLevel::Full), &records).unwrap_err();
    assert_eq!(error.line, result + 1);
    assert_eq!(error.message, "a `tool/result` event needs a call id");
}

// ---------------------------------------------------------------------------------------------
// A part the implementation does not declare is not judged.

#[test]
fn an_implementation_without_a_ui_records_no_cards_and_is_not_failed_for_it() {
    let id = "allow-runs-body";
    let mut records = trace(id);
    let cards =
        |r: &TraceRecord| matches!(r.node(), Some(NodeId::PresentCall | NodeId::PresentResult));
    assert_eq!(records.iter().filter(|r| cards(r)).count(), 2);
    records.retain(|r| !cards(r));
    let without_ui = options(id, ObservationLevel::Full)
        .with_capabilities(Capability::ALL.into_iter().filter(|&c| c != Capability::Ui));
    assert!(matches!(
        without_ui.status(InvariantId::UiPresentsEachCall),
        InvariantStatus::NotApplicable(why) if why.contains("does not declare ui")
    ));
    assert_eq!(violations(&without_ui, &records), BTreeSet::new());
    // Declared, the same missing cards are a breach.
    assert_eq!(
        violations(&options(id, ObservationLevel::Full), &records),
        BTreeSet::from([InvariantId::UiPresentsEachCall])
    );
}

#[test]
fn every_invariant_about_a_part_is_not_applicable_without_it() {
    for capability in Capability::ALL {
        let about_it: Vec<_> = tep_check::CATALOG
            .iter()
            .filter(|i| i.requires == Some(capability))
            .collect();
        assert!(!about_it.is_empty(), "no invariant needs {capability}");
        for invariant in about_it {
            let revision = Revision::ALL
                .into_iter()
                .find(|&r| invariant.applies_to(r))
                .unwrap();
            let with = |capabilities: Option<BTreeSet<Capability>>| match capabilities {
                Some(caps) => CheckOptions::new(revision).with_capabilities(caps),
                None => CheckOptions::new(revision),
            };
            let without = with(Some(BTreeSet::new())).status(invariant.id);
            assert_eq!(
                without,
                InvariantStatus::NotApplicable(format!(
                    "the implementation does not declare {capability}"
                )),
                "{}",
                invariant.id
            );
            let declared = with(Some(BTreeSet::from([capability]))).status(invariant.id);
            assert!(
                !matches!(declared, InvariantStatus::NotApplicable(_)),
                "{}: {declared:?}",
                invariant.id
            );
            assert_eq!(
                with(None).status(invariant.id),
                declared,
                "{}",
                invariant.id
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The reference at every level.

#[test]
fn the_reference_passes_at_every_level_and_what_a_level_cannot_check_is_listed() {
    for s in corpus() {
        for revision in Revision::ALL.into_iter().filter(|&r| s.applies_to(r)) {
            let records = trace_in(&s.id, revision);
            for level in ObservationLevel::ALL {
                let options = drive_options(s, revision, level);
                let report = check_records(&options, &thin(&records, level)).unwrap();
                assert!(
                    report.violations.is_empty(),
                    "{} {revision} at {level}: {:#?}",
                    s.id,
                    report.violations
                );
            }
        }
    }
    let not_checkable = |level| {
        CheckOptions::new(Revision::Rev2)
            .observed(level)
            .statuses()
            .into_iter()
            .filter(|(_, s)| matches!(s, InvariantStatus::NotCheckable(_)))
            .count()
    };
    assert!(not_checkable(ObservationLevel::Events) > not_checkable(ObservationLevel::Hooks));
    // Without a scenario, only what reads the scenario cannot be checked at full.
    let read_the_scenario = tep_check::CATALOG
        .iter()
        .filter(|i| i.reads.contains(&tep_check::invariants::Read::Scenario))
        .count();
    assert_eq!(not_checkable(ObservationLevel::Full), read_the_scenario);
}

// ---------------------------------------------------------------------------------------------
// Coverage says what a level can see: an edge a level does not record is implied by the records
// around it, never invented.

#[test]
fn a_trace_thinned_to_hooks_takes_the_same_edges_observed_or_implied() {
    let taken = |r: &tep_check::CheckReport| {
        let pipeline: BTreeSet<_> = r.edges.union(&r.implied_edges).copied().collect();
        let code_mode: BTreeSet<_> = r
            .code_mode_edges
            .union(&r.implied_code_mode_edges)
            .copied()
            .collect();
        (pipeline, code_mode)
    };
    let mut implied_at_hooks = 0;
    for s in corpus() {
        for revision in Revision::ALL.into_iter().filter(|&r| s.applies_to(r)) {
            let records = trace_in(&s.id, revision);
            let check = |level| {
                check_records(&drive_options(s, revision, level), &thin(&records, level)).unwrap()
            };
            let full = check(ObservationLevel::Full);
            assert!(
                full.implied_edges.is_empty() && full.implied_code_mode_edges.is_empty(),
                "{} {revision}: `full` records every stage, so it implies nothing",
                s.id
            );
            let hooks = check(ObservationLevel::Hooks);
            assert!(hooks.edges.is_disjoint(&hooks.implied_edges));
            assert_eq!(
                taken(&hooks),
                (full.edges.clone(), full.code_mode_edges.clone()),
                "{} {revision}: at hooks, observed {:?} implied {:?}",
                s.id,
                hooks.edges,
                hooks.implied_edges
            );
            implied_at_hooks += hooks.implied_edges.len();
            // At events most ways are many: what is implied is still only what was taken.
            let (pipeline, code_mode) = taken(&check(ObservationLevel::Events));
            assert!(
                pipeline.is_subset(&full.edges),
                "{} {revision}: {:?} not in {:?}",
                s.id,
                pipeline
                    .difference(&full.edges)
                    .map(|e| StageGraph::of(revision).edges()[e.0].describe())
                    .collect::<Vec<_>>(),
                full.edges
            );
            assert!(
                code_mode.is_subset(&full.code_mode_edges),
                "{} {revision}",
                s.id
            );
        }
    }
    assert!(
        implied_at_hooks > 0,
        "the corpus denies, throws and settles"
    );
}
