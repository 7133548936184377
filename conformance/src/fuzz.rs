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
//! Only the invariants judge: the scenario's expectations are not checked (no oracle knows them
//! for a random scenario). The printed minimal scenario carries the expectations the built-in
//! reference produces, so it can join a corpus as it is.
//!
//! Runs are reproducible: case `n` of seed `s` is generated from its own RNG, seeded from `s`
//! and `n` alone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;
use tep_reference::graph::Revision;
use tep_reference::identity::CallId;
use tep_reference::session::{Todo, TodoStatus};
use tep_reference::trace::{Capability, TraceRecord};

use crate::runner::{Answer, Implementation};
use crate::scenario::versions::versions;
use crate::scenario::{
    AcceptSpec, ApprovalAnswer, ApprovalSpec, BindingCall, BlockSpec, BodyStep, CallExpectation,
    CallSpec, EditSpec, Expectation, ExpectedContext, FinalizeAction, GuardAction, HookSpec,
    Listener, ObserverSpec, OnReject, PostAction, PreAction, ProgramStep, Scenario, ThrowPhase,
    ToolSpec, WrapperSpec, WriteSpec,
};
use crate::scripted::{ReferenceRun, run_reference_to_the_end};
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
        2,
        Just(PreAction::Ask(Some("needs a human".into()))).boxed(),
    ));
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
            Just(BodyStep::Todo(vec![Todo {
                content: "ship".into(),
                status: TodoStatus::InProgress,
            }]))
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
            // The timeout comes first (outermost): a hanging body always ends.
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

/// Per call, an action (`decide` maps call ids to actions).
fn per_call<A: Clone + std::fmt::Debug + 'static>(
    action: BoxedStrategy<A>,
) -> BoxedStrategy<Vec<A>> {
    proptest::collection::vec(action, MAX_CALLS).boxed()
}

fn decide<A: Clone>(calls: usize, actions: &[A]) -> BTreeMap<String, A> {
    (1..=calls)
        .zip(actions.iter().cloned())
        .map(|(k, a)| (format!("c{k}"), a))
        .collect()
}

/// Random scenarios of `profile`'s revision that use only its capabilities.
pub fn strategy(profile: &Profile) -> BoxedStrategy<Scenario> {
    let p = profile.clone();
    let parallel = p.has(Capability::Parallel);
    let calls = proptest::collection::vec(
        (
            call_kind(&p),
            if parallel {
                proptest::bool::weighted(0.6).boxed()
            } else {
                Just(false).boxed()
            },
            finalize(&p),
        ),
        1..=MAX_CALLS,
    );
    fn listeners<A: Clone + std::fmt::Debug + 'static>(
        action: BoxedStrategy<A>,
    ) -> BoxedStrategy<Vec<Vec<A>>> {
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
        calls,
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
                let mut scenario = Scenario {
                    id: "generated".into(),
                    description: "A scenario generated by tep fuzz.".into(),
                    spec: "generated: judged by the invariants".into(),
                    revisions: vec![p.revision],
                    requires: vec![],
                    exercises: vec![InvariantId::StageGraphWalk],
                    tools: calls
                        .iter()
                        .enumerate()
                        .map(|(i, (_, safe, finalize))| ToolSpec {
                            name: format!("t{}", i + 1),
                            concurrency_safe: *safe,
                            timeout_ms: Some(80),
                            finalize: finalize.clone(),
                        })
                        .collect(),
                    calls: calls
                        .iter()
                        .enumerate()
                        .map(|(i, (kind, _, _))| {
                            let (tool, body, program) = match kind {
                                CallKind::Tool(body) => (format!("t{}", i + 1), body.clone(), None),
                                CallKind::Unknown => ("nope".to_owned(), vec![], None),
                                CallKind::RunCode(program) => (
                                    tep_reference::pipeline::RUN_CODE.to_owned(),
                                    vec![],
                                    Some(program.clone()),
                                ),
                            };
                            CallSpec {
                                call_id: CallId::from(format!("c{}", i + 1).as_str()),
                                tool,
                                arguments: json!({"i": i + 1}),
                                body,
                                program,
                            }
                        })
                        .collect(),
                    pre: pre
                        .iter()
                        .enumerate()
                        .map(|(k, a)| Listener {
                            id: format!("pre{}", k + 1),
                            decide: decide(n, a),
                        })
                        .collect(),
                    approval: approval.map(|answers| ApprovalSpec {
                        answers: decide(n, &answers),
                    }),
                    guards: guards
                        .iter()
                        .enumerate()
                        .map(|(k, a)| Listener {
                            id: format!("guard{}", k + 1),
                            decide: decide(n, a),
                        })
                        .collect(),
                    wrappers: wrappers
                        .into_iter()
                        .map(|w| match w {
                            WrapperSpec::Throw {
                                message,
                                phase,
                                calls,
                            } => WrapperSpec::Throw {
                                message,
                                phase,
                                calls: calls
                                    .into_iter()
                                    .filter(|c| {
                                        c.as_str()[1..].parse::<usize>().is_ok_and(|k| k <= n)
                                    })
                                    .collect(),
                            },
                            other => other,
                        })
                        .collect(),
                    post: post
                        .iter()
                        .enumerate()
                        .map(|(k, a)| Listener {
                            id: format!("post{}", k + 1),
                            decide: decide(n, a),
                        })
                        .collect(),
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
                    },
                };
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
            .map(|id| {
                (
                    id.to_string(),
                    CallExpectation {
                        is_error: false,
                        body_runs: 0,
                        post_runs: None,
                        content: None,
                        content_includes: None,
                        error_code: None,
                        reference_content: None,
                    },
                )
            })
            .collect(),
        contexts: vec![],
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
}

