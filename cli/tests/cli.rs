//! The `tep` binary end to end: reports, exit codes, bad input, baselines, and adapters that
//! misbehave in every way the runner promises to survive.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TEP, tep_command};

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tep_check::invariants::InvariantId;
use tep_check::mutation::plant;
use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_model::graph::Revision;
use tep_model::trace::to_jsonl;

fn tep(args: &[&str]) -> Output {
    tep_command()
        .args(args)
        // Failing runs keep their traces under ./target/tep-runs: not in the source tree.
        .current_dir(scratch())
        .output()
        .unwrap()
}

fn scratch() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| temp_dir("cwd"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The summary line a text report ends with.
fn summary(out: &str) -> &str {
    out.trim_end().lines().last().unwrap_or_default()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tep-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn json(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

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
    // The summary ends with the wall time, as nextest's does: `… in 0.214s`.
    let last = summary(&out);
    let time = last
        .strip_prefix("58 passed, 0 failed, 1 skipped in ")
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

fn reference_trace(id: &str) -> Vec<tep_model::trace::TraceRecord> {
    let scenario = corpus().unwrap().into_iter().find(|s| s.id == id).unwrap();
    run_reference(&scenario, Revision::Rev2, &[]).unwrap()
}

#[test]
fn check_accepts_a_valid_trace_from_a_file_or_stdin() {
    let dir = temp_dir("check-ok");
    let file = write(&dir, "t.jsonl", &to_jsonl(&reference_trace("mixed-batch")));
    let o = tep(&["check", &file]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("0 violation(s)"));
    let mut child = tep_command()
        .args(["check", "-", "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(to_jsonl(&reference_trace("allow-runs-body")).as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0);
    assert_eq!(json(&o)["conformant"], true);
}

#[test]
fn check_names_the_invariant_the_lines_and_the_source() {
    let dir = temp_dir("check-bad");
    let trace = plant(
        InvariantId::DenySkipsBody,
        &reference_trace("pre-deny-skips-body"),
    )
    .unwrap();
    let file = write(&dir, "t.jsonl", &to_jsonl(&trace));
    let o = tep(&["check", &file]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(
        out.contains(
            "deny-skips-body [MUST]: line 7 (toolBody, call c1) after line 5 denied the call"
        ),
        "{out}"
    );
    assert!(
        out.contains("docs/invariants.md#deny-skips-body (doc: \u{201c}tool body skipped\u{201d}")
    );
    let o = tep(&["check", &file, "--format", "json"]);
    let report = json(&o);
    assert_eq!(report["violations"][0]["invariant"], "deny-skips-body");
    assert_eq!(report["violations"][0]["lines"], serde_json::json!([7, 5]));
    assert_eq!(
        report["violations"].as_array().unwrap().len(),
        1,
        "one fault, one violation"
    );
}

#[test]
fn check_uses_the_header_revision_unless_told_otherwise() {
    let dir = temp_dir("check-rev");
    let scenario = corpus()
        .unwrap()
        .into_iter()
        .find(|s| s.id == "contexts-fifo-after-all-results")
        .unwrap();
    let rev1 = run_reference(&scenario, Revision::Rev1, &[]).unwrap();
    let file = write(&dir, "rev1.jsonl", &to_jsonl(&rev1));
    let o = tep(&["check", &file]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert!(stdout(&o).contains("against rev1"));
    let o = tep(&["check", &file, "--spec", "rev2"]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).contains("against rev2 (its header says rev1)"));
    assert!(
        stdout(&o).contains("contexts-as-user-messages"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn malformed_traces_are_errors_with_a_line_number() {
    let dir = temp_dir("malformed");
    let model = r#"{"kind":"stage","node":"model","calls":[{"callId":"c1","name":"t","concurrencySafe":false}]}"#;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("json", format!("{model}\n{{oops\n").into_bytes(), "line 2: invalid JSON"),
        ("stage", format!("{model}\n{{\"kind\":\"stage\",\"node\":\"preExecute\",\"call\":\"c1\"}}\n").into_bytes(), "line 2: unknown stage `preExecute`"),
        ("field", format!("{model}\n{{\"kind\":\"stage\",\"node\":\"pre\",\"call\":\"c1\"}}\n").into_bytes(), "line 2: stage `pre` needs an `outcome`"),
        ("call", format!("{model}\n{{\"kind\":\"stage\",\"node\":\"pre\",\"call\":\"c9\",\"outcome\":\"allow\"}}\n").into_bytes(), "line 2: unknown call c9"),
        ("dup", r#"{"kind":"stage","node":"model","calls":[{"callId":"c1","name":"t","concurrencySafe":false},{"callId":"c1","name":"t","concurrencySafe":false}]}"#.as_bytes().to_vec(), "line 1: duplicate call id c1"),
        ("utf8", [model.as_bytes(), b"\n\xff\xfe\n"].concat(), "line 2: not valid UTF-8"),
        ("first", b"{\"kind\":\"stage\",\"node\":\"pre\",\"call\":\"c1\",\"outcome\":\"allow\"}\n".to_vec(), "line 1: a record before the first `model` observation"),
    ];
    for (name, bytes, message) in cases {
        let path = dir.join(format!("{name}.jsonl"));
        std::fs::write(&path, bytes).unwrap();
        let o = tep(&["check", path.to_str().unwrap()]);
        assert_eq!(code(&o), 2, "{name}: {}", stdout(&o));
        assert!(stderr(&o).contains(message), "{name}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{name}");
    }
    let o = tep(&["check", dir.join("missing.jsonl").to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot open"));
}

// ---------------------------------------------------------------------------------------------
// adapters

fn adapter_command(script: &str) -> String {
    // One argument for `sh -c`: quoted so shlex keeps it whole.
    format!("sh -c '{script}'")
}

const READY: &str = r#"{\"ready\":true,\"protocol\":1,\"implementation\":{\"name\":\"fixture\"},\"capabilities\":[],\"specs\":[\"rev2\"]}"#;

fn run_fixture(script: &str) -> Output {
    tep(&[
        "run",
        "--adapter",
        &adapter_command(script),
        "--timeout",
        "2",
        "--scenario",
        "allow-runs-body",
        "--scenario",
        "pre-deny-skips-body",
        "--format",
        "json",
    ])
}

fn statuses(o: &Output) -> Vec<(String, String, String)> {
    json(o)["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap_or_default().to_owned(),
                r["reason"].as_str().unwrap_or_default().to_owned(),
                r["stderr"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

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
fn a_hanging_adapter_times_out_per_scenario_and_the_run_goes_on() {
    let started = std::time::Instant::now();
    let o = run_fixture(&format!(
        r#"read l; echo "{READY}"; echo waiting >&2; while read l; do sleep 1000; done"#
    ));
    assert_eq!(code(&o), 1);
    let s = statuses(&o);
    assert_eq!(s.len(), 2, "both scenarios were attempted");
    for (status, reason, stderr) in &s {
        assert_eq!(status, "errored");
        assert!(reason.contains("no answer within 2 s"), "{reason}");
        assert!(stderr.contains("waiting"), "stderr tail: {stderr:?}");
    }
    assert!(
        started.elapsed().as_secs() < 30,
        "the hung adapter was killed"
    );
}

#[test]
fn a_crashing_adapter_is_restarted_for_the_next_scenario() {
    let o = run_fixture(&format!(
        r#"read l; echo "{READY}"; read l; echo "segfault in handler" >&2; exit 3"#
    ));
    assert_eq!(code(&o), 1);
    for (status, reason, stderr) in statuses(&o) {
        assert_eq!(status, "errored");
        assert!(reason.contains("closed stdout"), "{reason}");
        assert!(stderr.contains("segfault in handler"), "{stderr}");
    }
}

#[test]
fn an_adapter_printing_garbage_or_the_wrong_seq_is_errored() {
    let garbage = run_fixture(&format!(
        r#"read l; echo "{READY}"; read l; echo "Loading model weights..."; sleep 5"#
    ));
    for (status, reason, _) in statuses(&garbage) {
        assert_eq!(status, "errored");
        assert!(
            reason.contains("not an answer") && reason.contains("Loading model weights"),
            "{reason}"
        );
    }
    let wrong = run_fixture(&format!(
        r#"read l; echo "{READY}"; while read l; do echo "{{\"seq\":99,\"trace\":[]}}"; done"#
    ));
    for (status, reason, _) in statuses(&wrong) {
        assert_eq!(status, "errored");
        assert!(
            reason.contains("answered seq 99 to request seq"),
            "{reason}"
        );
    }
}

#[test]
fn an_adapter_flooding_stderr_keeps_only_a_bounded_tail() {
    let o = run_fixture(&format!(
        r#"read l; echo "{READY}"; read l; while :; do echo "flood flood flood flood" >&2; done"#
    ));
    assert_eq!(code(&o), 1);
    for (status, _, stderr) in statuses(&o) {
        assert_eq!(status, "errored");
        assert!(stderr.contains("flood"));
        assert!(
            stderr.len() <= tep_conformance::adapter::STDERR_TAIL_BYTES,
            "{}",
            stderr.len()
        );
    }
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
