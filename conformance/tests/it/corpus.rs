//! The corpus against the reference, and proof that the checker has teeth.
//!
//! - every scenario passes on the reference, in every revision it applies to, with no warning;
//! - the corpus takes every edge of each revision's graph (100% edge coverage);
//! - every invariant is exercised by at least one scenario of each revision it applies to;
//! - for every scenario and every invariant it claims to exercise, planting that breach in the
//!   scenario's reference trace makes the checker report exactly that invariant;
//! - every mutant of the reference is caught, with the invariant it breaks.

use std::collections::BTreeSet;

use tep_check::CATALOG;
use tep_check::CheckOptions;
use tep_check::invariants::InvariantId;
use tep_check::mutation::plant;
use tep_conformance::mutants::breaks;
use tep_conformance::outcome::{Coverage, Status};
use tep_conformance::runner::{BuiltinReference, RunOptions, judge, run_suite};
use tep_conformance::scenario::{Scenario, corpus};
use tep_conformance::scripted::run_reference;
use tep_model::graph::{Revision, StageGraph};
use tep_model::trace::NextRequest;
use tep_reference::mutant::Mutant;

fn scenarios() -> Vec<Scenario> {
    corpus().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_corpus_is_valid_and_large_enough() {
    let corpus = scenarios();
    assert!(corpus.len() >= 40, "only {} scenarios", corpus.len());
    let ids: BTreeSet<&str> = corpus.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), corpus.len(), "scenario ids are unique");
}

#[test]
fn the_reference_passes_every_scenario_with_full_edge_coverage() {
    let corpus = scenarios();
    for revision in Revision::ALL {
        let mut reference = BuiltinReference::new(vec![]);
        let options = RunOptions {
            spec: revision,
            ..RunOptions::default()
        };
        let report = run_suite(&mut reference, &corpus, &options).unwrap();
        for s in &report.scenarios {
            assert!(
                matches!(s.status, Status::Passed | Status::Skipped),
                "{revision} {}: {:?} {:#?} {:?}",
                s.id,
                s.status,
                s.violations,
                s.reason
            );
        }
        assert_eq!(
            report.missing_edges(),
            Vec::<String>::new(),
            "{revision}: edges no scenario takes"
        );
        assert_eq!(
            report.coverage.edges.len(),
            StageGraph::of(revision).edges().len()
        );
        assert!((report.edge_coverage() - 1.0).abs() < f64::EPSILON);
        assert_eq!(
            report.missing_code_mode_edges(),
            Vec::<String>::new(),
            "{revision}: Code Mode edges no sub-call takes"
        );
    }
}

#[test]
fn every_invariant_is_exercised_in_every_revision_it_applies_to() {
    let corpus = scenarios();
    let mut gaps = Vec::new();
    for inv in CATALOG {
        for revision in inv.revisions() {
            let covered = corpus
                .iter()
                .any(|s| s.applies_to(revision) && s.exercises.contains(&inv.id));
            if !covered {
                gaps.push(format!("{} in {revision}", inv.id));
            }
        }
    }
    assert!(
        gaps.is_empty(),
        "invariants no scenario exercises: {gaps:#?}"
    );
}

#[test]
fn every_claimed_breach_is_caught_with_its_id() {
    let corpus = scenarios();
    let mut problems = Vec::new();
    let mut planted = 0;
    for scenario in &corpus {
        for revision in Revision::ALL
            .into_iter()
            .filter(|&r| scenario.applies_to(r))
        {
            // With the request a harness replaying its log would send the model next: the
            // reference has no model boundary (level `boundary`'s `request` record).
            let trace = NextRequest::add_to(&run_reference(scenario, revision, &[]).unwrap());
            let options = CheckOptions::new(revision);
            for &id in &scenario.exercises {
                if !tep_check::invariant(id).applies_to(revision) {
                    continue;
                }
                let Some(mutated) = plant(id, &trace) else {
                    problems.push(format!(
                        "{} ({revision}) claims {id} but no breach of it can be planted in its trace",
                        scenario.id
                    ));
                    continue;
                };
                planted += 1;
                let mut coverage = Coverage::default();
                let result = judge(scenario, &options, mutated, None, &mut coverage);
                let reported: BTreeSet<InvariantId> =
                    result.violations.iter().map(|v| v.invariant).collect();
                if !reported.contains(&id) {
                    problems.push(format!(
                        "{} ({revision}): planting {id} was reported as {reported:?} {:?}",
                        scenario.id, result.reason
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(planted > 200, "only {planted} breaches planted");
}

#[test]
fn every_invariant_can_be_broken_in_a_scenario_and_is_caught_with_its_id() {
    // Walks the catalog: for each invariant and revision, some scenario's reference trace can be
    // broken the way a faulty implementation would (a planted breach), and the checker names
    // that invariant. The drive-mode expectations are broken by changing the outcome.
    let corpus = scenarios();
    let mut unbreakable = Vec::new();
    for inv in CATALOG {
        for revision in inv.revisions() {
            let caught = corpus
                .iter()
                .filter(|s| s.applies_to(revision) && s.exercises.contains(&inv.id))
                .any(|s| {
                    let trace = NextRequest::add_to(&run_reference(s, revision, &[]).unwrap());
                    let Some(broken) = plant(inv.id, &trace) else {
                        return false;
                    };
                    let options = CheckOptions::new(revision);
                    let mut coverage = Coverage::default();
                    judge(s, &options, broken, None, &mut coverage)
                        .violations
                        .iter()
                        .any(|v| v.invariant == inv.id)
                });
            if !caught {
                unbreakable.push(format!("{} in {revision}", inv.id));
            }
        }
    }
    assert!(
        unbreakable.is_empty(),
        "no scenario can break: {unbreakable:#?}"
    );
}

#[test]
fn every_mutant_of_the_reference_is_caught_with_the_invariant_it_breaks() {
    let corpus = scenarios();
    for &mutant in Mutant::ALL {
        let mut reference = BuiltinReference::new(vec![mutant]);
        let report = run_suite(&mut reference, &corpus, &RunOptions::default()).unwrap();
        // The drive-mode expectations see the consequences too; the invariants are the verdict.
        let reported: BTreeSet<InvariantId> = report
            .scenarios
            .iter()
            .flat_map(|s| s.violations.iter().map(|v| v.invariant))
            .filter(|id| {
                !matches!(
                    id,
                    InvariantId::ExpectedOutcome | InvariantId::ExpectedContent
                )
            })
            .collect();
        let expected: BTreeSet<InvariantId> = breaks(mutant).iter().copied().collect();
        assert_eq!(reported, expected, "{mutant}");
        let failing = report.scenarios.iter().filter(|s| s.fails(true)).count();
        assert!(failing > 0, "{mutant} went unnoticed");
    }
}

#[test]
fn sub_call_expectations_are_checked_too() {
    let mut scenario = scenarios()
        .into_iter()
        .find(|s| s.id == "code-mode-sub-calls-re-enter-the-pipeline")
        .unwrap();
    let trace = run_reference(&scenario, Revision::Rev2, &[]).unwrap();
    scenario.expect.calls.get_mut("c1:code:3").unwrap().is_error = false;
    let mut coverage = Coverage::default();
    let result = judge(
        &scenario,
        &CheckOptions::new(Revision::Rev2),
        trace,
        None,
        &mut coverage,
    );
    let flagged: Vec<_> = result
        .violations
        .iter()
        .filter(|v| v.invariant == InvariantId::ExpectedOutcome)
        .map(|v| v.call.as_ref().map(|c| c.to_string()))
        .collect();
    assert_eq!(flagged, vec![Some("c1:code:3".to_owned())]);
}
