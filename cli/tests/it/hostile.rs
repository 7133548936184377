//! Faults the second attack run found (issue 28, `shared/notes/attack-run.md`), each pinned by a
//! test: terminal escapes from an adapter or a trace (N1), I/O faults on the outputs (N7, N8),
//! signals (N5), one job's cleanup harming another's processes (N2, N3), zombies (N4).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(target_os = "linux")]
use crate::util::still_running;
use crate::util::{TEP, temp_dir, tep_command, tep_in, without_output_env};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_model::graph::Revision;
use tep_model::trace::to_jsonl;

/// The hostile adapter fixture with `mode` (see its docstring).
fn hostile(mode: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile_adapter.py");
    format!("python3 {} {mode}", script.display())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The control characters in `bytes` but newline, tab and (with `colours`) whole SGR colour
/// sequences, each with a little context.
fn controls(bytes: &[u8], colours: bool) -> Vec<String> {
    let text = text(bytes);
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        let at = i;
        i += c.len_utf8();
        if c == '\u{1b}' && colours {
            let rest = &text[i..];
            let params = rest
                .bytes()
                .skip(1)
                .take_while(|b| b.is_ascii_digit() || *b == b';')
                .count();
            if rest.starts_with('[') && rest.as_bytes().get(1 + params) == Some(&b'm') {
                i += 2 + params;
                continue;
            }
        }
        let bad = matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}');
        if bad {
            let end = (at + 40).min(text.len());
            let end = (end..=text.len())
                .find(|&e| text.is_char_boundary(e))
                .unwrap();
            found.push(format!("{:?}", &text[at..end]));
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// N1: terminal-safe text

#[test]
fn an_adapters_escapes_are_shown_not_obeyed_in_every_colour_mode() {
    let dir = temp_dir("n1-run");
    for color in ["always", "never", "auto"] {
        let o = tep_in(
            &dir,
            &[
                "run",
                "--adapter",
                &hostile("text"),
                "--jobs",
                "1",
                "--color",
                color,
                "--scenario",
                "allow-runs-body",
                "--scenario",
                "pre-deny-skips-body",
                "--scenario",
                "pre-throws",
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
        let stdout = text(&o.stdout);
        // The payloads arrived (the test has teeth) and are shown escaped.
        assert!(stdout.contains("errmsg"), "{stdout}");
        assert!(stdout.contains("stderr-tail"), "{stdout}");
        assert!(stdout.contains(r"\u001b]0;PWNED-TITLE\u0007"), "{stdout}");
        assert_eq!(controls(&o.stdout, color == "always"), Vec::<String>::new());
        assert_eq!(controls(&o.stderr, false), Vec::<String>::new());
        // The forged PASS line stays on the ERROR line it came with.
        for line in stdout.lines().filter(|l| l.contains("forged")) {
            assert!(!line.trim_start().starts_with("PASS"), "{line}");
        }
        // Colours are ours alone: the adapter's `ESC[31m` is escaped too.
        assert!(stdout.contains(r"\u001b[31mRED"), "{stdout}");
    }
}

#[test]
fn a_handshake_failure_shows_the_adapters_stderr_escaped() {
    let dir = temp_dir("n1-handshake");
    let o = tep_in(
        &dir,
        &["run", "--adapter", &hostile("handshake"), "--jobs", "1"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(stderr.contains(r"stderr\u001b]0;PWNED-TITLE"), "{stderr}");
    assert_eq!(controls(&o.stderr, false), Vec::<String>::new());
}

#[test]
fn a_traces_escapes_are_shown_not_obeyed_by_tep_check() {
    let dir = temp_dir("n1-check");
    let scenario = corpus()
        .unwrap()
        .into_iter()
        .find(|s| s.id == "allow-runs-body")
        .unwrap();
    let jsonl = to_jsonl(&run_reference(&scenario, Revision::Rev2, &[]).unwrap());
    let evil = serde_json::to_string("c1\u{1b}]0;CHECK-TITLE\u{7}\u{1b}[2J\r FAKE\u{9b}").unwrap();
    // The call presented (line 4) is one the model never declared: the messages quote its id.
    let mut lines: Vec<String> = jsonl.lines().map(str::to_owned).collect();
    assert!(lines[3].contains("presentCall"), "{}", lines[3]);
    lines[3] = lines[3].replace("\"c1\"", &evil);
    let trace = dir.join("evil.jsonl");
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    for format in ["text", "json"] {
        let o = tep_in(
            &dir,
            &["check", "--format", format, trace.to_str().unwrap()],
        );
        assert!(o.status.code().is_some(), "{}", text(&o.stderr));
        let all = [o.stdout.as_slice(), o.stderr.as_slice()].concat();
        assert!(text(&all).contains("CHECK-TITLE"), "{}", text(&all));
        assert_eq!(controls(&o.stdout, false), Vec::<String>::new());
        assert_eq!(controls(&o.stderr, false), Vec::<String>::new());
        if format == "json" && o.status.code() != Some(2) {
            let _: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// N7, N8: outputs checked before the run, written whole, every one tried

#[test]
fn a_run_directory_that_cannot_be_created_is_a_usage_error_before_the_run() {
    let dir = temp_dir("n7");
    // `target` is a file: the default run directory target/tep-runs/<time> cannot be made, so
    // the failing traces go to the system's temporary directory, and the run says so.
    std::fs::write(dir.join("target"), "x").unwrap();
    let o = tep_in(
        &dir,
        &["run", "--mutant", "run-body-after-deny", "--json", "r.json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let fallback = std::env::temp_dir().join("tep-run-");
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("cannot create the run directory target/tep-runs/")
            && stderr.contains(&format!("failing traces go to {}", fallback.display())),
        "{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    let kept = report["runDirectory"].as_str().unwrap_or_default();
    assert!(kept.starts_with(&fallback.display().to_string()), "{kept}");
    let traces = std::fs::read_dir(kept).unwrap().count();
    assert!(traces > 0, "no trace kept in {kept}");
    let _ = std::fs::remove_dir_all(kept);
    // A passing run leaves no empty fallback directory behind.
    let o = tep_in(
        &dir,
        &["run", "--scenario", "allow-runs-body", "--json", "p.json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("p.json")).unwrap()).unwrap();
    assert!(report["runDirectory"].is_null(), "{report}");
    let notice = text(&o.stderr);
    let made = notice
        .split("failing traces go to ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_default();
    assert!(!made.is_empty() && !Path::new(made).exists(), "{notice}");
    // A run directory given that cannot be made is refused before anything runs.
    let o = tep_in(
        &dir,
        &[
            "run",
            "--mutant",
            "run-body-after-deny",
            "--run-dir",
            "target",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains("PASS"), "{}", text(&o.stdout));
    // A run that keeps no trace leaves no run directory behind (the check made and removed it).
    let clean = temp_dir("n7-clean");
    let o = tep_in(&clean, &["run", "--scenario", "allow-runs-body"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!clean.join("target").exists());
}

#[cfg(target_os = "linux")]
#[test]
fn a_report_that_cannot_be_written_is_named_and_the_others_are_still_written_whole() {
    let dir = temp_dir("n8");
    let o = tep_in(
        &dir,
        &[
            "run",
            "--mutant",
            "run-body-after-deny",
            "--junit",
            "/dev/full",
            "--json",
            "ok/r.json",
            "--html",
            "ok/r.html",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("cannot write /dev/full: No space left on device"),
        "{}",
        text(&o.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("ok/r.json")).unwrap()).unwrap();
    assert_eq!(json["conformant"], false);
    let html = std::fs::read_to_string(dir.join("ok/r.html")).unwrap();
    assert!(html.trim_end().ends_with("</html>"), "{html}");
    // The text report still ends with its summary; no temporary file is left beside a report.
    assert!(text(&o.stdout).contains(" failed, "), "{}", text(&o.stdout));
    let mut names: Vec<String> = std::fs::read_dir(dir.join("ok"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["r.html", "r.json"]);
    // Standard output on a full disk is named too.
    let o = tep_command()
        .args(["run", "--scenario", "allow-runs-body"])
        .current_dir(&dir)
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("cannot write to standard output: No space left on device"),
        "{}",
        text(&o.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// N5: every way to stop is a clean stop

/// Waits (up to 20 s) until `pidfile` holds `n` pids, and returns them.
#[cfg(target_os = "linux")]
fn wait_for_pids(pidfile: &Path, n: usize) -> Vec<u32> {
    for _ in 0..400 {
        let pids: Vec<u32> = std::fs::read_to_string(pidfile)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never held {n} pids", pidfile.display());
}

/// Asserts none of `pids` is running once given time to die ([`still_running`]), and kills
/// those that are, not to leave them behind.
#[cfg(target_os = "linux")]
fn assert_all_ended(pids: &[u32], what: &str) {
    let alive = still_running(pids);
    for pid in &alive {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(alive.is_empty(), "{what}: {alive:?} outlived tep");
}

/// Starts tep with `args` in `dir`, the hostile adapter's $PIDFILE at `pidfile`; waits for `n`
/// pids there, sends `signal`, and returns tep's output and the pids.
#[cfg(target_os = "linux")]
fn signalled(dir: &Path, args: &[&str], n: usize, signal: &str) -> (Output, Vec<u32>) {
    let pidfile = dir.join("pids");
    let _ = std::fs::remove_file(&pidfile);
    let child = tep_command()
        .args(args)
        .env("PIDFILE", &pidfile)
        .env("TEP", TEP)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .current_dir(dir)
        .spawn()
        .unwrap();
    let pids = wait_for_pids(&pidfile, n);
    let started = std::time::Instant::now();
    Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "tep took {:?} to stop",
        started.elapsed()
    );
    (o, pids)
}

#[cfg(target_os = "linux")]
#[test]
fn sigterm_and_sighup_stop_a_run_with_its_reports_and_its_adapters() {
    // (One Ctrl-C waits for the running scenarios, a second abandons them: tests/run.rs.)
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let dir = temp_dir(&format!("n5-{signal}"));
        let adapter = hostile("hang-run 2");
        let (o, pids) = signalled(
            &dir,
            &[
                "run",
                "--adapter",
                &adapter,
                "--jobs",
                "2",
                "--timeout",
                "60",
                "--json",
                "r.json",
                "--junit",
                "r.xml",
            ],
            4,
            signal,
        );
        assert_all_ended(&pids, signal);
        assert_eq!(o.status.code(), Some(code), "{}", text(&o.stderr));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
        assert_eq!(json["interrupted"], true);
        assert_eq!(json["exitCode"], code);
        assert!(dir.join("r.xml").exists());
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_signal_during_the_handshake_kills_the_adapter() {
    for signal in ["INT", "TERM"] {
        let dir = temp_dir(&format!("n5-start-{signal}"));
        let adapter = hostile("hang-start");
        let (o, pids) = signalled(
            &dir,
            &["run", "--adapter", &adapter, "--jobs", "1"],
            2,
            signal,
        );
        let code = if signal == "INT" { 130 } else { 143 };
        assert_eq!(o.status.code(), Some(code), "{}", text(&o.stderr));
        assert_all_ended(&pids, signal);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_on_fuzz_reports_what_was_judged_and_the_seed_and_stops_the_adapter() {
    let dir = temp_dir("n5-fuzz");
    let adapter = hostile("hang-run 4");
    let (o, pids) = signalled(
        &dir,
        &[
            "fuzz",
            "--adapter",
            &adapter,
            "--seed",
            "7",
            "--cases",
            "50",
            "--timeout",
            "60",
        ],
        2,
        "INT",
    );
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout
            .contains("interrupted: 3 scenario(s) judged before the signal; replay with --seed 7"),
        "{stdout}"
    );
    assert_all_ended(&pids, "fuzz");
}

// ---------------------------------------------------------------------------------------------
// N2, N3, N4: one job never touches another's processes; orphans reaped as they exit

#[cfg(target_os = "linux")]
/// The errored scenarios of a JSON run report, each as `"id": "reason"`.
fn errored_scenarios(report: &Path) -> Vec<String> {
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    json["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "errored")
        .map(|s| format!("{}: {}", s["id"], s["reason"]))
        .collect()
}

#[test]
fn a_jobs_cleanup_never_kills_another_jobs_helper_daemon() {
    for jobs in ["4", "8"] {
        let dir = temp_dir(&format!("n2-{jobs}"));
        let pidfile = dir.join("pids");
        // The first scenario crashes its adapter: tep kills it, sweeps its orphans and starts
        // another, while the other jobs' adapters (each with a live helper) go on.
        let o = tep_command()
            .args([
                "run",
                "--adapter",
                &hostile("daemon"),
                "--jobs",
                jobs,
                "--json",
                "r.json",
            ])
            .env("PIDFILE", &pidfile)
            .env("TEP", TEP)
            .env("CRASH_ON", "allow-runs-body")
            .current_dir(&dir)
            .output()
            .unwrap();
        let errored = errored_scenarios(&dir.join("r.json"));
        assert_eq!(
            errored.len(),
            1,
            "--jobs {jobs}: {errored:#?}\n{}",
            text(&o.stdout)
        );
        assert!(errored[0].starts_with("\"allow-runs-body\""), "{errored:?}");
        // Every helper still ended with the run.
        let helpers = wait_for_pids(&pidfile, 1);
        assert_all_ended(&helpers, "helpers");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn exited_orphans_are_reaped_as_the_run_goes_not_when_an_adapter_ends() {
    let dir = temp_dir("n4");
    let mut child = tep_command()
        .args([
            "fuzz",
            "--adapter",
            &hostile("zombies"),
            "--seed",
            "4",
            "--cases",
            "300",
        ])
        .env("TEP", TEP)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .current_dir(&dir)
        .spawn()
        .unwrap();
    let me = child.id();
    let mut most = 0;
    while child.try_wait().unwrap().is_none() {
        let zombies = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                let rest: Vec<&str> = stat
                    .rsplit_once(')')
                    .map(|(_, r)| r.split_whitespace().collect())
                    .unwrap_or_default();
                rest.first() == Some(&"Z") && rest.get(1) == Some(&me.to_string().as_str())
            })
            .count();
        most = most.max(zombies);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // One helper per case: without reaping they pile up by the hundred.
    assert!(most <= 5, "{most} zombies at once");
}

/// Some CI sandboxes run tep in a PID namespace entered without a session of its own, where
/// `getsid` and `getpgrp` answer 0 and `/proc` shows 0 for our session and group. The orphan
/// sweep once asked the kernel for them and aborted there (a debug assertion in rustix), so a
/// failing run crashed and an adapter run hung. Needs `unshare` (root); skipped without it.
#[cfg(target_os = "linux")]
#[test]
fn a_run_in_a_pid_namespace_without_a_session_of_its_own_cleans_up_as_anywhere() {
    let unshare = || {
        let mut command = Command::new("unshare");
        without_output_env(&mut command).args(["--pid", "--fork", "--mount-proc", "--"]);
        command
    };
    let permitted = unshare().arg("true").status().is_ok_and(|s| s.success());
    if !permitted {
        // A sandbox without CAP_SYS_ADMIN cannot nest a namespace; the sweep's choice of groups
        // is still held by its unit test (`only_groups_of_other_sessions_are_killed...`).
        eprintln!("skipped: unshare --pid is not permitted here");
        return;
    }
    let dir = temp_dir("pid-namespace");
    let o = unshare()
        .args([TEP, "run", "--mutant", "run-body-after-deny"])
        .args(["--scenario", "pre-deny-skips-body"])
        .env_remove("CI")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("0 passed, 1 failed"),
        "{}",
        text(&o.stdout)
    );
    // Helpers in sessions of their own, one adapter crashing: its sweep still tells the
    // other jobs' helpers from its own.
    let o = unshare()
        .args([TEP, "run", "--adapter", &hostile("daemon"), "--jobs", "4"])
        .args(["--json", "r.json"])
        .env_remove("CI")
        .env("PIDFILE", dir.join("pids"))
        .env("TEP", TEP)
        .env("CRASH_ON", "allow-runs-body")
        .current_dir(&dir)
        .output()
        .unwrap();
    let errored = errored_scenarios(&dir.join("r.json"));
    assert_eq!(errored.len(), 1, "{errored:#?}\n{}", text(&o.stdout));
    assert!(errored[0].starts_with("\"allow-runs-body\""), "{errored:?}");
}

/// Two runs started in the same second once shared `target/tep-runs/<time>`: each overwrote
/// the other's traces, and one's probe could fail on a directory the other had just removed
/// (two tests in parallel did). A run takes a directory of its own, and an empty one is gone
/// after it.
#[test]
fn a_run_keeps_its_traces_in_a_directory_no_other_run_has() {
    let dir = temp_dir("run-dir-taken");
    let runs = dir.join("target/tep-runs");
    // Another run's directories for this second and the next few, with its trace in each.
    let now = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now());
    let taken: Vec<PathBuf> = (0..4)
        .map(|s| {
            let name = (now + chrono::TimeDelta::seconds(s)).format("%Y%m%dT%H%M%SZ");
            let taken = runs.join(name.to_string());
            std::fs::create_dir_all(&taken).unwrap();
            std::fs::write(taken.join("pre-deny-skips-body.jsonl"), "theirs\n").unwrap();
            taken
        })
        .collect();
    let o = tep_in(
        &dir,
        &["run", "--mutant", "run-body-after-deny", "--json", "r.json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
    let ours = dir.join(report["runDirectory"].as_str().unwrap());
    assert!(!taken.contains(&ours), "{}", ours.display());
    assert!(ours.join("pre-deny-skips-body.jsonl").is_file());
    for taken in &taken {
        let theirs = std::fs::read_to_string(taken.join("pre-deny-skips-body.jsonl")).unwrap();
        assert_eq!(theirs, "theirs\n", "{}", taken.display());
    }
    // A passing run leaves no directory behind, nor the parents it made.
    let empty = temp_dir("run-dir-empty");
    let o = tep_in(&empty, &["run"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!empty.join("target").exists());
}
