//! The third attack run's findings, end to end: every JSON input read within its bound and
//! strictly (a key or a scenario named twice, a version that is not one), every file written
//! whole through one writer, a trace that cannot be read twice copied, and every command
//! stopped by a signal cleanly (no temporary file, 128 + the signal).

use crate::util::{temp_dir, tep_command, tep_in};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// The JSON report of a mutant's run (14 scenarios fail), written once.
fn mutant_report() -> &'static str {
    static REPORT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REPORT.get_or_init(|| {
        let dir = temp_dir("mutant");
        let o = tep_in(
            &dir,
            &[
                "run",
                "--mutant",
                "run-body-after-deny",
                "--json",
                "mutant.json",
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{}", out(&o));
        std::fs::read_to_string(dir.join("mutant.json")).unwrap()
    })
}

/// `tep report FILE` of `text` written to `name` in a directory of its own.
fn report_of(name: &str, text: &str) -> Output {
    let dir = temp_dir(name);
    std::fs::write(dir.join(name), text).unwrap();
    tep_in(&dir, &["report", name])
}

#[test]
fn a_report_field_named_twice_is_refused_with_its_line() {
    let text = mutant_report();
    let at = text.find("\"conformant\": false").expect("a pretty report");
    let line = text[..at].lines().count();
    let forged = text.replacen(
        "\"conformant\": false",
        "\"conformant\": false, \"conformant\": true",
        1,
    );
    for args in [
        &["report", "forged.json"][..],
        &["run", "--compare", "forged.json"][..],
    ] {
        let dir = temp_dir("dup-key");
        std::fs::write(dir.join("forged.json"), &forged).unwrap();
        let o = tep_in(&dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", out(&o));
        assert!(
            out(&o).contains("duplicate field `conformant`")
                && out(&o).contains(&format!("line {line}")),
            "{args:?}: {}",
            out(&o)
        );
    }
}

#[test]
fn a_scenario_id_given_twice_in_a_report_is_refused_naming_it() {
    let mut report: Value = serde_json::from_str(mutant_report()).unwrap();
    let scenarios = report["scenarios"].as_array_mut().unwrap();
    let passed = scenarios
        .iter()
        .find(|s| s["status"] == "passed")
        .unwrap()
        .clone();
    let failed = scenarios
        .iter_mut()
        .find(|s| s["status"] == "failed")
        .unwrap();
    let id = failed["id"].as_str().unwrap().to_owned();
    let mut twin = passed;
    twin["id"] = Value::from(id.clone());
    scenarios.push(twin);
    let o = report_of("twice.json", &report.to_string());
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains(&format!("scenario {id} is listed twice")),
        "{}",
        out(&o)
    );
}

#[test]
fn a_report_version_that_is_not_semver_is_refused() {
    let mut report: Value = serde_json::from_str(mutant_report()).unwrap();
    for version in ["18446744073709551616.0.0", " 9.0.0", "v9.0.0", ""] {
        report["version"] = Value::from(version);
        let o = report_of("version.json", &report.to_string());
        assert_eq!(o.status.code(), Some(2), "{version:?}: {}", out(&o));
        assert!(
            out(&o).contains("is not a semantic version"),
            "{version:?}: {}",
            out(&o)
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_device_or_a_file_past_the_bound_is_refused_before_it_is_parsed() {
    let dir = temp_dir("bound");
    // 128 MiB and one byte, sparse: refused from its size, nothing read.
    let big = std::fs::File::create(dir.join("big.json")).unwrap();
    big.set_len(128 * 1024 * 1024 + 1).unwrap();
    let o = tep_in(&dir, &["report", "big.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("big.json is 134217729 bytes, longer than the 134217728 bytes"),
        "{}",
        out(&o)
    );
    // A device that never ends: read to the bound, then refused.
    for args in [
        &["report", "/dev/zero"][..],
        &["run", "--compare", "/dev/zero"][..],
        &["run", "--baseline", "/dev/zero"][..],
        &["run", "--scenario-file", "/dev/zero"][..],
    ] {
        let o = tep_in(&dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", out(&o));
        assert!(
            out(&o).contains("/dev/zero gave more than the"),
            "{args:?}: {}",
            out(&o)
        );
    }
}

#[test]
fn a_session_log_key_named_twice_is_refused_with_its_line() {
    let log = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/deepseek-harness/rc8-session.jsonl");
    let text = std::fs::read_to_string(log).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // A forged second `type` on line 3: the last one would win.
    lines[2] = lines[2].replacen("{\"type\":", "{\"type\":\"x\",\"type\":", 1);
    let dir = temp_dir("dup-log");
    std::fs::write(dir.join("log.jsonl"), lines.join("\n") + "\n").unwrap();
    let o = tep_in(&dir, &["check", "log.jsonl", "--from", "deepseek-harness"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("line 3") && out(&o).contains("duplicate key `type`"),
        "{}",
        out(&o)
    );
}

/// The pid of a child, as `kill` takes it.
fn signal(child: &Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` at most `limit`; kills it and fails past that.
fn wait_at_most(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls until `ready` or fails after 60 s.
fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A trace with one failing batch (the `run-body-after-deny` mutant's).
fn failing_trace() -> String {
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
fn check_stopped_by_a_signal_leaves_no_temporary_file_and_exits_128_plus_it() {
    let trace = failing_trace();
    let (head, tail) = trace.split_at(trace.len() / 2);
    for (name, code) in [("INT", 130), ("TERM", 143), ("HUP", 129)] {
        let dir = temp_dir(&format!("sig-check-{name}"));
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut child = tep_command()
            .args(["check", "-", "--html", "page.html"])
            .current_dir(&dir)
            .env("TMPDIR", &tmp)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(head.as_bytes()).unwrap();
        stdin.flush().unwrap();
        // Half the trace is read and copied; the copy is on disk.
        until("stdin copied", || !entries(&tmp).is_empty());
        signal(&child, name);
        let status = wait_at_most(&mut child, Duration::from_secs(60));
        let _ = stdin.write_all(tail.as_bytes());
        assert_eq!(status.code(), Some(code), "SIG{name}: {status:?}");
        assert!(entries(&tmp).is_empty(), "SIG{name}: {:?}", entries(&tmp));
        assert!(entries(&dir) == ["tmp"], "SIG{name}: {:?}", entries(&dir));
    }
}

#[cfg(unix)]
#[test]
fn report_stopped_by_a_signal_exits_128_plus_it() {
    for (name, code) in [("INT", 130), ("TERM", 143), ("HUP", 129)] {
        let dir = temp_dir(&format!("sig-report-{name}"));
        // Opening a FIFO no one writes blocks: the signal lands while `tep report` reads.
        let status = std::process::Command::new("mkfifo")
            .arg(dir.join("run.json"))
            .status()
            .unwrap();
        assert!(status.success());
        let mut child = tep_command()
            .args(["report", "run.json", "--html", "page.html"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        signal(&child, name);
        let status = wait_at_most(&mut child, Duration::from_secs(60));
        assert_eq!(status.code(), Some(code), "SIG{name}: {status:?}");
        assert_eq!(entries(&dir), ["run.json"], "SIG{name}");
    }
}

#[cfg(unix)]
#[test]
fn check_of_a_fifo_with_html_quotes_the_trace_and_exits() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("trace.jsonl");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let trace = failing_trace();
    let writer = {
        let (fifo, trace) = (fifo.clone(), trace.clone());
        std::thread::spawn(move || std::fs::write(fifo, trace))
    };
    let mut child = tep_command()
        .args(["check", "trace.jsonl", "--html", "page.html"])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_at_most(&mut child, Duration::from_secs(60));
    writer.join().unwrap().unwrap();
    assert_eq!(status.code(), Some(1));
    let page = std::fs::read_to_string(dir.join("page.html")).unwrap();
    // Every line of the trace is quoted, not none (as when the FIFO was opened again).
    let lines = trace.lines().count();
    assert!(
        page.contains(&format!("The trace: {lines} line(s)")),
        "{:?}",
        page.find("The trace:").map(|at| &page[at..at + 30])
    );
    assert_eq!(entries(&dir), ["page.html", "trace.jsonl"]);
}

#[test]
fn the_report_page_is_replaced_whole_not_written_in_place() {
    let dir = temp_dir("in-place");
    std::fs::write(dir.join("run.json"), mutant_report()).unwrap();
    std::fs::write(dir.join("page.html"), "the old page").unwrap();
    // A reader holding the old page (here: a second name of the same file) keeps it whole.
    std::fs::hard_link(dir.join("page.html"), dir.join("held.html")).unwrap();
    let o = tep_in(&dir, &["report", "run.json", "--html", "page.html"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let held = std::fs::read_to_string(dir.join("held.html")).unwrap();
    assert!(held == "the old page", "the old page was written over");
    assert!(
        std::fs::read_to_string(dir.join("page.html"))
            .unwrap()
            .trim_end()
            .ends_with("</html>")
    );
    assert_eq!(entries(&dir), ["held.html", "page.html", "run.json"]);
}

#[test]
fn fuzz_that_cannot_write_its_scenario_prints_the_failure_and_the_scenario() {
    let dir = temp_dir("fuzz-no-target");
    // `target` is a file: target/tep-fuzz cannot be made, whoever runs the test (root too).
    std::fs::write(dir.join("target"), "").unwrap();
    let o = tep_in(
        &dir,
        &[
            "fuzz",
            "--mutant",
            "run-body-after-deny",
            "--seed",
            "1",
            "--cases",
            "200",
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(stdout.contains("FAILED at case"), "{}", out(&o));
    assert!(
        stdout.contains("the shrunk scenario (not written: cannot write target/tep-fuzz/"),
        "{}",
        out(&o)
    );
    assert!(stdout.contains("\"revisions\""), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot write target/tep-fuzz/"),
        "{}",
        out(&o)
    );
}

#[test]
fn scenarios_export_writes_each_file_whole_and_names_the_one_it_cannot() {
    let dir = temp_dir("export");
    // A directory where one scenario's file should be: that file fails, the others are written.
    std::fs::create_dir_all(dir.join("out/allow-runs-body.json")).unwrap();
    let o = tep_in(&dir, &["scenarios", "export", "out"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("cannot write out/allow-runs-body.json"),
        "{}",
        out(&o)
    );
    let written = entries(&dir.join("out"));
    assert!(written.contains(&"scenario.schema.json".to_owned()));
    assert!(written.contains(&"pre-deny-skips-body.json".to_owned()));
    assert!(!written.iter().any(|n| n.ends_with(".tmp")), "{written:?}");
}
