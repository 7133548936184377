//! Faults an attack run found in the `tep` binary (issue 14), each pinned by a test: out-of-range
//! timeouts, broken pipes, outputs that cannot be written, adapters that answer twice or leave
//! processes behind; and adapters that hang, crash, print garbage or flood stderr.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(target_os = "linux")]
use crate::util::still_running;
use crate::util::{
    READY, TEP, adapter_command, code, run_fixture, statuses, stderr, temp_dir, tep, tep_command,
};

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};

use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_model::graph::Revision;
use tep_model::trace::to_jsonl;

// ---------------------------------------------------------------------------------------------
// --timeout

#[test]
fn timeouts_outside_the_documented_range_are_usage_errors() {
    // 1e20 once panicked converting to a Duration; 1e-12 gave a different verdict on every run.
    for timeout in ["1e20", "1e-12", "0.05", "86401", "NaN", "inf", "-1", "soon"] {
        let o = tep(&[
            "run",
            &format!("--timeout={timeout}"),
            "--scenario",
            "allow-runs-body",
        ]);
        assert_eq!(
            o.status.code(),
            Some(2),
            "--timeout {timeout}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("a number of seconds from 0.1 to 86400"),
            "--timeout {timeout}: {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
    // The crash was in converting the timeout for an adapter.
    let adapter = format!("{TEP} reference-adapter");
    let o = tep(&["run", "--adapter", &adapter, "--timeout=1e20"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    for timeout in ["0.1", "86400"] {
        let o = tep(&["run", "--timeout", timeout, "--scenario", "allow-runs-body"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "--timeout {timeout}: {}",
            stderr(&o)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// broken pipes

/// A pipe whose reader is already gone: every write to it fails with EPIPE.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

fn into_closed_pipe(args: &[&str], stdin: Stdio) -> Output {
    tep_command()
        .args(args)
        .stdin(stdin)
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn every_command_ends_quietly_on_a_broken_pipe_with_its_own_exit_code() {
    let dir = temp_dir("pipe");
    let scenario = corpus()
        .unwrap()
        .into_iter()
        .find(|s| s.id == "allow-runs-body")
        .unwrap();
    let trace = dir.join("trace.jsonl");
    std::fs::write(
        &trace,
        to_jsonl(&run_reference(&scenario, Revision::Rev2, &[]).unwrap()),
    )
    .unwrap();
    let trace = trace.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &["run", "--scenario", "allow-runs-body"],
        &["run", "--scenario", "allow-runs-body", "--format", "json"],
        &["check", trace],
        &["check", "--format", "json", trace],
        &["scenarios", "list"],
        &["scenarios", "show", "allow-runs-body"],
        &["invariants", "list"],
        &["invariants", "explain", "deny-skips-body"],
        &["mutants"],
        &["schema", "scenario"],
        &["--help"],
    ];
    for args in commands {
        let o = into_closed_pipe(args, Stdio::null());
        assert_eq!(o.status.code(), Some(0), "tep {args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "tep {args:?}");
    }
    // A check that finds violations still says so in its exit code.
    let broken = dir.join("broken.jsonl");
    let text = std::fs::read_to_string(trace).unwrap();
    let first_event = text.lines().position(|l| l.contains("\"event\"")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(first_event);
    std::fs::write(&broken, lines.join("\n") + "\n").unwrap();
    let o = into_closed_pipe(&["check", broken.to_str().unwrap()], Stdio::null());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn the_reference_adapter_ends_quietly_when_its_reader_goes_away() {
    let mut child = tep_command()
        .arg("reference-adapter")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"cmd":"start","protocol":1}}"#).unwrap();
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    assert!(ready.contains("\"ready\":true"), "{ready}");
    drop(stdout);
    // The answer to this goes to a closed pipe.
    writeln!(stdin, r#"{{"cmd":"start","protocol":1}}"#).unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

// ---------------------------------------------------------------------------------------------
// outputs are checked before the run

#[test]
fn an_unwritable_output_is_a_usage_error_before_the_adapter_starts() {
    let dir = temp_dir("outputs");
    let marker = dir.join("adapter-started");
    let adapter = adapter_command(&format!(
        r#"touch {}; read l; echo "{READY}"; read l; echo "{{\"seq\":1,\"skipped\":{{\"reason\":\"x\"}}}}"; read l"#,
        marker.display()
    ));
    // A path below a regular file cannot be created, even by root.
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let below_a_file = file.join("junit.xml");
    let o = tep(&[
        "run",
        "--adapter",
        &adapter,
        "--scenario",
        "allow-runs-body",
        "--junit",
        below_a_file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "cannot write the JUnit report to {}",
            below_a_file.display()
        )),
        "{}",
        stderr(&o)
    );
    let o = tep(&[
        "run",
        "--adapter",
        &adapter,
        "--scenario",
        "allow-runs-body",
        "--traces",
        below_a_file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot create the traces directory"),
        "{}",
        stderr(&o)
    );
    let below_a_file = file.join("report.html");
    let o = tep(&[
        "run",
        "--adapter",
        &adapter,
        "--scenario",
        "allow-runs-body",
        "--html",
        below_a_file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "cannot write the HTML report to {}",
            below_a_file.display()
        )),
        "{}",
        stderr(&o)
    );
    assert!(!marker.exists(), "the adapter was never started");
    // A writable report path is left as it was: no empty file before the run.
    let fine = dir.join("report.xml");
    let o = tep(&[
        "run",
        "--scenario",
        "no-such-scenario",
        "--junit",
        fine.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!fine.exists());
}

// ---------------------------------------------------------------------------------------------
// answers sent twice

#[test]
fn an_answer_sent_twice_is_named_as_a_duplicate() {
    let skipped = r#"{\"seq\":1,\"skipped\":{\"reason\":\"x\"}}"#;
    let o = tep(&[
        "run",
        "--adapter",
        &adapter_command(&format!(
            r#"read l; echo "{READY}"; read l; echo "{skipped}"; echo "{skipped}"; read l; read l"#
        )),
        "--timeout",
        "5",
        "--jobs",
        "1",
        "--scenario",
        "allow-runs-body",
        "--scenario",
        "pre-deny-skips-body",
        "--format",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = report["scenarios"].as_array().unwrap();
    assert_eq!(rows[0]["status"], "skipped");
    assert_eq!(rows[1]["status"], "errored");
    assert_eq!(
        rows[1]["reason"],
        "the adapter answered seq 1 again (a duplicate answer to the previous request) instead of answering seq 2"
    );
}

// ---------------------------------------------------------------------------------------------
// processes an adapter leaves behind

/// Runs one scenario against an adapter that first starts `sleep 600` in a session of its own
/// (through `spawn`, which writes its pid to `$PIDFILE`), then behaves as `rest` says. Returns the
/// pid of the sleeper and tep's output.
#[cfg(target_os = "linux")]
fn run_with_a_daemon(name: &str, spawn: &str, rest: &str) -> (u32, Output) {
    let dir = temp_dir(name);
    let pidfile = dir.join("daemon.pid");
    let daemon = format!(
        r#"setsid sh -c "echo \$\$ > {}; exec sleep 600" </dev/null >/dev/null 2>&1"#,
        pidfile.display()
    );
    let script = format!(
        "read l\n{}\nwhile [ ! -s {} ]; do sleep 0.05; done; echo \"{READY}\"; {rest}",
        spawn.replace("DAEMON", &daemon),
        pidfile.display()
    );
    let o = tep(&[
        "run",
        "--adapter",
        &adapter_command(&script),
        "--timeout",
        "1",
        "--scenario",
        "allow-runs-body",
    ]);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (pid, o)
}

/// Asserts that `pid` has ended once given time to die ([`still_running`]).
#[cfg(target_os = "linux")]
fn assert_ended(pid: u32, o: &Output) {
    if !still_running(&[pid]).is_empty() {
        // What it is now (its state, parent, group, session), for whoever reads the failure.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Do not leave it behind for the next test run.
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status();
        panic!(
            "pid {pid} outlived tep by 10 s ({}): {}",
            stat.trim(),
            stderr(o)
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_setsid_grandchild_of_a_hanging_adapter_is_killed_with_it() {
    // The grandchild left the adapter's process group, so killing the group missed it.
    let (pid, o) = run_with_a_daemon(
        "setsid-hang",
        "DAEMON &",
        "while read l; do sleep 1000; done",
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "the scenario errored: {}",
        stderr(&o)
    );
    assert_ended(pid, &o);
}

#[cfg(target_os = "linux")]
#[test]
fn a_daemon_orphaned_by_a_polite_adapter_does_not_outlive_tep() {
    // `( ... & )`: the daemon's parent exits at once, so it is no longer below the adapter; the
    // adapter itself answers and stops when told to.
    let skipped = r#"{\"seq\":1,\"skipped\":{\"reason\":\"x\"}}"#;
    let (pid, o) = run_with_a_daemon(
        "orphan-polite",
        "(DAEMON &)",
        &format!(r#"read l; echo "{skipped}"; read l"#),
    );
    // Exit 1: a run where every scenario was skipped tested nothing; the adapter still stopped.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_ended(pid, &o);
}

// ---------------------------------------------------------------------------------------------
// answer size

#[test]
fn an_answer_over_the_size_limit_is_refused_unparsed() {
    let limit = tep_conformance::adapter::MAX_ANSWER_BYTES;
    let o = tep(&[
        "run",
        "--adapter",
        &adapter_command(&format!(
            r#"read l; echo "{READY}"; read l; head -c {} /dev/zero | tr "\0" x; echo; read l"#,
            limit + 1
        )),
        "--timeout",
        "20",
        "--scenario",
        "allow-runs-body",
        "--format",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &report["scenarios"][0];
    assert_eq!(row["status"], "errored");
    assert_eq!(
        row["reason"],
        format!("the adapter sent a line longer than {limit} bytes")
    );
}

// ---------------------------------------------------------------------------------------------
// docs/limits.md

#[test]
fn docs_state_the_limits_in_force() {
    use tep_conformance::{adapter, limits, scripted, serve};
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/limits.md"),
    )
    .unwrap();
    let mib = |bytes: usize| bytes / (1024 * 1024);
    let defaults = adapter::AdapterOptions::new("x");
    let expected = [
        format!(
            "| {} MiB | `tep_check::MAX_LINE_BYTES` |",
            mib(tep_check::MAX_LINE_BYTES)
        ),
        format!(
            "| {} MiB | `adapter::MAX_ANSWER_BYTES` |",
            mib(adapter::MAX_ANSWER_BYTES)
        ),
        format!("longer than {} bytes", adapter::MAX_ANSWER_BYTES),
        format!(
            "| {} MiB | `serve::MAX_REQUEST_BYTES` |",
            mib(serve::MAX_REQUEST_BYTES)
        ),
        format!(
            "| {} | `tep_check::MAX_VIOLATIONS` |",
            tep_check::MAX_VIOLATIONS
        ),
        format!("the last {} KiB", adapter::STDERR_TAIL_BYTES / 1024),
        format!(
            "| {} s to {} s; default {} s |",
            adapter::MIN_TIMEOUT.as_secs_f64(),
            adapter::MAX_TIMEOUT.as_secs_f64(),
            defaults.timeout.as_secs_f64()
        ),
        format!(
            "| the handshake | {} s |",
            defaults.handshake_timeout.as_secs_f64()
        ),
        format!("| 1 to {} | `MAX_ID_BYTES` |", limits::MAX_ID_BYTES),
        format!("| {} | `MAX_CALLS` |", limits::MAX_CALLS),
        format!("| {} | `MAX_PROGRAM_STEPS` |", limits::MAX_PROGRAM_STEPS),
        format!("| {} | `MAX_BODY_STEPS` |", limits::MAX_BODY_STEPS),
        format!("| {} | `MAX_EXTENSIONS` |", limits::MAX_EXTENSIONS),
        format!("| {} | `MAX_NESTING` |", limits::MAX_NESTING),
        format!(
            "| {} | `MAX_DISPATCHES_PER_CALL` |",
            limits::MAX_DISPATCHES_PER_CALL
        ),
        format!("| {} ms | `MAX_DURATION_MS` |", limits::MAX_DURATION_MS),
        format!("| {} | `MAX_TEXT_BYTES` |", limits::MAX_TEXT_BYTES),
        format!(
            "| {} KiB | `MAX_RUNNABLE_BYTES` |",
            limits::MAX_RUNNABLE_BYTES / 1024
        ),
        format!(
            "| {} | `tep_check::MAX_MESSAGE_BYTES` |",
            tep_check::MAX_MESSAGE_BYTES
        ),
        format!("| {} | `tep_check::MAX_STEPS` |", tep_check::MAX_STEPS),
        format!(
            "| {} MiB | `tep_check::MAX_IN_FLIGHT_BYTES` |",
            mib(tep_check::MAX_IN_FLIGHT_BYTES)
        ),
        format!(
            "| {} bytes | `excerpt::MAX_LINE_SHOWN` |",
            tep_conformance::excerpt::MAX_LINE_SHOWN
        ),
        format!(
            "`RetryWrapper::MAX_ATTEMPTS` ({})",
            tep_reference::wrappers::RetryWrapper::MAX_ATTEMPTS
        ),
        format!(
            "| {} MiB | `input::MAX_REPORT_BYTES` |",
            tep_conformance::input::MAX_REPORT_BYTES / (1024 * 1024)
        ),
        format!(
            "| {} MiB | `input::MAX_BASELINE_BYTES` |",
            tep_conformance::input::MAX_BASELINE_BYTES / (1024 * 1024)
        ),
        format!(
            "| {} MiB | `input::MAX_SCENARIO_FILE_BYTES` |",
            tep_conformance::input::MAX_SCENARIO_FILE_BYTES / (1024 * 1024)
        ),
    ];
    for row in expected {
        assert!(page.contains(&row), "docs/limits.md does not say: {row}");
    }
    // "one hour" twice: the virtual time limit, and every duration bounded by it.
    assert_eq!(scripted::VIRTUAL_TIME_LIMIT.as_secs(), 3600);
    assert_eq!(
        u128::from(limits::MAX_DURATION_MS),
        scripted::VIRTUAL_TIME_LIMIT.as_millis()
    );
}

// ---------------------------------------------------------------------------------------------
// adapters that hang, crash, print garbage or flood stderr (from cli.rs)

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
