//! The `tep` binary end to end: reports, exit codes, bad input, baselines, adapters that break
//! the pipeline or skip, fail or mistake the handshake, and the lists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::{
    READY, TEP, adapter_command, code, json, run_fixture, statuses, stderr, stdout, summary,
    temp_dir, tep, write,
};

use serde_json::Value;
use tep_conformance::scenario::corpus;

// ---------------------------------------------------------------------------------------------
// run

#[test]
fn run_against_the_built_in_reference_is_conformant_with_full_coverage() {
    let o = tep(&["run"]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("edge coverage: 29/29 edges of the rev2 stage graph (100%)"),
        "{out}"
    );
    // The summary says what README.md says it does (its counts are generated from the corpus)
    // and ends with the wall time, as nextest's does: `… in 0.214s`.
    let readme = include_str!("../../../README.md");
    let count = |name: &str| {
        let open = format!("<!-- count:{name} -->");
        let at = readme.find(&open).unwrap() + open.len();
        readme[at..at + readme[at..].find("<!--").unwrap()].to_owned()
    };
    let expected = format!(
        "{} passed, 0 failed, {} skipped in ",
        count("rev2-scenarios"),
        count("not-rev2-scenarios")
    );
    let last = summary(&out);
    let time = last
        .strip_prefix(expected.as_str())
        .and_then(|t| t.strip_suffix('s'));
    assert!(
        time.is_some_and(|t| t.len() >= 5
            && t.split_once('.').is_some_and(|(_, ms)| ms.len() == 3)
            && t.parse::<f64>().is_ok()),
        "{last}"
    );
}

#[test]
fn run_reports_json_and_junit() {
    let dir = temp_dir("json");
    let junit = dir.join("junit.xml");
    let o = tep(&[
        "run",
        "--spec",
        "rev1",
        "--format",
        "json",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0);
    let report = json(&o);
    for field in [
        "summary",
        "coverage",
        "implementation",
        "scenarios",
        "corpusHash",
    ] {
        assert!(report.get(field).is_some(), "missing {field}");
    }
    assert_eq!(report["spec"], "rev1");
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["coverage"]["edges"]["ratio"], 1.0);
    let rows = report["scenarios"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|r| r["id"].is_string() && r["status"].is_string())
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"tep conformance (rev1)\""),
        "{xml}"
    );
    assert!(xml.contains("name=\"allow-runs-body\""));
    assert!(xml.contains("<skipped"), "rev2-only scenarios are skipped");
}

#[test]
fn a_broken_reference_fails_with_the_invariant_it_breaks() {
    let o = tep(&["run", "--mutant", "run-body-after-deny", "--format", "json"]);
    assert_eq!(code(&o), 1);
    let report = json(&o);
    assert!(report["summary"]["failed"].as_u64().unwrap() > 0);
    let text = tep(&[
        "run",
        "--mutant",
        "run-body-after-deny",
        "--scenario",
        "pre-deny-skips-body",
    ]);
    let out = stdout(&text);
    assert!(
        out.contains("pre-deny-skips-body: line 7 (around, call c1) after line 5 denied the call"),
        "{out}"
    );
    assert!(out.contains("docs/invariants.md#deny-skips-body"));
    assert!(
        summary(&out).starts_with("0 passed, 1 failed, 0 skipped in "),
        "{out}"
    );
}

