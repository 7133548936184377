//! The JUnit XML report.
//!
//! The XML is written with quick-xml's writer; the elements and their order are ours. quick-junit
//! (nextest's serializer) was tried in its place and does not earn it: 0.8 always writes
//! `skipped` on `<testsuites>` and 0.6 `disabled` on `<testsuite>`, both refused by the
//! `junit-10.xsd` the report is validated against, and it strips tab, CR and C1 characters
//! from every text, with no way to turn that off.

use std::fmt::Write as _;

use tep_model::graph::StageGraph;

use crate::baseline::BaselineOutcome;
use crate::outcome::RunReport;

use super::*;

/// The JUnit XML report: a test case per scenario, valid against the Jenkins xUnit plugin's
/// `junit-10.xsd`, agreeing with the exit code: its failures and errors are zero exactly when the
/// run exits 0. Expected failures are skipped with the baseline's reason; stale baseline entries,
/// a run that tested nothing and an interrupted run are failures (or an error) of their own.
pub fn junit(
    report: &RunReport,
    baseline: Option<&BaselineOutcome>,
    ctx: &RunContext,
    corpus_hash: &str,
) -> String {
    let classname = format!("tep.{}", report.spec);
    let mut cases: Vec<Case> = report
        .scenarios
        .iter()
        .map(|s| scenario_case(report, baseline, ctx, &classname, s))
        .collect();
    let run_case = |name: &str, outcome: CaseOutcome| Case {
        name: name.to_owned(),
        classname: "tep.run".to_owned(),
        time: None,
        outcome,
        details: String::new(),
        stderr: None,
    };
    if let Some(b) = baseline {
        for scenario in &b.missing_scenarios {
            let message = b
                .stale
                .iter()
                .filter(|e| e.id.split(':').next() == Some(scenario.as_str()))
                .map(|e| stale_line(b, e))
                .collect::<Vec<_>>()
                .join("\n");
            cases.push(run_case(
                scenario,
                CaseOutcome::Failure {
                    kind: "unknown-baseline-entry".to_owned(),
                    message,
                },
            ));
        }
    }
    if !report.tested() {
        cases.push(run_case(
            "nothing-was-tested",
            CaseOutcome::Failure {
                kind: "nothing-was-tested".to_owned(),
                message: "no scenario passed or failed: a run that tests nothing is not conformant"
                    .to_owned(),
            },
        ));
    }
    if report.interrupted {
        cases.push(run_case(
            "interrupted",
            CaseOutcome::Error {
                kind: "interrupted".to_owned(),
                message: format!(
                    "interrupted: {} selected scenario(s) did not run: {}",
                    report.not_run.len(),
                    report.not_run.join(", ")
                ),
            },
        ));
    }
    let properties = [
        ("tep.version", crate::suite::VERSION.to_owned()),
        ("tep.corpus", corpus_hash.to_owned()),
        ("tep.spec", report.spec.to_string()),
        ("tep.observation", report.level.to_string()),
        (
            "tep.implementation",
            report.implementation_name().to_owned(),
        ),
        ("tep.interrupted", report.interrupted.to_string()),
        (
            "tep.coverage.edges",
            format!(
                "{}/{}",
                report.coverage.taken(),
                StageGraph::of(report.spec).edges().len()
            ),
        ),
        (
            "tep.coverage.observed",
            report.coverage.edges.len().to_string(),
        ),
        (
            "tep.coverage.implied",
            report.coverage.implied_edges.len().to_string(),
        ),
        (
            "tep.coverage.unseen",
            report.unseen_edges().len().to_string(),
        ),
    ];
    write_junit(
        &format!("tep conformance ({})", report.spec),
        &ctx.started_at,
        report.duration.as_secs_f64(),
        &properties,
        &cases,
    )
}

/// A scenario's test case: its verdict as the outcome, its violations, rerun command and
/// kept trace as the details.
fn scenario_case(
    report: &RunReport,
    baseline: Option<&BaselineOutcome>,
    ctx: &RunContext,
    classname: &str,
    s: &ScenarioResult,
) -> Case {
    let comparison = baseline.and_then(|b| b.comparisons.get(&s.id));
    let outcome = match verdict_in(report, baseline, s) {
        Verdict::Passed | Verdict::Warned => CaseOutcome::Passed,
        Verdict::Skipped => CaseOutcome::Skipped(s.reason.clone().unwrap_or_default()),
        Verdict::ExpectedFailure => CaseOutcome::Skipped(format!(
            "expected failure (baseline): {}",
            comparison.map(|c| c.reasons.join("; ")).unwrap_or_default()
        )),
        Verdict::Failed => {
            let first = s.first_failing(report.strict);
            CaseOutcome::Failure {
                kind: first
                    .map(|v| v.invariant.to_string())
                    .unwrap_or_else(|| "failed".to_owned()),
                message: first.map(ToString::to_string).unwrap_or_default(),
            }
        }
        Verdict::Errored => CaseOutcome::Error {
            kind: "errored".to_owned(),
            message: s.reason.clone().unwrap_or_default(),
        },
        Verdict::Stale => CaseOutcome::Failure {
            kind: "stale-baseline-entry".to_owned(),
            message: comparison
                .map(|c| {
                    c.stale
                        .iter()
                        .map(|e| format!("stale baseline entry {}: {}; remove it", e.id, e.why))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
        },
    };
    let mut details = String::new();
    for v in &s.violations {
        let _ = writeln!(details, "[{}] {v}\n  {}", v.level, doc_line(v.invariant));
    }
    if !s.violations.is_empty() || outcome.fails() {
        let _ = writeln!(details, "rerun: {}", ctx.rerun_command(&s.id));
    }
    if let Some(path) = ctx.traces.get(&s.id) {
        let _ = writeln!(details, "trace: {}", path.display());
    }
    Case {
        name: s.id.clone(),
        classname: classname.to_owned(),
        time: Some(s.duration.as_secs_f64()),
        outcome,
        details,
        stderr: s.stderr.clone(),
    }
}

#[derive(Debug)]
enum CaseOutcome {
    Passed,
    Skipped(String),
    Failure { kind: String, message: String },
    Error { kind: String, message: String },
}

impl CaseOutcome {
    fn fails(&self) -> bool {
        matches!(
            self,
            CaseOutcome::Failure { .. } | CaseOutcome::Error { .. }
        )
    }
}

#[derive(Debug)]
struct Case {
    name: String,
    classname: String,
    time: Option<f64>,
    outcome: CaseOutcome,
    details: String,
    stderr: Option<String>,
}

/// `text` without the characters XML 1.0 cannot carry (control characters, such as the ANSI
/// escapes of an adapter's stderr); they become U+FFFD.
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || matches!(c, '\u{fffe}' | '\u{ffff}') => '\u{fffd}',
            c => c,
        })
        .collect()
}

