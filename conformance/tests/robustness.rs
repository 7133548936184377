//! Faults an attack run found in the `tep` binary (issue 14), each pinned by a test: out-of-range
//! timeouts, broken pipes, outputs that cannot be written, adapters that answer twice or leave
//! processes behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_reference::graph::Revision;
use tep_reference::trace::to_jsonl;

const TEP: &str = env!("CARGO_BIN_EXE_tep");

fn tep(args: &[&str]) -> Output {
    Command::new(TEP)
        .args(args)
        .env_remove("CI")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tep-robust-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `sh -c '<script>'` as one adapter command (quoted so shlex keeps it whole).
fn adapter_command(script: &str) -> String {
    format!("sh -c '{script}'")
}

const READY: &str = r#"{\"ready\":true,\"protocol\":1,\"implementation\":{\"name\":\"fixture\"},\"capabilities\":[],\"specs\":[\"rev2\"]}"#;

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
    Command::new(TEP)
        .args(args)
        .env_remove("CI")
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
    let mut child = Command::new(TEP)
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
