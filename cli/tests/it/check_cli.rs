//! `tep check` and the observation contract: a trace that checks nothing is not conformant, a
//! session log is checked at `events` (and refused, with the way out, at `hooks`), and the
//! report says what it could not check; traces read from a file or stdin, held to their header's
//! revision, and malformed ones refused with their line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::{code, json, stderr, stdout, temp_dir, tep, tep_command, write};

use tep_check::invariants::InvariantId;
use tep_check::mutation::plant;
use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_model::graph::Revision;
use tep_model::trace::to_jsonl;

use std::io::Write as _;
use std::process::{Output, Stdio};

fn check(trace: &str, args: &[&str]) -> Output {
    let mut child = tep_command()
        .arg("check")
        .arg("-")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(trace.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

const LOG: &str = concat!(
    r#"{"kind":"stage","node":"model","calls":[{"callId":"a","name":"read"}]}"#,
    "\n",
    r#"{"kind":"event","event":{"seq":1,"time":0,"type":"tool/call","data":{"turn":1,"step":1,"callId":"a","name":"read","arguments":"{}"}}}"#,
    "\n",
    r#"{"kind":"event","event":{"seq":2,"time":5,"type":"tool/result","data":{"turn":1,"step":1,"message":{"id":"m2","role":"user","source":{"kind":"tool","callId":"a"},"content":[{"type":"tool-result","toolCallId":"a","content":[{"type":"text","text":"ok"}],"isError":false}]}},"surfaceOp":"append","sourceEventSeqs":[1]}}"#,
    "\n",
);

#[test]
fn an_empty_or_header_only_trace_is_not_conformant() {
    for trace in [
        "",
        "\n\n",
        "{\"kind\":\"header\",\"spec\":\"rev2\",\"observation\":\"full\"}\n",
    ] {
        let o = check(trace, &[]);
        assert_eq!(o.status.code(), Some(1), "{trace:?}: {}", out(&o));
        assert!(out(&o).contains("nothing was checked"), "{}", out(&o));
        let o = check(trace, &["--format", "json"]);
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["conformant"], false);
        assert_eq!(report["batches"], 0);
    }
}

#[test]
fn a_session_log_is_checked_at_events_and_says_what_it_could_not_check() {
    let o = check(LOG, &["--observed", "events"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("at level events"), "{text}");
    assert!(text.contains("not checkable at level events"), "{text}");
    assert!(text.contains("deny-skips-body"), "{text}");
    assert!(
        text.contains("partly checkable at level events: sub-call-contexts-omitted: a context injected under a sub-call's id"),
        "{text}"
    );
    let o = check(LOG, &["--observed", "events", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["conformant"], true);
    let not_checkable: Vec<&str> = report["notCheckable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["invariant"].as_str().unwrap())
        .collect();
    assert!(not_checkable.contains(&"ordered-stages-serial"));
    // A sub-call's context forwarded to its run_code call is in no record of a session log: the
    // invariant is partly checkable there, never listed as checked.
    let partly: Vec<&str> = report["partlyCheckable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["invariant"].as_str().unwrap())
        .collect();
    assert!(partly.contains(&"sub-call-contexts-omitted"), "{partly:?}");
    assert!(partly.contains(&"contexts-fifo"), "{partly:?}");
    assert!(
        !report["checked"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("sub-call-contexts-omitted"))
    );
    assert!(
        report["checked"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("model-order-commit"))
    );
}

#[test]
fn a_session_log_checked_at_hooks_is_a_usage_error_with_the_way_out() {
    let o = check(LOG, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("--observed events"), "{}", out(&o));
}

/// A trace whose denied call still ran its body (the `run-body-after-deny` mutant's).
fn body_after_deny() -> String {
    use tep_conformance::scenario::corpus;
    use tep_conformance::scripted::run_reference;
    use tep_model::graph::Revision;
    use tep_reference::mutant::Mutant;
    let scenario = corpus()
        .unwrap()
        .into_iter()
        .find(|s| s.id == "pre-deny-skips-body")
        .unwrap();
    let records = run_reference(&scenario, Revision::Rev2, &[Mutant::RunBodyAfterDeny]).unwrap();
    tep_model::trace::to_jsonl(&records)
}

#[test]
fn the_html_report_of_a_check_quotes_the_trace_and_marks_its_witnesses() {
    let dir = std::env::temp_dir().join(format!("tep-check-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let trace = body_after_deny();
    let without = check(&trace, &[]);
    for (name, from_stdin) in [("stdin.html", true), ("file.html", false)] {
        let page = dir.join(name);
        let o = if from_stdin {
            check(&trace, &["--html", page.to_str().unwrap()])
        } else {
            let file = dir.join("trace.jsonl");
            std::fs::write(&file, &trace).unwrap();
            tep_command()
                .args([
                    "check",
                    file.to_str().unwrap(),
                    "--html",
                    page.to_str().unwrap(),
                ])
                .output()
                .unwrap()
        };
        // The same verdict, and the same text, as without the page.
        assert_eq!(o.status.code(), without.status.code(), "{}", out(&o));
        if from_stdin {
            assert_eq!(out(&o), out(&without));
        }
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        // Every line of the trace, the witnesses of the body that ran marked.
        for (n, line) in trace.lines().enumerate() {
            let escaped = line
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            assert!(
                html.contains(&format!(
                    "<span class=\"ln\">{}</span><code>{escaped}</code>",
                    n + 1
                )),
                "line {}",
                n + 1
            );
        }
        assert_eq!(
            html.matches("<li id=\"t-0-5\" class=\"witness\">").count(),
            1,
            "{name}"
        );
        assert_eq!(
            html.matches("<li id=\"t-0-7\" class=\"witness\">").count(),
            1,
            "{name}"
        );
        assert!(html.contains(
            "<g class=\"step-line refused failing\" data-from=\"denied\" data-to=\"around\">"
        ));
    }
    // An unwritable page is refused before the trace is read.
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let below = blocker.join("page.html");
    let o = tep_command()
        .args([
            "check",
            "/nonexistent/trace.jsonl",
            "--html",
            below.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        out(&o).contains(&format!(
            "cannot write the HTML report to {}",
            below.display()
        )),
        "{}",
        out(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// However many threads parse, `tep check` says the same: the same violations on the same
/// lines, and the same first unreadable line.
#[test]
fn the_verdict_does_not_depend_on_how_many_threads_parse() {
    use tep_model::trace::{TraceRecord, to_jsonl};
    let records: Vec<TraceRecord> = body_after_deny()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Long enough that several chunks are parsed at once.
    let trace = to_jsonl(&tep_check::repeat_batches(&records, 400));
    assert!(trace.len() > 4 * 64 * 1024, "{} bytes", trace.len());
    let broken = format!("{trace}{{oops\n{trace}");
    let dir = std::env::temp_dir().join(format!("tep-check-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |text: &str, jobs: &str| {
        let path = dir.join("trace.jsonl");
        std::fs::write(&path, text).unwrap();
        let o = tep_command()
            .args(["check", "--format", "json", "-j", jobs])
            .arg(&path)
            .output()
            .unwrap();
        (o.status.code(), out(&o))
    };
    for (what, text, code) in [("violations", &trace, 1), ("a broken line", &broken, 2)] {
        let one = run(text, "1");
        assert_eq!(one.0, Some(code), "{what}: {}", one.1);
        if code == 1 {
            // Every copy breaches, in every chunk.
            let report: serde_json::Value = serde_json::from_str(&one.1).unwrap();
            assert!(
                report["violations"].as_array().unwrap().len() >= 400,
                "{}",
                one.1
            );
        }
        for jobs in ["2", "3"] {
            assert_eq!(run(text, jobs), one, "{what} with -j {jobs}");
        }
    }
    let line = trace.lines().count() + 1;
    assert!(
        run(&broken, "2")
            .1
            .contains(&format!("line {line}: invalid JSON")),
        "{}",
        run(&broken, "2").1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_report_past_the_cap_says_how_many_violations_it_left_out() {
    use tep_model::trace::{TraceRecord, to_jsonl};
    let mut records: Vec<TraceRecord> = body_after_deny()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // At least one fault per batch: the batch never settles.
    records.retain(|r| r.node() != Some(tep_model::graph::NodeId::AllResults));
    let cap = tep_check::MAX_VIOLATIONS;
    let trace = to_jsonl(&tep_check::repeat_batches(&records, cap + 50));
    let json = check(&trace, &["--format", "json"]);
    assert_eq!(json.status.code(), Some(1), "{}", out(&json));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let shown = report["violations"].as_array().unwrap().len();
    let omitted = report["omitted"].as_u64().unwrap() as usize;
    assert_eq!(shown, cap);
    assert!(omitted >= 50, "{omitted} omitted");
    let text = check(&trace, &[]);
    assert_eq!(text.status.code(), Some(1));
    assert!(
        out(&text).contains(&format!("... and {omitted} more violations not shown")),
        "{}",
        out(&text)
    );
}

// ---------------------------------------------------------------------------------------------
// Traces from a file or stdin, the header's revision, malformed input (from cli.rs)

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
