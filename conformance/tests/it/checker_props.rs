//! Properties of the checker.
//!
//! - Random scenarios (random scripts for every extension point) run on the reference produce
//!   traces the checker accepts, in both revisions: no false alarms.
//! - Random mutations of such traces are rejected, with the invariant the mutation breaks:
//!   a context moved before a result, a body run after a deny, and structural damage (a record
//!   dropped, duplicated, or swapped with the next record of the same call), whose expected
//!   invariants are derived from the stage graph per kind of record.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::json;
use tep_check::invariants::InvariantId;
use tep_check::mutation::Structural;
use tep_check::observation::thin;
use tep_check::{CheckOptions, ScenarioFacts, check_records};
use tep_conformance::scenario::{
    AcceptSpec, ApprovalAnswer, ApprovalSpec, BlockSpec, BodyStep, CallExpectation, CallSpec,
    EditSpec, Expectation, FinalizeAction, GuardAction, Listener, ObserverSpec, PostAction,
    PreAction, Scenario, ThrowPhase, ToolSpec, WrapperSpec,
};
use tep_conformance::scripted::run_reference;
use tep_model::graph::{NodeId, Revision};
use tep_model::identity::CallId;
use tep_model::trace::{Capability, ObservationLevel, TraceRecord};

// ---------------------------------------------------------------------------------------------
// Random scenarios

fn pre_action(throws: bool) -> BoxedStrategy<PreAction> {
    let mut options = vec![
        (4, Just(PreAction::Pass).boxed()),
        (1, Just(PreAction::Allow).boxed()),
        (1, Just(PreAction::Deny("denied".into())).boxed()),
        (1, Just(PreAction::Ask(None)).boxed()),
        (
            1,
            Just(PreAction::Rewrite(json!({"rewritten": true}))).boxed(),
        ),
    ];
    if throws {
        options.push((1, Just(PreAction::Throw("pre threw".into())).boxed()));
    }
    proptest::strategy::Union::new_weighted(options).boxed()
}

fn guard_action(throws: bool) -> BoxedStrategy<GuardAction> {
    let mut options = vec![
        (5, Just(GuardAction::Abstain).boxed()),
        (1, Just(GuardAction::Deny("guard denied".into())).boxed()),
        (1, Just(GuardAction::Allow).boxed()),
    ];
    if throws {
        options.push((1, Just(GuardAction::Throw("guard threw".into())).boxed()));
    }
    proptest::strategy::Union::new_weighted(options).boxed()
}

fn post_action(throws: bool) -> BoxedStrategy<PostAction> {
    let mut options = vec![
        (4, Just(PostAction::Pass).boxed()),
        (
            1,
            Just(PostAction::AddContext("post context".into())).boxed(),
        ),
        (
            1,
            Just(PostAction::Accept(AcceptSpec {
                content: Some("replaced".into()),
                value: None,
                context: None,
            }))
            .boxed(),
        ),
        (
            1,
            Just(PostAction::Block(BlockSpec {
                feedback: "blocked".into(),
                context: Some("block context".into()),
            }))
            .boxed(),
        ),
    ];
    if throws {
        options.push((1, Just(PostAction::Throw("post threw".into())).boxed()));
    }
    proptest::strategy::Union::new_weighted(options).boxed()
}

fn body(throws: bool) -> BoxedStrategy<Vec<BodyStep>> {
    let step = prop_oneof![
        3 => (0u64..40).prop_map(BodyStep::Sleep),
        2 => Just(BodyStep::DeferContext("tool context".into())),
        1 => Just(BodyStep::Read("a.txt".into())),
        1 => Just(BodyStep::Edit(EditSpec { path: "a.txt".into(), old: "a".into(), new: "b".into() })),
        1 => Just(BodyStep::Todo(vec![])),
    ];
    let last = if throws {
        prop_oneof![
            3 => Just(BodyStep::Return(json!("done"))),
            1 => Just(BodyStep::Throw("body threw".into())),
            1 => Just(BodyStep::Hang),
            1 => (0u64..100).prop_map(BodyStep::SlowStop),
        ]
        .boxed()
    } else {
        prop_oneof![
            3 => Just(BodyStep::Return(json!("done"))),
            1 => Just(BodyStep::Hang),
            1 => (0u64..100).prop_map(BodyStep::SlowStop),
        ]
        .boxed()
    };
    (proptest::collection::vec(step, 0..3), last)
        .prop_map(|(mut steps, last)| {
            steps.push(last);
            steps
        })
        .boxed()
}

