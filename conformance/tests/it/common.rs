//! What the conformance crate's tests that run the reference share.

#![allow(dead_code)]

use tep_check::{CheckOptions, ScenarioFacts};
use tep_conformance::scenario::{Scenario, corpus};
use tep_model::graph::Revision;
use tep_model::trace::ObservationLevel;

/// The corpus scenario `id`.
pub fn scenario(id: &str) -> Scenario {
    corpus()
        .unwrap()
        .into_iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no scenario {id}"))
}

/// Drive mode's options for a scenario in `revision` at `level`.
pub fn drive_options(s: &Scenario, revision: Revision, level: ObservationLevel) -> CheckOptions {
    CheckOptions::new(revision)
        .observed(level)
        .with_facts(ScenarioFacts::from(s))
}
