//! The versioned scenario language: every construct has a protocol version in the one table,
//! and an implementation declaring an older protocol is sent nothing newer, by `tep run`'s plan
//! and by `tep fuzz` (generation and shrinking alike).

use std::collections::BTreeSet;

use serde_json::Value;
use tep_conformance::fuzz::{FuzzOptions, Profile, fuzz, generate};
use tep_conformance::outcome::Status;
use tep_conformance::protocol::{PROTOCOL_VERSION, Ready, SUPPORTED_PROTOCOLS};
use tep_conformance::runner::{Answer, BuiltinReference, Implementation, Plan, RunOptions};
use tep_conformance::scenario::versions::{CONSTRUCTS, entry, newest, schema, versions};
use tep_conformance::scenario::{Scenario, corpus};
use tep_model::graph::Revision;
use tep_model::trace::Capability;
use tep_reference::mutant::Mutant;

fn profile(revision: Revision) -> Profile {
    Profile::new(revision, Capability::ALL)
}

/// Every scenario a test can think of: the corpus and a few hundred generated ones per revision.
fn scenarios() -> Vec<Scenario> {
    let mut all = corpus().unwrap();
    for revision in Revision::ALL {
        for case in 0..300 {
            all.push(generate(&profile(revision), 11, case).unwrap());
        }
    }
    all
}

#[test]
fn every_construct_of_the_schema_has_a_version_entry() {
    let in_schema = versions().all();
    let missing: Vec<_> = in_schema
        .iter()
        .filter(|(part, name)| entry(part, name).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "constructs with no entry in scenario::versions::CONSTRUCTS: {missing:?}"
    );
    let stale: Vec<_> = CONSTRUCTS
        .iter()
        .filter(|c| !in_schema.contains(&(c.part.to_owned(), c.name.to_owned())))
        .collect();
    assert!(
        stale.is_empty(),
        "entries the schema does not have: {stale:?}"
    );
    let unique: BTreeSet<_> = CONSTRUCTS.iter().map(|c| (c.part, c.name)).collect();
    assert_eq!(
        unique.len(),
        CONSTRUCTS.len(),
        "a construct is listed twice"
    );
}

#[test]
fn every_construct_a_scenario_uses_has_a_version_entry() {
    let in_schema = versions().all();
    let mut seen = BTreeSet::new();
    for scenario in scenarios() {
        for used in versions().used(&scenario) {
            assert!(
                entry(&used.0, &used.1).is_some(),
                "{}: {used:?} has no version entry",
                scenario.id
            );
            assert!(in_schema.contains(&used), "{used:?} is not in the schema");
            seen.insert(used);
        }
    }
    // The walk sees the constructs the corpus is known to use, nested ones included.
    for (part, name) in [
        ("BodyStep", "slowStop"),
        ("PreAction", "rewrite"),
        ("GuardAction", "allow"),
        ("ObserverSpec", "mutate"),
        ("WrapperSpec", "retry.delayMs"),
        ("ProgramStep", "callRunCode"),
        ("ApprovalAnswer", "allowed-once"),
        ("CallExpectation", "referenceContent"),
    ] {
        assert!(
            seen.contains(&(part.to_owned(), name.to_owned())),
            "no scenario uses {part}.{name}"
        );
    }
}

