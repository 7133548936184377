//! Generative conformance: random scenarios driven through any implementation, judged by the
//! invariants, each failure shrunk to a small scenario.
//!
//! A fixed corpus finds the bugs its authors thought of; random scenarios find the others (Jepsen's
//! lesson). [`strategy`] generates scenarios from the scenario language (batches, listeners,
//! approval answers, guards, wrappers, bodies, post-execute decisions, finalizers, observers,
//! Code Mode programs), weighted toward the mixes where pipelines go wrong (parallel pools with
//! exclusive calls, throws at every stage, contexts from several origins), using only the
//! capabilities the implementation declares. [`fuzz`] runs them, drawing again (from the same
//! case's RNG) while a scenario uses a construct newer than the implementation's protocol; a failing scenario is shrunk with proptest's value
//! trees (fewer calls, fewer listeners, simpler steps) while the same invariant still fails.
//!
//! The invariants judge every trace, and so does the built-in reference (the differential
//! oracle, [`crate::oracle`]): each scenario runs on it first, in process, and its outcome, where
//! the spec determines it, is the scenario's expected outcome. `--oracle none` leaves the
//! invariants alone. The printed minimal scenario carries those expectations, so it can join a
//! corpus as it is and `tep run --scenario-file` replays the same verdict.
//!
//! Runs are reproducible: case `n` of seed `s` is generated from its own RNG, seeded from `s`
//! and `n` alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;
use tep_reference::graph::Revision;
use tep_reference::identity::CallId;
use tep_reference::session::{Todo, TodoStatus};
use tep_reference::trace::{Capability, TraceRecord};

use crate::expectations::{self, Source};
use crate::runner::{Answer, Implementation};
use crate::scenario::versions::versions;
use crate::scenario::{
    AcceptSpec, ApprovalAnswer, ApprovalSpec, BindingCall, BlockSpec, BodyStep, CallExpectation,
    CallSpec, EditSpec, Expectation, FinalizeAction, GuardAction, HookSpec, Listener, ObserverSpec,
    OnReject, PostAction, PreAction, ProgramStep, Scenario, ThrowPhase, ToolSpec, WrapperSpec,
    WriteSpec,
};
use crate::{fuzz_stats, oracle};
use tep_check::checker::{CheckOptions, Checker, ScenarioFacts, TraceError, Violation};
use tep_check::invariants::{InvariantId, Level};

/// What the generated scenarios may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub revision: Revision,
    pub capabilities: BTreeSet<Capability>,
}

impl Profile {
    fn has(&self, c: Capability) -> bool {
        self.capabilities.contains(&c)
    }

    /// rev1's flowchart has no throw edges: its scenarios throw nowhere.
    fn throws(&self) -> bool {
        self.revision >= Revision::Rev2
    }
}

/// The calls of a generated batch are `c1`..`c4`; their tools `t1`..`t4`.
const MAX_CALLS: usize = 4;

fn weighted<T: Clone + std::fmt::Debug + 'static>(
    options: Vec<(u32, BoxedStrategy<T>)>,
) -> BoxedStrategy<T> {
    proptest::strategy::Union::new_weighted(options).boxed()
}

fn pre_action(p: &Profile) -> BoxedStrategy<PreAction> {
    let mut options = vec![
        (8, Just(PreAction::Pass).boxed()),
        (2, Just(PreAction::Allow).boxed()),
        (2, Just(PreAction::Deny("denied by policy".into())).boxed()),
        (
            1,
            Just(PreAction::Rewrite(json!({"rewritten": true}))).boxed(),
        ),
    ];
    options.push((
        3,
        Just(PreAction::Ask(Some("needs a human".into()))).boxed(),
    ));
    options.push((1, Just(PreAction::Ask(None)).boxed()));
    if p.throws() {
        options.push((
            1,
            Just(PreAction::Throw("pre-execute crashed".into())).boxed(),
        ));
    }
    weighted(options)
}

fn approval_answer(p: &Profile) -> BoxedStrategy<ApprovalAnswer> {
    let mut options = vec![
        (3, Just(ApprovalAnswer::AllowedOnce).boxed()),
        (1, Just(ApprovalAnswer::Rejected).boxed()),
        (1, Just(ApprovalAnswer::Cancelled).boxed()),
        (1, Just(ApprovalAnswer::Unavailable).boxed()),
    ];
    if p.throws() {
        options.push((
            1,
            Just(ApprovalAnswer::Throw("the prompt crashed".into())).boxed(),
        ));
    }
    weighted(options)
}

fn guard_action(p: &Profile) -> BoxedStrategy<GuardAction> {
    let mut options = vec![
        (6, Just(GuardAction::Abstain).boxed()),
        (
            2,
            Just(GuardAction::Deny("the owner forbids it".into())).boxed(),
        ),
        (1, Just(GuardAction::Allow).boxed()),
    ];
    if p.throws() {
        options.push((
            1,
            Just(GuardAction::Throw("the guard crashed".into())).boxed(),
        ));
    }
    weighted(options)
}