fn decide<A: Clone>(ids: &[String], actions: &[A]) -> BTreeMap<String, A> {
    ids.iter().cloned().zip(actions.iter().cloned()).collect()
}

/// A random scenario; throws only where the revision has throw edges.
fn scenario(revision: Revision) -> impl Strategy<Value = Scenario> {
    let throws = revision == Revision::Rev2;
    let calls = proptest::collection::vec((any::<bool>(), body(throws)), 1..5);
    (
        calls,
        proptest::collection::vec(proptest::collection::vec(pre_action(throws), 5), 0..3),
        proptest::option::of(proptest::collection::vec(
            prop_oneof![
                Just(ApprovalAnswer::AllowedOnce),
                Just(ApprovalAnswer::Rejected),
                Just(ApprovalAnswer::Cancelled)
            ],
            5,
        )),
        proptest::collection::vec(proptest::collection::vec(guard_action(throws), 5), 0..3),
        proptest::collection::vec(proptest::collection::vec(post_action(throws), 5), 0..3),
        (any::<bool>(), any::<bool>()),
        proptest::option::of(0u64..300),
        1usize..4,
    )
        .prop_map(
            move |(calls, pre, approval, guards, post, (retry, wrapper_throw), observer, cap)| {
                let ids: Vec<String> = (1..=calls.len()).map(|i| format!("c{i}")).collect();
                Scenario {
                    id: "random".into(),
                    description: String::new(),
                    spec: String::new(),
                    revisions: vec![revision],
                    requires: Capability::ALL.to_vec(),
                    exercises: vec![InvariantId::StageGraphWalk],
                    tools: tools(&calls, throws),
                    calls: call_specs(&calls, &ids),
                    pre: listeners("pre", &pre, &ids),
                    approval: approval.map(|answers| ApprovalSpec {
                        answers: decide(&ids, &answers),
                    }),
                    guards: listeners("guard", &guards, &ids),
                    wrappers: wrappers(retry, wrapper_throw && throws),
                    post: listeners("post", &post, &ids),
                    observers: observer
                        .map(|ms| {
                            vec![ObserverSpec {
                                id: "observer".into(),
                                async_ms: ms,
                                mutate: (ms % 2 == 0).then(|| "meddled".to_owned()),
                            }]
                        })
                        .unwrap_or_default(),
                    files: [("a.txt".to_owned(), "a file".to_owned())]
                        .into_iter()
                        .collect(),
                    max_parallel: Some(cap),
                    expect: Expectation {
                        calls: ids
                            .iter()
                            .map(|id| (id.clone(), CallExpectation::default()))
                            .collect(),
                        contexts: vec![],
                        undetermined: Default::default(),
                    },
                }
            },
        )
}

/// One tool per call (`t1`, `t2`, …), safe as drawn; the first finalizes with a prefix where
/// finalize may throw, the second keeps its content.
fn tools(calls: &[(bool, Vec<BodyStep>)], throws: bool) -> Vec<ToolSpec> {
    calls
        .iter()
        .enumerate()
        .map(|(i, (safe, _))| ToolSpec {
            name: format!("t{}", i + 1),
            concurrency_safe: *safe,
            timeout_ms: Some(60),
            finalize: match i {
                0 if throws => Some(FinalizeAction::Prefix("> ".into())),
                1 => Some(FinalizeAction::Keep),
                _ => None,
            },
        })
        .collect()
}