#[test]
fn the_runner_speaks_the_newest_version_of_the_language() {
    assert_eq!(newest(), PROTOCOL_VERSION);
    assert_eq!(SUPPORTED_PROTOCOLS.last(), Some(&PROTOCOL_VERSION));
    let v3: BTreeSet<_> = CONSTRUCTS
        .iter()
        .filter(|c| c.since == 3)
        .map(|c| format!("{}.{}", c.part, c.name))
        .collect();
    let expected: BTreeSet<String> = [
        "BodyStep.slowStop",
        "GuardAction.allow",
        "ObserverSpec.mutate",
        "PreAction.rewrite",
        // The fuzzing oracle's expectations (tep judges them; no adapter reads them).
        "CallExpectation.approvalRuns",
        "CallExpectation.guardRuns",
        "CallExpectation.preRuns",
        "Expectation.undetermined",
        "Undetermined.calls",
        "Undetermined.contexts",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(v3, expected);
}

#[test]
fn the_schema_carries_each_construct_version() {
    let schema = schema();
    let body = schema["$defs"]["BodyStep"]["oneOf"].as_array().unwrap();
    let slow = body
        .iter()
        .find(|b| b["required"][0] == "slowStop")
        .unwrap();
    assert_eq!(slow["x-tep-protocol"], 3);
    let sleep = body.iter().find(|b| b["required"][0] == "sleep").unwrap();
    assert_eq!(sleep["x-tep-protocol"], 1);
    assert_eq!(
        schema["$defs"]["ObserverSpec"]["properties"]["mutate"]["x-tep-protocol"],
        3
    );
    assert_eq!(schema["properties"]["tools"]["x-tep-protocol"], 1);
    let answers = schema["$defs"]["ApprovalAnswer"]["oneOf"]
        .as_array()
        .unwrap();
    assert_eq!(answers[0]["x-tep-protocol"]["allowed-once"], 1);
    // Every construct of the schema is annotated exactly once.
    fn count(v: &Value) -> usize {
        match v {
            Value::Object(m) => {
                let here = match m.get("x-tep-protocol") {
                    Some(Value::Object(values)) => values.len(),
                    Some(_) => 1,
                    None => 0,
                };
                here + m.values().map(count).sum::<usize>()
            }
            Value::Array(a) => a.iter().map(count).sum(),
            _ => 0,
        }
    }
    // `Listener` has three instances in the schema (one per action type): two fields each.
    assert_eq!(count(&schema), CONSTRUCTS.len() + 2 * 2);
}

/// The names of the protocol 3 constructs a scenario's JSON holds, found without the table: keys
/// `rewrite`, `slowStop` and `mutate`, and a guard's `"allow"`.
fn protocol_3_constructs(scenario: &Scenario) -> BTreeSet<&'static str> {
    fn keys(v: &Value, out: &mut BTreeSet<&'static str>) {
        match v {
            Value::Object(m) => {
                for (k, item) in m {
                    for name in ["rewrite", "slowStop", "mutate"] {
                        if k == name {
                            out.insert(name);
                        }
                    }
                    keys(item, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
            _ => {}
        }
    }
    let json = serde_json::to_value(scenario).unwrap();
    let mut out = BTreeSet::new();
    keys(&json, &mut out);
    let guard_allows = scenario
        .guards
        .iter()
        .flat_map(|g| g.decide.values())
        .any(|a| serde_json::to_value(a).unwrap() == "allow");
    if guard_allows {
        out.insert("guard allow");
    }
    out
}

/// The built-in reference declaring `protocol`, recording every scenario it is asked to run.
struct Recording {
    inner: BuiltinReference,
    sent: Vec<Scenario>,
}

impl Recording {
    fn new(protocol: u32, mutants: Vec<Mutant>) -> Self {
        Recording {
            inner: BuiltinReference::new(mutants).with_protocol(protocol),
            sent: Vec::new(),
        }
    }
}

impl Implementation for Recording {
    fn ready(&self) -> &Ready {
        self.inner.ready()
    }

    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
        self.sent.push(scenario.clone());
        self.inner.run(seq, spec, scenario)
    }
}

#[test]
fn a_run_sends_no_construct_newer_than_the_declared_protocol() {
    let corpus = corpus().unwrap();
    for protocol in SUPPORTED_PROTOCOLS {
        let mut reference = Recording::new(protocol, vec![]);
        let options = RunOptions {
            strict: true,
            ..RunOptions::default()
        };
        let report = Plan::new(reference.ready(), &corpus, &options)
            .unwrap()
            .run(&mut reference);
        let newer: Vec<_> = reference
            .sent
            .iter()
            .filter(|s| !protocol_3_constructs(s).is_empty())
            .map(|s| s.id.clone())
            .collect();
        let uses_3: Vec<&Scenario> = corpus
            .iter()
            .filter(|s| s.applies_to(options.spec) && !protocol_3_constructs(s).is_empty())
            .collect();
        assert!(uses_3.len() >= 4, "{}", uses_3.len());
        if protocol >= 3 {
            assert_eq!(newer.len(), uses_3.len(), "protocol 3 is sent them all");
        } else {
            assert!(newer.is_empty(), "protocol {protocol} was sent {newer:?}");
            for s in &uses_3 {
                let result = report.scenarios.iter().find(|r| r.id == s.id).unwrap();
                assert_eq!(result.status, Status::Skipped, "{}", s.id);
                let reason = result.reason.as_deref().unwrap_or_default();
                assert!(
                    reason.contains(&format!("the adapter declares protocol {protocol}"))
                        && reason.contains("(protocol 3)"),
                    "{}: {reason}",
                    s.id
                );
            }
        }
        // The reference is correct at every version: whatever it is sent, it passes.
        let bad: Vec<_> = report
            .scenarios
            .iter()
            .filter(|r| !matches!(r.status, Status::Passed | Status::Skipped))
            .map(|r| (&r.id, r.status, &r.reason))
            .collect();
        assert!(bad.is_empty(), "protocol {protocol}: {bad:?}");
    }
}

#[test]
fn the_na_reason_names_the_construct() {
    let corpus = corpus().unwrap();
    let slow = corpus
        .iter()
        .find(|s| s.id == "timeout-waits-for-a-slow-body")
        .unwrap();
    let reason = tep_conformance::scenario::versions::not_applicable(slow, 2).unwrap();
    assert!(reason.contains("body step `slowStop`"), "{reason}");
    assert_eq!(
        tep_conformance::scenario::versions::not_applicable(slow, 3),
        None
    );
    assert_eq!(versions().needs(slow), 3);
    let plain = corpus.iter().find(|s| s.id == "allow-runs-body").unwrap();
    assert_eq!(versions().needs(plain), 1);
}

#[test]
fn fuzzing_sends_no_construct_newer_than_the_declared_protocol() {
    for protocol in SUPPORTED_PROTOCOLS {
        // A clean run (generation only), then a mutant's (generation and shrinking).
        for mutants in [vec![], vec![Mutant::RunBodyAfterDeny]] {
            let mut reference = Recording::new(protocol, mutants.clone());
            let options = FuzzOptions {
                cases: 150,
                ..FuzzOptions::new(5)
            };
            let report = fuzz(&mut reference, &options, |_| {}).unwrap();
            assert!(!reference.sent.is_empty());
            let newer = reference
                .sent
                .iter()
                .filter(|s| !protocol_3_constructs(s).is_empty())
                .count();
            if protocol >= 3 {
                assert!(newer > 0, "protocol 3 is sent protocol 3 constructs");
            } else {
                assert_eq!(newer, 0, "protocol {protocol}");
            }
            assert_eq!(report.errored, 0, "{:?}", report.first_error);
            if mutants.is_empty() {
                assert!(report.failure.is_none(), "{:?}", report.failure);
            } else {
                let failure = report.failure.expect("the mutant is found");
                assert!(protocol_3_constructs(&failure.scenario).is_empty() || protocol >= 3);
            }
        }
    }
}