fn post_action(p: &Profile) -> BoxedStrategy<PostAction> {
    let mut options = vec![
        (8, Just(PostAction::Pass).boxed()),
        (
            2,
            Just(PostAction::AddContext("post context".into())).boxed(),
        ),
        (
            1,
            Just(PostAction::Accept(AcceptSpec {
                content: Some("replaced".into()),
                value: None,
                context: Some("accept context".into()),
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
    if p.throws() {
        options.push((
            1,
            Just(PostAction::Throw("post-execute crashed".into())).boxed(),
        ));
        // Replacing a failed result's value makes the pipeline throw applying the decision.
        options.push((
            1,
            Just(PostAction::Accept(AcceptSpec {
                content: None,
                value: Some(json!({"n": 1})),
                context: None,
            }))
            .boxed(),
        ));
    }
    weighted(options)
}

fn finalize(p: &Profile) -> BoxedStrategy<Option<FinalizeAction>> {
    let mut options = vec![
        (4, Just(None).boxed()),
        (2, Just(Some(FinalizeAction::Keep)).boxed()),
        (
            1,
            Just(Some(FinalizeAction::Prefix("[final] ".into()))).boxed(),
        ),
        (
            1,
            Just(Some(FinalizeAction::Replace("finalized".into()))).boxed(),
        ),
    ];
    if p.throws() {
        options.push((
            1,
            Just(Some(FinalizeAction::Throw("finalizer broke".into()))).boxed(),
        ));
    }
    weighted(options)
}

/// A body: a few steps, then how it ends. Every tool declares a timeout and the first wrapper
/// applies it, so a body that waits for its cancellation ends.
fn body(p: &Profile) -> BoxedStrategy<Vec<BodyStep>> {
    let mut steps = vec![
        (3, (0u64..30).prop_map(BodyStep::Sleep).boxed()),
        (
            2,
            Just(BodyStep::DeferContext("tool context".into())).boxed(),
        ),
        (1, (1u32..3).prop_map(BodyStep::FailUntilAttempt).boxed()),
    ];
    if p.has(Capability::FsGate) {
        steps.push((2, Just(BodyStep::Read("a.txt".into())).boxed()));
        steps.push((
            2,
            Just(BodyStep::Edit(EditSpec {
                path: "a.txt".into(),
                old: "a".into(),
                new: "b".into(),
            }))
            .boxed(),
        ));
        steps.push((
            1,
            Just(BodyStep::Write(WriteSpec {
                path: "b.txt".into(),
                content: "new".into(),
            }))
            .boxed(),
        ));
        // A write, then an edit of the file written (in one body or across calls).
        steps.push((
            1,
            Just(BodyStep::Write(WriteSpec {
                path: "a.txt".into(),
                content: "a rewritten file".into(),
            }))
            .boxed(),
        ));
        steps.push((
            1,
            Just(BodyStep::Edit(EditSpec {
                path: "b.txt".into(),
                old: "new".into(),
                new: "newer".into(),
            }))
            .boxed(),
        ));
        steps.push((
            1,
            Just(BodyStep::ExternalWrite(WriteSpec {
                path: "a.txt".into(),
                content: "changed".into(),
            }))
            .boxed(),
        ));
    }
    if p.has(Capability::OwnedEvents) {
        steps.push((
            1,
            Just(BodyStep::Todo(vec![
                Todo {
                    content: "ship".into(),
                    status: TodoStatus::InProgress,
                },
                Todo {
                    content: "review".into(),
                    status: TodoStatus::Pending,
                },
            ]))
            .boxed(),
        ));
        steps.push((
            1,
            Just(BodyStep::Hook(HookSpec {
                point: "PostToolUse".into(),
                handler_id: "h1".into(),
                decision: "pass".into(),
            }))
            .boxed(),
        ));
    }
    let last = weighted(vec![
        (6, Just(BodyStep::Return(json!("done"))).boxed()),
        (1, Just(BodyStep::Return(json!({"n": 2}))).boxed()),
        (2, Just(BodyStep::Throw("the body failed".into())).boxed()),
        (1, Just(BodyStep::Hang).boxed()),
        (1, (10u64..60).prop_map(BodyStep::SlowStop).boxed()),
    ]);
    (proptest::collection::vec(weighted(steps), 0..3), last)
        .prop_map(|(mut steps, last)| {
            steps.push(last);
            steps
        })
        .boxed()
}

fn wrappers(p: &Profile) -> BoxedStrategy<Vec<WrapperSpec>> {
    let throws = p.throws();
    (
        proptest::option::weighted(0.3, (1u32..4, 0u64..5)),
        any::<bool>(),
        proptest::option::weighted(0.4, Just("wrapper context".to_owned())),
        if throws {
            proptest::option::weighted(
                0.2,
                (
                    any::<bool>(),
                    proptest::sample::subsequence((1..=MAX_CALLS).collect::<Vec<_>>(), 0..=2),
                ),
            )
            .boxed()
        } else {
            Just(None).boxed()
        },
    )
        .prop_map(|(retry, metrics, context, throw)| {
            // Every generated batch has the timeout: a hanging body always ends.
            let mut out = vec![WrapperSpec::Timeout];
            if let Some((attempts, delay_ms)) = retry {
                out.push(WrapperSpec::Retry { attempts, delay_ms });
            }
            if metrics {
                out.push(WrapperSpec::Metrics);
            }
            if let Some(text) = context {
                out.push(WrapperSpec::Context {
                    text,
                    calls: vec![],
                });
            }
            if let Some((before, calls)) = throw {
                out.push(WrapperSpec::Throw {
                    message: "the wrapper crashed".into(),
                    phase: if before {
                        ThrowPhase::Before
                    } else {
                        ThrowPhase::After
                    },
                    calls: calls
                        .into_iter()
                        .map(|k| CallId::from(format!("c{k}").as_str()))
                        .collect(),
                });
            }
            out
        })
        // Every order of the declared wrappers but one: the retry is innermost. What a second
        // `next()` runs is the implementation's (the original harness's waterfall reaches the
        // dispatch directly; the reference runs the inner wrappers again), so no wrapper sits
        // inside a retry, and a timeout always wraps it (a hanging body always ends).
        .prop_flat_map(|out| Just(out).prop_shuffle())
        .prop_map(|mut out| {
            if let Some(k) = out
                .iter()
                .position(|w| matches!(w, WrapperSpec::Retry { .. }))
            {
                let retry = out.remove(k);
                out.push(retry);
            }
            out
        })
        .boxed()
}

fn binding(p: &Profile) -> BoxedStrategy<BindingCall> {
    (1..=MAX_CALLS, body(p), any::<bool>())
        .prop_map(|(k, body, fail)| BindingCall {
            tool: format!("t{k}"),
            arguments: json!({"k": k}),
            body,
            on_reject: if fail {
                OnReject::Fail
            } else {
                OnReject::Continue
            },
        })
        .boxed()
}

fn program(p: &Profile) -> BoxedStrategy<Vec<ProgramStep>> {
    let step = weighted(vec![
        (4, binding(p).prop_map(ProgramStep::Call).boxed()),
        (
            2,
            proptest::collection::vec(binding(p), 2..4)
                .prop_map(ProgramStep::All)
                .boxed(),
        ),
        (1, Just(ProgramStep::Log("step".into())).boxed()),
        (1, Just(ProgramStep::CallRunCode).boxed()),
    ]);
    let end = if p.throws() {
        weighted(vec![
            (4, Just(ProgramStep::Return(json!("done"))).boxed()),
            (
                1,
                Just(ProgramStep::Throw("the program failed".into())).boxed(),
            ),
        ])
    } else {
        Just(ProgramStep::Return(json!("done"))).boxed()
    };
    (proptest::collection::vec(step, 1..4), end)
        .prop_map(|(mut steps, end)| {
            steps.push(end);
            steps
        })
        .boxed()
}

/// What one call of the batch is.
#[derive(Debug, Clone)]
enum CallKind {
    /// A call of its own tool, with this body.
    Tool(Vec<BodyStep>),
    /// A call to a tool no definition has.
    Unknown,
    /// A `run_code` call with this program.
    RunCode(Vec<ProgramStep>),
}

fn call_kind(p: &Profile) -> BoxedStrategy<CallKind> {
    let mut options = vec![
        (8, body(p).prop_map(CallKind::Tool).boxed()),
        (1, Just(CallKind::Unknown).boxed()),
    ];
    if p.has(Capability::CodeMode) {
        options.push((2, program(p).prop_map(CallKind::RunCode).boxed()));
    }
    weighted(options)
}

/// How many of a batch's sub-calls a listener may decide for by id.
const DECIDED_SUB_CALLS: usize = 3;

/// One listener's (or the prompt's) decisions: per call of the batch (an entry may be left out),
/// for `"*"` (every call without its own entry), and for the first sub-calls of the batch's
/// Code Mode programs.
#[derive(Debug, Clone)]
struct Decisions<A> {
    calls: Vec<Option<A>>,
    star: Option<A>,
    subs: Vec<Option<A>>,
}

fn per_call<A: Clone + std::fmt::Debug + 'static>(
    action: BoxedStrategy<A>,
) -> BoxedStrategy<Decisions<A>> {
    (
        proptest::collection::vec(proptest::option::weighted(0.85, action.clone()), MAX_CALLS),
        proptest::option::weighted(0.2, action.clone()),
        proptest::collection::vec(proptest::option::weighted(0.4, action), DECIDED_SUB_CALLS),
    )
        .prop_map(|(calls, star, subs)| Decisions { calls, star, subs })
        .boxed()
}

/// The `decide` (or `answers`) map of `d` for a batch of `calls` calls with these sub-calls.
fn decide<A: Clone>(calls: usize, d: &Decisions<A>, sub_calls: &[CallId]) -> BTreeMap<String, A> {
    let mut out: BTreeMap<String, A> = (1..=calls)
        .zip(&d.calls)
        .filter_map(|(k, a)| a.clone().map(|a| (format!("c{k}"), a)))
        .collect();
    if let Some(a) = &d.star {
        out.insert("*".to_owned(), a.clone());
    }
    for (id, a) in sub_calls.iter().zip(&d.subs) {
        if let Some(a) = a {
            out.insert(id.to_string(), a.clone());
        }
    }
    out
}

/// One generated call: what it is, whether its tool is concurrency-safe, its finalizer, and
/// whether it calls the previous call's tool (so one tool is asked for twice).
type GeneratedCall = (CallKind, bool, Option<FinalizeAction>, bool);

fn generated_calls(p: &Profile) -> BoxedStrategy<Vec<GeneratedCall>> {
    let parallel = p.has(Capability::Parallel);
    proptest::collection::vec(
        (
            call_kind(p),
            if parallel {
                proptest::bool::weighted(0.6).boxed()
            } else {
                Just(false).boxed()
            },
            finalize(p),
            proptest::bool::weighted(0.4),
        ),
        1..=MAX_CALLS,
    )
    .boxed()
}

/// The tools and calls of a generated batch: call `cN` calls tool `tN`, or the tool of the call
/// before it.
fn batch(calls: &[GeneratedCall]) -> (Vec<ToolSpec>, Vec<CallSpec>) {
    let tools = calls
        .iter()
        .enumerate()
        .map(|(i, (_, safe, finalize, _))| ToolSpec {
            name: format!("t{}", i + 1),
            concurrency_safe: *safe,
            timeout_ms: Some(80),
            finalize: finalize.clone(),
        })
        .collect();
    let mut specs: Vec<CallSpec> = Vec::new();
    for (i, (kind, _, _, shares)) in calls.iter().enumerate() {
        let previous = specs
            .last()
            .filter(|c| *shares && c.program.is_none() && c.tool.starts_with('t'))
            .map(|c| c.tool.clone());
        let (tool, body, program) = match kind {
            CallKind::Tool(body) => (
                previous.unwrap_or_else(|| format!("t{}", i + 1)),
                body.clone(),
                None,
            ),
            CallKind::Unknown => ("nope".to_owned(), vec![], None),
            CallKind::RunCode(program) => (
                tep_reference::pipeline::RUN_CODE.to_owned(),
                vec![],
                Some(program.clone()),
            ),
        };
        specs.push(CallSpec {
            call_id: CallId::from(format!("c{}", i + 1).as_str()),
            tool,
            arguments: json!({"i": i + 1}),
            body,
            program,
        });
    }
    (tools, specs)
}

/// Listeners named `prefix1`, `prefix2`, ... deciding as generated.
fn listeners_of<A: Clone>(
    prefix: &str,
    generated: &[Decisions<A>],
    calls: usize,
    sub_calls: &[CallId],
) -> Vec<Listener<A>> {
    generated
        .iter()
        .enumerate()
        .map(|(k, d)| Listener {
            id: format!("{prefix}{}", k + 1),
            decide: decide(calls, d, sub_calls),
        })
        .collect()
}

/// A wrapper that throws names only calls of the batch.
fn in_batch(wrappers: Vec<WrapperSpec>, calls: usize) -> Vec<WrapperSpec> {
    wrappers
        .into_iter()
        .map(|w| match w {
            WrapperSpec::Throw {
                message,
                phase,
                calls: named,
            } => WrapperSpec::Throw {
                message,
                phase,
                calls: named
                    .into_iter()
                    .filter(|c| c.as_str()[1..].parse::<usize>().is_ok_and(|k| k <= calls))
                    .collect(),
            },
            other => other,
        })
        .collect()
}

/// Random scenarios of `profile`'s revision that use only its capabilities.
pub fn strategy(profile: &Profile) -> BoxedStrategy<Scenario> {
    let p = profile.clone();
    fn listeners<A: Clone + std::fmt::Debug + 'static>(
        action: BoxedStrategy<A>,
    ) -> BoxedStrategy<Vec<Decisions<A>>> {
        proptest::collection::vec(per_call(action), 0..3).boxed()
    }
    let approval = if p.has(Capability::Approval) {
        proptest::option::weighted(0.6, per_call(approval_answer(&p))).boxed()
    } else {
        Just(None).boxed()
    };
    let observers = proptest::collection::vec(
        (
            0u64..40,
            proptest::option::weighted(0.3, Just("meddled".to_owned())),
        ),
        0..2,
    );
    (
        generated_calls(&p),
        listeners(pre_action(&p)),
        approval,
        listeners(guard_action(&p)),
        wrappers(&p),
        listeners(post_action(&p)),
        observers,
        1usize..4,
    )
        .prop_map(
            move |(calls, pre, approval, guards, wrappers, post, observers, cap)| {
                let n = calls.len();
                let (tools, calls) = batch(&calls);
                let mut scenario = Scenario {
                    id: "generated".into(),
                    description: "A scenario generated by tep fuzz.".into(),
                    spec: "generated: judged by the invariants and the reference's outcome".into(),
                    revisions: vec![p.revision],
                    requires: vec![],
                    exercises: vec![InvariantId::StageGraphWalk],
                    tools,
                    calls,
                    pre: vec![],
                    approval: None,
                    guards: vec![],
                    wrappers: in_batch(wrappers, n),
                    post: vec![],
                    observers: observers
                        .into_iter()
                        .enumerate()
                        .map(|(k, (async_ms, mutate))| ObserverSpec {
                            id: format!("observer{}", k + 1),
                            async_ms,
                            mutate,
                        })
                        .collect(),
                    files: [("a.txt".to_owned(), "a file".to_owned())].into(),
                    max_parallel: Some(cap),
                    expect: Expectation {
                        calls: BTreeMap::new(),
                        contexts: vec![],
                        undetermined: Default::default(),
                    },
                };
                let subs: Vec<CallId> = scenario
                    .all_sub_calls()
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect();
                scenario.pre = listeners_of("pre", &pre, n, &subs);
                scenario.guards = listeners_of("guard", &guards, n, &subs);
                scenario.post = listeners_of("post", &post, n, &subs);
                scenario.approval = approval.map(|d| ApprovalSpec {
                    answers: decide(n, &d, &subs),
                });
                scenario.requires = scenario.used_capabilities().into_iter().collect();
                scenario.expect = placeholder_expectations(&scenario);
                scenario
            },
        )
        .boxed()
}

/// One expectation per call and sub-call, as scenario validation requires; a generated
/// scenario's outcome is not known before it runs.
fn placeholder_expectations(scenario: &Scenario) -> Expectation {
    Expectation {
        calls: scenario
            .calls
            .iter()
            .map(|c| c.call_id.clone())
            .chain(scenario.all_sub_calls().into_iter().map(|(id, _)| id))
            .map(|id| (id.to_string(), CallExpectation::default()))
            .collect(),
        contexts: vec![],
        undetermined: Default::default(),
    }
}

/// How big a scenario is: calls, listeners, guards, wrappers, observers, steps.
pub fn size(scenario: &Scenario) -> usize {
    let steps: usize = scenario
        .calls
        .iter()
        .map(|c| {
            c.body.len()
                + c.program.as_ref().map_or(0, |p| {
                    p.len()
                        + p.iter()
                            .map(|s| match s {
                                ProgramStep::Call(b) => b.body.len(),
                                ProgramStep::All(bs) => bs.iter().map(|b| b.body.len() + 1).sum(),
                                _ => 0,
                            })
                            .sum::<usize>()
                })
        })
        .sum();
    scenario.calls.len()
        + scenario.pre.len()
        + scenario.guards.len()
        + scenario.post.len()
        + scenario.wrappers.len()
        + scenario.observers.len()
        + usize::from(scenario.approval.is_some())
        + steps
}

/// How to fuzz.
#[derive(Debug, Clone)]
pub struct FuzzOptions {
    pub spec: Revision,
    /// Generate at most this many scenarios.
    pub cases: usize,
    pub seed: u64,
    /// Stop generating after this long (shrinking a failure still finishes).
    pub time: Option<Duration>,
    /// At most this many runs while shrinking a failure.
    pub max_shrink_runs: usize,
    /// SHOULD-level violations are failures too.
    pub strict: bool,
    /// Judge by the reference's outcome too (the differential oracle), not the invariants alone.
    pub oracle: bool,
    /// Count the constructs of the generated scenarios ([`FuzzReport::constructs`]).
    pub stats: bool,
    /// Set (by a signal handler) to stop: no new case starts, shrinking ends with what it has.
    pub stop: Option<Arc<AtomicBool>>,
}

/// The longest a shrink may take, whatever `time` is: five minutes.
pub const MAX_SHRINK_TIME: Duration = Duration::from_secs(300);
/// Shrinking gives up after this many errored runs in a row (an adapter that hangs or crashes
/// makes every run cost a timeout and tells nothing).
pub const MAX_SHRINK_ERRORS_IN_A_ROW: usize = 3;

impl FuzzOptions {
    pub fn new(seed: u64) -> Self {
        FuzzOptions {
            spec: Revision::CURRENT,
            cases: 200,
            seed,
            time: None,
            max_shrink_runs: 500,
            strict: false,
            oracle: true,
            stats: false,
            stop: None,
        }
    }
}

/// A failing scenario, shrunk.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The case that failed first, and the seed of the run.
    pub case: usize,
    pub seed: u64,
    /// The invariant the shrinking kept failing.
    pub invariant: InvariantId,
    /// The check within it: the invariant's id, or for the oracle's comparisons
    /// `expected-outcome: body-runs` and the like.
    pub check: String,
    /// The smallest scenario found that still fails with it.
    pub scenario: Scenario,
    pub violations: Vec<Violation>,
    pub original_size: usize,
    pub shrink_runs: usize,
    /// Why shrinking stopped where it did.
    pub shrink_stop: ShrinkStop,
}

/// Why shrinking stopped: at the smallest scenario it could reach, or at one of its budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShrinkStop {
    /// No simpler scenario fails with the same check.
    Smallest,
    /// After [`FuzzOptions::max_shrink_runs`] runs.
    Runs,
    /// After its time (`--time`, at most [`MAX_SHRINK_TIME`]).
    Time(Duration),
    /// After [`MAX_SHRINK_ERRORS_IN_A_ROW`] runs in a row errored (an adapter that hangs).
    Errors,
    /// Interrupted (Ctrl-C).
    Interrupted,
}

impl std::fmt::Display for ShrinkStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShrinkStop::Smallest => f.write_str("no simpler scenario fails the same way"),
            ShrinkStop::Runs => write!(f, "stopped at its budget of runs"),
            ShrinkStop::Time(t) => write!(f, "stopped after its {} s", t.as_secs_f64()),
            ShrinkStop::Errors => write!(
                f,
                "stopped: {MAX_SHRINK_ERRORS_IN_A_ROW} runs in a row errored (see `errored`)"
            ),
            ShrinkStop::Interrupted => f.write_str("stopped: interrupted"),
        }
    }
}

