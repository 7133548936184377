//! Generative conformance: the reference passes thousands of random scenarios, and every mutant
//! of it is found and shrunk to a small scenario that fails with the invariant it breaks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use tep_conformance::fuzz::{FuzzOptions, Profile, fuzz, generate, size};
use tep_conformance::invariants::InvariantId;
use tep_conformance::mutants::breaks;
use tep_conformance::runner::BuiltinReference;
use tep_reference::graph::Revision;
use tep_reference::mutant::Mutant;
use tep_reference::trace::Capability;

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
        let expected: &[InvariantId] = breaks(mutant);
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
