//! `tep fuzz --harness` generates only what the harness can be driven through: every scenario
//! generated under a profile's restriction has a script (`RunScript::of` accepts it), and the
//! restriction still generates the mixes worth fuzzing. Under it, the oracle's reference judges
//! itself clean.

use std::collections::BTreeMap;

use tep_conformance::fuzz::{FuzzOptions, Profile as Generating, fuzz, generate};
use tep_conformance::runner::BuiltinReference;
use tep_conformance::scenario::{BodyStep, PostAction, PreAction, Scenario};
use tep_harness::fuzzing::restriction;
use tep_harness::profile::{HookDialect, Profile};
use tep_harness::script::RunScript;
use tep_model::graph::Revision;
use tep_model::trace::Capability;

const CASES: usize = 400;

/// What the generator may use for `profile`: every capability (the driver declares them all),
/// restricted as the profile says.
fn generating(profile: &Profile) -> Generating {
    Generating {
        restriction: restriction(profile),
        ..Generating::new(Revision::Rev2, Capability::ALL)
    }
}

/// How many of the scenarios generated for `profile` show each feature; panics naming the
/// first scenario `RunScript::of` refuses.
fn generate_for(profile: &Profile, seed: u64) -> BTreeMap<&'static str, usize> {
    let space = generating(profile);
    let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
    for case in 0..CASES {
        let scenario = generate(&space, seed, case).unwrap();
        if let Err(construct) = RunScript::of(&scenario, profile) {
            panic!(
                "case {case} of seed {seed} cannot be driven through {}: {construct}\n{}",
                profile.name,
                serde_json::to_string_pretty(&scenario).unwrap()
            );
        }
        for feature in features(&scenario) {
            *seen.entry(feature).or_default() += 1;
        }
    }
    seen
}

fn features(s: &Scenario) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut add = |yes: bool, what: &'static str| {
        if yes {
            out.push(what);
        }
    };
    let bodies = || s.calls.iter().flat_map(|c| c.body.iter());
    add(s.calls.len() >= 3, "a batch of three calls or more");
    add(
        bodies().any(|b| matches!(b, BodyStep::Throw(_))),
        "a body that throws",
    );
    add(
        bodies().any(|b| matches!(b, BodyStep::Sleep(ms) if *ms > 0)),
        "a body that sleeps",
    );
    add(
        s.calls
            .iter()
            .any(|c| !s.tools.iter().any(|t| t.name == c.tool)),
        "an unknown tool",
    );
    add(
        s.calls.windows(2).any(|w| w[0].tool == w[1].tool),
        "one tool called twice",
    );
    add(!s.pre.is_empty(), "a pre-execute listener");
    add(!s.post.is_empty(), "a post-execute listener");
    let pre = || s.pre.iter().flat_map(|l| l.decide.values());
    let post = || s.post.iter().flat_map(|l| l.decide.values());
    add(pre().any(|a| matches!(a, PreAction::Deny(_))), "a deny");
    add(pre().any(|a| matches!(a, PreAction::Ask(_))), "an ask");
    add(
        post().any(|a| matches!(a, PostAction::AddContext(_))),
        "a post-execute context",
    );
    add(
        post().any(|a| matches!(a, PostAction::Block(_))),
        "a post-execute block",
    );
    add(s.approval.is_some(), "an approval answer");
    add(
        s.tools.iter().any(|t| t.concurrency_safe),
        "a concurrency-safe tool",
    );
    add(s.max_parallel.is_some(), "a pool cap");
    out
}

/// Every profile here names a shipped safe tool (`web_search`) and a pool cap row.
const ALWAYS: [&str; 7] = [
    "a batch of three calls or more",
    "a concurrency-safe tool",
    "a pool cap",
    "a body that throws",
    "a body that sleeps",
    "an unknown tool",
    "one tool called twice",
];

const WITH_HOOKS: [&str; 6] = [
    "a pre-execute listener",
    "a post-execute listener",
    "a deny",
    "an ask",
    "a post-execute context",
    "a post-execute block",
];

#[test]
fn every_case_generated_for_the_published_harness_can_be_driven_and_there_are_no_hooks() {
    let profile = Profile::load("deepseek-harness").unwrap();
    assert_eq!(profile.hooks.dialect, HookDialect::None);
    for seed in [1, 2] {
        let seen = generate_for(&profile, seed);
        for feature in ALWAYS {
            assert!(
                seen.get(feature).is_some_and(|n| *n >= 5),
                "{feature}: {seen:?}"
            );
        }
        for feature in WITH_HOOKS {
            assert_eq!(seen.get(feature), None, "{feature}: {seen:?}");
        }
    }
}

#[test]
fn every_case_generated_for_a_harness_with_hooks_can_be_driven_and_scripts_them() {
    let source = Profile::load("deepseek-harness-source").unwrap();
    let mut published = Profile::load("deepseek-harness").unwrap();
    // `--harness-hooks`.
    published.hooks.dialect = HookDialect::ClaudeCode;
    for profile in [source, published] {
        assert_ne!(profile.hooks.dialect, HookDialect::None);
        let seen = generate_for(&profile, 7);
        for feature in ALWAYS.iter().chain(&WITH_HOOKS) {
            assert!(
                seen.get(feature).is_some_and(|n| *n >= 5),
                "{}: {feature}: {seen:?}",
                profile.name
            );
        }
    }
}

#[test]
fn the_reference_under_the_restriction_is_clean_by_its_own_oracle() {
    let profile = Profile::load("deepseek-harness-source").unwrap();
    let options = FuzzOptions {
        cases: 150,
        restriction: restriction(&profile),
        ..FuzzOptions::new(3)
    };
    let mut reference = BuiltinReference::new(vec![]);
    let report = fuzz(&mut reference, &options, |_| {}).unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert!(report.flaky.is_empty(), "{:?}", report.flaky);
    assert_eq!((report.skipped, report.errored), (0, 0), "{report:?}");
    assert_eq!(report.cases, 150);
}