fn call_specs(calls: &[(bool, Vec<BodyStep>)], ids: &[String]) -> Vec<CallSpec> {
    calls
        .iter()
        .enumerate()
        .map(|(i, (_, body))| CallSpec {
            call_id: CallId::from(ids[i].as_str()),
            tool: format!("t{}", i + 1),
            arguments: json!({"i": i}),
            body: body.clone(),
            program: None,
        })
        .collect()
}

/// Listeners `{prefix}0`, `{prefix}1`, …, each deciding per call as drawn.
fn listeners<A: Clone>(prefix: &str, actions: &[Vec<A>], ids: &[String]) -> Vec<Listener<A>> {
    actions
        .iter()
        .enumerate()
        .map(|(k, a)| Listener {
            id: format!("{prefix}{k}"),
            decide: decide(ids, a),
        })
        .collect()
}

/// Every tool declares a timeout and the wrapper applies it, so a hanging body ends. Then a
/// retry if drawn, a wrapper that adds a context, and one that throws after `c1` if drawn.
fn wrappers(retry: bool, throw: bool) -> Vec<WrapperSpec> {
    let mut wrappers = vec![WrapperSpec::Timeout];
    if retry {
        wrappers.push(WrapperSpec::Retry {
            attempts: 2,
            delay_ms: 1,
        });
    }
    wrappers.push(WrapperSpec::Context {
        text: "wrapper context".into(),
        calls: vec![],
    });
    if throw {
        wrappers.push(WrapperSpec::Throw {
            message: "wrapper threw".into(),
            phase: ThrowPhase::After,
            calls: vec![CallId::from("c1")],
        });
    }
    wrappers
}

fn trace_of(scenario: &Scenario, revision: Revision) -> Vec<TraceRecord> {
    run_reference(scenario, revision, &[]).unwrap()
}

/// The invariants a trace of `scenario` breaks, checked as drive mode checks it (with what the
/// scenario says about finalizers and the approval prompt).
fn violations(
    revision: Revision,
    scenario: &Scenario,
    records: &[TraceRecord],
) -> Result<BTreeSet<InvariantId>, String> {
    violations_at(ObservationLevel::Full, revision, scenario, records)
}

/// The same, for a trace observed at `level`.
fn violations_at(
    level: ObservationLevel,
    revision: Revision,
    scenario: &Scenario,
    records: &[TraceRecord],
) -> Result<BTreeSet<InvariantId>, String> {
    let options = CheckOptions::new(revision)
        .observed(level)
        .with_facts(ScenarioFacts::from(scenario));
    check_records(&options, records)
        .map(|r| r.invariants())
        .map_err(|e| e.to_string())
}

fn level() -> impl Strategy<Value = ObservationLevel> {
    prop_oneof![
        Just(ObservationLevel::Events),
        Just(ObservationLevel::Hooks),
        Just(ObservationLevel::Full)
    ]
}

