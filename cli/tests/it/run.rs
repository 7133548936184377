//! `tep run` as its users meet it: parallel runs that report the same bytes, selection, reports
//! that agree with the exit code (JUnit validated against junit-10.xsd, JSON against the
//! generated schema), failures a user can act on, colour, the progress bar, Ctrl-C, and the CI
//! template's commands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::{TEP, code, json, stderr, stdout, summary, temp_dir, tep, tep_command, tep_in};

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

fn command(cwd: &Path, args: &[&str]) -> Command {
    let mut command = tep_command();
    command.args(args).current_dir(cwd);
    command
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// One word for `sh`.
fn quote(word: &str) -> String {
    shlex::try_quote(word).unwrap().into_owned()
}

/// An adapter command running `script` in `sh -c`.
fn sh(script: &str) -> String {
    format!("sh -c {}", quote(script))
}

/// The reference adapter behind a proxy that holds each request back `delay` seconds (and
/// ends with `stop`, as an adapter must).
fn slow_reference(delay: &str, pid_file: &Path) -> String {
    sh(&format!(
        "echo $$ > {}; while IFS= read -r l; do sleep {delay}; printf '%s\\n' \"$l\"; case \"$l\" in '{{\"cmd\":\"stop\"}}') exit;; esac; done | {} reference-adapter",
        quote(pid_file.to_str().unwrap()),
        quote(TEP)
    ))
}

fn ids(report: &Value) -> Vec<String> {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A scenario's row in a JSON report.
fn row<'r>(report: &'r Value, id: &str) -> &'r Value {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no row for {id}"))
}

/// A JSON report without what differs between two runs of the same thing: times, and the
/// command line (`--jobs N`).
fn without_times(mut report: Value) -> Value {
    let object = report.as_object_mut().unwrap();
    object.remove("startedAt");
    object.remove("durationSeconds");
    object.remove("command");
    for row in report["scenarios"].as_array_mut().unwrap() {
        row.as_object_mut().unwrap().remove("durationSeconds");
    }
    report
}

/// A text report without its `[  0.003s]` durations.
fn text_without_times(text: &str) -> String {
    text.lines()
        .map(|line| match (line.find('['), line.find("s]")) {
            (Some(a), Some(b)) if a < b && line[a + 1..b].trim().parse::<f64>().is_ok() => {
                format!("{}{}", &line[..a], &line[b + 2..])
            }
            // The summary's wall time: `… 1 skipped in 0.123s`.
            _ if line.rsplit_once(" in ").is_some_and(|(_, t)| {
                t.strip_suffix('s')
                    .is_some_and(|t| t.parse::<f64>().is_ok())
            }) =>
            {
                line.rsplit_once(" in ")
                    .map(|(l, _)| l.to_owned())
                    .unwrap_or_default()
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Validates a JUnit file against the Jenkins xUnit plugin's junit-10.xsd with `xmllint`
/// (Debian: libxml2-utils), and returns (tests, failures, errors, skipped).
fn junit(path: &Path) -> (usize, usize, usize, usize) {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/junit-10.xsd");
    match Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .arg(path)
        .output()
    {
        Ok(o) => assert!(
            o.status.success(),
            "{} does not validate against junit-10.xsd:\n{}",
            path.display(),
            stderr(&o)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var_os("CI").is_none(),
                "xmllint is missing: apt-get install libxml2-utils"
            );
            eprintln!(
                "NOTE: JUnit not validated against its XSD: xmllint is missing (libxml2-utils)"
            );
        }
        Err(e) => panic!("xmllint: {e}"),
    }
    let xml = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    let attr = |name: &str| suite.attribute(name).unwrap().parse::<usize>().unwrap();
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let with = |tag: &str| {
        cases
            .iter()
            .filter(|c| c.children().any(|n| n.has_tag_name(tag)))
            .count()
    };
    assert_eq!(attr("tests"), cases.len());
    assert_eq!(attr("failures"), with("failure"));
    assert_eq!(attr("errors"), with("error"));
    assert_eq!(attr("skipped"), with("skipped"));
    (
        cases.len(),
        attr("failures"),
        attr("errors"),
        attr("skipped"),
    )
}

/// The `<testcase>` called `name`: (its outcome element, that element's message).
fn junit_case(path: &Path, name: &str) -> Option<(String, String)> {
    let xml = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(name))?;
    let outcome = case.children().find(|n| {
        ["failure", "error", "skipped"]
            .iter()
            .any(|t| n.has_tag_name(*t))
    });
    Some(match outcome {
        Some(n) => (
            n.tag_name().name().to_owned(),
            n.attribute("message").unwrap_or_default().to_owned(),
        ),
        None => ("passed".to_owned(), String::new()),
    })
}

/// Validates a JSON report against the generated, committed schema.
/// How many scenarios the corpus holds.
fn corpus_len() -> usize {
    tep_conformance::scenario::corpus().unwrap().len()
}

/// How many scenarios `--scenario 'pre-*'` selects.
fn pre_scenarios() -> usize {
    tep_conformance::scenario::corpus()
        .unwrap()
        .iter()
        .filter(|s| s.id.starts_with("pre-"))
        .count()
}

fn valid(report: &Value) -> &Value {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas/run-report.schema.json");
        jsonschema::validator_for(&read_json(&path)).unwrap()
    });
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    report
}

// ---------------------------------------------------------------------------------------------
// parallel runs

