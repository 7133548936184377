//! Generating scenarios: the proptest strategies over the scenario language, each case's RNG and
//! its draw.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;
use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::session::{Todo, TodoStatus};
use tep_model::trace::Capability;

use super::FuzzError;
use crate::oracle;
use crate::scenario::versions::versions;
use crate::scenario::{
    AcceptSpec, ApprovalAnswer, ApprovalSpec, BindingCall, BlockSpec, BodyStep, CallExpectation,
    CallSpec, EditSpec, Expectation, FinalizeAction, GuardAction, HookSpec, Listener, ObserverSpec,
    OnReject, PostAction, PreAction, ProgramStep, Scenario, ThrowPhase, ToolSpec, WrapperSpec,
    WriteSpec,
};
use tep_check::invariants::InvariantId;

/// What the generated scenarios may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub revision: Revision,
    pub capabilities: BTreeSet<Capability>,
    /// The constructs the implementation can be driven through, beyond its capabilities.
    pub restriction: Restriction,
}

/// Which constructs of the scenario language a generated scenario may use, beyond the
/// implementation's capabilities: for one driven through its public interfaces only (a shipped
/// harness), those that have one. A data value: allowing one more construct is a flag.
/// [`Restriction::NONE`] generates the whole language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restriction {
    pub guards: bool,
    /// `tools/execute` wrappers. Without them no body hangs or stops slowly (no timeout
    /// wrapper would end it).
    pub wrappers: bool,
    pub observers: bool,
    /// Files in the scripted filesystem (and the body steps that use them).
    pub files: bool,
    /// `run_code` calls with programs.
    pub code_mode: bool,
    /// At most this many pre-execute listeners, and post-execute ones.
    pub max_pre: usize,
    pub max_post: usize,
    /// Listener decisions beyond what a hook command answers: a pre-execute rewrite or throw,
    /// a post-execute replacement, throw, or block that adds a context.
    pub listener_extras: bool,
    /// Concurrency-safe tools.
    pub safe_tools: bool,
    /// A pool cap (`max_parallel`).
    pub pool_cap: bool,
    /// A tool's own timeout.
    pub tool_timeouts: bool,
    /// Body steps beyond sleep, then return or throw.
    pub body_extras: bool,
    /// The longest scripted sleep of a body step, in ms.
    pub max_sleep_ms: u64,
    /// Approval answers beyond `unavailable`.
    pub approval_answers: bool,
    /// `finalizeContent`.
    pub finalize: bool,
    /// Calls to a tool no definition has.
    pub unknown_tools: bool,
}

impl Restriction {
    /// No restriction: the whole scenario language (within the capabilities).
    pub const NONE: Restriction = Restriction {
        guards: true,
        wrappers: true,
        observers: true,
        files: true,
        code_mode: true,
        max_pre: 2,
        max_post: 2,
        listener_extras: true,
        safe_tools: true,
        pool_cap: true,
        tool_timeouts: true,
        body_extras: true,
        max_sleep_ms: 29,
        approval_answers: true,
        finalize: true,
        unknown_tools: true,
    };
}

impl Default for Restriction {
    fn default() -> Self {
        Restriction::NONE
    }
}

impl Profile {
    /// The whole language of `revision` within `capabilities`.
    pub fn new(revision: Revision, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        Profile {
            revision,
            capabilities: capabilities.into_iter().collect(),
            restriction: Restriction::NONE,
        }
    }

    fn has(&self, c: Capability) -> bool {
        self.capabilities.contains(&c)
    }

