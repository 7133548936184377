//! Each guarantee under its own name: a breach the scenario's expected outcome or the walk used
//! to catch alone is reported under the invariant it breaks, and only where the trace (or the
//! scenario, in drive mode) shows the premise.

use std::collections::BTreeSet;

use crate::util::{findings, is_stage, options, position, trace, violations};
use tep_check::CheckOptions;
use tep_check::invariants::InvariantId;
use tep_check::observation::thin;
use tep_model::graph::{NodeId, Outcome, Revision};
use tep_model::result::ContextOrigin;
use tep_model::trace::{GuardVerdictKind, ObservationLevel, TraceRecord};

fn full(id: &str) -> CheckOptions {
    options(id, ObservationLevel::Full)
}

fn stage_at(records: &mut [TraceRecord], at: usize) -> &mut tep_model::trace::Observation {
    match &mut records[at] {
        TraceRecord::Stage(o) => o,
        other => panic!("not a stage: {other:?}"),
    }
}

#[test]
fn listeners_entered_out_of_registration_order_are_named_in_drive_mode_only() {
    let id = "pre-listeners-run-in-order";
    let mut records = trace(id);
    let pre = position(&records, is_stage(NodeId::Pre, "c1"));
    let listeners = stage_at(&mut records, pre).listeners.as_mut().unwrap();
    assert_eq!(listeners, &["first", "second"]);
    // The last registered first: the third one vetoes with its deny, as reversed listeners do.
    *listeners = vec!["third".to_owned()];
    let found = findings(&full(id), &records);
    let named: Vec<_> = found
        .iter()
        .filter(|v| v.invariant == InvariantId::WaterfallRegistrationOrder)
        .collect();
    assert_eq!(named.len(), 1, "{found:#?}");
    assert!(
        named[0].message.contains(
            "entered the listeners [third], but they are registered as [first, second, third]"
        ),
        "{}",
        named[0].message
    );
    assert_eq!(named[0].lines, [pre + 1]);
    // Replay mode does not know the registration order: the rule cannot see its premise.
    let replay = CheckOptions::new(Revision::Rev2).observed(ObservationLevel::Full);
    assert!(!violations(&replay, &records).contains(&InvariantId::WaterfallRegistrationOrder));
    // A veto is no breach: the first listeners registered, in order, then none.
    let mut vetoed = trace(id);
    stage_at(&mut vetoed, pre).listeners = Some(vec!["first".to_owned()]);
    assert!(!violations(&full(id), &vetoed).contains(&InvariantId::WaterfallRegistrationOrder));
}

#[test]
fn post_listeners_are_held_to_their_registration_order_too() {
    let id = "post-waterfall-is-an-onion";
    let mut records = trace(id);
    let post = position(&records, |r| {
        matches!(r, TraceRecord::Stage(o) if o.node == NodeId::Post
            && o.listeners.as_ref().is_some_and(|l| l.len() >= 2))
    });
    let listeners = stage_at(&mut records, post).listeners.as_mut().unwrap();
    // One entered twice: no longer the first ones registered, in order.
    let first = listeners[0].clone();
    listeners.push(first);
    assert_eq!(
        violations(&full(id), &records),
        BTreeSet::from([InvariantId::WaterfallRegistrationOrder])
    );
}

#[test]
fn guards_skipped_after_allowed_once_are_named_not_a_generic_walk() {
    let id = "ask-allowed-once";
    let mut records = trace(id);
    let approval = position(&records, |r| {
        matches!(r, TraceRecord::Stage(o) if o.node == NodeId::Approval
            && o.outcome == Some(Outcome::AllowedOnce))
    });
    let call = records[approval].call().unwrap().clone();
    let guards = position(&records, is_stage(NodeId::Guards, call.as_str()));
    records.remove(guards);
    let found = findings(&full(id), &records);
    assert_eq!(
        found.iter().map(|v| v.invariant).collect::<Vec<_>>(),
        [InvariantId::AllowReachesGuards],
        "{found:#?}"
    );
    assert!(
        found[0]
            .message
            .contains("after an allow the guards run, and the call went on without them"),
        "{}",
        found[0].message
    );
    // At `events` the guards are not recorded: nothing can be said.
    let events = options(id, ObservationLevel::Events);
    assert!(
        !violations(&events, &thin(&records, ObservationLevel::Events))
            .contains(&InvariantId::AllowReachesGuards)
    );
}