/// Moves each record with a window (a `denied`, a `normalized`, a Code Mode dispatch log, a UI
/// card) to a position `picks` chooses inside its window: where another implementation could
/// have recorded it.
fn jiggle(mut records: Vec<TraceRecord>, picks: &[prop::sample::Index]) -> Vec<TraceRecord> {
    let mut picks = picks.iter().cycle();
    let of_call = |records: &[TraceRecord], i: usize, pred: &dyn Fn(&TraceRecord) -> bool| {
        let call = records[i].call().cloned();
        (0..records.len()).find(|&j| records[j].call() == call.as_ref() && pred(&records[j]))
    };
    let movable = |r: &TraceRecord| {
        matches!(
            r.node(),
            Some(NodeId::Denied | NodeId::Normalized | NodeId::Dispatched | NodeId::PresentCall)
        )
    };
    let count = records.iter().filter(|r| movable(r)).count();
    for k in 0..count {
        let Some(i) = (0..records.len()).filter(|&i| movable(&records[i])).nth(k) else {
            break;
        };
        let Some(pick) = picks.next() else { break };
        let node = records[i].node();
        let stage_is = |n: NodeId| move |r: &TraceRecord| r.node() == Some(n);
        // The window: after the record it follows from, before the one it must precede.
        let (after, before) = match node {
            Some(NodeId::Denied) => (
                (0..i).rev().find(|&j| {
                    records[j].call() == records[i].call()
                        && matches!(&records[j], TraceRecord::Stage(o) if matches!(o.node, NodeId::Pre | NodeId::Approval | NodeId::Guards))
                }),
                of_call(&records, i, &stage_is(NodeId::Post)),
            ),
            Some(NodeId::Normalized) => (
                (0..i).rev().find(|&j| {
                    records[j].call() == records[i].call()
                        && matches!(&records[j], TraceRecord::Stage(o) if o.outcome == Some(tep_model::graph::Outcome::Throw) || o.node == NodeId::Post)
                }),
                (i + 1..records.len()).find(|&j| {
                    records[j].call() == records[i].call()
                        && matches!(records[j].node(), Some(NodeId::Finalize | NodeId::Final))
                }),
            ),
            Some(NodeId::Dispatched) => {
                let parent = records[i].call().and_then(|c| {
                    c.as_str().rsplit_once(":code:").map(|(p, _)| p.to_owned())
                });
                (
                    of_call(&records, i, &stage_is(NodeId::Final)),
                    parent.and_then(|p| {
                        (i + 1..records.len()).find(|&j| {
                            records[j].call().map(|c| c.as_str()) == Some(p.as_str())
                                && records[j].node() == Some(NodeId::Around)
                        })
                    }),
                )
            }
            Some(NodeId::PresentCall) => (
                of_call(&records, i, &stage_is(NodeId::ToolCall)),
                of_call(&records, i, &stage_is(NodeId::ToolResult)),
            ),
            _ => (None, None),
        };
        let (Some(after), Some(before)) = (after, before) else {
            continue;
        };
        if before <= after + 1 {
            continue;
        }
        let record = records.remove(i);
        let before = if before > i { before - 1 } else { before };
        let after = if after > i { after - 1 } else { after };
        // A position strictly between `after` and `before`.
        let to = after + 1 + pick.index(before - after);
        records.insert(to.min(before), record);
    }
    records
}

// ---------------------------------------------------------------------------------------------
// What each structural mutation must be reported as

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Node(NodeId),
    Audit(&'static str),
    Other,
}

fn kind(r: &TraceRecord) -> Kind {
    match r {
        TraceRecord::Event(e) if e.event.body.node().is_none() => {
            Kind::Audit(e.event.body.type_name())
        }
        _ => r.node().map_or(Kind::Other, Kind::Node),
    }
}

/// Dropping a record of this kind must be reported as one of these.
fn after_drop(k: Kind) -> Option<Vec<InvariantId>> {
    use InvariantId as I;
    use NodeId as N;
    Some(match k {
        Kind::Node(N::ToolCall) => vec![I::ToolCallFirst],
        Kind::Node(N::PresentCall | N::PresentResult) => vec![I::UiPresentsEachCall],
        Kind::Node(N::Pre) => vec![
            I::GuardsOnlyAfterAllow,
            I::ApprovalOnlyAfterAsk,
            I::StageGraphWalk,
        ],
        // Guards dropped after an allow: what goes on without them is named.
        Kind::Node(N::Guards) => vec![
            I::AllowReachesGuards,
            I::StageGraphWalk,
            I::BodyInsideExecute,
            I::DenialReachesPost,
            I::FsGateInsideBody,
        ],
        Kind::Node(N::Denied | N::Post) => {
            vec![
                I::StageGraphWalk,
                I::BodyInsideExecute,
                I::DenialReachesPost,
                I::FsGateInsideBody,
            ]
        }
        Kind::Node(N::Approval) => vec![I::GuardsOnlyAfterAllow, I::StageGraphWalk],
        Kind::Node(N::Around | N::ToolBody | N::FsGate) => {
            vec![
                I::StageGraphWalk,
                I::BodyInsideExecute,
                I::FsGateInsideBody,
                I::OwnedEventsInsideBody,
            ]
        }
        Kind::Node(N::Normalized) => vec![I::ThrowIsNormalized],
        Kind::Node(N::Finalize) => vec![I::FinalizeOnce],
        Kind::Node(N::Final) => vec![I::NotificationBeforeResult],
        Kind::Node(N::ToolResult) => vec![I::StageGraphWalk, I::BatchSettles],
        Kind::Node(N::AllResults) => vec![I::ContextsAfterAllResults, I::BatchSettles],
        Kind::Node(N::Context) => vec![I::ContextsFifo],
        Kind::Audit(_) => vec![I::ApprovalAudited],
        Kind::Node(N::DispatchStart) => vec![I::SubCallStartLogged],
        Kind::Node(N::Dispatched) => vec![I::SubCallLogsDispatch],
        Kind::Node(N::RunCode) => vec![I::BindingSettles],
        // Tool-owned events and marks may be dropped unnoticed; the batch head is a format error.
        Kind::Node(N::Owned | N::Model) | Kind::Other => return None,
    })
}

