//! The checker on traces only the reference can make, and the runner's judgement of one.
//!
//! tep-check's own tests (`check/tests/it`) check the corpus traces the snapshots hold; these
//! need the reference to run something else: a scenario outside the corpus, a scenario on the
//! other revision's reference, and the runner's `judge`, which adds the scenario's expectations
//! to the checker's findings.

use crate::common::{drive_options, scenario};

use std::collections::BTreeSet;

use tep_check::invariants::InvariantId;
use tep_check::observation::thin;
use tep_check::{CheckOptions, check_records};
use tep_conformance::outcome::Coverage;
use tep_conformance::runner::judge;
use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_model::graph::{NodeId, Revision};
use tep_model::identity::CallId;
use tep_model::result::ContentBlock;
use tep_model::session::{EventBody, ToolResultData};
use tep_model::trace::{ObservationLevel, TraceRecord};

/// The reference's trace of scenario `id` (rev2).
fn trace(id: &str) -> Vec<TraceRecord> {
    run_reference(&scenario(id), Revision::Rev2, &[]).unwrap()
}

/// Drive mode's options for scenario `id` at `level` (rev2).
fn options(id: &str, level: ObservationLevel) -> CheckOptions {
    drive_options(&scenario(id), Revision::Rev2, level)
}

fn violations(options: &CheckOptions, records: &[TraceRecord]) -> BTreeSet<InvariantId> {
    check_records(options, records)
        .unwrap_or_else(|e| panic!("{e}"))
        .invariants()
}

fn is_event<'a>(ty: &'a str, call: &'a str) -> impl Fn(&TraceRecord) -> bool + 'a {
    move |r| matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == ty && r.call().map(CallId::as_str) == Some(call))
}

// ---------------------------------------------------------------------------------------------
// A scenario outside the corpus (from check/tests/it/observation.rs, 4. Code Mode).

#[test]
fn a_retried_program_numbers_its_sub_calls_anew() {
    // A retry wrapper around run_code runs the program twice: the second run's `c1:code:1` is
    // a new sub-call (its records would be out of order as the first run's).
    let s: tep_conformance::scenario::Scenario = serde_json::from_value(serde_json::json!({
        "id": "code-mode-retried", "description": "", "spec": "", "exercises": [],
        "requires": ["code-mode"],
        "tools": [{"name": "read"}],
        "calls": [{"callId": "c1", "tool": "run_code", "arguments": {"language": "data"},
            "program": [{"call": {"tool": "read", "body": [{"return": "contents"}]}},
                        {"throw": "boom"}]}],
        "wrappers": [{"kind": "retry", "attempts": 2}],
        "expect": {"calls": {}}
    }))
    .unwrap();
    let records = run_reference(&s, Revision::Rev2, &[]).unwrap();
    let starts = records
        .iter()
        .filter(|r| is_event("tool/code-dispatch-start", "c1:code:1")(r))
        .count();
    assert_eq!(starts, 2, "the program ran twice");
    for level in ObservationLevel::ALL {
        assert_eq!(
            violations(
                &drive_options(&s, Revision::Rev2, level),
                &thin(&records, level)
            ),
            BTreeSet::new(),
            "{level}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Expected texts check only what the spec or the reference semantics fix.

#[test]
fn wording_nothing_fixes_is_a_note_not_a_warning() {
    let cases = [
        // The original harness's refusal reason.
        (
            "approval-refusals-deny",
            "c1",
            "Error: the user rejected tool \"rm\"",
        ),
        (
            "unknown-tool-is-an-error-result",
            "c1",
            "Error: unknown tool \"nope\"",
        ),
        // A TypeError's message does not start with its class name (reference semantics 42).
        (
            "post-value-on-a-failure-throws",
            "c1",
            "Error: cannot replace the value of an error result",
        ),
    ];
    for (id, call, text) in cases {
        let mut records = trace(id);
        reword(&mut records, call, text);
        let s = scenario(id);
        let mut coverage = Coverage::default();
        let result = judge(
            &s,
            &options(id, ObservationLevel::Full),
            records,
            None,
            &mut coverage,
        );
        assert_eq!(result.violations, vec![], "{id}");
        assert!(
            result
                .notes
                .iter()
                .any(|n| n.message.contains(&format!("{text:?}"))
                    && n.message.contains("the reference says")),
            "{id}: {:?}",
            result.notes
        );
    }
    // What the scripts and the reference semantics do fix is still checked: the tool's name.
    let mut records = trace("approval-refusals-deny");
    reword(&mut records, "c1", "Error: refused");
    let mut coverage = Coverage::default();
    let result = judge(
        &scenario("approval-refusals-deny"),
        &options("approval-refusals-deny", ObservationLevel::Full),
        records,
        None,
        &mut coverage,
    );
    let ids: Vec<InvariantId> = result.violations.iter().map(|v| v.invariant).collect();
    assert_eq!(ids, vec![InvariantId::ExpectedContent]);
}

/// Replaces call `call`'s content wherever the trace shows its outcome.
fn reword(records: &mut [TraceRecord], call: &str, text: &str) {
    let content = vec![ContentBlock::text(text)];
    for r in records.iter_mut() {
        if r.call().map(CallId::as_str) != Some(call) {
            continue;
        }
        match r {
            TraceRecord::Stage(o) if o.node == NodeId::Final => {
                if let Some(result) = o.result_mut() {
                    result.content = content.clone();
                }
            }
            TraceRecord::Event(e) => {
                if let EventBody::ToolResult(ToolResultData::Message(m)) = &mut e.event.body {
                    m.message.content[0].content = content.clone();
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A scenario on the other revision's reference (from check/tests/it/revisions.rs).

#[test]
fn the_notification_differs_observer_by_observer() {
    // The observer scenarios are revision-specific; run each on the other revision's reference.
    let corpus = corpus().unwrap();
    let awaited = corpus
        .iter()
        .find(|s| s.id == "tools-result-is-awaited-in-rev1")
        .unwrap();
    let synchronous = corpus
        .iter()
        .find(|s| s.id == "tools-result-is-synchronous")
        .unwrap();
    let rev1_trace = run_reference(synchronous, Revision::Rev1, &[]).unwrap();
    let report = check_records(&CheckOptions::new(Revision::Rev2), &rev1_trace).unwrap();
    assert!(
        report
            .invariants()
            .contains(&InvariantId::NotificationSynchronous)
    );
    let rev2_trace = run_reference(awaited, Revision::Rev2, &[]).unwrap();
    let report = check_records(&CheckOptions::new(Revision::Rev1), &rev2_trace).unwrap();
    assert!(
        report
            .invariants()
            .contains(&InvariantId::NotificationAwaited)
    );
}
