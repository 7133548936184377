//! Generative conformance: the reference passes thousands of random scenarios, and every mutant
//! of it is found and shrunk to a small scenario that fails with the invariant it breaks.

use std::collections::BTreeSet;

use tep_check::invariants::InvariantId;
use tep_conformance::fuzz::{
    CONFIRM_RUNS, FuzzOptions, MAX_SHRINK_ERRORS_IN_A_ROW, Profile, ShrinkStop, fuzz, generate,
    size,
};
use tep_conformance::fuzz_stats::{constructs, count};
use tep_conformance::mutants::breaks;
use tep_conformance::protocol::Ready;
use tep_conformance::runner::BuiltinReference;
use tep_conformance::runner::{Answer, Implementation, RunOptions, run_suite};
use tep_conformance::scenario::{Scenario, corpus};
use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::trace::{Capability, TraceRecord};
use tep_reference::mutant::Mutant;

fn all() -> Profile {
    Profile::new(Revision::Rev2, Capability::ALL)
}

#[test]
fn the_same_seed_gives_the_same_scenarios() {
    for case in 0..20 {
        assert_eq!(
            generate(&all(), 7, case).unwrap(),
            generate(&all(), 7, case).unwrap()
        );
    }
    let differ = (0..20)
        .filter(|&c| generate(&all(), 7, c).unwrap() != generate(&all(), 8, c).unwrap())
        .count();
    assert!(differ > 15);
}

#[test]
fn generated_scenarios_are_valid_and_use_only_declared_capabilities() {
    let bare = Profile::new(Revision::Rev1, []);
    for case in 0..200 {
        let s = generate(&all(), 1, case).unwrap();
        s.validate().unwrap_or_else(|e| panic!("{e}"));
        let s = generate(&bare, 1, case).unwrap();
        s.validate().unwrap();
        assert!(s.requires.is_empty(), "{:?}", s.requires);
    }
}

#[test]
fn the_reference_passes_generated_scenarios() {
    for (revision, cases) in [(Revision::Rev2, 1500), (Revision::Rev1, 500)] {
        let mut reference = BuiltinReference::new(vec![]);
        let options = FuzzOptions {
            spec: revision,
            cases,
            strict: true,
            ..FuzzOptions::new(42)
        };
        let report = fuzz(&mut reference, &options, |_| {}).unwrap();
        assert_eq!(report.errored, 0, "{:?}", report.first_error);
        assert!(
            report.failure.is_none(),
            "{revision}: {:#?}",
            report.failure.map(|f| (
                f.violations,
                tep_conformance::fuzz::to_corpus_json(&f.scenario)
            ))
        );
        assert_eq!(report.cases, cases);
    }
}

#[test]
fn every_mutant_is_found_and_shrunk_to_a_small_scenario_that_breaks_its_invariant() {
    let mut report = Vec::new();
    for &mutant in Mutant::ALL {
        let mut reference = BuiltinReference::new(vec![mutant]);
        let options = FuzzOptions {
            cases: 300,
            strict: true,
            ..FuzzOptions::new(1)
        };
        let run = fuzz(&mut reference, &options, |_| {}).unwrap();
        let failure = run
            .failure
            .unwrap_or_else(|| panic!("{mutant}: not found in {} cases", run.cases));
        // A mutant no invariant names is found by the oracle.
        let expected: &[InvariantId] = match breaks(mutant) {
            [] => &[InvariantId::ExpectedOutcome, InvariantId::ExpectedContent],
            named => named,
        };
        assert!(
            expected.contains(&failure.invariant),
            "{mutant}: shrunk to {}, expected one of {expected:?}",
            failure.invariant
        );
        // The minimal scenario is a corpus scenario, and still fails the same way.
        failure.scenario.validate().unwrap();
        let shrunk = size(&failure.scenario);
        assert!(
            shrunk <= 12,
            "{mutant}: the shrunk scenario has size {shrunk}"
        );
        assert!(shrunk <= failure.original_size);
        report.push(format!(
            "{mutant}: case {}, {} -> size {shrunk}",
            failure.case, failure.invariant
        ));
    }
    println!("{}", report.join("\n"));
}