#[test]
fn reports_are_the_same_for_any_number_of_jobs() {
    let dir = temp_dir("jobs");
    let run_dir = dir.join("traces");
    let run = |jobs: &str, format: &str| {
        tep(&[
            "run",
            "--mutant",
            "run-body-after-deny",
            "--jobs",
            jobs,
            "--format",
            format,
            "--run-dir",
            run_dir.to_str().unwrap(),
        ])
    };
    let one = run("1", "json");
    let four = run("4", "json");
    assert_eq!(code(&one), 1);
    assert_eq!(code(&four), 1);
    assert_eq!(without_times(json(&one)), without_times(json(&four)));
    valid(&json(&four));
    // Not on a terminal, the text streams in corpus order too.
    let one = run("1", "text");
    let four = run("4", "text");
    assert_eq!(
        text_without_times(&stdout(&one)),
        text_without_times(&stdout(&four))
    );
}

#[test]
fn an_adapter_runs_as_one_process_per_job_with_the_same_report() {
    let dir = temp_dir("adapter-jobs");
    let run = |jobs: &str| {
        let pids = dir.join(format!("pids-{jobs}"));
        let adapter = sh(&format!(
            "echo $$ >> {}; exec {} reference-adapter",
            quote(pids.to_str().unwrap()),
            quote(TEP)
        ));
        let o = tep(&[
            "run",
            "--adapter",
            &adapter,
            "--jobs",
            jobs,
            "--format",
            "json",
        ]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let started: BTreeSet<String> = std::fs::read_to_string(&pids)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        (without_times(json(&o)), started.len())
    };
    let (one, processes) = run("1");
    assert_eq!(processes, 1);
    let (three, processes) = run("3");
    assert_eq!(processes, 3, "one adapter process per job");
    assert_eq!(one, three);
}

// ---------------------------------------------------------------------------------------------
// selection

#[test]
fn scenarios_are_selected_by_glob_invariant_capability_and_exclusion() {
    let listed = |args: &[&str]| -> Vec<Value> {
        let o = tep(&[&["scenarios", "list", "--format", "json"], args].concat());
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        json(&o).as_array().unwrap().clone()
    };
    let id_list = |rows: &[Value]| -> Vec<String> {
        rows.iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = listed(&[]);
    assert_eq!(all.len(), tep_conformance::scenario::corpus_files().len());

    let run = |args: &[&str]| {
        let o = tep(&[&["run", "--format", "json"], args].concat());
        assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
        ids(&json(&o))
    };
    let picked = run(&[
        "--scenario",
        "pre-*",
        "--scenario",
        "allow-runs-body",
        "--exclude",
        "pre-throws",
    ]);
    let expected: Vec<String> = id_list(&all)
        .into_iter()
        .filter(|id| (id.starts_with("pre-") || id == "allow-runs-body") && id != "pre-throws")
        .collect();
    assert!(expected.len() > 2);
    assert_eq!(picked, expected);

    let by_invariant = listed(&["--invariant", "deny-skips-body"]);
    assert!(!by_invariant.is_empty() && by_invariant.len() < all.len());
    assert!(by_invariant.iter().all(|r| {
        r["exercises"]
            .as_array()
            .unwrap()
            .contains(&Value::from("deny-skips-body"))
    }));
    assert_eq!(
        run(&["--invariant", "deny-skips-body"]),
        id_list(&by_invariant)
    );

    let by_capability = listed(&["--capability", "code-mode"]);
    assert!(!by_capability.is_empty() && by_capability.len() < all.len());
    assert!(by_capability.iter().all(|r| {
        r["requires"]
            .as_array()
            .unwrap()
            .contains(&Value::from("code-mode"))
    }));
    assert_eq!(run(&["--capability", "code-mode"]), id_list(&by_capability));

    for (args, message) in [
        (vec!["--scenario", "zzz*"], "no scenario matches `zzz*`"),
        (vec!["--invariant", "nope"], "unknown invariant"),
        (vec!["--capability", "teleport"], "teleport"),
        (
            vec!["--scenario", "allow-*", "--exclude", "*"],
            "the selection is empty",
        ),
        (vec!["--jobs", "0"], "0"),
    ] {
        let o = tep(&[&["run"], args.as_slice()].concat());
        assert_eq!(code(&o), 2, "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn invariants_list_as_json() {
    let o = tep(&["invariants", "list", "--format", "json"]);
    assert_eq!(code(&o), 0);
    let rows = json(&o);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), tep_check::CATALOG.len());
    let deny = rows.iter().find(|r| r["id"] == "deny-skips-body").unwrap();
    assert_eq!(deny["level"], "MUST");
    assert_eq!(deny["doc"], "docs/invariants.md#deny-skips-body");
    assert!(deny["statement"].as_str().unwrap().len() > 20);
    assert!(deny["sources"].as_array().is_some_and(|s| !s.is_empty()));
    let rev1 = json(&tep(&[
        "invariants",
        "list",
        "--spec",
        "rev1",
        "--format",
        "json",
    ]));
    assert!(rev1.as_array().unwrap().len() < rows.len());
}

// ---------------------------------------------------------------------------------------------
// reports and the exit code

#[test]
fn the_json_report_follows_its_schema_and_names_the_suite_and_the_implementation() {
    let dir = temp_dir("json-report");
    let file = dir.join("report.json");
    let o = tep(&["run", "--json", file.to_str().unwrap()]);
    assert_eq!(code(&o), 0);
    let report = read_json(&file);
    valid(&report);
    let version = stdout(&tep(&["--version"]));
    let hash = report["corpusHash"].as_str().unwrap();
    assert!(hash.starts_with("sha256:"), "{hash}");
    assert!(
        version.starts_with(&format!(
            "tep {} (corpus {hash}, ",
            report["version"].as_str().unwrap()
        )),
        "{version}"
    );
    let implementation = &report["implementation"];
    assert!(
        implementation["name"]
            .as_str()
            .unwrap()
            .starts_with("tep-reference")
    );
    assert_eq!(implementation["language"], "Rust");
    assert_eq!(implementation["observation"], "full");
    assert_eq!(implementation["protocol"], 3);
    assert_eq!(implementation["capabilities"].as_array().unwrap().len(), 6);
    assert_eq!(report["exitCode"], 0);
    assert_eq!(report["conformant"], true);
    assert!(report["durationSeconds"].as_f64().unwrap() >= 0.0);
    assert!(
        report["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["durationSeconds"].is_f64())
    );
    let statuses: BTreeSet<&str> = report["invariants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains("checked") && statuses.contains("not-applicable"));
    assert_eq!(report["coverage"]["codeModeEdges"]["ratio"], 1.0);

    // The schema has teeth: an unknown field or a wrong type is refused.
    let validator = jsonschema::validator_for(&read_json(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas/run-report.schema.json"),
    ))
    .unwrap();
    let mut extra = report.clone();
    extra["passed"] = Value::from(53);
    assert!(!validator.is_valid(&extra));
    let mut wrong = report.clone();
    wrong["summary"]["failed"] = Value::from("none");
    assert!(!validator.is_valid(&wrong));
}

#[test]
fn the_html_report_is_one_page_that_needs_nothing_else() {
    let dir = temp_dir("html-report");
    let page = dir.join("out").join("report.html");
    let o = tep_in(
        &dir,
        &[
            "run",
            "--mutant",
            "run-body-after-deny",
            "--scenario",
            "pre-*",
            "--html",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(html.ends_with("</html>\n"));
    // Nothing is fetched: no external script, stylesheet, image or font; the only URL is the
    // SVG namespace, and links go within the page or to the docs.
    assert_eq!(html.matches("<script").count(), 1);
    assert!(html.contains("<script>"));
    for fetching in [
        " src=",
        "<link rel=\"stylesheet",
        "@import",
        "url(http",
        "@font-face",
    ] {
        assert!(!html.contains(fetching), "{fetching}");
    }
    let urls: BTreeSet<&str> = html
        .match_indices("http:")
        .chain(html.match_indices("https:"))
        .map(|(i, _)| html[i..].split(['"', ' ']).next().unwrap())
        .collect();
    assert_eq!(urls, BTreeSet::from(["http://www.w3.org/2000/svg"]));
    for (i, _) in html.match_indices(" href=\"") {
        let target = &html[i + 7..];
        let target = &target[..target.find('"').unwrap()];
        assert!(
            target.starts_with('#')
                || target == "data:,"
                || target.starts_with("docs/invariants.md#"),
            "{target}"
        );
    }
    // One row per selected scenario, the failing ones expandable to their traces.
    let report = json(&tep_in(
        &dir,
        &[
            "run",
            "--mutant",
            "run-body-after-deny",
            "--scenario",
            "pre-*",
            "--format",
            "json",
        ],
    ));
    let scenarios = report["scenarios"].as_array().unwrap();
    assert_eq!(html.matches("<tr id=\"s-").count(), scenarios.len());
    let failing = scenarios.iter().filter(|s| s["status"] == "failed").count();
    assert!(failing > 0);
    assert_eq!(html.matches("<ol class=\"trace\"").count(), failing);
    // Every scenario that ran can be opened (its path drawn beside it), a passing one too.
    let ran = scenarios
        .iter()
        .filter(|s| s["status"] != "skipped")
        .count();
    assert_eq!(html.matches("<tr id=\"d-").count(), ran);
}

#[test]
fn the_json_report_counts_each_edge_and_places_each_violation_on_the_graph() {
    let dir = temp_dir("json-edges");
    let o = tep_in(
        &dir,
        &[
            "run",
            "--mutant",
            "run-body-after-deny",
            "--scenario",
            "pre-deny-skips-body",
            "--scenario",
            "allow-runs-body",
            "--scenario",
            "code-mode-*",
            "--format",
            "json",
        ],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let report = json(&o);
    valid(&report);
    let scenarios = report["scenarios"].as_array().unwrap();
    for (graph, field) in [("edges", "edges"), ("codeModeEdges", "codeModeEdges")] {
        let coverage = &report["coverage"][graph];
        let edges = coverage["edges"].as_array().unwrap();
        assert_eq!(edges.len() as u64, coverage["total"].as_u64().unwrap());
        // Each edge counts the scenarios that list it, and the taken edges are those counted.
        for (n, edge) in edges.iter().enumerate() {
            let listing = scenarios
                .iter()
                .filter(|s| {
                    s[field]
                        .as_array()
                        .is_some_and(|e| e.contains(&Value::from(n)))
                })
                .count();
            assert_eq!(edge["scenarios"], listing, "{edge}");
        }
        let taken = edges.iter().filter(|e| e["scenarios"] != 0).count();
        assert_eq!(coverage["taken"], taken, "{graph}");
        assert!(taken > 0, "{graph}");
    }
    let model_to_tool_call = &report["coverage"]["edges"]["edges"][0];
    assert_eq!(model_to_tool_call["edge"], "model --> toolCall");
    assert_eq!(model_to_tool_call["scenarios"], scenarios.len() as u64);
    // The denied call's body ran: a step from `denied` to `around` the graph does not have.
    let failing = row(&report, "pre-deny-skips-body");
    let violation = failing["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["invariant"] == "deny-skips-body")
        .unwrap();
    assert_eq!(
        violation["step"],
        serde_json::json!({"graph": "pipeline", "from": "denied", "to": "around", "refused": true})
    );
}

#[test]
fn junit_and_json_agree_with_the_exit_code_through_a_baseline_lifecycle() {
    let dir = temp_dir("lifecycle");
    let failed = lifecycle_failures_without_a_baseline(&dir);
    lifecycle_the_baseline_expects_them(&dir, failed);
    lifecycle_every_entry_is_stale_on_the_fixed_reference(&dir, failed);
    lifecycle_unknown_ids_and_the_rewritten_baseline(&dir, failed);
}

/// The mutant whose failures the lifecycle records in a baseline.
const LIFECYCLE_MUTANT: [&str; 2] = ["--mutant", "run-body-after-deny"];

fn in_dir(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_owned()
}

/// Step 1: Failures, no baseline: exit 1, one <failure> per failing scenario. Writes
/// `baseline.json` and returns how many scenarios failed.
fn lifecycle_failures_without_a_baseline(dir: &Path) -> usize {
    let path = |name: &str| in_dir(dir, name);
    let mutant = LIFECYCLE_MUTANT;
    let o = tep(&[
        &["run"][..],
        &mutant,
        &["--junit", &path("1.xml"), "--json", &path("1.json")],
        &["--write-baseline", &path("baseline.json")],
    ]
    .concat());
    assert_eq!(code(&o), 1);
    let report = read_json(&dir.join("1.json"));
    let failed = report["summary"]["failed"].as_u64().unwrap() as usize;
    assert!(failed > 0);
    assert_eq!(junit(&dir.join("1.xml")), (corpus_len(), failed, 0, 1));
    // A failure's message is its first violation: the invariant, then the sentence.
    let first = &row(&report, "pre-deny-skips-body")["violations"][0];
    assert_eq!(
        junit_case(&dir.join("1.xml"), "pre-deny-skips-body").unwrap(),
        (
            "failure".to_owned(),
            format!(
                "{}: {}",
                first["invariant"].as_str().unwrap(),
                first["message"].as_str().unwrap()
            )
        )
    );
    assert!(stderr(&o).contains("baseline entries to"), "{}", stderr(&o));
    failed
}

/// Step 2: The written baseline expects exactly those failures: exit 0, and they are skipped with
/// the baseline's reason, not failures.
fn lifecycle_the_baseline_expects_them(dir: &Path, failed: usize) {
    let path = |name: &str| in_dir(dir, name);
    let mutant = LIFECYCLE_MUTANT;
    let o = tep(&[
        &["run"][..],
        &mutant,
        &["--baseline", &path("baseline.json")],
        &["--junit", &path("2.xml"), "--json", &path("2.json")],
    ]
    .concat());
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert_eq!(junit(&dir.join("2.xml")), (corpus_len(), 0, 0, failed + 1));
    let (outcome, message) = junit_case(&dir.join("2.xml"), "pre-deny-skips-body").unwrap();
    assert_eq!(outcome, "skipped");
    assert!(
        message.starts_with("expected failure (baseline): line 7 (around, call c1)"),
        "{message}"
    );
    let report = valid(&read_json(&dir.join("2.json"))).clone();
    assert_eq!(report["summary"]["expectedFailures"], failed);
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["conformant"], true);
    assert!(stdout(&o).contains("XFAIL"));
}

/// Step 3: The same baseline against the fixed reference: every entry is stale, exit 1, and each
/// stale scenario is a <failure>.
fn lifecycle_every_entry_is_stale_on_the_fixed_reference(dir: &Path, failed: usize) {
    let path = |name: &str| in_dir(dir, name);
    let o = tep(&[
        "run",
        "--baseline",
        &path("baseline.json"),
        "--junit",
        &path("3.xml"),
        "--json",
        &path("3.json"),
    ]);
    assert_eq!(code(&o), 1);
    assert_eq!(junit(&dir.join("3.xml")), (corpus_len(), failed, 0, 1));
    let (outcome, message) = junit_case(&dir.join("3.xml"), "pre-deny-skips-body").unwrap();
    assert_eq!(outcome, "failure");
    assert!(
        message.contains("no longer breaks deny-skips-body"),
        "{message}"
    );
    let report = valid(&read_json(&dir.join("3.json"))).clone();
    assert_eq!(report["summary"]["stale"], failed);
    assert!(
        summary(&stdout(&o)).starts_with(&format!(
            "{} passed, 0 failed, 1 skipped, {failed} stale in ",
            corpus_len() - 1 - failed
        )),
        "one unit, scenarios: {}",
        stdout(&o)
    );
}

/// Step 4: An entry for a scenario the corpus does not have is an unknown id (not "stale, remove
/// it": it is more often a typo): exit 1, one clear line with the closest id, and a failing
/// test case of its own. Rewriting the baseline keeps the reasons of the entries that still
/// apply.
fn lifecycle_unknown_ids_and_the_rewritten_baseline(dir: &Path, failed: usize) {
    let path = |name: &str| in_dir(dir, name);
    let mutant = LIFECYCLE_MUTANT;
    let mut file = read_json(&dir.join("baseline.json"));
    file["expectedFailures"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"id": "retired-scenario", "reason": "was flaky"}));
    file["expectedFailures"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"id": "pre-deny-skip-body", "reason": "a typo"}));
    file["expectedFailures"][0]["reason"] = Value::from("tracked in #7");
    let kept_id = file["expectedFailures"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(dir.join("old.json"), file.to_string()).unwrap();
    let o = tep(&[
        &["run"][..],
        &mutant,
        &["--baseline", &path("old.json"), "--junit", &path("4.xml")],
        &["--write-baseline", &path("new.json")],
    ]
    .concat());
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("retired-scenario") || l.contains("skip-body"))
        .collect();
    assert_eq!(
        lines,
        vec![
            "  unknown id retired-scenario: the corpus has no scenario retired-scenario",
            "  unknown id pre-deny-skip-body: the corpus has no scenario pre-deny-skip-body \
             (did you mean `pre-deny-skips-body`?)"
        ],
        "{out}"
    );
    assert_eq!(
        junit(&dir.join("4.xml")),
        (corpus_len() + 2, 2, 0, failed + 1)
    );
    assert_eq!(
        junit_case(&dir.join("4.xml"), "retired-scenario")
            .unwrap()
            .0,
        "failure"
    );
    // Rewriting keeps the reasons of the entries that still apply and drops the stale one.
    let new = read_json(&dir.join("new.json"));
    let entries = new["expectedFailures"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .all(|e| e["id"] != "retired-scenario" && e["id"] != "pre-deny-skip-body")
    );
    let kept = entries
        .iter()
        .find(|e| e["id"] == kept_id.as_str())
        .unwrap();
    assert_eq!(kept["reason"], "tracked in #7");
    assert_eq!(
        entries.len(),
        file["expectedFailures"].as_array().unwrap().len() - 2
    );
}

#[test]
fn a_run_that_tests_nothing_fails_in_every_report() {
    let dir = temp_dir("empty");
    let skipper = sh(
        r#"read l; echo '{"ready":true,"protocol":2,"implementation":{"name":"skeleton"},"specs":["rev2"]}'; while read l; do seq=$(printf '%s' "$l" | sed 's/.*"seq":\([0-9]*\).*/\1/'); echo "{\"seq\":$seq,\"skipped\":{\"reason\":\"not wired yet\"}}"; done"#,
    );
    let o = tep(&[
        "run",
        "--adapter",
        &skipper,
        "--junit",
        dir.join("r.xml").to_str().unwrap(),
        "--json",
        dir.join("r.json").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("nothing was tested"));
    let report = valid(&read_json(&dir.join("r.json"))).clone();
    assert_eq!(report["tested"], false);
    assert_eq!(report["exitCode"], 1);
    let (tests, failures, errors, _) = junit(&dir.join("r.xml"));
    // Every scenario, and the run's own "nothing was tested" case.
    assert_eq!((tests, failures, errors), (corpus_len() + 1, 1, 0));
    assert_eq!(
        junit_case(&dir.join("r.xml"), "nothing-was-tested")
            .unwrap()
            .0,
        "failure"
    );
}

// ---------------------------------------------------------------------------------------------
// failures a user can act on

#[test]
fn failures_are_grouped_quoted_kept_and_rerunnable() {
    let cwd = temp_dir("failures");
    let adapter = sh(&format!(
        "exec {} reference-adapter --mutant run-body-after-deny",
        quote(TEP)
    ));
    let o = tep_in(&cwd, &["run", "--adapter", &adapter]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    // One root cause, one group: the scenarios' expected-outcome violations follow from the
    // same fault and do not make a group of their own.
    let groups: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  ") && l.ends_with("scenario(s)") && l.contains(" ["))
        .collect();
    let failing = out.lines().filter(|l| l.starts_with(" FAIL ")).count();
    assert!(failing > 1, "{out}");
    assert_eq!(
        groups,
        vec![format!("  deny-skips-body [MUST]: {failing} scenario(s)")],
        "{out}"
    );
    assert!(
        out.contains("docs/invariants.md#deny-skips-body (doc: \u{201c}tool body skipped\u{201d}")
    );
    assert!(
        out.contains(&format!("failed scenarios ({failing}):\n")),
        "{out}"
    );

    // The traces of the failing scenarios are kept, where the summary says.
    let line = out
        .lines()
        .find(|l| l.starts_with("traces of the failing scenarios: "))
        .unwrap();
    let dir = line
        .trim_start_matches("traces of the failing scenarios: ")
        .trim_end_matches("<scenario>.jsonl");
    assert!(dir.starts_with("target/tep-runs/"), "{dir}");
    let kept: BTreeSet<String> = std::fs::read_dir(cwd.join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(kept.len(), failing, "{kept:?}");
    assert!(kept.contains("approval-comes-before-guards.jsonl"));
    assert!(
        !kept.contains("allow-runs-body.jsonl"),
        "passing traces are not kept"
    );

    // The witness lines are quoted from that file, with context.
    let trace =
        std::fs::read_to_string(cwd.join(dir).join("approval-comes-before-guards.jsonl")).unwrap();
    let trace: Vec<&str> = trace.lines().collect();
    assert!(out.contains(
        "approval-comes-before-guards: line 11 (around, call c1) after line 9 denied the call"
    ));
    assert!(
        out.contains(&format!("> 11 \u{2502} {}", trace[10])),
        "{out}"
    );
    // A long witness is quoted by its fields: what names the record, and what the message
    // speaks of; the rest is elided, not cut at 160 characters.
    assert!(trace[8].len() > 160);
    let witness = out
        .lines()
        .find(|l| l.contains(">  9 \u{2502} "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        witness.contains("kind=\"stage\" node=\"guards\" call=\"c1\" outcome=\"deny\"")
            && witness.ends_with('\u{2026}'),
        "{witness}"
    );
    assert!(
        out.contains(&format!("  10 \u{2502} {}", trace[9])),
        "{out}"
    );

    // The rerun command, pasted into a shell, runs that scenario alone the same way.
    let rerun = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("rerun: "))
        .unwrap();
    assert!(
        rerun.ends_with("--scenario approval-comes-before-guards"),
        "{rerun}"
    );
    let again = Command::new("sh")
        .args(["-c", rerun])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert_eq!(code(&again), 1, "{}", stderr(&again));
    assert!(
        summary(&stdout(&again)).starts_with("0 passed, 1 failed, 0 skipped in "),
        "{}",
        stdout(&again)
    );
    assert!(stdout(&again).contains("approval-comes-before-guards: line 11"));

    // A passing run keeps nothing.
    let clean = temp_dir("clean");
    assert_eq!(code(&tep_in(&clean, &["run"])), 0);
    assert!(!clean.join("target").exists());
}

#[test]
fn a_crashed_adapter_is_named_by_the_signal_that_killed_it() {
    let crashing = sh(
        r#"read l; echo '{"ready":true,"protocol":3,"implementation":{"name":"crashy"}}'; read l; kill -SEGV $$"#,
    );
    let o = tep(&[
        "run",
        "--adapter",
        &crashing,
        "--scenario",
        "allow-runs-body",
    ]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(
        out.contains("ERROR allow-runs-body")
            && out.contains(
                "the adapter closed stdout (it exited, signal: 11 (SIGSEGV)) before sending an answer"
            ),
        "{out}"
    );
}

#[test]
fn a_subset_counts_the_edges_it_did_not_take_on_one_line() {
    let subset = stdout(&tep(&["run", "--scenario", "pre-*"]));
    assert!(!subset.contains("not taken:"), "{subset}");
    let line = subset
        .lines()
        .find(|l| l.contains("edge(s) not taken by this subset"))
        .unwrap_or_else(|| panic!("{subset}"));
    assert!(line.contains("--verbose lists them"), "{line}");
    let verbose = stdout(&tep(&["run", "--scenario", "pre-*", "--verbose"]));
    let listed = verbose.matches("  not taken: ").count();
    assert!(listed > 1, "{verbose}");
    assert!(
        line.trim_start().starts_with(&format!("{listed} edge(s)")),
        "{line}"
    );
}

#[test]
fn an_exclude_that_matches_nothing_is_a_usage_error() {
    let o = tep(&["run", "--exclude", "pre-dny-*"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("--exclude `pre-dny-*` matches no scenario"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn run_directories_go_to_one_place_per_checkout_and_old_ones_are_pruned() {
    let top = temp_dir("prune");
    std::fs::create_dir(top.join(".git")).unwrap();
    let sub = top.join("deep").join("er");
    std::fs::create_dir_all(&sub).unwrap();
    let runs = top.join("target").join("tep-runs");
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    // Twelve old runs, one recent one, and a directory that is not a run's.
    let mut old: Vec<String> = (0..12).map(|i| format!("20200101T0000{i:02}Z")).collect();
    old.push("20200101T000011Z-2".to_owned());
    for name in old.iter().chain(["keep-me".to_owned()].iter()) {
        std::fs::create_dir_all(runs.join(name)).unwrap();
        std::fs::File::open(runs.join(name))
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
    }
    std::fs::create_dir_all(runs.join("20200101T000000Z-3")).unwrap();
    let o = tep_in(
        &sub,
        &[
            "run",
            "--mutant",
            "run-body-after-deny",
            "--scenario",
            "pre-deny-skips-body",
        ],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        !sub.join("target").exists(),
        "not in the directory the run started in"
    );
    let out = stdout(&o);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("traces of the failing scenarios: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.starts_with(&runs.display().to_string()), "{line}");
    let mut left: Vec<String> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    // This run and the nine newest before it stay; older ones an hour old go; a young one
    // (another run may be writing it) and what is not a run directory stay.
    assert_eq!(left.len(), 10 + 2, "{left:?}");
    assert!(
        left.contains(&"keep-me".to_owned()) && left.contains(&"20200101T000000Z-3".to_owned())
    );
    for gone in [
        "20200101T000000Z",
        "20200101T000001Z",
        "20200101T000002Z",
        "20200101T000003Z",
    ] {
        assert!(!left.contains(&gone.to_owned()), "{left:?}");
    }
    assert!(
        left.contains(&"20200101T000011Z-2".to_owned())
            && left.contains(&"20200101T000004Z".to_owned())
    );
}

#[test]
fn errored_scenarios_are_grouped_by_cause() {
    let crashing = sh(
        r#"read l; echo '{"ready":true,"protocol":3,"implementation":{"name":"crashy"}}'; read l; echo "segfault in handler" >&2; exit 3"#,
    );
    let o = tep(&[
        "run",
        "--adapter",
        &crashing,
        "--scenario",
        "pre-*",
        "--jobs",
        "1",
    ]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "\n  the adapter closed stdout (it exited, exit status: 3) before sending an answer: {} scenario(s)\n",
            pre_scenarios()
        )),
        "{out}"
    );
    assert_eq!(out.matches("rerun: ").count(), 1, "{out}");
    assert_eq!(out.matches("| segfault in handler").count(), 1, "{out}");
    assert!(
        !out.contains("not taken:"),
        "no edge list when nothing was judged"
    );
    assert!(out.contains("nothing was tested"));
}

#[test]
fn messages_carry_no_debug_text() {
    use tep_conformance::runner::{BuiltinReference, RunOptions, run_suite};
    use tep_reference::mutant::Mutant;
    let corpus = tep_conformance::scenario::corpus().unwrap();
    for &mutant in Mutant::ALL {
        let mut reference = BuiltinReference::new(vec![mutant]);
        let report = run_suite(&mut reference, &corpus, &RunOptions::default()).unwrap();
        for s in &report.scenarios {
            for v in &s.violations {
                for debug in ["CallId(", "Some(", "None", "[("] {
                    assert!(
                        !v.message.contains(debug),
                        "{mutant} {}: {}",
                        s.id,
                        v.message
                    );
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the terminal

#[test]
fn colour_follows_the_flag_then_no_color() {
    let cwd = temp_dir("colour");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = command(
            &cwd,
            &[&["run", "--scenario", "allow-runs-body"], args].concat(),
        );
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert_eq!(code(&o), 0);
        stdout(&o).contains('\u{1b}')
    };
    assert!(!run(&[], &[]), "not a terminal: no colour");
    assert!(run(&["--color", "always"], &[]));
    assert!(
        run(&["--color", "always"], &[("NO_COLOR", "1")]),
        "the flag wins"
    );
    assert!(run(&[], &[("CLICOLOR_FORCE", "1")]));
    assert!(!run(&[], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]));
    assert!(!run(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]));
}

#[cfg(target_os = "linux")]
#[test]
fn the_progress_bar_is_drawn_on_a_terminal_only() {
    let dir = temp_dir("bar");
    let o = tep(&["run", "--scenario", "pre-*"]);
    assert_eq!(code(&o), 0);
    assert_eq!(stderr(&o), "", "no bar when stderr is not a terminal");
    // `script` gives tep a terminal for stderr; stdout goes to a file.
    let adapter = slow_reference("0.1", &dir.join("pid"));
    let report = dir.join("out.txt");
    let line = format!(
        "{} run --jobs 1 --adapter {} --scenario 'pre-*' > {}",
        quote(TEP),
        quote(&adapter),
        quote(report.to_str().unwrap())
    );
    let o = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let terminal = stdout(&o);
    let pre = pre_scenarios();
    assert!(
        terminal.contains(&format!("{pre}/{pre}: 0 running, {pre} passed, 0 failed")),
        "{terminal:?}"
    );
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(
        !text.contains(&format!("/{pre} scenarios")),
        "the bar stays off stdout"
    );
    assert!(
        summary(&text).starts_with(&format!("{pre} passed, 0 failed, 0 skipped in ")),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Ctrl-C

#[cfg(target_os = "linux")]
fn alive(pid: &str) -> bool {
    // Gone, or a zombie nobody reaped yet: either way it no longer runs.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|s| s.starts_with('Z'))
        })
        .unwrap_or(false)
}

#[cfg(target_os = "linux")]
fn interrupt(pid: u32) {
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_finishes_the_running_scenarios_and_writes_every_report() {
    let dir = temp_dir("sigint");
    let pid_file = dir.join("adapter.pid");
    let mut child = command(
        &dir,
        &[
            "run",
            "--jobs",
            "1",
            "--adapter",
            &slow_reference("0.2", &pid_file),
            "--json",
            "r.json",
            "--junit",
            "r.xml",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    // The first scenario's line: the run is under way.
    while !seen.contains(" allow-runs-body") {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
    }
    interrupt(child.id());
    out.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{err}");
    assert!(err.contains("interrupted: no new scenario starts"), "{err}");
    assert!(seen.contains("interrupted: "), "{seen}");

    let report = valid(&read_json(&dir.join("r.json"))).clone();
    assert_eq!(report["interrupted"], true);
    assert_eq!(report["exitCode"], 130);
    assert_eq!(report["conformant"], false);
    let ran = report["scenarios"].as_array().unwrap().len();
    let not_run = report["notRun"].as_array().unwrap().len();
    assert!(ran >= 1 && not_run >= 1, "{ran} ran, {not_run} not run");
    assert_eq!(ran + not_run, corpus_len());
    assert!(
        report["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "passed" || s["status"] == "skipped"),
        "the running scenario finished rather than erroring"
    );
    let (tests, failures, errors, _) = junit(&dir.join("r.xml"));
    assert_eq!((tests, failures, errors), (ran + 1, 0, 1));
    assert_eq!(
        junit_case(&dir.join("r.xml"), "interrupted").unwrap().0,
        "error"
    );
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(!alive(pid.trim()), "the adapter was stopped");
}

#[cfg(target_os = "linux")]
#[test]
fn a_second_ctrl_c_abandons_a_hung_adapter_and_kills_it() {
    let dir = temp_dir("sigint-twice");
    let pid_file = dir.join("adapter.pid");
    let hung = sh(&format!(
        r#"read l; echo '{{"ready":true,"protocol":2,"implementation":{{"name":"hung"}},"specs":["rev2"]}}'; echo $$ > {}; while read l; do sleep 1000; done"#,
        quote(pid_file.to_str().unwrap())
    ));
    let mut child = command(
        &dir,
        &[
            "run",
            "--adapter",
            &hung,
            "--timeout",
            "600",
            "--scenario",
            "allow-runs-body",
            "--json",
            "r.json",
            "--junit",
            "r.xml",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut header = String::new();
    out.read_line(&mut header).unwrap();
    assert!(header.starts_with("tep "), "{header}");
    interrupt(child.id());
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut notice = String::new();
    while !notice.contains("Ctrl-C again") {
        assert!(err.read_line(&mut notice).unwrap() > 0, "{notice}");
    }
    interrupt(child.id());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    let report = valid(&read_json(&dir.join("r.json"))).clone();
    assert_eq!(report["interrupted"], true);
    assert_eq!(report["notRun"], serde_json::json!(["allow-runs-body"]));
    let (tests, failures, errors, _) = junit(&dir.join("r.xml"));
    assert_eq!(
        (tests, failures, errors),
        (2, 1, 1),
        "nothing tested, interrupted"
    );
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(!alive(pid.trim()), "the hung adapter was killed");
}

// ---------------------------------------------------------------------------------------------
// the CI template

/// The `run:` scripts of a GitHub Actions workflow, by step name (plain `run: cmd` and
/// `run: |` blocks, which is all the template uses).
fn run_steps(workflow: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = workflow.lines().collect();
    let mut steps = Vec::new();
    let mut name = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start().trim_start_matches("- ");
        if let Some(n) = trimmed.strip_prefix("name: ") {
            name = n.to_owned();
        }
        if let Some(script) = trimmed.strip_prefix("run: ") {
            if script == "|" {
                let indent = line.len() - line.trim_start().len();
                let mut block = Vec::new();
                while i + 1 < lines.len()
                    && (lines[i + 1].trim().is_empty()
                        || lines[i + 1].len() - lines[i + 1].trim_start().len() > indent)
                {
                    i += 1;
                    block.push(lines[i].trim());
                }
                steps.push((name.clone(), block.join("\n")));
            } else {
                steps.push((name.clone(), script.to_owned()));
            }
        }
        i += 1;
    }
    steps
}

#[test]
fn the_ci_templates_run_against_the_reference() {
    // From source (cargo install of the package with the binary), and from the packages (the
    // wheel brings tep). Every step of these files runs in .ci/ci-jobs.py (a .ci/run step).
    for (file, install) in [
        (
            "docs/ci/conformance.yml",
            "cargo install --locked --git \"$TEP_GIT\" --branch \"$TEP_BRANCH\" tep\n",
        ),
        (
            "docs/ci/conformance-packages.yml",
            "python3 -m pip install \"$TEP_WHEEL\"",
        ),
    ] {
        ci_template_runs_against_the_reference(file, install);
    }
}

#[test]
fn docs_ci_shows_every_workflow_of_docs_ci_verbatim_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let page = std::fs::read_to_string(root.join("docs/ci.md")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(root.join("docs/ci"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    files.sort();
    let mut shown: Vec<String> = page
        .split("```yaml\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap().to_owned())
        .collect();
    shown.sort();
    // .ci/ci-jobs.py runs the files; a block on the page that is not one of them runs nowhere.
    assert_eq!(shown, files);
    assert_eq!(files.len(), 3, "the two jobs and the release workflow");
}

fn ci_template_runs_against_the_reference(file: &str, install: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workflow = std::fs::read_to_string(root.join(file)).unwrap();
    // docs/ci.md shows the template verbatim.
    let page = std::fs::read_to_string(root.join("docs/ci.md")).unwrap();
    assert!(
        page.contains(&format!("```yaml\n{workflow}```")),
        "docs/ci.md does not show {file}"
    );
    let steps = run_steps(&workflow);
    assert!(
        steps
            .iter()
            .any(|(_, s)| format!("{s}\n").contains(install)),
        "{file}: {steps:?}"
    );
    let suite: Vec<&(String, String)> = steps
        .iter()
        .filter(|(_, s)| s.contains("tep run"))
        .collect();
    assert_eq!(suite.len(), 1, "{steps:?}");
    // Run that step as the workflow would, with the built tep on PATH and the reference as the
    // adapter.
    let cwd = temp_dir(&format!("ci-{}", file.replace('/', "-")));
    let bin = Path::new(TEP).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("sh")
        .args(["-ec", &suite[0].1])
        .current_dir(&cwd)
        .env("PATH", path)
        .env("TEP_ADAPTER", format!("{} reference-adapter", quote(TEP)))
        .env_remove("CI")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("tep "), "tep --version runs first");
    // What the artifact step keeps is there, and valid.
    let artifact = workflow
        .lines()
        .find_map(|l| l.trim().strip_prefix("path: "))
        .unwrap();
    let reports = cwd.join(artifact);
    junit(&reports.join("junit.xml"));
    valid(&read_json(&reports.join("report.json")));
    let html = std::fs::read_to_string(reports.join("report.html")).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>"),
        "the HTML report is kept too"
    );
}

// ---------------------------------------------------------------------------------------------
// coverage at a level below full

#[test]
fn coverage_at_hooks_counts_implied_edges_and_never_calls_an_unseen_edge_not_taken() {
    let full = tep(&["run", "--format", "json"]);
    let hooks = tep(&["run", "--observed", "hooks", "--format", "json"]);
    let (full, hooks): (Value, Value) = (
        serde_json::from_slice(&full.stdout).unwrap(),
        serde_json::from_slice(&hooks.stdout).unwrap(),
    );
    let edges = |r: &Value| r["coverage"]["edges"].clone();
    // The reference takes every edge at full; at hooks the same, some only implied.
    assert_eq!(edges(&full)["taken"], edges(&full)["total"]);
    assert_eq!(
        edges(&hooks)["taken"],
        edges(&full)["taken"],
        "{}",
        edges(&hooks)
    );
    assert!(edges(&hooks)["implied"].as_u64().unwrap() > 0);
    assert!(edges(&full).get("implied").is_none());
    let text = stdout(&tep(&["run", "--observed", "hooks"]));
    assert!(text.contains("at level hooks: "), "{text}");
    assert!(
        text.contains(" implied by the records around them"),
        "{text}"
    );
    assert!(!text.contains("not taken:"), "{text}");
    // At events, what the level cannot see is said so, not called missing.
    let events = stdout(&tep(&["run", "--observed", "events"]));
    assert!(
        events.contains("not seen at level events: pre -->|deny| denied"),
        "{events}"
    );
    assert!(
        !events.contains("not taken: pre -->|deny| denied"),
        "{events}"
    );
}
