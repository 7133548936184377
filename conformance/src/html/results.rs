//! The top of the page (what failed, before anything else) and its end (the invariants it
//! names, embedded, so that the page needs nothing beside it).
//!
//! The failures are grouped by the invariant each scenario breaks first, as the text report
//! groups them; the errored scenarios by their cause. The run's facts follow, collapsed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tep_check::invariant;
use tep_check::invariants::InvariantId;
use tep_model::trace::ObservationLevel;

use super::{Page, escape, escape_text, implementation_line, status_class};
use crate::outcome::Status;
use crate::report::{InvariantCheck, JsonReport, ScenarioReport};

/// The scenarios that make the run fail by a violation, by the invariant each breaks first, in
/// catalog order.
pub(super) fn failures(report: &JsonReport) -> Vec<(InvariantId, Vec<&ScenarioReport>)> {
    let mut groups: BTreeMap<InvariantId, Vec<&ScenarioReport>> = BTreeMap::new();
    for s in &report.scenarios {
        let counts = status_class(s) == "failed" || (report.strict && status_class(s) == "warned");
        if let Some(v) = s.first_failing(report.strict).filter(|_| counts) {
            groups.entry(v.invariant).or_default().push(s);
        }
    }
    InvariantId::ALL
        .iter()
        .filter_map(|id| groups.remove_entry(id))
        .collect()
}

/// `text` as HTML, its `code` spans (the catalog's markdown) as `<code>`.
pub(super) fn inline_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (n, part) in text.split('`').enumerate() {
        if n % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", escape_text(part));
        } else {
            out.push_str(&escape_text(part));
        }
    }
    out
}

fn scenarios_word(n: usize) -> String {
    if n == 1 {
        "1 scenario".to_owned()
    } else {
        format!("{n} scenarios")
    }
}

fn scenario_link(id: &str, class: &str) -> String {
    format!(
        "<a class=\"to-scenario {class}\" href=\"#scenario={}\">{}</a>",
        escape(id),
        escape_text(id)
    )
}

/// The verdict's counts, the failures by invariant, the errored scenarios by cause, the edge
/// coverage, and the run's facts (collapsed).
pub(super) fn results(out: &mut String, page: &Page<'_>) {
    let report = page.report;
    let _ = writeln!(
        out,
        "<section id=\"results\" aria-labelledby=\"results-title\">\n<h2 id=\"results-title\">Results</h2>"
    );
    if report.interrupted {
        let _ = writeln!(
            out,
            "<p class=\"banner\">Interrupted: {} selected scenario(s) did not run: {}.</p>",
            report.not_run.len(),
            escape(&report.not_run.join(", "))
        );
    }
    if !report.tested {
        let _ = writeln!(
            out,
            "<p class=\"banner\">Nothing was tested: no scenario passed or failed, and a run that tests nothing is not conformant.</p>"
        );
    }
    counts(out, report);
    if let Some(comparison) = page.compare {
        super::compare::section(out, comparison);
    }
    failure_groups(out, report);
    errored_groups(out, report);
    coverage(out, report);
    facts(out, page);
    let _ = writeln!(out, "</section>");
}

fn counts(out: &mut String, report: &JsonReport) {
    let c = &report.summary;
    let _ = writeln!(out, "<ul class=\"counts\">");
    for (n, what, class, always) in [
        (c.failed, "failed", "failed", true),
        (c.errored, "errored", "errored", false),
        (c.passed, "passed", "passed", true),
        (c.skipped, "skipped", "skipped", true),
        (c.warned, "warned", "warned", false),
        (c.expected_failures, "failed as expected", "xfail", false),
        (c.stale, "stale", "warned", false),
        (c.not_run, "not run", "skipped", false),
    ] {
        if always || n > 0 {
            let _ = writeln!(out, "<li class=\"{class}\"><b>{n}</b>{what}</li>");
        }
    }
    let _ = writeln!(out, "</ul>");
}