#[test]
fn the_oracle_finds_what_no_must_invariant_names_and_the_shrunk_file_replays_it() {
    // Reversed listeners break only `waterfall-registration-order`, a SHOULD: without
    // `--strict` no invariant fails the run, and the oracle still sees the decision that wins.
    let mutant = Mutant::PreListenersReversed;
    assert!(
        breaks(mutant)
            .iter()
            .all(|&id| !tep_check::invariant(id).level.fails(false))
    );
    let options = FuzzOptions {
        cases: 1000,
        ..FuzzOptions::new(1)
    };
    let blind = fuzz(
        &mut BuiltinReference::new(vec![mutant]),
        &FuzzOptions {
            oracle: false,
            ..options.clone()
        },
        |_| {},
    )
    .unwrap();
    assert!(
        blind.failure.is_none(),
        "the MUST invariants alone see {mutant}"
    );
    let found = fuzz(&mut BuiltinReference::new(vec![mutant]), &options, |_| {})
        .unwrap()
        .failure
        .expect("the oracle finds it");
    assert!(
        found.check.oracle.is_some() && found.check.to_string().starts_with("expected-"),
        "{}",
        found.check
    );
    // The message names the check the failure carries.
    let named = format!("oracle {}", found.check.oracle.map_or("", |o| o.as_str()));
    assert!(
        found.violations[0].message.starts_with(&named),
        "{:?}",
        found.violations
    );
    // The written scenario carries the oracle's expectations: drive mode fails it the same way.
    let replayed =
        Scenario::from_json(&tep_conformance::fuzz::to_corpus_json(&found.scenario)).unwrap();
    let report = run_suite(
        &mut BuiltinReference::new(vec![mutant]),
        std::slice::from_ref(&replayed),
        &RunOptions::default(),
    )
    .unwrap();
    assert!(
        report.scenarios[0]
            .violations
            .iter()
            .any(|v| v.invariant == found.invariant),
        "{:#?}",
        report.scenarios[0].violations
    );
    let correct = run_suite(
        &mut BuiltinReference::new(vec![]),
        &[replayed],
        &RunOptions::default(),
    )
    .unwrap();
    assert!(
        !correct.scenarios[0].fails(true),
        "{:#?}",
        correct.scenarios[0]
    );
}

#[test]
fn a_body_that_ends_near_its_deadline_is_left_free() {
    let near: Scenario = serde_json::from_value(serde_json::json!({
        "id": "near-the-deadline",
        "description": "d",
        "spec": "s",
        "exercises": ["expected-outcome"],
        "tools": [{"name": "t1", "timeoutMs": 80}, {"name": "t2", "timeoutMs": 80}],
        "calls": [
            {"callId": "c1", "tool": "t1", "body": [{"sleep": 78}, {"return": "done"}]},
            {"callId": "c2", "tool": "t2", "body": [{"sleep": 10}, {"return": "done"}]}
        ],
        "wrappers": [{"kind": "timeout"}],
        "expect": {"calls": {"c1": {"isError": false, "bodyRuns": 1}, "c2": {"isError": false, "bodyRuns": 1}}}
    }))
    .unwrap();
    let expect = tep_conformance::oracle::expectations(&near, Revision::Rev2).unwrap();
    assert_eq!(expect.undetermined.calls, vec!["c1".into()]);
    let c2 = &expect.calls["c2"];
    assert_eq!(
        (c2.is_error, c2.body_runs, c2.content.as_deref()),
        (false, 1, Some("done"))
    );
}

/// Judging the built-in reference, the oracle takes the reference's run from the trace it was
/// handed instead of running the scenario again: the expectations are the same.
#[test]
fn the_oracle_given_the_references_own_trace_expects_what_its_own_run_gives() {
    use tep_conformance::oracle::{expectations, expectations_given};
    use tep_conformance::scripted::{ReferenceRun, run_reference_to_the_end};
    let generated = (0..150).map(|case| generate(&all(), 11, case).unwrap());
    let mut compared = 0;
    for scenario in generated.chain(corpus().unwrap()) {
        let Ok(ReferenceRun::Trace(trace)) =
            run_reference_to_the_end(&scenario, Revision::Rev2, &[])
        else {
            continue;
        };
        assert_eq!(
            expectations_given(&scenario, Revision::Rev2, Some(&trace)),
            expectations(&scenario, Revision::Rev2),
            "{}",
            scenario.id
        );
        compared += 1;
    }
    assert!(compared > 150, "{compared}");
    // The unbroken reference is the reference; broken on purpose, it is not.
    assert!(BuiltinReference::new(Vec::new()).is_the_reference());
    assert!(!BuiltinReference::new(vec![Mutant::ALL[0]]).is_the_reference());
}

