//! The differential oracle: the built-in reference's outcome of a scenario, as the expectations
//! any implementation must meet, restricted to what the spec determines.
//!
//! The reference is one correct implementation among many, so only facts the doc (or, where it is
//! silent, `spec/reference-semantics.md`) fixes are taken from its run; everything else is left
//! free. `docs/conformance.md` ("What the oracle compares") has one row per compared fact. Two
//! rules keep it from judging what the scripts leave open:
//!
//! - **Stable under timing.** The scenario also runs with every duration it scripts (sleeps,
//!   slow stops, retry delays, observer work) scaled by [`JITTER`]; a fact that differs between
//!   the runs depends on timing (a body that ends near its deadline) and is not compared.
//! - **Deadlines far from the work, or the call is free.** A body the timeout wrapper may end
//!   while it does work nobody scripted (file steps, a Code Mode program's sub-calls) ends by
//!   the clock of the machine it runs on: unless its deadline is far from its scripted work
//!   ([`far_deadline_ms`]: at least ten times it, and at least a second), its call is not
//!   compared. A body that waits for its cancellation (a hang, a slow stop, after sleeps only)
//!   ends the same way whenever its deadline fires. `tep fuzz` generates only such deadlines.
//! - **No parallel file races.** When two concurrency-safe calls of a batch touch files, the
//!   order of their reads and edits is the implementation's: their outcomes are not compared.
//! - **What the implementation validates.** A `run_code` call whose value a post-execute
//!   `accept{value}` may replace is not compared: the implementation revalidates the value
//!   against `run_code`'s output schema (reference semantics 29, 32) and may answer
//!   `INVALID_TOOL_OUTPUT`; the reference has no output schemas.
//! - **No second `next()` through inner wrappers.** When a retry has wrappers inside it, a call it
//!   re-dispatched is not compared: the doc does not say whether the second dispatch passes
//!   through them (the reference's does; the original harness's goes straight to the body).

use std::collections::BTreeSet;

use serde_json::Value;
use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::trace::TraceRecord;

use crate::expectations::{Observed, Seen, observe};
use crate::scenario::{
    BodyStep, CallExpectation, CallSpec, Expectation, ExpectedContext, PostAction, ProgramStep,
    Scenario, ThrowPhase, Undetermined, WrapperSpec,
};
use crate::scripted::{ReferenceRun, run_reference_to_the_end};

/// The factors every scripted duration is scaled by in the extra runs.
pub const JITTER: [f64; 2] = [0.6, 1.4];

/// The expectations the reference's run of `scenario` gives, where the spec determines them;
/// `None` if the reference cannot run it.
pub fn expectations(scenario: &Scenario, revision: Revision) -> Option<Expectation> {
    expectations_given(scenario, revision, None)
}

