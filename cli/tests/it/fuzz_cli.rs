//! `tep fuzz` and `tep run --scenario-file` through the binary: the seed is printed and replays
//! the run, a failure is shrunk, written as a corpus file and replayed by the printed command,
//! and fuzzing through the adapter protocol finds what a mutant breaks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::{TEP, stderr, stdout, temp_dir, tep_in};

use std::process::Command;

use tep_check::invariants::InvariantId;
use tep_conformance::mutants::breaks;
use tep_conformance::scenario::Scenario;
use tep_reference::mutant::Mutant;

/// The line of `text` that starts with `prefix`, without it.
fn line_after<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
}

#[test]
fn a_failure_is_shrunk_written_and_replayed_by_the_printed_command() {
    let dir = temp_dir("replay");
    let out = dir.join("found.json");
    let args = [
        "fuzz",
        "--mutant",
        "contexts-reversed",
        "--seed",
        "7",
        "--cases",
        "300",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = tep_in(&dir, &args);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("seed 7 (replay this run with --seed 7)"));
    let text = stdout(&o);
    let invariant = line_after(&text, "FAILED at case ")
        .split(": ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    let expected: Vec<String> = breaks(Mutant::ContextsReversed)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        expected.contains(&invariant),
        "{invariant} not in {expected:?}"
    );

    // The file is a valid corpus scenario, and the same seed writes the same one.
    let written = std::fs::read_to_string(&out).unwrap();
    let scenario = Scenario::from_json(&written).unwrap();
    assert_eq!(scenario.exercises.len(), 1);
    assert_eq!(scenario.exercises[0].to_string(), invariant);
    // Written, not dumped: one line names the file and what the scenario holds.
    assert!(
        !text.contains(&written) && !text.contains("\"calls\""),
        "{text}"
    );
    let summary = line_after(&text, &format!("scenario {}: ", out.display()));
    assert!(
        summary.contains(&format!("{} call", scenario.calls.len())),
        "{summary}"
    );
    let again = tep_in(&dir, &args);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written);

    // The printed replay command fails the same way; the unbroken reference passes the file.
    let replay = line_after(&text, "replay: ");
    let o = Command::new("sh")
        .args(["-c", replay])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains(&format!("{invariant} [MUST]: 1 scenario(s)")),
        "{}",
        stdout(&o)
    );
    let o = tep_in(&dir, &["run", "--scenario-file", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("(1 scenario file(s))"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn without_a_seed_one_is_chosen_printed_and_replays_the_run() {
    let dir = temp_dir("seed");
    let o = tep_in(
        &dir,
        &[
            "fuzz",
            "--mutant",
            "exclusive-in-pool",
            "--cases",
            "300",
            "--strict",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let seed = line_after(&stderr(&o), "tep fuzz: seed ")
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    let found = line_after(&stdout(&o), "FAILED at case ").to_owned();
    let again = tep_in(
        &dir,
        &[
            "fuzz",
            "--mutant",
            "exclusive-in-pool",
            "--cases",
            "300",
            "--strict",
            "--seed",
            &seed,
        ],
    );
    assert_eq!(line_after(&stdout(&again), "FAILED at case "), found);
}

#[test]
fn the_reference_passes_and_says_how_much_was_judged() {
    let dir = temp_dir("clean");
    let o = tep_in(&dir, &["fuzz", "--seed", "3", "--cases", "150", "--strict"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("150 case(s) in "), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("no failure: 150 scenario(s) judged (SHOULD-level included)"),
        "{}",
        stdout(&o)
    );
    let o = tep_in(
        &dir,
        &["fuzz", "--seed", "3", "--cases", "40", "--spec", "rev1"],
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn fuzzing_through_the_adapter_protocol_finds_what_each_mutant_breaks() {
    let dir = temp_dir("adapter");
    for mutant in [
        Mutant::SubCallsOverlap,
        Mutant::CommitInCompletionOrder,
        Mutant::SkipPostForDenials,
    ] {
        let adapter = format!("{TEP} reference-adapter --mutant {}", mutant.name());
        let out = dir.join(format!("{}.json", mutant.name()));
        let o = tep_in(
            &dir,
            &[
                "fuzz",
                "--adapter",
                &adapter,
                "--seed",
                "11",
                "--cases",
                "300",
                // commit-in-completion-order breaks a SHOULD (model order) first.
                "--strict",
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{mutant:?}: {}", stdout(&o));
        let scenario = Scenario::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert!(
            found_as(mutant).contains(&scenario.exercises[0]),
            "{mutant:?} found as {:?}",
            scenario.exercises
        );
        assert!(
            line_after(&stdout(&o), "replay: ").contains("--adapter"),
            "the replay drives the same adapter"
        );
    }
}

#[test]
fn an_adapter_that_skips_everything_tested_nothing() {
    let dir = temp_dir("skips");
    let adapter = r#"sh -c 'read l; echo "{\"ready\":true,\"protocol\":2,\"implementation\":{\"name\":\"skipper\"},\"capabilities\":[]}"; n=0; while read l; do n=$((n+1)); echo "{\"seq\":$n,\"skipped\":{\"reason\":\"no\"}}"; done'"#;
    let o = tep_in(
        &dir,
        &["fuzz", "--adapter", adapter, "--cases", "5", "--seed", "1"],
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("nothing was tested"), "{}", stdout(&o));
}

#[test]
fn bad_scenario_files_are_usage_errors_naming_the_file() {
    let dir = temp_dir("files");
    let missing = dir.join("missing.json");
    let o = tep_in(&dir, &["run", "--scenario-file", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!(
            "cannot read the scenario file {}",
            missing.display()
        )),
        "{}",
        stderr(&o)
    );

    let invalid = dir.join("invalid.json");
    std::fs::write(&invalid, r#"{"id": "x"}"#).unwrap();
    let o = tep_in(&dir, &["run", "--scenario-file", invalid.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{} is not a valid scenario", invalid.display())),
        "{}",
        stderr(&o)
    );

    let one = dir.join("one.json");
    let two = dir.join("two.json");
    let text = tep_conformance::scenario::corpus_files()[0].1;
    std::fs::write(&one, text).unwrap();
    std::fs::write(&two, text).unwrap();
    let o = tep_in(
        &dir,
        &[
            "run",
            "--scenario-file",
            one.to_str().unwrap(),
            "--scenario-file",
            two.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("two scenario files give the id"),
        "{}",
        stderr(&o)
    );
}

/// The invariants fuzzing may name a mutant's failure by: those it breaks, or for a mutant no
/// invariant names, the oracle's.
fn found_as(mutant: Mutant) -> &'static [InvariantId] {
    match breaks(mutant) {
        [] => &[InvariantId::ExpectedOutcome, InvariantId::ExpectedContent],
        named => named,
    }
}

/// Every mutant through the adapter protocol, as an implementer would fuzz their own adapter.
#[test]
fn every_mutant_is_found_through_the_adapter_protocol_and_shrunk_small() {
    let dir = temp_dir("every-mutant");
    let mut sizes = Vec::new();
    for &mutant in Mutant::ALL {
        let adapter = format!("{TEP} reference-adapter --mutant {}", mutant.name());
        let out = dir.join(format!("{}.json", mutant.name()));
        let o = tep_in(
            &dir,
            &[
                "fuzz",
                "--adapter",
                &adapter,
                "--seed",
                "1",
                "--cases",
                "300",
                "--strict",
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{mutant:?}: {}", stdout(&o));
        let scenario = Scenario::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert!(
            found_as(mutant).contains(&scenario.exercises[0]),
            "{mutant:?} found as {:?}",
            scenario.exercises
        );
        let size = tep_conformance::fuzz::size(&scenario);
        assert!(size <= 12, "{mutant:?}: shrunk to size {size}");
        sizes.push(size);
    }
    sizes.sort_unstable();
    println!(
        "{} mutants, shrunk sizes {}..={} (median {})",
        sizes.len(),
        sizes[0],
        sizes[sizes.len() - 1],
        sizes[sizes.len() / 2]
    );
}