#[test]
fn parallel_calls_touching_files_are_left_free() {
    let racing: Scenario = serde_json::from_value(serde_json::json!({
        "id": "racing-edits",
        "description": "d",
        "spec": "s",
        "requires": ["parallel", "fs-gate"],
        "exercises": ["expected-outcome"],
        "tools": [{"name": "t1", "concurrencySafe": true}, {"name": "t2", "concurrencySafe": true}],
        "calls": [
            {"callId": "c1", "tool": "t1", "body": [{"read": "a.txt"}, {"return": "read"}]},
            {"callId": "c2", "tool": "t2", "body": [{"edit": {"path": "a.txt", "old": "a", "new": "b"}}, {"return": "edited"}]}
        ],
        "files": {"a.txt": "a file"},
        "expect": {"calls": {"c1": {"isError": false, "bodyRuns": 1}, "c2": {"isError": false, "bodyRuns": 1}}}
    }))
    .unwrap();
    racing.validate().unwrap();
    let expect = tep_conformance::oracle::expectations(&racing, Revision::Rev2).unwrap();
    assert_eq!(expect.undetermined.calls, vec!["c1".into(), "c2".into()]);
    assert!(expect.calls.is_empty());
}

/// Constructs the corpus uses that the generator leaves out on purpose.
const NOT_GENERATED: &[(&str, &str)] = &[];

#[test]
fn the_generator_reaches_every_construct_of_the_scenario_language() {
    let generated = count(
        (0..1000)
            .map(|c| generate(&all(), 3, c).unwrap())
            .collect::<Vec<_>>()
            .iter(),
    );
    // Every construct the corpus uses, and those the corpus cannot show in one scenario.
    let mut wanted: BTreeSet<String> = corpus().unwrap().iter().flat_map(constructs).collect();
    for decided in [
        "pre[].decide",
        "guards[].decide",
        "post[].decide",
        "approval.answers",
    ] {
        for class in ["<call>", "<sub-call>", "*"] {
            wanted.insert(format!("{decided}.{class}"));
        }
    }
    wanted.extend(
        [
            "span: a write then an edit of the same file",
            "span: two asks for one tool",
            "span: wrapper timeout outside retry",
            "span: wrapper timeout outside context",
            "span: wrapper context outside timeout",
            "span: wrapper context outside throw",
            "span: wrapper throw outside context",
            // Wrappers inside a retry (judged by redispatch-through-wrappers).
            "span: wrapper retry outside timeout",
            "span: wrapper retry outside context",
            "span: wrapper retry outside metrics",
            "span: wrapper retry outside throw",
        ]
        .map(String::from),
    );
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|c| !generated.contains_key(*c))
        .filter(|c| !NOT_GENERATED.iter().any(|(n, _)| n == c))
        .collect();
    assert!(
        missing.is_empty(),
        "never generated in 1,000 cases: {missing:#?}"
    );
}

/// A mutant that answers its first failing case, then errors on every run (an adapter that
/// starts hanging): shrinking gives up after a few errors in a row, and says why.
struct FailsThenErrors {
    inner: BuiltinReference,
    /// Runs answered so far, and how many it answers before it errors.
    runs: usize,
    answers: usize,
}

impl Implementation for FailsThenErrors {
    fn ready(&self) -> &Ready {
        self.inner.ready()
    }

    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
        self.runs += 1;
        if self.runs > self.answers {
            return Answer::Errored {
                message: "no answer within 1 s".to_owned(),
                stderr: None,
            };
        }
        self.inner.run(seq, spec, scenario)
    }
}