    fn allows(&self, what: fn(&Restriction) -> bool) -> bool {
        what(&self.restriction)
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
    let extras = p.allows(|r| r.listener_extras);
    let mut options = vec![
        (8, Just(PreAction::Pass).boxed()),
        (2, Just(PreAction::Allow).boxed()),
        (2, Just(PreAction::Deny("denied by policy".into())).boxed()),
    ];
    if extras {
        options.push((
            1,
            Just(PreAction::Rewrite(json!({"rewritten": true}))).boxed(),
        ));
    }
    options.push((
        3,
        Just(PreAction::Ask(Some("needs a human".into()))).boxed(),
    ));
    options.push((1, Just(PreAction::Ask(None)).boxed()));
    if p.throws() && extras {
        options.push((
            1,
            Just(PreAction::Throw("pre-execute crashed".into())).boxed(),
        ));
    }
    weighted(options)
}

fn approval_answer(p: &Profile) -> BoxedStrategy<ApprovalAnswer> {
    if !p.allows(|r| r.approval_answers) {
        return Just(ApprovalAnswer::Unavailable).boxed();
    }
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
    if !p.allows(|r| r.listener_extras) {
        // What a hook command answers: pass, a context, a block with its feedback.
        return weighted(vec![
            (8, Just(PostAction::Pass).boxed()),
            (
                2,
                Just(PostAction::AddContext("post context".into())).boxed(),
            ),
            (
                1,
                Just(PostAction::Block(BlockSpec {
                    feedback: "blocked".into(),
                    context: None,
                }))
                .boxed(),
            ),
        ]);
    }
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
    if !p.allows(|r| r.finalize) {
        return Just(None).boxed();
    }
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
/// Restricted to plain bodies (sleeps, then a return or a throw), and without wrappers no body
/// waits for a cancellation nothing would send.
fn body(p: &Profile) -> BoxedStrategy<Vec<BodyStep>> {
    let extras = p.allows(|r| r.body_extras);
    let sleep = (0u64..p.restriction.max_sleep_ms + 1).prop_map(BodyStep::Sleep);
    let mut steps = vec![(3, sleep.boxed())];
    if extras {
        steps.push((
            2,
            Just(BodyStep::DeferContext("tool context".into())).boxed(),
        ));
        steps.push((1, (1u32..3).prop_map(BodyStep::FailUntilAttempt).boxed()));
    }
    if extras && p.has(Capability::FsGate) && p.allows(|r| r.files) {
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
    if extras && p.has(Capability::OwnedEvents) {
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
    let mut ends = vec![
        (6, Just(BodyStep::Return(json!("done"))).boxed()),
        (1, Just(BodyStep::Return(json!({"n": 2}))).boxed()),
        (2, Just(BodyStep::Throw("the body failed".into())).boxed()),
    ];
    if extras && p.allows(|r| r.wrappers) {
        ends.push((1, Just(BodyStep::Hang).boxed()));
        ends.push((1, (10u64..60).prop_map(BodyStep::SlowStop).boxed()));
    }
    let last = weighted(ends);
    (proptest::collection::vec(weighted(steps), 0..3), last)
        .prop_map(|(mut steps, last)| {
            steps.push(last);
            steps
        })
        .boxed()
}

fn wrappers(p: &Profile) -> BoxedStrategy<Vec<WrapperSpec>> {
    if !p.allows(|r| r.wrappers) {
        return Just(vec![]).boxed();
    }
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
        // Every order of the declared wrappers: a retry may have wrappers inside it (what its
        // second `next()` runs is judged by `redispatch-through-wrappers`, at SHOULD), and a
        // timeout always wraps the body (a hanging body always ends).
        .prop_flat_map(|out| Just(out).prop_shuffle())
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
    let mut options = vec![(8, body(p).prop_map(CallKind::Tool).boxed())];
    if p.allows(|r| r.unknown_tools) {
        options.push((1, Just(CallKind::Unknown).boxed()));
    }
    if p.has(Capability::CodeMode) && p.allows(|r| r.code_mode) {
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
    let parallel = p.has(Capability::Parallel) && p.allows(|r| r.safe_tools);
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
            // Set once the scenario is whole: `deadlines`.
            timeout_ms: Some(HANG_DEADLINE_MS),
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
                tep_model::RUN_CODE.to_owned(),
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
        max: usize,
    ) -> BoxedStrategy<Vec<Decisions<A>>> {
        proptest::collection::vec(per_call(action), 0..=max).boxed()
    }
    let r = p.restriction.clone();
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
        0..=usize::from(r.observers),
    );
    (
        generated_calls(&p),
        listeners(pre_action(&p), r.max_pre),
        approval,
        listeners(guard_action(&p), if r.guards { 2 } else { 0 }),
        wrappers(&p),
        listeners(post_action(&p), r.max_post),
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
                    files: if p.restriction.files {
                        [("a.txt".to_owned(), "a file".to_owned())].into()
                    } else {
                        BTreeMap::new()
                    },
                    max_parallel: p.restriction.pool_cap.then_some(cap),
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
                if p.restriction.tool_timeouts {
                    deadlines(&mut scenario);
                } else {
                    for tool in &mut scenario.tools {
                        tool.timeout_ms = None;
                    }
                }
                scenario.requires = scenario.used_capabilities().into_iter().collect();
                scenario.expect = placeholder_expectations(&scenario);
                scenario
            },
        )
        .boxed()
}

/// The deadline of a tool whose every body waits for its cancellation (a hang, a slow stop, after
/// sleeps only): it ends the same way whenever the deadline fires, so the deadline can be short.
const HANG_DEADLINE_MS: u64 = 80;

/// Each tool's deadline, far from the work its bodies script: the time of the machine the
/// implementation runs on (a file step, a scheduler stall on a loaded machine) never decides
/// whether a body ends first. At least ten times the longest scripted work of the tool's
/// bodies (over every attempt) and at least a second ([`oracle::far_deadline_ms`]), rounded up
/// to 100 ms; the short [`HANG_DEADLINE_MS`] only where every body of the tool waits for its
/// cancellation, the shapes that test the timeout itself.
fn deadlines(scenario: &mut Scenario) {
    let mut bodies: BTreeMap<String, Vec<Vec<BodyStep>>> = BTreeMap::new();
    for call in &scenario.calls {
        bodies
            .entry(call.tool.clone())
            .or_default()
            .push(call.body.clone());
    }
    for (_, binding) in scenario.all_sub_calls() {
        bodies.entry(binding.tool).or_default().push(binding.body);
    }
    let deadline_of = |tool: &str| {
        let of_tool = bodies.get(tool).map(Vec::as_slice).unwrap_or_default();
        if !of_tool.is_empty() && of_tool.iter().all(|b| oracle::waits_for_its_deadline(b)) {
            return HANG_DEADLINE_MS;
        }
        let scripted = of_tool
            .iter()
            .map(|b| oracle::scripted_ms(scenario, b))
            .max()
            .unwrap_or(0);
        oracle::far_deadline_ms(scripted).div_ceil(100) * 100
    };
    let deadlines: Vec<u64> = scenario
        .tools
        .iter()
        .map(|t| deadline_of(&t.name))
        .collect();
    for (tool, ms) in scenario.tools.iter_mut().zip(deadlines) {
        tool.timeout_ms = Some(ms);
    }
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

/// The RNG of case `case` of a run seeded with `seed`: splitmix64 over both.
pub(super) fn case_rng(seed: u64, case: usize) -> TestRng {
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

/// How many scenarios one case may draw to find one the adapter's protocol can carry.
const MAX_DRAWS: usize = 64;

/// The value tree of one case: the first scenario drawn from the case's RNG that uses no
/// construct newer than `protocol` (a filter after generation: the strategy itself generates the
/// whole language), or `None` if `MAX_DRAWS` draws all need a newer protocol.
pub(super) fn draw(
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