/// [`expectations`], given the reference's own trace of `scenario` when the caller has it (the
/// built-in reference, unbroken, was the implementation judged): the same expectations, one run
/// of the reference fewer.
pub fn expectations_given(
    scenario: &Scenario,
    revision: Revision,
    reference_trace: Option<&[TraceRecord]>,
) -> Option<Expectation> {
    let base = match reference_trace {
        Some(records) => observe(records),
        None => run(scenario, revision)?,
    };
    let jittered: Vec<Observed> = if timing_sensitive(scenario) {
        JITTER
            .iter()
            .map(|&f| run(&scaled(scenario, f), revision))
            .collect::<Option<_>>()?
    } else {
        Vec::new()
    };
    let mut racing = file_races(scenario);
    racing.extend(deadline_under_a_throw(scenario));
    racing.extend(unscripted_work_near_a_deadline(scenario));
    racing.extend(output_revalidated(scenario));
    if retry_wraps_others(scenario) {
        // What a second `next()` runs is judged by `redispatch-through-wrappers` (SHOULD), not
        // here: a re-dispatched call is free. A call of an unknown tool is dispatched again too
        // (its dispatch fails), though no body runs.
        racing.extend(
            base.0
                .iter()
                .filter(|(_, seen)| seen.body_runs > 1)
                .map(|(id, _)| id.clone()),
        );
        racing.extend(of_unknown_tools(scenario));
    }
    let literals = literals(scenario);
    let mut expect = Expectation {
        calls: Default::default(),
        contexts: vec![],
        undetermined: Undetermined::default(),
    };
    let ids = scenario
        .calls
        .iter()
        .map(|c| (c.call_id.clone(), Some(c)))
        .chain(
            scenario
                .all_sub_calls()
                .into_iter()
                .map(|(id, _)| (id, None)),
        );
    for (id, call) in ids {
        let seen = base.0.get(&id).cloned().unwrap_or_default();
        let stable = jittered
            .iter()
            .all(|(calls, _)| same_outcome(calls.get(&id), &seen));
        if !stable || racing.contains(&id) {
            // A sub-call has no entry to leave out; a call of the batch is listed as left free.
            if call.is_some() {
                expect.undetermined.calls.push(id);
            }
            continue;
        }
        let entry = call_expectation(scenario, call, &seen, &literals);
        expect.calls.insert(id.to_string(), entry);
    }
    let contexts: Vec<(CallId, String)> = texts(&base);
    if jittered.iter().all(|o| texts(o) == contexts)
        && !contexts.iter().any(|(c, _)| racing.contains(c))
    {
        expect.contexts = contexts
            .into_iter()
            .map(|(call, text)| ExpectedContext { call, text })
            .collect();
    } else {
        expect.undetermined.contexts = true;
    }
    Some(expect)
}

fn run(scenario: &Scenario, revision: Revision) -> Option<Observed> {
    match run_reference_to_the_end(scenario, revision, &[]) {
        Ok(ReferenceRun::Trace(records)) => Some(observe(&records)),
        _ => None,
    }
}

/// Whether a jittered run saw the same outcome (the lines may differ).
fn same_outcome(other: Option<&Seen>, seen: &Seen) -> bool {
    let strip = |s: &Seen| {
        (
            s.body_runs,
            s.post_runs,
            s.pre_runs,
            s.approval_runs,
            s.guard_runs,
            s.result
                .as_ref()
                .map(|(_, e, t, c)| (*e, t.clone(), c.clone())),
        )
    };
    strip(other.unwrap_or(&Seen::default())) == strip(seen)
}

fn texts(observed: &Observed) -> Vec<(CallId, String)> {
    observed
        .1
        .iter()
        .map(|(_, c, t)| (c.clone(), t.clone()))
        .collect()
}

/// One call's expectations: what the reference did, where the scripts determine it.
fn call_expectation(
    scenario: &Scenario,
    call: Option<&CallSpec>,
    seen: &Seen,
    literals: &BTreeSet<String>,
) -> CallExpectation {
    let (is_error, text) = seen
        .result
        .as_ref()
        .map_or((false, None), |(_, e, t, _)| (*e, Some(t)));
    // A success's text, when the scenario wrote it verbatim (a body's or a listener's string, a
    // program's log lines and string value): never the reference's own wording.
    let verbatim = |t: &String| {
        literals.contains(t)
            || (call.is_some_and(|c| c.program.is_some())
                && !t.is_empty()
                && t.lines().all(|l| literals.contains(l)))
    };
    let content = text
        .filter(|t| !is_error && call.is_some() && verbatim(t))
        .cloned();
    CallExpectation {
        is_error,
        body_runs: seen.body_runs,
        post_runs: Some(seen.post_runs),
        content,
        pre_runs: (!scenario.pre.is_empty()).then_some(seen.pre_runs),
        approval_runs: scenario.approval.is_some().then_some(seen.approval_runs),
        guard_runs: (!scenario.guards.is_empty()).then_some(seen.guard_runs),
        ..CallExpectation::default()
    }
}