#[test]
fn shrinking_says_why_it_stopped() {
    let options = FuzzOptions {
        cases: 300,
        strict: true,
        ..FuzzOptions::new(1)
    };
    let mut reference = BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]);
    let failure = fuzz(&mut reference, &options, |_| {})
        .unwrap()
        .failure
        .unwrap();
    assert_eq!(failure.shrink_stop, ShrinkStop::Smallest);
    // The same cases, answered up to the first failing one; every shrink run errors.
    // (The failing case runs CONFIRM_RUNS times before it is a failure.)
    let mut hanging = FailsThenErrors {
        inner: BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]),
        runs: 0,
        answers: failure.case + CONFIRM_RUNS,
    };
    let run = fuzz(&mut hanging, &options, |_| {}).unwrap();
    let failure = run.failure.unwrap();
    assert_eq!(failure.shrink_stop, ShrinkStop::Errors);
    assert_eq!(failure.shrink_runs, MAX_SHRINK_ERRORS_IN_A_ROW);
    assert_eq!(run.errored, MAX_SHRINK_ERRORS_IN_A_ROW);
    assert_eq!(
        failure.shrink_stop.to_string(),
        "stopped: 3 runs in a row errored (see `errored`)"
    );
}

/// An implementation that is correct on some runs and broken on others, as a pipeline whose
/// outcome depends on the machine's load is: the reference, except that on the runs `broken`
/// picks, the mutant's trace is answered.
struct SometimesBroken {
    correct: BuiltinReference,
    broken: BuiltinReference,
    runs: usize,
    pick: fn(usize) -> bool,
}

impl Implementation for SometimesBroken {
    fn ready(&self) -> &Ready {
        self.correct.ready()
    }

    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
        self.runs += 1;
        if (self.pick)(self.runs) {
            self.broken.run(seq, spec, scenario)
        } else {
            self.correct.run(seq, spec, scenario)
        }
    }
}

#[test]
fn a_failure_that_does_not_reproduce_every_time_is_flaky_never_failed() {
    let options = FuzzOptions {
        cases: 60,
        strict: true,
        ..FuzzOptions::new(1)
    };
    // Every other run is broken (run-body-after-deny is found at case 4 of seed 1).
    let mut alternating = SometimesBroken {
        correct: BuiltinReference::new(vec![]),
        broken: BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]),
        runs: 0,
        pick: |run| run % 2 == 1,
    };
    let report = fuzz(&mut alternating, &options, |_| {}).unwrap();
    assert!(
        report.failure.is_none(),
        "{:?}",
        report.failure.map(|f| f.check)
    );
    assert_eq!(report.cases, 60, "fuzzing goes on after a flaky case");
    let first = report.flaky.first().expect("a flaky case is reported");
    assert_eq!(first.check.to_string(), "deny-skips-body");
    assert_eq!(first.check.oracle, None);
    assert!(first.failed > 1 && first.failed < first.runs, "{first:?}");
    assert_eq!(first.runs, CONFIRM_RUNS);
    assert!(!first.never_reproduced());
    // The scenario is written for the corpus, named for its seed and case.
    first.scenario.validate().unwrap();
    assert_eq!(first.scenario.id, format!("fuzz-1-{}", first.case));

    // Broken only on the run that found it: it could not be reproduced at all.
    let mut once = SometimesBroken {
        correct: BuiltinReference::new(vec![]),
        broken: BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]),
        runs: 0,
        pick: |run| run == 5,
    };
    let report = fuzz(&mut once, &options, |_| {}).unwrap();
    assert!(report.failure.is_none());
    let [flaky] = report.flaky.as_slice() else {
        panic!("{:?}", report.flaky);
    };
    assert_eq!((flaky.failed, flaky.runs), (1, CONFIRM_RUNS));
    assert!(flaky.never_reproduced());
}

#[test]
fn a_deterministic_failure_is_confirmed_and_shrunk_as_before() {
    // Measured before replays confirmed failures (seed 1): case 4, size 23 shrunk to 8.
    let options = FuzzOptions {
        cases: 300,
        ..FuzzOptions::new(1)
    };
    let mut reference = BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]);
    let report = fuzz(&mut reference, &options, |_| {}).unwrap();
    assert!(report.flaky.is_empty());
    let failure = report.failure.unwrap();
    assert_eq!(
        (failure.case, failure.original_size, failure.shrunk_size),
        (4, 23, 8)
    );
    // Dropping the parts it does not need (after shrinking) only makes it smaller.
    assert!(size(&failure.scenario) <= failure.shrunk_size);
}

