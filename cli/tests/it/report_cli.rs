//! `tep report` and `--compare` end to end: runs side by side, what changed since an earlier
//! run, and the files they refuse.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::tep_in;

use std::path::{Path, PathBuf};

use serde_json::Value;

fn dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tep-report-cli-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// The JSON reports of the reference and of a mutant, written once.
fn reports() -> &'static (PathBuf, PathBuf) {
    static REPORTS: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    REPORTS.get_or_init(|| {
        let (reference, mutant) = (dir().join("reference.json"), dir().join("mutant.json"));
        let o = tep_in(dir(), &["run", "--json", reference.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0));
        let o = tep_in(
            dir(),
            &[
                "run",
                "--mutant",
                "run-body-after-deny",
                "--json",
                mutant.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(1));
        (reference, mutant)
    })
}

fn failing(report: &Path) -> Vec<String> {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    json["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "failed")
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_matrix_has_a_column_per_run_and_the_mutants_failures() {
    let (reference, mutant) = reports();
    let page = dir().join("matrix.html");
    let o = tep_in(
        dir(),
        &[
            "report",
            "--html",
            page.to_str().unwrap(),
            reference.to_str().unwrap(),
            mutant.to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<th scope=\"col\" class=\"run\"").count(), 2);
    let failing = failing(mutant);
    assert!(!failing.is_empty());
    for id in &failing {
        assert!(
            html.contains(&format!(
                "<td class=\"cell failed\" data-status=\"failed\"><a href=\"#cell-1-{id}\""
            )),
            "{id}"
        );
    }
    // No other scenario cell fails: none of the reference's, none other of the mutant's.
    assert_eq!(
        html.matches("<td class=\"cell failed\" data-status=\"failed\"><a")
            .count(),
        failing.len()
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(
        stdout.contains(&format!("{} failed", failing.len())),
        "{stdout}"
    );
}

#[test]
fn compare_names_the_newly_failing_and_the_fixed() {
    let (reference, mutant) = reports();
    let o = tep_in(
        dir(),
        &[
            "report",
            mutant.to_str().unwrap(),
            "--compare",
            reference.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let failing = failing(mutant);
    assert!(
        stdout.contains(&format!(
            "{} newly failing, 0 fixed, 0 new scenario(s), 0 gone",
            failing.len()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  newly failing: {}", failing.join(", "))),
        "{stdout}"
    );
    // The other way round: all of them fixed.
    let o = tep_in(
        dir(),
        &[
            "report",
            reference.to_str().unwrap(),
            "--compare",
            mutant.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&format!("0 newly failing, {} fixed", failing.len())),
        "{stdout}"
    );
    // Another corpus: compared by id, and said.
    let mut other: Value =
        serde_json::from_str(&std::fs::read_to_string(reference).unwrap()).unwrap();
    other["corpusHash"] = Value::from("sha256:another");
    other["scenarios"].as_array_mut().unwrap().remove(0);
    let other_file = dir().join("other-corpus.json");
    std::fs::write(&other_file, other.to_string()).unwrap();
    let o = tep_in(
        dir(),
        &[
            "report",
            reference.to_str().unwrap(),
            "--compare",
            other_file.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("the corpora differ (sha256:another then sha256:"),
        "{stdout}"
    );
    assert!(stdout.contains("1 new scenario(s)"), "{stdout}");
}

#[test]
fn a_file_that_is_no_run_report_is_a_usage_error_naming_it() {
    let (reference, _) = reports();
    std::fs::write(dir().join("baseline.json"), "{\"expectedFailures\":[]}").unwrap();
    let o = tep_in(
        dir(),
        &["report", reference.to_str().unwrap(), "baseline.json"],
    );
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("baseline.json is not a JSON run report"),
        "{stderr}"
    );
    let mut newer: Value =
        serde_json::from_str(&std::fs::read_to_string(reference).unwrap()).unwrap();
    newer["version"] = Value::from("99.0.0");
    std::fs::write(dir().join("newer.json"), newer.to_string()).unwrap();
    for args in [
        &["report", "newer.json"][..],
        &["run", "--compare", "newer.json"][..],
    ] {
        let o = tep_in(dir(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("newer.json was written by tep 99.0.0"),
            "{stderr}"
        );
    }
    let o = tep_in(dir(), &["report", "missing.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read missing.json"));
}
