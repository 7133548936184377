//! Generative conformance: the reference passes thousands of random scenarios, and every mutant
//! of it is found and shrunk to a small scenario that fails with the invariant it breaks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use tep_check::invariants::InvariantId;
use tep_conformance::fuzz::{
    FuzzOptions, MAX_SHRINK_ERRORS_IN_A_ROW, Profile, ShrinkStop, fuzz, generate, size,
};
use tep_conformance::fuzz_stats::{constructs, count};
use tep_conformance::mutants::breaks;
use tep_conformance::protocol::Ready;
use tep_conformance::runner::BuiltinReference;
use tep_conformance::runner::{Answer, Implementation, RunOptions, run_suite};
use tep_conformance::scenario::{Scenario, corpus};
use tep_model::graph::Revision;
use tep_model::trace::Capability;
use tep_reference::mutant::Mutant;

fn all() -> Profile {
    Profile {
        revision: Revision::Rev2,
        capabilities: Capability::ALL.into_iter().collect(),
    }
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
    let bare = Profile {
        revision: Revision::Rev1,
        capabilities: BTreeSet::new(),
    };
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
fn the_oracle_finds_what_no_invariant_names_and_the_shrunk_file_replays_it() {
    let mutant = Mutant::PreListenersReversed;
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
    assert!(blind.failure.is_none(), "the invariants alone see {mutant}");
    let found = fuzz(&mut BuiltinReference::new(vec![mutant]), &options, |_| {})
        .unwrap()
        .failure
        .expect("the oracle finds it");
    assert!(found.check.starts_with("expected-"), "{}", found.check);
    assert!(
        found.violations[0].message.starts_with("oracle "),
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
    let mut hanging = FailsThenErrors {
        inner: BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]),
        runs: 0,
        answers: failure.case + 1,
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