#[test]
fn every_generated_deadline_is_far_from_the_work_it_scripts() {
    use tep_conformance::scenario::BodyStep;
    let waits = |body: &[BodyStep]| match body.split_last() {
        Some((BodyStep::Hang | BodyStep::SlowStop(_), before)) => {
            before.iter().all(|s| matches!(s, BodyStep::Sleep(_)))
        }
        _ => false,
    };
    let mut short = 0;
    for case in 0..1000 {
        let s = generate(&all(), 5, case).unwrap();
        // Every attempt a retry makes, and the delays between them.
        let (attempts, delays) = s
            .wrappers
            .iter()
            .filter_map(|w| match w {
                tep_conformance::scenario::WrapperSpec::Retry { attempts, delay_ms } => {
                    Some((u64::from(*attempts), delay_ms * u64::from(*attempts)))
                }
                _ => None,
            })
            .fold((1, 0), |(a, d), (n, ms)| (a * n, d + ms));
        for tool in &s.tools {
            let deadline = tool.timeout_ms.unwrap();
            let bodies: Vec<Vec<BodyStep>> = s
                .calls
                .iter()
                .filter(|c| c.tool == tool.name)
                .map(|c| c.body.clone())
                .chain(
                    s.all_sub_calls()
                        .into_iter()
                        .filter(|(_, b)| b.tool == tool.name)
                        .map(|(_, b)| b.body),
                )
                .collect();
            if !bodies.is_empty() && bodies.iter().all(|b| waits(b)) {
                short += 1;
                continue;
            }
            for body in &bodies {
                let sleeps: u64 = body
                    .iter()
                    .map(|s| match s {
                        BodyStep::Sleep(ms) | BodyStep::SlowStop(ms) => *ms,
                        _ => 0,
                    })
                    .sum();
                assert!(
                    deadline >= 1000 && deadline >= 10 * (sleeps * attempts + delays),
                    "case {case}: tool {} has {deadline} ms for {body:?}",
                    tool.name
                );
            }
        }
    }
    assert!(short > 0, "the hang shapes keep their short deadline");
}

#[test]
fn a_run_code_value_a_listener_replaces_is_left_free() {
    // The implementation revalidates the value against run_code's output schema (reference
    // semantics 29, 32): the reference, with no schemas, cannot say how it ends.
    let replaced: Scenario = serde_json::from_value(serde_json::json!({
        "id": "replaced-program-value",
        "description": "d",
        "spec": "s",
        "requires": ["code-mode"],
        "exercises": ["expected-outcome"],
        "tools": [{"name": "t1"}],
        "calls": [
            {"callId": "c1", "tool": "run_code", "program": [{"return": "done"}]},
            {"callId": "c2", "tool": "t1", "body": [{"return": "done"}]}
        ],
        "post": [{"id": "post1", "decide": {"*": {"accept": {"value": {"n": 1}}}}}],
        "expect": {"calls": {"c1": {"isError": false, "bodyRuns": 1}, "c2": {"isError": false, "bodyRuns": 1}}}
    }))
    .unwrap();
    replaced.validate().unwrap();
    let expect = tep_conformance::oracle::expectations(&replaced, Revision::Rev2).unwrap();
    assert_eq!(expect.undetermined.calls, vec!["c1".into()]);
    assert!(!expect.calls["c2"].is_error);
}

