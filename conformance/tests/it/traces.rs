//! Every scenario's trace from the reference, snapshotted (one file per scenario and revision),
//! and what its scripts say that its traces do not (its `ScenarioFacts`, one file per scenario).
//! tep-check's own tests check these files in place (`check/tests/it/util.rs`), without the
//! reference.
//!
//! Review changes with `cargo insta review`; never edit a `.snap` by hand. In CI (`CI=true`)
//! insta writes nothing and a missing or different snapshot fails.

use tep_check::ScenarioFacts;
use tep_conformance::scenario::Scenario;
use tep_conformance::scripted::run_reference;
use tep_model::graph::Revision;
use tep_model::trace::{TraceRecord, to_jsonl};

fn snapshot_traces(revision: Revision) {
    insta::glob!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios"),
        "*.json",
        |path| {
            let text = std::fs::read_to_string(path).unwrap();
            let scenario = Scenario::from_json(&text).unwrap();
            if !scenario.applies_to(revision) {
                return;
            }
            let records = run_reference(&scenario, revision, &[]).unwrap();
            // The header names the crate version; the trace proper starts after it.
            let body: Vec<TraceRecord> = records
                .into_iter()
                .filter(|r| !matches!(r, TraceRecord::Header(_)))
                .collect();
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_suffix(format!("{}.{}", scenario.id, revision));
            settings.set_prepend_module_to_snapshot(false);
            // Where they were when this was a binary of its own: check/tests/it reads them there.
            settings.set_snapshot_path("../snapshots");
            settings.set_description(scenario.description.clone());
            settings.bind(|| insta::assert_snapshot!("trace", to_jsonl(&body)));
        }
    );
}

#[test]
fn reference_traces_rev2() {
    snapshot_traces(Revision::Rev2);
}

#[test]
fn reference_traces_rev1() {
    snapshot_traces(Revision::Rev1);
}

#[test]
fn scenario_facts() {
    insta::glob!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios"),
        "*.json",
        |path| {
            let text = std::fs::read_to_string(path).unwrap();
            let scenario = Scenario::from_json(&text).unwrap();
            let facts = serde_json::to_string_pretty(&ScenarioFacts::from(&scenario)).unwrap();
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_suffix(scenario.id.clone());
            settings.set_prepend_module_to_snapshot(false);
            // Where they were when this was a binary of its own: check/tests/it reads them there.
            settings.set_snapshot_path("../snapshots");
            settings.set_description(scenario.description.clone());
            settings.bind(|| insta::assert_snapshot!("facts", facts));
        }
    );
}