/// Repeating a record of this kind must be reported as one of these.
fn after_duplicate(k: Kind) -> Option<Vec<InvariantId>> {
    use InvariantId as I;
    use NodeId as N;
    let mut ids = match k {
        Kind::Node(N::ToolCall) => vec![I::ToolCallOnce],
        Kind::Node(N::PresentCall | N::PresentResult) => vec![I::UiPresentsEachCall],
        Kind::Node(N::Pre) => vec![I::PreExecuteOnce],
        Kind::Node(N::Guards) => vec![I::GuardsOnlyAfterAllow],
        // The prompt asked twice for one ask.
        Kind::Node(N::Approval) => vec![I::ApprovalOnce],
        Kind::Node(N::Denied) => vec![I::DenialReachesPost],
        // Consecutive `around` records are one visit: a repeated one is legal.
        Kind::Node(N::Around) => return None,
        Kind::Node(N::Post | N::Normalized) => {
            vec![I::StageGraphWalk, I::ThrowSkipsPost, I::ThrowIsNormalized]
        }
        Kind::Node(N::ToolBody) => vec![I::BodyInsideExecute],
        Kind::Node(N::FsGate) => vec![I::FsGateInsideBody],
        Kind::Node(N::Finalize) => vec![I::FinalizeOnce],
        Kind::Node(N::Final | N::ToolResult) => vec![I::OneResultPerCall],
        Kind::Node(N::AllResults) => vec![I::BatchSettles],
        Kind::Node(N::Context) => vec![I::ContextsFifo],
        Kind::Audit(_) => vec![I::ApprovalOnlyAfterAsk, I::ApprovalAudited],
        Kind::Node(N::DispatchStart | N::Dispatched | N::RunCode) => {
            vec![I::StageGraphWalk, I::NoStageAfterResult]
        }
        // A repeated owned event is a legal side branch, but its seq repeats.
        Kind::Node(N::Owned) => vec![],
        Kind::Node(N::Model) | Kind::Other => return None,
    };
    // Every repeated session event repeats its seq.
    if matches!(
        k,
        Kind::Node(N::ToolCall | N::ToolResult | N::Owned | N::Context) | Kind::Audit(_)
    ) {
        ids.push(I::SessionSeqIncreasing);
    }
    Some(ids)
}

/// The kinds of the call's records just before and just after record `i` (skipping other
/// calls' records).
fn neighbours(trace: &[TraceRecord], i: usize) -> [Option<Kind>; 2] {
    let call = trace[i].call();
    let same = |j: &usize| trace[*j].call() == call;
    [
        (0..i).rev().find(same).map(|j| kind(&trace[j])),
        (i + 1..trace.len()).find(same).map(|j| kind(&trace[j])),
    ]
}

/// Whether the call's record before or after record `i` is an `around`.
fn next_to_an_around(trace: &[TraceRecord], i: usize) -> bool {
    neighbours(trace, i).contains(&Some(Kind::Node(NodeId::Around)))
}

/// Whether the call's records on both sides of record `i` are `around`s.
fn between_arounds(trace: &[TraceRecord], i: usize) -> bool {
    neighbours(trace, i) == [Some(Kind::Node(NodeId::Around)); 2]
}

