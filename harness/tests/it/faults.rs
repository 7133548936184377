//! Faults are errors, never verdicts: small fake harnesses (sh, python3) that exit at once,
//! never call the model, hang, or finish without a log. Each is `errored` within its timeout,
//! with its stderr tail, nothing it started is left running, and its run directory is gone
//! unless kept.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tep_conformance::runner::{Answer, Implementation};
use tep_conformance::scenario::corpus;
use tep_harness::driver::{HarnessDriver, HarnessOptions};
use tep_harness::profile::Profile;
use tep_model::graph::Revision;

const SCENARIO: &str = "unknown-tool-is-an-error-result";

fn driver(script: &str, timeout: Duration, keep: bool) -> HarnessDriver {
    let profile = Profile::load("deepseek-harness").unwrap();
    let mut options = HarnessOptions::new(profile, PathBuf::from("tep"));
    options.command = Some(vec![
        "sh".into(),
        "-c".into(),
        script.into(),
        "fake-harness".into(),
    ]);
    options.timeout = timeout;
    options.boot_timeout = timeout.min(Duration::from_secs(2));
    options.keep = keep;
    HarnessDriver::new(options).unwrap()
}

fn run(driver: &mut HarnessDriver) -> (Answer, Duration) {
    let corpus = corpus().unwrap();
    let scenario = corpus.iter().find(|s| s.id == SCENARIO).unwrap();
    let started = Instant::now();
    let answer = driver.run(1, Revision::Rev2, scenario);
    (answer, started.elapsed())
}

fn errored(answer: Answer) -> (String, Option<String>) {
    match answer {
        Answer::Errored { message, stderr } => (message, stderr),
        other => panic!("expected errored, got {other:?}"),
    }
}

/// Whether a process is alive (a zombie is not).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_harness_that_exits_at_once_is_errored_with_its_stderr_and_its_directory_is_removed() {
    let out = tempfile::tempdir().unwrap();
    let cwd = out.path().join("cwd");
    let script = format!(
        "pwd > '{}'; echo 'cannot boot: no config' >&2; exit 3",
        cwd.display()
    );
    let (answer, took) = run(&mut driver(&script, Duration::from_secs(20), false));
    let (message, stderr) = errored(answer);
    assert!(message.contains("exited with"), "{message}");
    assert!(
        stderr
            .unwrap_or_default()
            .contains("cannot boot: no config")
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    let workspace = read(&cwd);
    assert!(workspace.contains("tep-"), "{workspace}");
    assert!(
        !Path::new(workspace.trim()).exists(),
        "the run directory is removed"
    );
}

#[test]
fn a_harness_that_never_calls_the_model_is_errored_at_the_boot_timeout_and_ended_with_its_children()
{
    let out = tempfile::tempdir().unwrap();
    let pids = out.path().join("pids");
    let script = format!(
        "sleep 300 & echo $! > '{p}'; echo $$ >> '{p}'; echo booting >&2; wait",
        p = pids.display()
    );
    let (answer, took) = run(&mut driver(&script, Duration::from_secs(30), false));
    let (message, stderr) = errored(answer);
    assert!(message.contains("never called the model"), "{message}");
    assert_eq!(stderr.as_deref().map(str::trim), Some("booting"));
    assert!(
        took < Duration::from_secs(6),
        "the boot timeout is 2 s: {took:?}"
    );
    let pids = read(&pids);
    assert_eq!(pids.lines().count(), 2, "{pids}");
    for pid in pids.lines() {
        assert!(!alive(pid), "process {pid} outlived the run");
    }
}

/// A fake harness in Python that asks the model for the batch (through the search URL the
/// profile exports, the model server's) and then hangs.
fn asks_then(rest: &str) -> String {
    format!(
        r#"exec python3 -c '
import json, os, sys, time, urllib.request
url = os.environ["DEEPSEEK_SEARCH_BASE_URL"] + "/chat/completions"
body = {{"model": "m", "stream": True, "tools": [{{"type": "function"}}], "messages": []}}
req = urllib.request.Request(url, json.dumps(body).encode(), {{"content-type": "application/json"}})
print(urllib.request.urlopen(req).read()[:40], file=sys.stderr, flush=True)
{rest}
'"#
    )
}

#[test]
fn a_harness_that_hangs_after_calling_the_model_is_errored_at_the_timeout() {
    let script = asks_then("time.sleep(300)");
    let (answer, took) = run(&mut driver(&script, Duration::from_secs(4), false));
    let (message, stderr) = errored(answer);
    assert!(message.contains("did not finish within 4 s"), "{message}");
    assert!(message.contains("model requests: 1"), "{message}");
    assert!(
        stderr.unwrap_or_default().contains("data:"),
        "it got the stream"
    );
    assert!(took < Duration::from_secs(8), "{took:?}");
}

#[test]
fn a_harness_that_stops_after_the_batch_or_writes_no_log_is_errored_and_kept_when_asked() {
    let (answer, _) = run(&mut driver(
        &asks_then("sys.exit(0)"),
        Duration::from_secs(20),
        false,
    ));
    let (message, _) = errored(answer);
    assert!(
        message.contains("without sending the batch's results"),
        "{message}"
    );

    let twice = asks_then(
        "body[\"messages\"] = [{\"role\": \"assistant\"}]\nurllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), {\"content-type\": \"application/json\"})).read()",
    );
    let mut kept = driver(&twice, Duration::from_secs(20), true);
    let (answer, _) = run(&mut kept);
    let (message, _) = errored(answer);
    assert!(message.contains("wrote no session log"), "{message}");
    let dir = kept.kept.pop().expect("a kept run directory");
    let requests = read(&dir.join("model-requests.jsonl"));
    assert_eq!(requests.lines().count(), 2, "{requests}");
    assert!(dir.join("overlay.patch.yml").is_file());
    std::fs::remove_dir_all(dir).unwrap();
}