#[test]
fn a_guard_throw_taken_for_a_deny_is_named() {
    let id = "guard-throws";
    let mut records = trace(id);
    let g = position(&records, is_stage(NodeId::Guards, "c1"));
    let guards = stage_at(&mut records, g);
    assert_eq!(guards.outcome, Some(Outcome::Throw));
    assert_eq!(
        guards.verdicts.as_ref().unwrap()[0].verdict,
        GuardVerdictKind::Throw
    );
    let planted = tep_check::mutation::plant(InvariantId::GuardThrowIsNormalized, &records)
        .expect("a guard throws here");
    let found = findings(&full(id), &planted);
    let named: Vec<_> = found
        .iter()
        .filter(|v| v.invariant == InvariantId::GuardThrowIsNormalized)
        .collect();
    assert_eq!(named.len(), 1, "{found:#?}");
    assert!(
        named[0]
            .message
            .contains("guard owner threw (\"guard database unreachable\")"),
        "{}",
        named[0].message
    );
    // A deny by a guard that denied is no throw.
    let denied = trace("approval-comes-before-guards");
    assert!(
        !violations(&full("approval-comes-before-guards"), &denied)
            .contains(&InvariantId::GuardThrowIsNormalized)
    );
}

#[test]
fn a_failure_that_lost_what_the_body_deferred_is_named() {
    let id = "deferred-context-survives-a-failing-body";
    let mut records = trace(id);
    let post = position(&records, is_stage(NodeId::Post, "c1"));
    let result = stage_at(&mut records, post).result_mut().unwrap();
    assert!(result.is_error);
    result
        .additional_contexts
        .retain(|c| c.origin != ContextOrigin::Tool);
    let found = findings(&full(id), &records);
    let named: Vec<_> = found
        .iter()
        .filter(|v| v.invariant == InvariantId::DeferredContextsSurviveAThrow)
        .collect();
    assert_eq!(named.len(), 1, "{found:#?}");
    assert!(
        named[0]
            .message
            .contains("(\"build log saved to /tmp/log\")"),
        "{}",
        named[0].message
    );
    // Replay mode does not know what the body deferred.
    let replay = CheckOptions::new(Revision::Rev2).observed(ObservationLevel::Full);
    assert!(!violations(&replay, &records).contains(&InvariantId::DeferredContextsSurviveAThrow));
}

#[test]
fn a_body_that_never_ran_deferred_nothing() {
    // The scripts defer a context in c1's body, but pre-execute denies the call: its body
    // never runs, and the denial post-execute is handed carries nothing of it.
    let id = "deferred-context-survives-a-failing-body";
    let mut records = trace(id);
    let body = position(&records, is_stage(NodeId::ToolBody, "c1"));
    let post = position(&records, is_stage(NodeId::Post, "c1"));
    stage_at(&mut records, post)
        .result_mut()
        .unwrap()
        .additional_contexts
        .clear();
    // Everything between pre-execute's allow and post-execute goes: the call is denied.
    let pre = position(&records, is_stage(NodeId::Pre, "c1"));
    stage_at(&mut records, pre).outcome = Some(Outcome::Deny);
    stage_at(&mut records, pre).reason = Some("no".to_owned());
    let denied = TraceRecord::Stage(Box::new(
        tep_model::trace::Observation::at(NodeId::Denied)
            .call(records[body].call().unwrap())
            .reason("no".to_owned()),
    ));
    records.drain(pre + 1..post);
    records.insert(pre + 1, denied);
    assert!(
        !violations(&full(id), &records).contains(&InvariantId::DeferredContextsSurviveAThrow),
        "{:#?}",
        findings(&full(id), &records)
    );
}

#[test]
fn a_sub_call_logged_as_a_models_call_is_named_at_every_level() {
    let id = "code-mode-sub-calls-re-enter-the-pipeline";
    let records = trace(id);
    let planted = tep_check::mutation::plant(InvariantId::SubCallLogsNoCallOrResult, &records)
        .expect("a sub-call is dispatched here");
    let at = position(&planted, |r| {
        matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == "tool/call")
            && r.call().is_some_and(|c| c.as_str() != "c1")
    });
    for level in ObservationLevel::ALL {
        let thinned = thin(&planted, level);
        let found = findings(&options(id, level), &thinned);
        let named: Vec<_> = found
            .iter()
            .filter(|v| v.invariant == InvariantId::SubCallLogsNoCallOrResult)
            .collect();
        assert_eq!(named.len(), 1, "{level}: {found:#?}");
        assert!(
            named[0].message.contains("logs a tool/call of its own"),
            "{}",
            named[0].message
        );
        if level == ObservationLevel::Full {
            assert_eq!(named[0].lines[0], at + 1);
            // Reported once, under its own name: nothing generic besides it.
            assert_eq!(found.len(), 1, "{found:#?}");
        }
    }
}