fn check_structural(
    revision: Revision,
    scenario: &Scenario,
    trace: &[TraceRecord],
    mutation: Structural,
    expected: &[InvariantId],
) -> Result<(), TestCaseError> {
    let mutated = mutation.apply(trace);
    let found = violations(revision, scenario, &mutated)
        .map_err(|e| TestCaseError::fail(format!("{mutation:?}: {e}")))?;
    prop_assert!(
        found.iter().any(|id| expected.contains(id)),
        "{:?} on {:?} was reported as {:?}, expected one of {:?}",
        mutation,
        revision,
        found,
        expected
    );
    Ok(())
}

fn revision() -> impl Strategy<Value = Revision> {
    prop_oneof![Just(Revision::Rev1), Just(Revision::Rev2)]
}

proptest! {
    // Some properties need a denial or a context in the random trace; at high case counts
    // (PROPTEST_CASES) more draws are discarded than the default allows.
    #![proptest_config(ProptestConfig {
        max_global_rejects: 1 << 20,
        ..ProptestConfig::default()
    })]

    #[test]
    fn reference_traces_of_random_scenarios_are_accepted(
        (rev, s) in revision().prop_flat_map(|r| (Just(r), scenario(r)))
    ) {
        let trace = trace_of(&s, rev);
        let found = violations(rev, &s, &trace).map_err(TestCaseError::fail)?;
        prop_assert!(found.is_empty(), "{:?}: {:?}", rev, found);
    }

    #[test]
    fn thinned_traces_with_records_anywhere_in_their_windows_are_accepted(
        (rev, s) in revision().prop_flat_map(|r| (Just(r), scenario(r))),
        level in level(),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..8),
    ) {
        let trace = jiggle(thin(&trace_of(&s, rev), level), &picks);
        let found = violations_at(level, rev, &s, &trace).map_err(TestCaseError::fail)?;
        prop_assert!(found.is_empty(), "{:?} at {:?}: {:?}", rev, level, found);
    }

    #[test]
    fn a_context_moved_before_a_result_is_caught_at_every_level(
        (rev, s) in revision().prop_flat_map(|r| (Just(r), scenario(r))),
        level in level(),
        pick in any::<prop::sample::Index>(),
    ) {
        let trace = thin(&trace_of(&s, rev), level);
        let contexts: Vec<usize> = (0..trace.len()).filter(|&i| trace[i].node() == Some(NodeId::Context)).collect();
        let results: Vec<usize> = (0..trace.len()).filter(|&i| trace[i].node() == Some(NodeId::ToolResult)).collect();
        prop_assume!(!contexts.is_empty() && !results.is_empty());
        let mut mutated = trace.clone();
        let context = mutated.remove(*pick.get(&contexts));
        mutated.insert(*pick.get(&results), context);
        let found = violations_at(level, rev, &s, &mutated).map_err(TestCaseError::fail)?;
        prop_assert!(found.contains(&InvariantId::ContextsAfterAllResults), "{:?}", found);
    }

    #[test]
    fn a_body_run_after_a_deny_is_caught_where_checkable(
        (rev, s) in revision().prop_flat_map(|r| (Just(r), scenario(r))),
        level in prop_oneof![Just(ObservationLevel::Hooks), Just(ObservationLevel::Full)],
        pick in any::<prop::sample::Index>(),
    ) {
        let trace = thin(&trace_of(&s, rev), level);
        // The decisions that deny (`denied` itself is only recorded at full).
        let denials: Vec<usize> = (0..trace.len())
            .filter(|&i| matches!(&trace[i], TraceRecord::Stage(o) if matches!(
                (o.node, o.outcome),
                (NodeId::Pre | NodeId::Guards, Some(tep_model::graph::Outcome::Deny))
                    | (NodeId::Approval, Some(tep_model::graph::Outcome::Rejected | tep_model::graph::Outcome::Cancelled | tep_model::graph::Outcome::Unavailable))
            )))
            .collect();
        prop_assume!(!denials.is_empty());
        let at = *pick.get(&denials);
        let call = trace[at].call().cloned().unwrap();
        let mut mutated = trace.clone();
        mutated.insert(at + 1, TraceRecord::Stage(Box::new(tep_model::trace::Observation::at(NodeId::ToolBody).call(&call))));
        let found = violations_at(level, rev, &s, &mutated).map_err(TestCaseError::fail)?;
        prop_assert!(found.contains(&InvariantId::DenySkipsBody), "{:?}", found);
    }

    #[test]
    fn a_dropped_record_is_caught(
        (rev, s) in revision().prop_flat_map(|r| (Just(r), scenario(r))),
        pick in any::<prop::sample::Index>(),
    ) {
        let trace = trace_of(&s, rev);
        let i = pick.index(trace.len());
        let expected = after_drop(kind(&trace[i]));
        prop_assume!(expected.is_some());
        // One of several consecutive `around` records of a call (one visit) may go; a body
        // dropped from between two leaves a waterfall that did not dispatch, which is legal
        // (drive mode's expectations count the body runs).
        prop_assume!(!(kind(&trace[i]) == Kind::Node(NodeId::Around) && next_to_an_around(&trace, i)));
        prop_assume!(!(kind(&trace[i]) == Kind::Node(NodeId::ToolBody) && between_arounds(&trace, i)));
        check_structural(rev, &s, &trace, Structural::Drop(i), &expected.unwrap_or_default())?;
    }

    #[test]
    fn a_duplicated_record_is_caught(
        (rev, s) in revision().prop_flat_map(|r| (Just(r), scenario(r))),
        pick in any::<prop::sample::Index>(),
    ) {
        let trace = trace_of(&s, rev);
        let i = pick.index(trace.len());
        let expected = after_duplicate(kind(&trace[i]));
        prop_assume!(expected.is_some());
        check_structural(rev, &s, &trace, Structural::Duplicate(i), &expected.unwrap_or_default())?;
    }

    #[test]
    fn two_records_of_one_call_swapped_are_caught(
        (rev, s) in revision().prop_flat_map(|r| (Just(r), scenario(r))),
        pick in any::<prop::sample::Index>(),
    ) {
        let trace = trace_of(&s, rev);
        // Adjacent records of the same call, both visits of stage nodes (the order of two
        // side branches, such as two owned events, is free).
        let candidates: Vec<usize> = (0..trace.len().saturating_sub(1))
            .filter(|&i| {
                let (a, b) = (&trace[i], &trace[i + 1]);
                a.call().is_some() && a.call() == b.call()
                    && !matches!((kind(a), kind(b)), (Kind::Node(NodeId::Owned), Kind::Node(NodeId::Owned)))
                    && !matches!((kind(a), kind(b)), (Kind::Node(NodeId::Context), Kind::Node(NodeId::Context)))
                    // UI cards are side branches, shown any time after their stage.
                    && ![kind(a), kind(b)].iter().any(|k| matches!(k, Kind::Node(NodeId::PresentCall | NodeId::PresentResult)))
                    && kind(a) != Kind::Other && kind(b) != Kind::Other
                    // The decision may be audited just before or just after the approval record.
                    && !matches!((kind(a), kind(b)), (Kind::Audit("approval/decided"), Kind::Node(NodeId::Approval)))
                    // An `around` swapped past another `around` of one visit changes nothing.
                    && !((kind(a) == Kind::Node(NodeId::Around) && next_to_an_around(&trace, i))
                        || (kind(b) == Kind::Node(NodeId::Around) && next_to_an_around(&trace, i + 1)))
            })
            .collect();
        prop_assume!(!candidates.is_empty());
        let i = *pick.get(&candidates);
        let mutated = Structural::SwapWithNext(i).apply(&trace);
        let found = violations(rev, &s, &mutated).map_err(TestCaseError::fail)?;
        prop_assert!(!found.is_empty(), "swapping {:?} and {:?} went unnoticed", kind(&trace[i]), kind(&trace[i + 1]));
    }
}