/// What a fuzzing run did.
#[derive(Debug, Clone, Default)]
pub struct FuzzReport {
    pub cases: usize,
    pub skipped: usize,
    pub errored: usize,
    /// The first errored answer's message, for the report.
    pub first_error: Option<String>,
    pub elapsed: Duration,
    pub failure: Option<Failure>,
    /// With [`FuzzOptions::stats`]: how many generated scenarios used each construct.
    pub constructs: BTreeMap<String, usize>,
    /// Stopped by [`FuzzOptions::stop`]: the counts cover the cases judged before.
    pub interrupted: bool,
}

/// Why fuzzing could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FuzzError {
    #[error(
        "the implementation implements {declared}, not {requested}; fuzz with --spec {declared}"
    )]
    SpecNotImplemented {
        requested: Revision,
        declared: String,
    },
    #[error("cannot generate a scenario: {0}")]
    Generate(String),
}

/// The RNG of case `case` of a run seeded with `seed`: splitmix64 over both.
fn case_rng(seed: u64, case: usize) -> TestRng {
    let mut state = seed ^ (case as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Case `case` of seed `seed`: the same scenario every time.
pub fn generate(profile: &Profile, seed: u64, case: usize) -> Result<Scenario, FuzzError> {
    let mut runner = TestRunner::new_with_rng(Config::default(), case_rng(seed, case));
    strategy(profile)
        .new_tree(&mut runner)
        .map(|tree| tree.current())
        .map_err(|e| FuzzError::Generate(e.to_string()))
}

/// How one generated scenario fared.
enum Verdict {
    Clean,
    Fails(Vec<Violation>),
    Skipped,
    Errored(String),
}

/// What judges a generated scenario: the check options, the strictness, and whether the
/// reference's outcome is an oracle.
struct Judge {
    check: CheckOptions,
    strict: bool,
    oracle: bool,
}

/// Runs and judges one scenario: the invariants, and with the oracle on, the reference's
/// outcome where the spec determines it.
fn run_one(
    implementation: &mut dyn Implementation,
    judge: &Judge,
    seq: u64,
    scenario: &Scenario,
) -> Verdict {
    let revision = judge.check.revision;
    let (records, escaped) = match implementation.run(seq, revision, scenario) {
        Answer::Ran(records) => (records, None),
        Answer::Escaped { message, records } => (records, Some(message)),
        Answer::Skipped(_) => return Verdict::Skipped,
        Answer::Errored { message, .. } => return Verdict::Errored(message),
    };
    let options = CheckOptions {
        facts: Some(ScenarioFacts::from(scenario)),
        ..judge.check.clone()
    };
    let mut violations = match judge_records(&options, &records, escaped.as_deref()) {
        Err(e) => return Verdict::Errored(format!("the trace is malformed: {e}")),
        Ok(violations) => violations,
    };
    if judge.oracle
        && escaped.is_none()
        && let Some(expect) = oracle::expectations(scenario, revision)
    {
        let expected = Scenario {
            expect,
            ..scenario.clone()
        };
        let (found, _) = expectations::judge(&expected, &records, options.level, Source::Reference);
        violations.extend(found);
    }
    let failing: Vec<Violation> = violations
        .into_iter()
        .filter(|v| judge.strict || v.level == Level::Must)
        .collect();
    if failing.is_empty() {
        Verdict::Clean
    } else {
        Verdict::Fails(failing)
    }
}

fn judge_records(
    options: &CheckOptions,
    records: &[TraceRecord],
    escaped: Option<&str>,
) -> Result<Vec<Violation>, TraceError> {
    let mut checker = Checker::new(options.clone());
    for (i, record) in records.iter().enumerate() {
        checker.feed(i + 1, record)?;
    }
    if let Some(message) = escaped {
        checker.escape(records.len() + 1, message);
    }
    Ok(checker.finish()?.violations)
}

/// The check a violation fails: its invariant, and for the oracle's, the named comparison
/// (`expected-outcome: body-runs`), so shrinking keeps the same cause.
pub fn check_of(v: &Violation) -> String {
    match v.message.strip_prefix("oracle ") {
        Some(rest) => {
            let name = rest.split([',', ':']).next().unwrap_or_default();
            format!("{}: {name}", v.invariant)
        }
        None => v.invariant.to_string(),
    }
}

/// The violation a failure is about: a named invariant before the oracle's comparisons, a
/// MUST-level one before a SHOULD-level one, a named guarantee before the generic
/// `stage-graph-walk`, then catalog order.
fn primary(violations: &[Violation]) -> Option<&Violation> {
    violations.iter().min_by_key(|v| {
        (
            matches!(
                v.invariant,
                InvariantId::ExpectedOutcome | InvariantId::ExpectedContent
            ),
            v.level != Level::Must,
            v.invariant == InvariantId::StageGraphWalk,
            v.invariant,
        )
    })
}

/// Generates scenarios and runs them through `implementation` until one fails (then shrinks it)
/// or the cases or the time run out. `progress` is told each case's number as it finishes.
pub fn fuzz(
    implementation: &mut dyn Implementation,
    options: &FuzzOptions,
    mut progress: impl FnMut(usize),
) -> Result<FuzzReport, FuzzError> {
    let ready = implementation.ready().clone();
    if !ready.specs.contains(&options.spec) {
        return Err(FuzzError::SpecNotImplemented {
            requested: options.spec,
            declared: ready.specs_list(),
        });
    }
    let profile = Profile {
        revision: options.spec,
        capabilities: ready.capabilities.iter().copied().collect(),
    };
    let judge = Judge {
        check: CheckOptions {
            revision: options.spec,
            capabilities: Some(profile.capabilities.clone()),
            level: ready.level(),
            facts: None,
            body_marks: ready.protocol >= 2,
        },
        strict: options.strict,
        oracle: options.oracle,
    };
    let started = Instant::now();
    let mut report = FuzzReport::default();
    let mut seq = 0u64;
    let strategy = strategy(&profile);
    let stopped = || {
        options
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::SeqCst))
    };
    for case in 0..options.cases {
        if options.time.is_some_and(|t| started.elapsed() >= t) {
            break;
        }
        if stopped() {
            report.interrupted = true;
            break;
        }
        let mut runner = TestRunner::new_with_rng(Config::default(), case_rng(options.seed, case));
        let Some(mut tree) = draw(&strategy, &mut runner, ready.protocol)? else {
            report.cases += 1;
            report.skipped += 1;
            progress(case);
            continue;
        };
        seq += 1;
        if options.stats {
            for c in fuzz_stats::constructs(&tree.current()) {
                *report.constructs.entry(c).or_default() += 1;
            }
        }
        let verdict = run_one(implementation, &judge, seq, &tree.current());
        // A case cut short by a stop is not judged.
        if stopped() {
            report.interrupted = true;
            break;
        }
        report.cases += 1;
        progress(case);
        let violations = match verdict {
            Verdict::Clean => continue,
            Verdict::Skipped => {
                report.skipped += 1;
                continue;
            }
            Verdict::Errored(message) => {
                report.errored += 1;
                report.first_error.get_or_insert(message);
                continue;
            }
            Verdict::Fails(violations) => violations,
        };
        let Some(first) = primary(&violations) else {
            continue;
        };
        let (invariant, check) = (first.invariant, check_of(first));
        let original_size = size(&tree.current());
        let mut shrinking = Shrinking {
            implementation: &mut *implementation,
            judge: &judge,
            options,
            protocol: ready.protocol,
            stopped: &stopped,
            seq: &mut seq,
            report: &mut report,
        };
        let (best, runs, shrink_stop) = shrinking.shrink(&mut *tree, violations, &check);
        let (mut scenario, violations) = best;
        scenario.id = format!("fuzz-{}-{case}", options.seed);
        scenario.description = format!(
            "Found by tep fuzz (seed {}, case {case}) and shrunk: it breaks {check}.",
            options.seed
        );
        scenario.exercises = vec![invariant];
        if let Some(expect) = oracle::expectations(&scenario, options.spec) {
            scenario.expect = expect;
        }
        report.failure = Some(Failure {
            case,
            seed: options.seed,
            invariant,
            check: check.clone(),
            scenario,
            violations: violations
                .into_iter()
                .filter(|v| check_of(v) == check)
                .collect(),
            original_size,
            shrink_runs: runs,
            shrink_stop,
        });
        break;
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// What shrinking a failure needs: the implementation and how to judge it, the run's options
/// and its stop, and the counters it shares with the run.
struct Shrinking<'a> {
    implementation: &'a mut dyn Implementation,
    judge: &'a Judge,
    options: &'a FuzzOptions,
    /// The adapter's protocol: a candidate with a newer construct is not sent.
    protocol: u32,
    stopped: &'a dyn Fn() -> bool,
    seq: &'a mut u64,
    report: &'a mut FuzzReport,
}

impl Shrinking<'_> {
    /// Simplifies `tree` while the same `check` still fails, else steps back. Bounded in runs,
    /// in time (`time`, at most [`MAX_SHRINK_TIME`]) and in errors in a row. Returns the
    /// smallest failing scenario with its violations, the runs it took, and why it stopped.
    fn shrink(
        &mut self,
        tree: &mut dyn ValueTree<Value = Scenario>,
        violations: Vec<Violation>,
        check: &str,
    ) -> ((Scenario, Vec<Violation>), usize, ShrinkStop) {
        let options = self.options;
        let stopped = self.stopped;
        let shrink_started = Instant::now();
        let budget = options.time.unwrap_or(MAX_SHRINK_TIME).min(MAX_SHRINK_TIME);
        let mut errors_in_a_row = 0;
        let spent = |runs: usize, errors: usize| {
            runs >= options.max_shrink_runs
                || errors >= MAX_SHRINK_ERRORS_IN_A_ROW
                || shrink_started.elapsed() >= budget
                || stopped()
        };
        let mut best = (tree.current(), violations);
        let mut runs = 0;
        while !spent(runs, errors_in_a_row) && tree.simplify() {
            loop {
                runs += 1;
                let candidate = tree.current();
                // A simpler candidate may pick a construct the adapter's protocol lacks: unsent.
                let sendable = versions().newer_than(&candidate, self.protocol).is_empty();
                if sendable {
                    *self.seq += 1;
                }
                let verdict = sendable
                    .then(|| run_one(&mut *self.implementation, self.judge, *self.seq, &candidate));
                if let Some(Verdict::Errored(message)) = &verdict {
                    if !stopped() {
                        self.report.errored += 1;
                        self.report
                            .first_error
                            .get_or_insert_with(|| message.clone());
                    }
                    errors_in_a_row += 1;
                } else {
                    errors_in_a_row = 0;
                }
                let kept = match verdict {
                    Some(Verdict::Fails(v)) if v.iter().any(|x| check_of(x) == check) => {
                        best = (candidate, v);
                        true
                    }
                    _ => false,
                };
                if kept || spent(runs, errors_in_a_row) || !tree.complicate() {
                    break;
                }
            }
        }
        self.report.interrupted |= stopped();
        let why = if stopped() {
            ShrinkStop::Interrupted
        } else if errors_in_a_row >= MAX_SHRINK_ERRORS_IN_A_ROW {
            ShrinkStop::Errors
        } else if runs >= options.max_shrink_runs {
            ShrinkStop::Runs
        } else if shrink_started.elapsed() >= budget {
            ShrinkStop::Time(budget)
        } else {
            ShrinkStop::Smallest
        };
        (best, runs, why)
    }
}

/// How many scenarios one case may draw to find one the adapter's protocol can carry.
const MAX_DRAWS: usize = 64;

/// The value tree of one case: the first scenario drawn from the case's RNG that uses no
/// construct newer than `protocol` (a filter after generation: the strategy itself generates the
/// whole language), or `None` if `MAX_DRAWS` draws all need a newer protocol.
fn draw(
    strategy: &BoxedStrategy<Scenario>,
    runner: &mut TestRunner,
    protocol: u32,
) -> Result<Option<Box<dyn ValueTree<Value = Scenario>>>, FuzzError> {
    for _ in 0..MAX_DRAWS {
        let tree = strategy
            .new_tree(runner)
            .map_err(|e| FuzzError::Generate(e.to_string()))?;
        if versions().newer_than(&tree.current(), protocol).is_empty() {
            return Ok(Some(tree));
        }
    }
    Ok(None)
}

/// A scenario as the corpus writes it: pretty JSON, with a trailing newline.
pub fn to_corpus_json(scenario: &Scenario) -> String {
    // Straight from the struct, so the fields keep the corpus files' order (`id` first).
    serde_json::to_string_pretty(scenario).unwrap_or_default() + "\n"
}
