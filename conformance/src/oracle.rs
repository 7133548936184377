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
//! - **No parallel file races.** When two concurrency-safe calls of a batch touch files, the
//!   order of their reads and edits is the implementation's: their outcomes are not compared.
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
    BodyStep, CallExpectation, CallSpec, Expectation, ExpectedContext, ProgramStep, Scenario,
    ThrowPhase, Undetermined, WrapperSpec,
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
    if retry_wraps_others(scenario) {
        // What a second `next()` runs is the implementation's: a re-dispatched call is free.
        racing.extend(
            base.0
                .iter()
                .filter(|(_, seen)| seen.body_runs > 1)
                .map(|(id, _)| id.clone()),
        );
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
    let deadline = deadline(scenario).unwrap_or(0);
    let meets =
        |body: &[BodyStep]| worst_ms(scenario, body).is_none_or(|ms| may_reach(ms, deadline));
    let mut out = BTreeSet::new();
    for call in &scenario.calls {
        let mut hit = meets(&call.body);
        for step in call.program.iter().flatten() {
            hit |= match step {
                ProgramStep::Call(b) => meets(&b.body),
                ProgramStep::All(bs) => bs.iter().any(|b| meets(&b.body)),
                _ => false,
            };
        }
        if hit {
            out.insert(call.call_id.clone());
            out.extend(
                scenario
                    .all_sub_calls()
                    .into_iter()
                    .map(|(id, _)| id)
                    .filter(|id| id.as_str().starts_with(&format!("{}:", call.call_id))),
            );
        }
    }
    out
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
    let has_timeout = scenario
        .wrappers
        .iter()
        .any(|w| matches!(w, WrapperSpec::Timeout));
    let Some(deadline) = deadline(scenario).filter(|_| has_timeout) else {
        return false;
    };
    let bodies = scenario.calls.iter().flat_map(|c| {
        std::iter::once(c.body.as_slice()).chain(c.program.iter().flatten().flat_map(|s| match s {
            ProgramStep::Call(b) => vec![b.body.as_slice()],
            ProgramStep::All(bs) => bs.iter().map(|b| b.body.as_slice()).collect(),
            _ => vec![],
        }))
    });
    bodies
        .filter_map(|body| worst_ms(scenario, body))
        .any(|ms| may_reach(ms, deadline))
}

/// The shortest declared timeout.
fn deadline(scenario: &Scenario) -> Option<u64> {
    scenario.tools.iter().filter_map(|t| t.timeout_ms).min()
}

/// A body's scripted time over every attempt a retry may make, or `None` if it waits for its
/// cancellation (a hang, a slow stop).
fn worst_ms(scenario: &Scenario, body: &[BodyStep]) -> Option<u64> {
    let (attempts, delay) = scenario
        .wrappers
        .iter()
        .filter_map(|w| match w {
            WrapperSpec::Retry { attempts, delay_ms } => Some((u64::from(*attempts), *delay_ms)),
            _ => None,
        })
        .fold((1u64, 0u64), |(a, d), (n, ms)| (a * n.max(1), d + ms * n));
    let mut total = 0u64;
    for step in body {
        match step {
            BodyStep::Hang | BodyStep::SlowStop(_) => return None,
            BodyStep::Sleep(ms) => total += ms,
            _ => {}
        }
    }
    Some(total * attempts + delay)
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