impl FuzzOptions {
    pub fn new(seed: u64) -> Self {
        FuzzOptions {
            spec: Revision::CURRENT,
            cases: 200,
            seed,
            time: None,
            max_shrink_runs: 500,
            strict: false,
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
    /// The smallest scenario found that still fails with it.
    pub scenario: Scenario,
    pub violations: Vec<Violation>,
    pub original_size: usize,
    pub shrink_runs: usize,
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

/// Runs and judges one scenario: the invariants only.
fn run_one(
    implementation: &mut dyn Implementation,
    options: &CheckOptions,
    seq: u64,
    scenario: &Scenario,
    strict: bool,
) -> Verdict {
    let (records, escaped) = match implementation.run(seq, options.revision, scenario) {
        Answer::Ran(records) => (records, None),
        Answer::Escaped { message, records } => (records, Some(message)),
        Answer::Skipped(_) => return Verdict::Skipped,
        Answer::Errored { message, .. } => return Verdict::Errored(message),
    };
    let options = CheckOptions {
        facts: Some(ScenarioFacts::from(scenario)),
        ..options.clone()
    };
    match judge_records(&options, &records, escaped.as_deref()) {
        Err(e) => Verdict::Errored(format!("the trace is malformed: {e}")),
        Ok(violations) => {
            let failing: Vec<Violation> = violations
                .into_iter()
                .filter(|v| strict || v.level == Level::Must)
                .collect();
            if failing.is_empty() {
                Verdict::Clean
            } else {
                Verdict::Fails(failing)
            }
        }
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

/// The invariant a failure is about: a MUST-level one before a SHOULD-level one, a named
/// guarantee before the generic `stage-graph-walk`, then catalog order.
fn primary(violations: &[Violation]) -> Option<InvariantId> {
    violations
        .iter()
        .map(|v| {
            (
                v.level != Level::Must,
                v.invariant == InvariantId::StageGraphWalk,
                v.invariant,
            )
        })
        .min()
        .map(|(_, _, id)| id)
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
    let check = CheckOptions {
        revision: options.spec,
        capabilities: Some(profile.capabilities.clone()),
        level: ready.level(),
        facts: None,
        body_marks: ready.protocol >= 2,
    };
    let started = Instant::now();
    let mut report = FuzzReport::default();
    let mut seq = 0u64;
    let strategy = strategy(&profile);
    for case in 0..options.cases {
        if options.time.is_some_and(|t| started.elapsed() >= t) {
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
        let verdict = run_one(implementation, &check, seq, &tree.current(), options.strict);
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
        let Some(invariant) = primary(&violations) else {
            continue;
        };
        let original_size = size(&tree.current());
        // Shrink: simplify while the same invariant still fails, else step back.
        let mut best = (tree.current(), violations);
        let mut runs = 0;
        while runs < options.max_shrink_runs && tree.simplify() {
            loop {
                runs += 1;
                let candidate = tree.current();
                // A simpler candidate may pick a construct the adapter's protocol lacks: unsent.
                let sendable = versions().newer_than(&candidate, ready.protocol).is_empty();
                if sendable {
                    seq += 1;
                }
                let verdict = sendable
                    .then(|| run_one(implementation, &check, seq, &candidate, options.strict));
                let kept = match verdict {
                    Some(Verdict::Fails(v)) if v.iter().any(|x| x.invariant == invariant) => {
                        best = (candidate, v);
                        true
                    }
                    _ => false,
                };
                if kept || runs >= options.max_shrink_runs || !tree.complicate() {
                    break;
                }
            }
        }
        let (mut scenario, violations) = best;
        scenario.id = format!("fuzz-{}-{case}", options.seed);
        scenario.description = format!(
            "Found by tep fuzz (seed {}, case {case}) and shrunk: it breaks {invariant}.",
            options.seed
        );
        scenario.exercises = vec![invariant];
        if let Some(expect) = reference_expectations(&scenario, options.spec) {
            scenario.expect = expect;
        }
        report.failure = Some(Failure {
            case,
            seed: options.seed,
            invariant,
            scenario,
            violations: violations
                .into_iter()
                .filter(|v| v.invariant == invariant)
                .collect(),
            original_size,
            shrink_runs: runs,
        });
        break;
    }
    report.elapsed = started.elapsed();
    Ok(report)
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

/// The outcome the built-in reference gives a scenario, as corpus expectations (so a shrunk
/// scenario can join a corpus as it is); `None` if the reference cannot run it.
pub fn reference_expectations(scenario: &Scenario, revision: Revision) -> Option<Expectation> {
    let Ok(ReferenceRun::Trace(records)) = run_reference_to_the_end(scenario, revision, &[]) else {
        return None;
    };
    let mut expect = placeholder_expectations(scenario);
    let mut dispatched: BTreeMap<CallId, (u32, bool)> = BTreeMap::new();
    let mut last: BTreeMap<CallId, tep_reference::graph::NodeId> = BTreeMap::new();
    for record in &records {
        let (Some(node), Some(call)) = (record.node(), record.call()) else {
            continue;
        };
        use tep_reference::graph::NodeId as N;
        let entry = dispatched.entry(call.clone()).or_default();
        match node {
            N::ToolBody if last.get(call) == Some(&N::Around) => entry.0 += 1,
            N::Post => entry.1 = true,
            _ => {}
        }
        if !matches!(node, N::Owned | N::PresentCall | N::PresentResult) {
            last.insert(call.clone(), node);
        }
        if let TraceRecord::Event(e) = record {
            use tep_reference::session::EventBody;
            let outcome = match &e.event.body {
                EventBody::ToolResult(d) => Some(d.is_error()),
                EventBody::CodeDispatch(d) => Some(d.is_error),
                EventBody::UserMessage(m) => {
                    expect.contexts.push(ExpectedContext {
                        call: call.clone(),
                        text: tep_reference::result::content_text(&m.content),
                    });
                    None
                }
                EventBody::ContextMessage(m) => {
                    expect.contexts.push(ExpectedContext {
                        call: call.clone(),
                        text: tep_reference::result::content_text(&m.content),
                    });
                    None
                }
                _ => None,
            };
            if let (Some(is_error), Some(c)) = (outcome, expect.calls.get_mut(call.as_str())) {
                c.is_error = is_error;
            }
        }
    }
    for (id, c) in &mut expect.calls {
        if let Some((runs, post)) = dispatched.get(&CallId::from(id.as_str())) {
            c.body_runs = *runs;
            c.post_runs = Some(*post);
        }
    }
    Some(expect)
}

/// A scenario as the corpus writes it: pretty JSON, with a trailing newline.
pub fn to_corpus_json(scenario: &Scenario) -> String {
    // Straight from the struct, so the fields keep the corpus files' order (`id` first).
    serde_json::to_string_pretty(scenario).unwrap_or_default() + "\n"
}
