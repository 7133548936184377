//! Teeth through the binary: breaches that need the protocol itself (an exception escaping the
//! pipeline, a SHOULD-level audit enforced at `--strict`) reach a verdict, not an error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::{TEP, tep};

use std::collections::BTreeSet;
use std::process::Output;

use serde_json::Value;

fn report(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// The invariants a JSON run report names, beside the drive-mode expectations.
fn invariants(report: &Value) -> BTreeSet<String> {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["violations"].as_array().cloned().unwrap_or_default())
        .map(|v| v["invariant"].as_str().unwrap().to_owned())
        .filter(|id| !id.starts_with("expected-"))
        .collect()
}

#[test]
fn an_exception_escaping_an_adapters_pipeline_is_a_verdict_not_an_error() {
    let adapter = format!("{TEP} reference-adapter --mutant throw-escapes");
    let o = tep(&[
        "run",
        "--adapter",
        &adapter,
        "--scenario",
        "pre-throws",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let r = report(&o);
    assert_eq!(r["summary"]["errored"], 0, "{r:#}");
    assert_eq!(r["summary"]["failed"], 1);
    assert_eq!(
        invariants(&r),
        BTreeSet::from(["throw-is-normalized".to_owned()])
    );
    let message = r["scenarios"][0]["violations"][0]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("hook crashed"), "{message}");
}

#[test]
fn an_unaudited_approval_fails_only_a_strict_run() {
    let args = [
        "run",
        "--mutant",
        "approval-unaudited",
        "--scenario",
        "ask-allowed-once",
        "--format",
        "json",
    ];
    let lenient = tep(&args);
    assert_eq!(lenient.status.code(), Some(0), "SHOULD-level: a warning");
    assert_eq!(report(&lenient)["summary"]["warned"], 1);
    let strict = tep(&[&args[..], &["--strict"]].concat());
    assert_eq!(strict.status.code(), Some(1));
    assert_eq!(
        invariants(&report(&strict)),
        BTreeSet::from(["approval-audited".to_owned()])
    );
}
