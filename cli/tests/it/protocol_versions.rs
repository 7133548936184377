//! `tep run` and `tep fuzz` through `tep reference-adapter --protocol N`, with every request
//! the adapter receives copied to a file: an adapter declaring protocol 1 or 2 receives no
//! `rewrite`, `slowStop`, `mutate` or guard `allow` (such scenarios are N/A, naming the
//! construct); one declaring 3 receives them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::{TEP, temp_dir, tep_command, tep_in};

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

/// The reference adapter declaring `protocol`, its stdin appended to `log` on the way.
fn logged_adapter(protocol: u32, log: &Path) -> String {
    format!(
        "sh -c 'tee -a {} | exec {TEP} reference-adapter --protocol {protocol}'",
        log.display()
    )
}

/// The protocol 3 constructs each `run` request carried, found by key in the raw JSON.
fn received(log: &Path) -> Vec<(String, BTreeSet<&'static str>)> {
    fn walk(v: &Value, out: &mut BTreeSet<&'static str>) {
        match v {
            Value::Object(m) => {
                for (k, item) in m {
                    for name in ["rewrite", "slowStop", "mutate"] {
                        if k == name {
                            out.insert(name);
                        }
                    }
                    walk(item, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["cmd"] == "run")
        .map(|r| {
            let scenario = &r["scenario"];
            let mut found = BTreeSet::new();
            walk(scenario, &mut found);
            let guard_allow = scenario["guards"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g["decide"].as_object())
                .flat_map(|d| d.values())
                .any(|a| a == "allow");
            if guard_allow {
                found.insert("guard allow");
            }
            (
                scenario["id"].as_str().unwrap_or_default().to_owned(),
                found,
            )
        })
        .collect()
}

#[test]
fn an_adapter_declaring_an_older_protocol_receives_no_newer_construct() {
    let all: BTreeSet<&str> = ["guard allow", "mutate", "rewrite", "slowStop"].into();
    for protocol in [1, 2, 3] {
        let dir = temp_dir(&format!("run-{protocol}"));
        let log = dir.join("requests.jsonl");
        let adapter = logged_adapter(protocol, &log);
        let o = tep_in(
            &dir,
            &[
                "run",
                "--adapter",
                &adapter,
                "--jobs",
                "1",
                "--format",
                "json",
            ],
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let runs = received(&log);
        assert!(runs.len() > 20, "{}", runs.len());
        let seen: BTreeSet<&str> = runs.iter().flat_map(|(_, c)| c.iter().copied()).collect();
        if protocol >= 3 {
            assert_eq!(seen, all, "protocol 3 receives them");
        } else {
            assert!(seen.is_empty(), "protocol {protocol} received {runs:?}");
        }
        let report: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["summary"]["errored"], 0, "{stdout}");
        assert_eq!(report["summary"]["failed"], 0, "{stdout}");
        let slow = report["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "timeout-waits-for-a-slow-body")
            .unwrap();
        if protocol >= 3 {
            assert_eq!(slow["status"], "passed", "{slow}");
        } else {
            assert_eq!(slow["status"], "skipped", "{slow}");
            let reason = slow["reason"].as_str().unwrap();
            assert!(
                reason.contains("body step `slowStop` (protocol 3)")
                    && reason.contains(&format!("declares protocol {protocol}")),
                "{reason}"
            );
        }
    }
}

#[test]
fn fuzzing_an_adapter_declaring_protocol_2_sends_no_newer_construct() {
    for protocol in [2, 3] {
        let dir = temp_dir(&format!("fuzz-{protocol}"));
        let log = dir.join("requests.jsonl");
        let adapter = logged_adapter(protocol, &log);
        let o = tep_in(
            &dir,
            &[
                "fuzz",
                "--adapter",
                &adapter,
                "--cases",
                "60",
                "--seed",
                "3",
            ],
        );
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let runs = received(&log);
        assert!(runs.len() >= 50, "{}", runs.len());
        let newer = runs.iter().filter(|(_, c)| !c.is_empty()).count();
        if protocol >= 3 {
            assert!(newer > 0);
        } else {
            assert_eq!(newer, 0, "{runs:?}");
        }
    }
}

#[test]
fn the_reference_adapter_refuses_a_construct_newer_than_it_declares() {
    let dir = temp_dir("refuse");
    let scenario: Value = serde_json::from_str(
        &String::from_utf8(
            tep_in(
                &dir,
                &["scenarios", "show", "timeout-waits-for-a-slow-body"],
            )
            .stdout,
        )
        .unwrap(),
    )
    .unwrap();
    let input = format!(
        "{}\n{}\n{}\n",
        r#"{"cmd":"start","protocol":3}"#,
        serde_json::json!({"cmd": "run", "seq": 1, "spec": "rev2", "scenario": scenario}),
        r#"{"cmd":"stop"}"#
    );
    let mut child = tep_command()
        .args(["reference-adapter", "--protocol", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["protocol"], 2);
    let errored = &lines[1]["errored"];
    assert!(
        errored["context"]
            .as_str()
            .unwrap_or_default()
            .contains("body step `slowStop`"),
        "{}",
        lines[1]
    );
    let o = tep_in(&dir, &["reference-adapter", "--protocol", "4"]);
    assert_eq!(o.status.code(), Some(2), "no protocol 4 to declare");
}

#[test]
fn a_run_on_an_older_protocol_names_what_it_could_not_send() {
    for protocol in [2, 3] {
        let dir = temp_dir(&format!("gap-{protocol}"));
        let adapter = logged_adapter(protocol, &dir.join("requests.jsonl"));
        let json = tep_in(&dir, &["run", "--adapter", &adapter, "--format", "json"]);
        let report: Value = serde_json::from_slice(&json.stdout).unwrap();
        let held_back: Vec<&Value> = report["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| {
                s["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("the adapter declares protocol"))
            })
            .collect();
        let text = tep_in(&dir, &["run", "--adapter", &adapter, "--color", "never"]);
        let stdout = String::from_utf8_lossy(&text.stdout);
        let line = stdout.lines().find(|l| l.starts_with("older protocol:"));
        if protocol == 3 {
            assert!(held_back.is_empty() && line.is_none(), "{stdout}");
            continue;
        }
        assert!(!held_back.is_empty());
        let line = line.unwrap_or_else(|| panic!("no older-protocol line:\n{stdout}"));
        assert!(
            line.contains(&format!(
                "the adapter declares protocol 2: {} scenario(s) use newer constructs and were not sent",
                held_back.len()
            )),
            "{line}"
        );
        // The invariants those scenarios exercise are named.
        for s in &held_back {
            let id = s["id"].as_str().unwrap();
            let scenario = tep_in(&dir, &["scenarios", "show", id]);
            let scenario: Value = serde_json::from_slice(&scenario.stdout).unwrap();
            for inv in scenario["exercises"].as_array().unwrap() {
                assert!(line.contains(inv.as_str().unwrap()), "{inv} in {line}");
            }
        }
    }
}