fn failure_groups(out: &mut String, report: &JsonReport) {
    let groups = failures(report);
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3 id=\"failures-title\">Failures, by the invariant each scenario breaks first</h3>\n<ol class=\"failures\" aria-labelledby=\"failures-title\">"
    );
    for (id, scenarios) in &groups {
        let inv = invariant(*id);
        let _ = writeln!(
            out,
            "<li class=\"failure {level}\" id=\"failure-{id}\" data-invariant=\"{id}\">\
             <div class=\"head\"><a class=\"inv\" href=\"#invariant={id}\">{id}</a><span class=\"level\">{LEVEL}</span><span class=\"n\">{n}</span></div>\
             <p class=\"statement\">{statement}</p>",
            id = id.as_str(),
            level = inv.level.to_string().to_lowercase(),
            LEVEL = inv.level,
            n = scenarios_word(scenarios.len()),
            statement = inline_code(inv.statement),
        );
        if let Some((first, v)) = scenarios
            .first()
            .and_then(|s| s.first_failing(report.strict).map(|v| (s, v)))
        {
            let line = v
                .lines
                .first()
                .map(|n| format!(" (line {n})"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "<p class=\"first\">First: {}{line}: {}</p>",
                scenario_link(&first.id, "failed"),
                escape_text(&v.message)
            );
        }
        let links: Vec<String> = scenarios
            .iter()
            .map(|s| format!("<li>{}</li>", scenario_link(&s.id, "failed")))
            .collect();
        let _ = writeln!(
            out,
            "<ul class=\"scenario-list\">{}</ul>\n</li>",
            links.join("")
        );
    }
    let _ = writeln!(out, "</ol>");
}

fn errored_groups(out: &mut String, report: &JsonReport) {
    let mut causes: BTreeMap<String, Vec<&ScenarioReport>> = BTreeMap::new();
    for s in report
        .scenarios
        .iter()
        .filter(|s| s.status == Status::Errored && !s.expected_failure)
    {
        let cause = s
            .reason
            .as_deref()
            .and_then(|r| r.lines().next())
            .unwrap_or("no reason given");
        causes.entry(cause.to_owned()).or_default().push(s);
    }
    if causes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3 id=\"errors-title\">Errored, by cause</h3>\n<ul class=\"failures errors\" aria-labelledby=\"errors-title\">"
    );
    for (cause, scenarios) in &causes {
        let links: Vec<String> = scenarios
            .iter()
            .map(|s| format!("<li>{}</li>", scenario_link(&s.id, "errored")))
            .collect();
        let _ = writeln!(
            out,
            "<li class=\"failure errored\"><div class=\"head\"><span class=\"cause\">{}</span><span class=\"n\">{}</span></div><ul class=\"scenario-list\">{}</ul></li>",
            escape_text(cause),
            scenarios_word(scenarios.len()),
            links.join("")
        );
    }
    let _ = writeln!(out, "</ul>");
}

fn coverage(out: &mut String, report: &JsonReport) {
    let _ = writeln!(out, "<div class=\"coverage\">");
    for (coverage, name, slug) in [
        (&report.coverage.edges, "stage graph", "pipeline"),
        (
            &report.coverage.code_mode_edges,
            "Code Mode graph",
            "code-mode",
        ),
    ] {
        let percent = (coverage.ratio * 100.0).round();
        let _ = writeln!(
            out,
            "<div><a href=\"#graph-{slug}\">Edge coverage of the {} {name}</a>: <b>{} of {}</b> edges ({percent}%)\
             <div class=\"bar\" role=\"img\" aria-label=\"{percent}%\"><span style=\"width: {percent}%\"></span></div></div>",
            report.spec, coverage.taken, coverage.total
        );
        // Below `full`, what the level recorded and what the records imply, apart.
        if report.observation < ObservationLevel::Full && coverage.taken > 0 {
            let _ = writeln!(
                out,
                "<div class=\"seen\">at level {}: {} observed, {} implied by the records around them; {} not seen at this level</div>",
                report.observation,
                coverage.taken - coverage.implied,
                coverage.implied,
                coverage.unseen.len()
            );
        }
    }
    let _ = writeln!(out, "</div>");
}