/// The calls whose outcome depends on how parallel calls interleave at files: every
/// concurrency-safe call touching a file, when two or more of the batch do.
fn file_races(scenario: &Scenario) -> BTreeSet<CallId> {
    let safe = |c: &CallSpec| {
        scenario
            .tools
            .iter()
            .any(|t| t.name == c.tool && t.concurrency_safe)
    };
    let touching: BTreeSet<CallId> = scenario
        .calls
        .iter()
        .filter(|c| safe(c) && c.body.iter().any(touches_files))
        .map(|c| c.call_id.clone())
        .collect();
    if touching.len() >= 2 {
        touching
    } else {
        BTreeSet::new()
    }
}

/// The calls (and their sub-calls) a deadline may end while a wrapper inside the timeout throws
/// after its dispatch: whether the timeout reports its `TOOL_TIMEOUT` result or passes the
/// inner wrapper's throw on (post-execute runs after the one, not the other) is not fixed.
fn deadline_under_a_throw(scenario: &Scenario) -> BTreeSet<CallId> {
    let Some(t) = scenario
        .wrappers
        .iter()
        .position(|w| matches!(w, WrapperSpec::Timeout))
    else {
        return BTreeSet::new();
    };
    // A throw wrapper for listed calls only is counted for every call: the safe side.
    let throws_after = scenario.wrappers[t + 1..].iter().any(|w| {
        matches!(
            w,
            WrapperSpec::Throw {
                phase: ThrowPhase::After,
                ..
            }
        )
    });
    if !throws_after {
        return BTreeSet::new();
    }
    // A tool without a deadline counts as one that may fire at once: the safe side.
    let meets = |tool: &str, body: &[BodyStep]| {
        let deadline = deadline_of(scenario, tool).unwrap_or(0);
        worst_ms(scenario, body).is_none_or(|ms| may_reach(ms, deadline))
    };
    let mut out = BTreeSet::new();
    for (call, tool, body) in bodies(scenario) {
        if meets(tool, body) {
            out.insert(call.clone());
            out.extend(sub_calls_of(scenario, call));
        }
    }
    out
}

/// The calls and sub-calls of a tool no definition has (`run_code` is always defined).
fn of_unknown_tools(scenario: &Scenario) -> Vec<CallId> {
    let unknown =
        |tool: &str| tool != tep_model::RUN_CODE && !scenario.tools.iter().any(|t| t.name == tool);
    scenario
        .calls
        .iter()
        .filter(|c| unknown(&c.tool))
        .map(|c| c.call_id.clone())
        .chain(
            scenario
                .all_sub_calls()
                .into_iter()
                .filter(|(_, b)| unknown(&b.tool))
                .map(|(id, _)| id),
        )
        .collect()
}

/// Whether a retry has wrappers inside it. A retry's second `next()` runs them again in the
/// reference, while the original harness's waterfall goes straight to the dispatch: the doc
/// fixes neither.
fn retry_wraps_others(scenario: &Scenario) -> bool {
    scenario
        .wrappers
        .iter()
        .position(|w| matches!(w, WrapperSpec::Retry { .. }))
        .is_some_and(|k| k + 1 < scenario.wrappers.len())
}

fn touches_files(step: &BodyStep) -> bool {
    matches!(
        step,
        BodyStep::Read(_) | BodyStep::Edit(_) | BodyStep::Write(_) | BodyStep::ExternalWrite(_)
    )
}