fn write_junit(
    suite: &str,
    timestamp: &str,
    seconds: f64,
    properties: &[(&str, String)],
    cases: &[Case],
) -> String {
    use quick_xml::Writer;
    use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

    let count = |f: fn(&CaseOutcome) -> bool| cases.iter().filter(|c| f(&c.outcome)).count();
    let tests = cases.len().to_string();
    let failures = count(|o| matches!(o, CaseOutcome::Failure { .. })).to_string();
    let errors = count(|o| matches!(o, CaseOutcome::Error { .. })).to_string();
    let skipped = count(|o| matches!(o, CaseOutcome::Skipped(_))).to_string();
    let time = format!("{seconds:.3}");
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing XML into a Vec cannot fail; the results are ignored for that reason.
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let root = BytesStart::new("testsuites").with_attributes([
        ("name", "tep"),
        ("tests", tests.as_str()),
        ("failures", failures.as_str()),
        ("errors", errors.as_str()),
        ("time", time.as_str()),
    ]);
    let _ = w.write_event(Event::Start(root));
    let mut suite_tag = BytesStart::new("testsuite").with_attributes([
        ("name", suite),
        ("tests", tests.as_str()),
        ("failures", failures.as_str()),
        ("errors", errors.as_str()),
        ("skipped", skipped.as_str()),
        ("time", time.as_str()),
    ]);
    if !timestamp.is_empty() {
        suite_tag.push_attribute(("timestamp", timestamp));
    }
    let _ = w.write_event(Event::Start(suite_tag));
    let _ = w.write_event(Event::Start(BytesStart::new("properties")));
    for (name, value) in properties {
        let value = xml_text(value);
        let tag = BytesStart::new("property")
            .with_attributes([("name", *name), ("value", value.as_str())]);
        let _ = w.write_event(Event::Empty(tag));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("properties")));
    for case in cases {
        let name = xml_text(&case.name);
        let mut tag = BytesStart::new("testcase").with_attributes([
            ("name", name.as_str()),
            ("classname", case.classname.as_str()),
        ]);
        if let Some(time) = case.time {
            tag.push_attribute(("time", format!("{time:.3}").as_str()));
        }
        let body = !matches!(case.outcome, CaseOutcome::Passed)
            || case.stderr.is_some()
            || !case.details.is_empty();
        if !body {
            let _ = w.write_event(Event::Empty(tag));
            continue;
        }
        let _ = w.write_event(Event::Start(tag));
        let (element, kind, message) = match &case.outcome {
            CaseOutcome::Passed => ("", "", String::new()),
            CaseOutcome::Skipped(message) => ("skipped", "", xml_text(message)),
            CaseOutcome::Failure { kind, message } => ("failure", kind.as_str(), xml_text(message)),
            CaseOutcome::Error { kind, message } => ("error", kind.as_str(), xml_text(message)),
        };
        let details = xml_text(&case.details);
        if !element.is_empty() {
            let mut tag = BytesStart::new(element).with_attributes([("message", message.as_str())]);
            if !kind.is_empty() {
                tag.push_attribute(("type", kind));
            }
            if case.outcome.fails() && !details.is_empty() {
                let _ = w.write_event(Event::Start(tag));
                let _ = w.write_event(Event::Text(BytesText::new(&details)));
                let _ = w.write_event(Event::End(BytesEnd::new(element)));
            } else {
                let _ = w.write_event(Event::Empty(tag));
            }
        }
        if !case.outcome.fails() && !details.is_empty() {
            let _ = w.write_event(Event::Start(BytesStart::new("system-out")));
            let _ = w.write_event(Event::Text(BytesText::new(&details)));
            let _ = w.write_event(Event::End(BytesEnd::new("system-out")));
        }
        if let Some(stderr) = &case.stderr {
            let _ = w.write_event(Event::Start(BytesStart::new("system-err")));
            let _ = w.write_event(Event::Text(BytesText::new(&xml_text(stderr))));
            let _ = w.write_event(Event::End(BytesEnd::new("system-err")));
        }
        let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("testsuite")));
    let _ = w.write_event(Event::End(BytesEnd::new("testsuites")));
    let mut xml = String::from_utf8_lossy(&w.into_inner()).into_owned();
    xml.push('\n');
    xml
}