/// The run's facts, in a collapsed block: who, which revision and level, the suite.
fn facts(out: &mut String, page: &Page<'_>) {
    let report = page.report;
    let _ = writeln!(
        out,
        "<details class=\"about\"><summary>About this run</summary>\n<dl class=\"facts\">"
    );
    let mut fact = |name: &str, value: &str| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{}</dd>", escape(value));
    };
    let i = &report.implementation;
    fact("implementation", &implementation_line(report));
    if let Some(homepage) = &i.homepage {
        fact("homepage", homepage);
    }
    // Quoted, so that it can be pasted; an older report has no command, only its rerun words.
    match (&report.command, page.rerun) {
        (Some(command), _) => fact("command", command),
        (None, Some(ctx)) => {
            let words: Vec<String> = ctx.rerun.iter().map(|w| crate::report::quote(w)).collect();
            fact("command", &words.join(" "));
        }
        (None, None) => {}
    }
    let specs: Vec<&str> = i.specs.iter().map(|r| r.as_str()).collect();
    fact(
        "spec revision",
        &format!(
            "{} (the implementation declares {})",
            report.spec,
            specs.join(", ")
        ),
    );
    fact(
        "observation level",
        &format!(
            "{} (the implementation declares {})",
            report.observation, i.observation
        ),
    );
    let capabilities: Vec<&str> = i.capabilities.iter().map(|c| c.as_str()).collect();
    fact(
        "capabilities",
        &if capabilities.is_empty() {
            "none".to_owned()
        } else {
            capabilities.join(", ")
        },
    );
    let count = |status: InvariantCheck| {
        report
            .invariants
            .iter()
            .filter(|i| i.status == status)
            .count()
    };
    let partly = match count(InvariantCheck::PartlyCheckable) {
        0 => String::new(),
        n => format!(", {n} partly checkable"),
    };
    fact(
        "invariants",
        &format!(
            "{} checked{partly}, {} not applicable, {} not checkable",
            count(InvariantCheck::Checked),
            count(InvariantCheck::NotApplicable),
            count(InvariantCheck::NotCheckable)
        ),
    );
    fact("exit code", &report.exit_code.to_string());
    if let Some(b) = &report.baseline {
        fact(
            "baseline",
            &format!(
                "{}: {} expected, {} unexpected, {} stale",
                b.file,
                b.expected.len(),
                b.unexpected.len(),
                b.stale.len()
            ),
        );
    }
    if !report.started_at.is_empty() {
        fact("started", &report.started_at);
        fact("duration", &format!("{:.3} s", report.duration_seconds));
    }
    if let Some(dir) = &report.run_directory {
        fact("failing traces kept in", dir);
    }
    fact(
        "suite",
        &format!("tep {}, corpus {}", report.version, report.corpus_hash),
    );
    let _ = writeln!(out, "</dl>\n</details>");
}

/// Every invariant of the catalog the run knows, as the catalog states it: level, statement,
/// when it is checked, what it needs, its sources, and what this run made of it.
pub(super) fn invariants(out: &mut String, report: &JsonReport, docs_url: Option<&str>) {
    let _ = writeln!(
        out,
        "<section id=\"invariants\" aria-labelledby=\"invariants-title\">\n<h2 id=\"invariants-title\">The invariants</h2>\n\
         <p class=\"muted\">As the catalog states them{}.</p>",
        match docs_url {
            Some(url) => format!(
                "; each links to its entry in <a href=\"{}\">the published docs</a>",
                escape(&docs_page(url))
            ),
            None => String::new(),
        }
    );
    for entry in &report.invariants {
        let inv = invariant(entry.invariant);
        let id = inv.id.as_str();
        let this_run = match entry.status {
            InvariantCheck::Checked => "checked in this run".to_owned(),
            InvariantCheck::PartlyCheckable => "partly checkable in this run".to_owned(),
            InvariantCheck::NotCheckable => "not checkable in this run".to_owned(),
            InvariantCheck::NotApplicable => "not applicable in this run".to_owned(),
        };
        let why = entry
            .why
            .as_deref()
            .map(|w| format!(": {}", escape_text(w)))
            .unwrap_or_default();
        let sources: Vec<String> = inv.sources.iter().map(ToString::to_string).collect();
        let mut needs = vec![format!("observation level {}", inv.observed)];
        if let Some(cap) = inv.requires {
            needs.push(format!("the {} capability", cap.as_str()));
        }
        let _ = writeln!(
            out,
            "<article class=\"invariant {level}\" id=\"inv-{id}\" data-invariant=\"{id}\" tabindex=\"-1\">\
             <h3><a href=\"#invariant={id}\">{id}</a><span class=\"level\">{LEVEL}</span>{doc}</h3>\
             <p class=\"statement\">{statement}</p>\
             <p class=\"muted\">Checked {check}; needs {needs}; since {since}. Sources: {sources}. <b>{this_run}</b>{why}.</p></article>",
            level = inv.level.to_string().to_lowercase(),
            LEVEL = inv.level,
            doc = match docs_url {
                Some(url) => format!(
                    " <a class=\"doc\" href=\"{}#{id}\">docs</a>",
                    escape(&docs_page(url))
                ),
                None => String::new(),
            },
            statement = inline_code(inv.statement),
            check = inv.check.describe(),
            needs = escape_text(&needs.join(", ")),
            since = inv.since,
            sources = escape_text(&sources.join("; ")),
        );
    }
    let _ = writeln!(out, "</section>");
}

/// The published page of the invariant catalog under `--docs-url URL` (the docs directory).
pub fn docs_page(url: &str) -> String {
    format!("{}/invariants.md", url.trim_end_matches('/'))
}