/// Every string the scenario writes.
fn literals(scenario: &Scenario) -> BTreeSet<String> {
    fn walk(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::String(s) => {
                out.insert(s.clone());
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    if let Ok(v) = serde_json::to_value(scenario) {
        walk(&v, &mut out);
    }
    out
}

/// Whether some body could end near its deadline: a body that ends by itself (no hang, no slow
/// stop: those always meet the deadline) and whose scripted time may reach it. Only then can
/// timing change an outcome, and only then the jittered runs are made.
fn timing_sensitive(scenario: &Scenario) -> bool {
    bodies(scenario).into_iter().any(|(_, tool, body)| {
        deadline_of(scenario, tool)
            .zip(worst_ms(scenario, body))
            .is_some_and(|(deadline, ms)| may_reach(ms, deadline))
    })
}

/// Every body the scenario scripts: the call it belongs to (a sub-call's is its `run_code`
/// call), the tool it runs as, and its steps.
fn bodies(scenario: &Scenario) -> Vec<(&CallId, &str, &[BodyStep])> {
    let mut out = Vec::new();
    for call in &scenario.calls {
        out.push((&call.call_id, call.tool.as_str(), call.body.as_slice()));
        for step in call.program.iter().flatten() {
            match step {
                ProgramStep::Call(b) => out.push((&call.call_id, b.tool.as_str(), &b.body)),
                ProgramStep::All(bs) => {
                    out.extend(
                        bs.iter()
                            .map(|b| (&call.call_id, b.tool.as_str(), &b.body[..])),
                    );
                }
                _ => {}
            }
        }
    }
    out
}

/// The deadline a body of `tool` runs under: the tool's declared timeout, when the scenario
/// mounts the timeout wrapper.
pub(crate) fn deadline_of(scenario: &Scenario, tool: &str) -> Option<u64> {
    scenario
        .wrappers
        .iter()
        .any(|w| matches!(w, WrapperSpec::Timeout))
        .then(|| scenario.tools.iter().find(|t| t.name == tool)?.timeout_ms)
        .flatten()
}

/// The least deadline far from `scripted_ms` of scripted work: ten times it, and at least a
/// second. Scheduling on a loaded machine adds hundreds of milliseconds to a body's time, never
/// this much.
pub(crate) fn far_deadline_ms(scripted_ms: u64) -> u64 {
    scripted_ms.saturating_mul(10).max(1000)
}

/// A body that waits for its cancellation after sleeps only: whenever its deadline fires, it
/// ends the same way (the timeout's result).
pub(crate) fn waits_for_its_deadline(body: &[BodyStep]) -> bool {
    match body.split_last() {
        Some((BodyStep::Hang | BodyStep::SlowStop(_), before)) => {
            before.iter().all(|s| matches!(s, BodyStep::Sleep(_)))
        }
        _ => false,
    }
}

/// The calls (with their sub-calls) one of whose bodies does work nobody scripted (file steps,
/// or it is a program's sub-call) under a deadline not far from its scripted work: whether the
/// deadline fires first depends on the machine, not on the scripts.
fn unscripted_work_near_a_deadline(scenario: &Scenario) -> BTreeSet<CallId> {
    let mut out = BTreeSet::new();
    for call in &scenario.calls {
        let own = std::iter::once((false, call.tool.as_str(), call.body.as_slice()));
        let subs = call.program.iter().flatten().flat_map(|step| match step {
            ProgramStep::Call(b) => vec![(true, b.tool.as_str(), b.body.as_slice())],
            ProgramStep::All(bs) => bs
                .iter()
                .map(|b| (true, b.tool.as_str(), b.body.as_slice()))
                .collect(),
            _ => vec![],
        });
        let near = own.chain(subs).any(|(sub_call, tool, body)| {
            let unscripted = sub_call || body.iter().any(touches_files);
            let Some(deadline) = deadline_of(scenario, tool) else {
                return false;
            };
            let scripted = scripted_ms(scenario, body);
            unscripted && !waits_for_its_deadline(body) && deadline < far_deadline_ms(scripted)
        });
        if near {
            out.insert(call.call_id.clone());
            out.extend(sub_calls_of(scenario, &call.call_id));
        }
    }
    out
}

/// The `run_code` calls whose value a post-execute listener may replace (`accept{value}`, for
/// the call or for every call): the implementation revalidates it against `run_code`'s output
/// schema (reference semantics 29, 32), which the reference does not have, so the outcome is the
/// implementation's.
fn output_revalidated(scenario: &Scenario) -> BTreeSet<CallId> {
    let replaces = |key: &str| {
        scenario
            .post
            .iter()
            .any(|l| matches!(l.decide.get(key), Some(PostAction::Accept(a)) if a.value.is_some()))
    };
    let mut out = BTreeSet::new();
    for call in &scenario.calls {
        if call.tool == tep_model::RUN_CODE && (replaces(call.call_id.as_str()) || replaces("*")) {
            out.insert(call.call_id.clone());
        }
    }
    for (id, binding) in scenario.all_sub_calls() {
        if binding.tool == tep_model::RUN_CODE && (replaces(id.as_str()) || replaces("*")) {
            out.insert(id);
        }
    }
    out
}

/// The sub-calls of the `run_code` call `parent`, as the scenario names them.
fn sub_calls_of(scenario: &Scenario, parent: &CallId) -> Vec<CallId> {
    scenario
        .calls
        .iter()
        .filter(|c| &c.call_id == parent)
        .filter_map(|c| c.program.as_deref())
        .flat_map(|p| crate::scenario::sub_calls(parent, p))
        .map(|(id, _)| id)
        .collect()
}

/// A body's scripted time over every attempt a retry may make, or `None` if it waits for its
/// cancellation (a hang, a slow stop).
fn worst_ms(scenario: &Scenario, body: &[BodyStep]) -> Option<u64> {
    if body
        .iter()
        .any(|s| matches!(s, BodyStep::Hang | BodyStep::SlowStop(_)))
    {
        return None;
    }
    Some(scripted_ms(scenario, body))
}

/// The time a body's steps script over every attempt a retry may make, with the retries'
/// delays: its sleeps (and a slow stop's time after its cancellation).
pub(crate) fn scripted_ms(scenario: &Scenario, body: &[BodyStep]) -> u64 {
    let (attempts, delay) = scenario
        .wrappers
        .iter()
        .filter_map(|w| match w {
            WrapperSpec::Retry { attempts, delay_ms } => Some((u64::from(*attempts), *delay_ms)),
            _ => None,
        })
        .fold((1u64, 0u64), |(a, d), (n, ms)| {
            (
                a.saturating_mul(n.max(1)),
                d.saturating_add(ms.saturating_mul(n)),
            )
        });
    let once: u64 = body
        .iter()
        .map(|s| match s {
            BodyStep::Sleep(ms) | BodyStep::SlowStop(ms) => *ms,
            _ => 0,
        })
        .sum();
    once.saturating_mul(attempts).saturating_add(delay)
}

/// Whether `ms` of scripted time, stretched by the largest jitter plus a little scheduling,
/// reaches `deadline`.
fn may_reach(ms: u64, deadline: u64) -> bool {
    let stretch = JITTER.iter().copied().fold(1.0, f64::max);
    ms as f64 * stretch + SCHEDULING_MS >= deadline as f64
}

/// What scheduling may add to a body's scripted time, in milliseconds.
const SCHEDULING_MS: f64 = 10.0;

/// `scenario` with every scripted duration scaled by `factor` (declared timeouts stay).
pub fn scaled(scenario: &Scenario, factor: f64) -> Scenario {
    let scale = |ms: u64| (ms as f64 * factor).round() as u64;
    let steps = |body: &mut Vec<BodyStep>| {
        for step in body {
            match step {
                BodyStep::Sleep(ms) | BodyStep::SlowStop(ms) => *ms = scale(*ms),
                _ => {}
            }
        }
    };
    let mut s = scenario.clone();
    for call in &mut s.calls {
        steps(&mut call.body);
        for step in call.program.iter_mut().flatten() {
            match step {
                ProgramStep::Call(b) => steps(&mut b.body),
                ProgramStep::All(bs) => bs.iter_mut().for_each(|b| steps(&mut b.body)),
                _ => {}
            }
        }
    }
    for wrapper in &mut s.wrappers {
        if let WrapperSpec::Retry { delay_ms, .. } = wrapper {
            *delay_ms = scale(*delay_ms);
        }
    }
    for observer in &mut s.observers {
        observer.async_ms = scale(observer.async_ms);
    }
    s
}
