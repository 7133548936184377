//! `tep run --harness` and the hidden commands a driven harness starts, through the binary.

use std::io::Write;
use std::process::Stdio;

use crate::util::tep_command;

#[test]
fn an_unknown_profile_is_a_usage_error_naming_the_known_ones() {
    let out = tep_command()
        .args(["run", "--harness", "no-such-harness"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("deepseek-harness"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn a_harness_that_exits_at_once_is_errored_and_fails_the_run() {
    let out = tep_command()
        .args([
            "run",
            "--harness",
            "deepseek-harness",
            "--harness-command",
            "sh -c 'echo no such model >&2; exit 7'",
            "--scenario",
            "unknown-tool-is-an-error-result",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("ERROR"), "{stdout}");
    assert!(stdout.contains("exit status: 7"), "{stdout}");
    assert!(
        stdout.contains("no such model"),
        "the stderr tail: {stdout}"
    );
}

#[test]
fn scenarios_without_a_public_interface_are_na_naming_the_construct() {
    let out = tep_command()
        .args([
            "run",
            "--harness",
            "deepseek-harness",
            "--harness-command",
            "false",
            "--scenario",
            "guard-throws",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("N/A: a guard has no public interface in deepseek-harness"),
        "{stdout}"
    );
}

#[test]
fn the_hook_command_answers_from_the_run_directorys_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = serde_json::json!({
        "scenario": "s", "tools": ["rm"], "calls": [], "final_text": "done",
        "pre": [{"id": "p", "decide": {"c1": {"deny": "no rm"}}}], "post": []
    });
    std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
    let mut child = tep_command()
        .arg("harness-hook")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"hook_event_name":"PreToolUse","tool_name":"mcp__tep__rm","tool_input":{},"tool_use_id":"c1"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecisionReason"],
        "no rm"
    );
    assert!(dir.path().join("hooks.jsonl").is_file());
}

/// A relative `--harness-command` names a program from where tep was started, though the harness
/// runs in a workspace of its own.
#[cfg(unix)]
#[test]
fn a_relative_harness_command_is_found_from_where_tep_was_started() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = crate::util::temp_dir("relative-harness");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let script = dir.join("bin/fake-dsh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho the fake harness ran >&2\nexit 7\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = tep_command()
        .current_dir(&dir)
        .args([
            "run",
            "--harness",
            "deepseek-harness",
            "--harness-command",
            "bin/fake-dsh",
            "--scenario",
            "unknown-tool-is-an-error-result",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("No such file or directory"), "{stdout}");
    assert!(stdout.contains("the fake harness ran"), "{stdout}");
}