#[test]
fn a_frozen_outcome_violation_names_the_field_that_differs() {
    let o = tep(&["run", "--mutant", "result-differs-from-notification"]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(
        out.contains(
            r#"differs from the outcome tools/result announced at line 14: content[1] {"text":"(edited after notification)","type":"text"} is extra (announced 1 item(s))"#
        ),
        "{out}"
    );
}

#[test]
fn run_usage_errors_exit_2() {
    let o = tep(&["run", "--scenario", "no-such-scenario"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("no scenario is called no-such-scenario"),
        "{}",
        stderr(&o)
    );
    let o = tep(&["run", "--spec", "rev9"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("unknown spec revision"),
        "{}",
        stderr(&o)
    );
    let o = tep(&["run", "--timeout", "0"]);
    assert_eq!(code(&o), 2);
}

#[test]
fn mistyped_names_get_one_suggestion() {
    let dir = temp_dir("typos");
    let trace = write(
        &dir,
        "typo.jsonl",
        "{\"kind\":\"stage\",\"node\":\"deneid\"}\n",
    );
    let cases: [(&[&str], &str); 5] = [
        (
            &["run", "--scenario", "pre-deny-skip-body"],
            "no scenario is called pre-deny-skip-body (did you mean `pre-deny-skips-body`?)",
        ),
        (
            &["scenarios", "show", "pre-deny-skip-body"],
            "no scenario is called pre-deny-skip-body (did you mean `pre-deny-skips-body`?)",
        ),
        (
            &["run", "--invariant", "deny-skip-body"],
            "unknown invariant `deny-skip-body` (did you mean `deny-skips-body`?)",
        ),
        (
            &["run", "--mutant", "run-body-after-dny"],
            "unknown mutant `run-body-after-dny` (did you mean `run-body-after-deny`?) (run `tep mutants`)",
        ),
        (
            &["check", &trace],
            "unknown stage `deneid` (did you mean `denied`?)",
        ),
    ];
    for (args, message) in cases {
        let o = tep(args);
        assert_eq!(code(&o), 2, "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(message), "{args:?}: {err}");
        // One suggestion, not the list of every name.
        assert_eq!(err.matches("did you mean").count(), 1, "{args:?}: {err}");
        assert!(!err.contains("run-body-after-deny,"), "{args:?}: {err}");
    }
}

// ---------------------------------------------------------------------------------------------
// baselines

fn failing_entries() -> Vec<String> {
    let o = tep(&["run", "--mutant", "run-body-after-deny", "--format", "json"]);
    let report = json(&o);
    let mut entries = Vec::new();
    for row in report["scenarios"].as_array().unwrap() {
        let mut ids: Vec<String> = row["violations"]
            .as_array()
            .map(|vs| {
                vs.iter()
                    .filter(|v| v["level"] == "MUST")
                    .map(|v| v["invariant"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids.dedup();
        for id in ids {
            entries.push(format!("{}:{id}", row["id"].as_str().unwrap()));
        }
    }
    entries
}

fn baseline(entries: &[String], reason: &str) -> String {
    let items: Vec<Value> = entries
        .iter()
        .map(|e| serde_json::json!({"id": e, "reason": reason}))
        .collect();
    serde_json::json!({ "expectedFailures": items }).to_string()
}

#[test]
fn a_baseline_of_known_failures_passes_and_a_stale_entry_fails() {
    let dir = temp_dir("baseline");
    let entries = failing_entries();
    assert!(!entries.is_empty());
    let file = write(
        &dir,
        "baseline.json",
        &baseline(&entries, "known: runs bodies after denials"),
    );
    let o = tep(&[
        "run",
        "--mutant",
        "run-body-after-deny",
        "--baseline",
        &file,
    ]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let failing_scenarios: std::collections::BTreeSet<&str> = entries
        .iter()
        .map(|e| e.split(':').next().unwrap())
        .collect();
    assert!(
        stdout(&o).contains(&format!(
            "{} scenario(s) failed as expected, 0 unexpectedly, 0 stale",
            failing_scenarios.len()
        )),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("XFAIL"));

    // The same baseline against a fixed implementation: every entry is stale.
    let o = tep(&["run", "--baseline", &file]);
    assert_eq!(code(&o), 1);
    assert!(
        stdout(&o).contains("stale entry pre-deny-skips-body:deny-skips-body: pre-deny-skips-body no longer breaks deny-skips-body; remove it"),
        "{}",
        stdout(&o)
    );

    // Listing only part of the failures leaves the rest unexpected.
    let partial = write(&dir, "partial.json", &baseline(&entries[..1], "known"));
    let o = tep(&[
        "run",
        "--mutant",
        "run-body-after-deny",
        "--baseline",
        &partial,
    ]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).contains("unexpected:"));
}

#[test]
fn bad_baselines_are_usage_errors() {
    let dir = temp_dir("bad-baseline");
    let cases = [
        (
            r#"{"expectedFailures":[{"id":"allow-runs-body","reason":""}]}"#,
            "has no reason",
        ),
        (
            r#"{"expectedFailures":[{"id":"nope","reason":"x"},{"id":"nope","reason":"y"}]}"#,
            "entry nope is listed twice",
        ),
        (
            r#"{"expectedFailures":[{"id":"allow-runs-body:nope","reason":"x"}]}"#,
            "unknown invariant",
        ),
        (
            r#"{"expectedFailures":[{"id":"allow-runs-body","reason":"x"},{"id":"allow-runs-body:frozen-outcome","reason":"y"}]}"#,
            "both as a whole and per invariant",
        ),
        ("not json", "invalid"),
    ];
    for (i, (text, message)) in cases.iter().enumerate() {
        let file = write(&dir, &format!("b{i}.json"), text);
        let o = tep(&["run", "--baseline", &file]);
        assert_eq!(code(&o), 2, "{text}");
        assert!(stderr(&o).contains(message), "{text}: {}", stderr(&o));
    }
}

// ---------------------------------------------------------------------------------------------
// check

// ---------------------------------------------------------------------------------------------
// adapters

#[test]
fn the_reference_behind_the_adapter_protocol_passes_the_whole_suite() {
    let command = format!("{TEP} reference-adapter");
    let o = tep(&[
        "run",
        "--adapter",
        &command,
        "--spec",
        "rev1",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let report = json(&o);
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["errored"], 0);
    assert_eq!(report["coverage"]["edges"]["ratio"], 1.0);
    assert!(
        report["implementation"]["name"]
            .as_str()
            .unwrap()
            .starts_with("tep-reference")
    );
}

#[test]
fn a_deliberately_broken_adapter_is_reported_with_exactly_that_invariant() {
    let command = format!("{TEP} reference-adapter --mutant run-body-after-deny");
    let o = tep(&["run", "--adapter", &command, "--format", "json"]);
    assert_eq!(code(&o), 1);
    let report = json(&o);
    let mut ids: Vec<String> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["violations"].as_array().cloned().unwrap_or_default())
        .map(|v| v["invariant"].as_str().unwrap().to_owned())
        .filter(|id| !id.starts_with("expected-"))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids, vec!["deny-skips-body"]);
}

#[test]
fn an_adapter_that_skips_everything_tested_nothing_and_is_not_conformant() {
    let o = run_fixture(&format!(
        r#"read l; echo "{READY}"; n=0; while read l; do n=$((n+1)); echo "{{\"seq\":$n,\"skipped\":{{\"reason\":\"not wired yet\"}}}}"; done"#
    ));
    for (status, reason, _) in statuses(&o) {
        assert_eq!(status, "skipped");
        assert_eq!(reason, "not wired yet");
    }
    assert_eq!(code(&o), 1, "nothing was tested: {}", stdout(&o));
    let report = json(&o);
    assert_eq!(report["tested"], false);
    assert_eq!(report["conformant"], false);
    assert_eq!(report["exitCode"], 1);
    let text = tep(&[
        "run",
        "--adapter",
        &adapter_command(&format!(
            r#"read l; echo "{READY}"; n=0; while read l; do n=$((n+1)); echo "{{\"seq\":$n,\"skipped\":{{\"reason\":\"not wired yet\"}}}}"; done"#
        )),
        "--jobs",
        "1",
    ]);
    assert_eq!(code(&text), 1);
    assert!(
        stdout(&text).contains("nothing was tested: no scenario passed or failed"),
        "{}",
        stdout(&text)
    );
    assert!(
        summary(&stdout(&text)).starts_with(&format!(
            "0 passed, 0 failed, {} skipped in ",
            corpus().unwrap().len()
        )),
        "{}",
        stdout(&text)
    );
}

#[test]
fn undeclared_capabilities_are_not_applicable_not_failures() {
    let o = tep(&[
        "run",
        "--adapter",
        &adapter_command(&format!(
            r#"read l; echo "{READY}"; while read l; do sleep 1000; done"#
        )),
        "--scenario",
        "ask-allowed-once",
        "--format",
        "json",
    ]);
    // Nothing else was selected, so nothing was tested.
    assert_eq!(code(&o), 1);
    let s = statuses(&o);
    assert_eq!(s[0].0, "skipped");
    assert!(s[0].1.contains("does not declare approval"), "{}", s[0].1);
}

#[test]
fn an_adapter_that_fails_the_handshake_is_an_environment_error() {
    for (script, message) in [
        ("echo not json", "did not complete the handshake"),
        ("read l; exit 0", "closed stdout"),
        (
            r#"read l; echo "{\"ready\":true,\"protocol\":7,\"implementation\":{\"name\":\"x\"}}""#,
            "speaks protocol 7",
        ),
    ] {
        let o = tep(&["run", "--adapter", &adapter_command(script)]);
        assert_eq!(code(&o), 2, "{script}: {}", stdout(&o));
        assert!(stderr(&o).contains(message), "{script}: {}", stderr(&o));
    }
    let o = tep(&["run", "--adapter", "/no/such/adapter"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot start"), "{}", stderr(&o));
}

#[test]
fn an_adapter_for_another_revision_is_told_which_to_ask_for() {
    let o = tep(&[
        "run",
        "--spec",
        "rev1",
        "--adapter",
        &adapter_command(&format!(
            r#"read l; echo "{READY}"; while read l; do sleep 1; done"#
        )),
    ]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("implements rev2, not rev1"),
        "{}",
        stderr(&o)
    );
}

// ---------------------------------------------------------------------------------------------
// catalog commands

#[test]
fn invariants_and_scenarios_can_be_listed_explained_shown_and_exported() {
    let o = tep(&["invariants", "list"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("deny-skips-body"));
    let o = tep(&["invariants", "explain", "model-order-commit"]);
    let out = stdout(&o);
    assert!(out.contains("model-order-commit [SHOULD]"));
    assert!(out.contains("source: reference semantics 7"));
    assert!(out.contains("scenarios: ") && out.contains("parallel-results-commit-in-model-order"));
    let o = tep(&["invariants", "explain", "nope"]);
    assert_eq!(code(&o), 2);

    let o = tep(&["scenarios", "list", "--spec", "rev1"]);
    assert!(!stdout(&o).contains("finalize-content-runs-last"));
    // Every row's revisions column starts at the same place, whatever the id's length.
    let o = tep(&["scenarios", "list"]);
    let starts: std::collections::BTreeSet<usize> =
        stdout(&o).lines().filter_map(|l| l.find(" rev")).collect();
    assert_eq!(starts.len(), 1, "{}", stdout(&o));
    let o = tep(&["scenarios", "show", "allow-runs-body"]);
    let shown: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(shown["id"], "allow-runs-body");
    let dir = temp_dir("export");
    let o = tep(&["scenarios", "export", dir.to_str().unwrap()]);
    assert_eq!(code(&o), 0);
    assert!(dir.join("allow-runs-body.json").exists());
    assert!(dir.join("scenario.schema.json").exists());
    // A file in the way is named as such, not as "File exists".
    let file = dir.join("allow-runs-body.json");
    let o = tep(&["scenarios", "export", file.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("it is not a directory"),
        "{}",
        stderr(&o)
    );
    let o = tep(&["schema", "trace-record"]);
    let schema: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        schema["oneOf"].is_array() || schema["anyOf"].is_array(),
        "{schema}"
    );
}