#[test]
fn unscripted_work_near_a_deadline_is_left_free() {
    let near: Scenario = serde_json::from_value(serde_json::json!({
        "id": "files-near-the-deadline",
        "description": "d",
        "spec": "s",
        "requires": ["fs-gate"],
        "exercises": ["expected-outcome"],
        "tools": [{"name": "t1", "timeoutMs": 80}, {"name": "t2", "timeoutMs": 1000}],
        "calls": [
            {"callId": "c1", "tool": "t1", "body": [{"read": "a.txt"}, {"return": "done"}]},
            {"callId": "c2", "tool": "t2", "body": [{"read": "a.txt"}, {"return": "done"}]}
        ],
        "files": {"a.txt": "a file"},
        "wrappers": [{"kind": "timeout"}],
        "expect": {"calls": {"c1": {"isError": false, "bodyRuns": 1}, "c2": {"isError": false, "bodyRuns": 1}}}
    }))
    .unwrap();
    near.validate().unwrap();
    let expect = tep_conformance::oracle::expectations(&near, Revision::Rev2).unwrap();
    assert_eq!(expect.undetermined.calls, vec!["c1".into()]);
    assert!(!expect.calls["c2"].is_error);
}

/// The reference, but each successful result's text formatted its own way (as a shipped harness
/// formats a search answer), in every record alike; it may say which calls' content that is.
struct Reformatting {
    inner: BuiltinReference,
    declares: bool,
}

impl Implementation for Reformatting {
    fn ready(&self) -> &Ready {
        self.inner.ready()
    }

    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
        let reformat = |record: TraceRecord| -> TraceRecord {
            let line = serde_json::to_string(&record)
                .unwrap()
                .replace(r#""text":"done""#, r#""text":"formatted: done""#);
            serde_json::from_str(&line).unwrap()
        };
        match self.inner.run(seq, spec, scenario) {
            Answer::Ran(records) => Answer::Ran(records.into_iter().map(reformat).collect()),
            other => other,
        }
    }

    fn unchecked_content(&self, scenario: &Scenario) -> Vec<(CallId, String)> {
        if !self.declares {
            return Vec::new();
        }
        scenario
            .calls
            .iter()
            .map(|c| (c.call_id.clone(), "formatted its own way".to_owned()))
            .collect()
    }
}

#[test]
fn content_an_implementation_formats_its_own_way_is_not_compared_by_the_oracle() {
    let options = FuzzOptions {
        cases: 100,
        strict: true,
        ..FuzzOptions::new(4)
    };
    let mut silent = Reformatting {
        inner: BuiltinReference::new(vec![]),
        declares: false,
    };
    let failure = fuzz(&mut silent, &options, |_| {})
        .unwrap()
        .failure
        .expect("reformatted content differs from the reference's");
    assert_eq!(
        failure.invariant,
        InvariantId::ExpectedContent,
        "{failure:?}"
    );
    let mut declaring = Reformatting {
        inner: BuiltinReference::new(vec![]),
        declares: true,
    };
    let report = fuzz(&mut declaring, &options, |_| {}).unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert!(report.flaky.is_empty(), "{:?}", report.flaky);
}

/// The reference, whose own records show a MUST breach beyond the trace whenever a batch has
/// more than two calls (as a harness driver's body intervals would).
struct BreachingBeyond {
    inner: BuiltinReference,
    calls: usize,
}

impl Implementation for BreachingBeyond {
    fn ready(&self) -> &Ready {
        self.inner.ready()
    }

    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
        self.calls = scenario.calls.len();
        self.inner.run(seq, spec, scenario)
    }

    fn breaches_beyond_the_trace(&mut self) -> Vec<tep_check::Violation> {
        if self.calls <= 2 {
            return Vec::new();
        }
        vec![tep_check::Violation::new(
            InvariantId::DenySkipsBody,
            vec![1],
            None,
            "a body ran after its denial",
        )]
    }
}

#[test]
fn a_breach_beyond_the_trace_fails_the_fuzz_run_and_shrinks_with_it() {
    let options = FuzzOptions {
        cases: 100,
        ..FuzzOptions::new(5)
    };
    let mut breaching = BreachingBeyond {
        inner: BuiltinReference::new(vec![]),
        calls: 0,
    };
    let failure = fuzz(&mut breaching, &options, |_| {})
        .unwrap()
        .failure
        .expect("a breach beyond the trace is a failure");
    assert_eq!(failure.invariant, InvariantId::DenySkipsBody, "{failure:?}");
    // Shrunk to the smallest batch that still breaches.
    assert_eq!(failure.scenario.calls.len(), 3, "{failure:?}");
}
