//! The HTML report (`--html FILE`): one self-contained page drawing a run on the spec's own
//! diagrams.
//!
//! Its data is the JSON report ([`JsonReport`]) and the failing scenarios' traces. The pictures
//! are the docs' SVGs (`cargo xtask docs` lays them out and names each node and edge group), so
//! nothing here lays out a graph: each edge's group gets its count (how many scenarios took it,
//! shading it), each failing step's node and edge a class, and a refused step (one the graph
//! does not have) a dashed line between its two boxes.
//!
//! Everything is inline (CSS, JS, SVG): the page needs no network and works opened from disk. A
//! Content-Security-Policy lets only the page's own script run (by its hash), and every text that
//! comes from a run (trace lines, messages, names, stderr) is escaped ([`escape`]): a trace from
//! an untrusted adapter cannot put markup, let alone a script, in the page.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::BufRead;

use base64::Engine as _;
use sha2::{Digest, Sha256};
use tep_reference::graph::{GraphKind, NodeId, Revision, StageGraph};

use crate::report::{
    EdgeCoverage, GraphName, InvariantCheck, JsonReport, RunContext, ScenarioReport,
    ViolationReport,
};
use crate::runner::Status;
use crate::scenario::Scenario;
use tep_check::catalog::invariant;
use tep_check::invariants::InvariantId;

const STYLE: &str = include_str!("html/report.css");
const SCRIPT: &str = include_str!("html/report.js");

/// The docs' pictures of each revision's graphs.
fn picture(revision: Revision, kind: GraphKind) -> &'static str {
    match (revision, kind) {
        (Revision::Rev2, GraphKind::Pipeline) => {
            include_str!("../../docs/tool-execution-pipeline.svg")
        }
        (Revision::Rev2, GraphKind::CodeMode) => include_str!("../../docs/code-mode.svg"),
        (Revision::Rev1, GraphKind::Pipeline) => {
            include_str!("../../docs/revisions/rev1/tool-execution-pipeline.svg")
        }
        (Revision::Rev1, GraphKind::CodeMode) => {
            include_str!("../../docs/revisions/rev1/code-mode.svg")
        }
    }
}

/// A trace with more lines than this is shown in part: its first lines, and the lines around
/// each witness.
pub const FULL_TRACE_LINES: usize = 500;
/// The first lines of a long trace shown (its header and first batch).
const HEAD_LINES: usize = 10;
/// Lines of context shown around a witness line of a long trace.
const CONTEXT_LINES: usize = 3;

/// The lines of a trace the report shows: all of a trace of up to [`FULL_TRACE_LINES`] lines,
/// else its first lines and the lines around each witness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceExcerpt {
    /// How many lines the trace has.
    pub total: usize,
    /// The lines shown, numbered from 1, in order.
    pub lines: Vec<(usize, String)>,
}

impl TraceExcerpt {
    /// The excerpt of a trace in memory (JSON Lines).
    pub fn of(jsonl: &str, witnesses: &BTreeSet<usize>) -> Self {
        // Reading from memory cannot fail.
        Self::read(jsonl.as_bytes(), witnesses).unwrap_or_default()
    }

    /// Reads a trace and keeps the lines it shows: at most [`FULL_TRACE_LINES`] and the
    /// witnesses' surroundings are held at any time, however long the trace.
    pub fn read(mut reader: impl BufRead, witnesses: &BTreeSet<usize>) -> std::io::Result<Self> {
        let near = |n: usize| {
            n <= HEAD_LINES
                || witnesses
                    .range(n.saturating_sub(CONTEXT_LINES)..=n + CONTEXT_LINES)
                    .next()
                    .is_some()
        };
        let mut excerpt = TraceExcerpt::default();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            excerpt.total += 1;
            let n = excerpt.total;
            if n == FULL_TRACE_LINES + 1 {
                excerpt.lines.retain(|(k, _)| near(*k));
            }
            if n <= FULL_TRACE_LINES || near(n) {
                let text = String::from_utf8_lossy(&buf);
                excerpt
                    .lines
                    .push((n, text.trim_end_matches(['\n', '\r']).to_owned()));
            }
        }
        Ok(excerpt)
    }
}

/// What a page shows.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The command it reports: `tep run`, or `tep check FILE`.
    pub title: &'a str,
    pub report: &'a JsonReport,
    /// The traces to quote, by scenario id (the failing scenarios').
    pub traces: &'a BTreeMap<String, TraceExcerpt>,
    /// The scenarios, for what each needs and exercises (the table's filters).
    pub corpus: &'a [Scenario],
    /// Where `docs/` is, seen from the page (`docs/`, `../docs/`): the violations link there.
    pub docs: &'a str,
    /// How to rerun a scenario alone, for a run.
    pub rerun: Option<&'a RunContext>,
}

/// `text` for a quoted HTML attribute (and anywhere else): `&`, `<`, `>`, `"` and `'` become
/// references, and the control characters HTML cannot carry (the ANSI escapes of an adapter's
/// stderr, NUL) become U+FFFD.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_where(text, true)
}

/// `text` for an element's content: as [`escape`], but quotes stay quotes (a trace line is JSON,
/// full of them).
pub fn escape_text(text: &str) -> Cow<'_, str> {
    escape_where(text, false)
}

fn escape_where(text: &str, quotes: bool) -> Cow<'_, str> {
    let special = |c: char| {
        matches!(c, '&' | '<' | '>')
            || (quotes && matches!(c, '"' | '\''))
            || (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    };
    if !text.contains(special) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !special(c) => out.push(c),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push('\u{fffd}'),
        }
    }
    Cow::Owned(out)
}

/// How many scenarios took each edge, and how dark that shades it: its share of the most taken
/// edge's count (0 for an edge no scenario took).
pub fn shades(coverage: &EdgeCoverage) -> Vec<(usize, f64)> {
    let most = coverage
        .edges
        .iter()
        .map(|e| e.scenarios)
        .max()
        .unwrap_or(0);
    coverage
        .edges
        .iter()
        .map(|e| {
            let share = if most == 0 {
                0.0
            } else {
                e.scenarios as f64 / most as f64
            };
            (e.scenarios, share)
        })
        .collect()
}

/// What a scenario's row says it is: its status, or `xfail` for a failure the baseline expects.
fn status_class(s: &ScenarioReport) -> &'static str {
    if s.expected_failure {
        "xfail"
    } else {
        s.status.as_str()
    }
}

fn status_tag(s: &ScenarioReport) -> &'static str {
    if s.expected_failure {
        return "XFAIL";
    }
    match s.status {
        Status::Passed => "PASS",
        Status::Warned => "WARN",
        Status::Failed => "FAIL",
        Status::Skipped => "SKIP",
        Status::Errored => "ERROR",
    }
}

/// The failing steps on one graph: the nodes and edges of the violations of failing scenarios,
/// and the steps the graph does not have (from, to).
#[derive(Debug, Default)]
struct Failing {
    nodes: BTreeSet<NodeId>,
    edges: BTreeSet<usize>,
    refused: BTreeSet<(NodeId, NodeId)>,
}

fn failing(report: &JsonReport, graph: GraphName) -> Failing {
    let mut failing = Failing::default();
    let steps = report
        .scenarios
        .iter()
        .filter(|s| s.status == Status::Failed)
        .flat_map(|s| &s.violations)
        .filter_map(|v| v.step.as_ref())
        .filter(|step| step.graph == graph);
    for step in steps {
        failing.nodes.insert(step.to);
        if let Some(edge) = step.edge {
            failing.edges.insert(edge);
        }
        if step.refused {
            failing.nodes.insert(step.from);
            failing.refused.insert((step.from, step.to));
        }
    }
    failing
}

/// The page.
pub fn render(page: &Page<'_>) -> String {
    let report = page.report;
    let mut out = String::with_capacity(256 * 1024);
    let verdict = if report.interrupted {
        ("interrupted", "interrupted")
    } else if report.conformant {
        ("conformant", "conformant")
    } else {
        ("not-conformant", "not conformant")
    };
    let script_hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{script_hash}'\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <meta name=\"generator\" content=\"tep {}\">\n\
         <title>{}: {} against {}, {}</title>\n\
         <link rel=\"icon\" href=\"data:,\">\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        escape(&report.version),
        escape(page.title),
        escape(&report.implementation.name),
        report.spec,
        verdict.1
    );
    let _ = writeln!(
        out,
        "<a class=\"skip\" href=\"#scenarios\">Skip to the scenarios</a>\n<header>\n<h1><span>{}</span> <span class=\"verdict {}\">{}</span></h1>\n\
         <p class=\"sub\">{} against {}, observation level {}{}</p>\n</header>\n<main>",
        escape(page.title),
        verdict.0,
        verdict.1,
        escape(&implementation_line(report)),
        report.spec,
        report.observation,
        if report.strict { ", --strict" } else { "" }
    );
    summary(&mut out, page);
    graphs(&mut out, page);
    scenarios(&mut out, page);
    let _ = write!(
        out,
        "</main>\n<footer>tep {} · corpus {} · adapter protocol {}</footer>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        escape(&report.version),
        escape(&report.corpus_hash),
        report.protocol
    );
    out
}

fn implementation_line(report: &JsonReport) -> String {
    let i = &report.implementation;
    let mut who = i.name.clone();
    if let Some(version) = i.version.as_ref().filter(|v| !i.name.contains(v.as_str())) {
        who.push(' ');
        who.push_str(version);
    }
    if let Some(language) = &i.language {
        who.push_str(&format!(" ({language})"));
    }
    who
}

fn summary(out: &mut String, page: &Page<'_>) {
    let report = page.report;
    let _ = writeln!(
        out,
        "<section id=\"summary\" aria-labelledby=\"summary-title\">\n<h2 id=\"summary-title\">Summary</h2>"
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
    let c = &report.summary;
    let _ = writeln!(out, "<ul class=\"counts\">");
    for (n, what, class, always) in [
        (c.passed, "passed", "passed", true),
        (c.failed, "failed", "failed", true),
        (c.skipped, "skipped", "skipped", true),
        (c.errored, "errored", "errored", false),
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
    let _ = writeln!(out, "<div class=\"coverage\">");
    for (coverage, name) in [
        (&report.coverage.edges, "stage graph"),
        (&report.coverage.code_mode_edges, "Code Mode graph"),
    ] {
        let percent = (coverage.ratio * 100.0).round();
        let _ = writeln!(
            out,
            "<div>Edge coverage of the {} {name}: <b>{} of {}</b> edges ({percent}%)\
             <div class=\"bar\" role=\"img\" aria-label=\"{percent}%\"><span style=\"width: {percent}%\"></span></div></div>",
            report.spec, coverage.taken, coverage.total
        );
    }
    let _ = writeln!(out, "</div>");
    let _ = writeln!(out, "<dl class=\"facts\">");
    let mut fact = |name: &str, value: &str| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{}</dd>", escape(value));
    };
    let i = &report.implementation;
    fact("implementation", &implementation_line(report));
    if let Some(homepage) = &i.homepage {
        fact("homepage", homepage);
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
    let checked = report
        .invariants
        .iter()
        .filter(|i| i.status == InvariantCheck::Checked)
        .count();
    let not_checkable: Vec<&str> = report
        .invariants
        .iter()
        .filter(|i| i.status == InvariantCheck::NotCheckable)
        .map(|i| i.invariant.as_str())
        .collect();
    let not_applicable = report
        .invariants
        .iter()
        .filter(|i| i.status == InvariantCheck::NotApplicable)
        .count();
    let partly = report
        .invariants
        .iter()
        .filter(|i| i.status == InvariantCheck::PartlyCheckable)
        .count();
    let partly = if partly > 0 {
        format!(", {partly} partly checkable")
    } else {
        String::new()
    };
    let mut invariants = format!(
        "{checked} checked{partly}, {not_applicable} not applicable, {} not checkable",
        not_checkable.len()
    );
    if !not_checkable.is_empty() {
        invariants.push_str(&format!(" at this level: {}", not_checkable.join(", ")));
    }
    fact("invariants", &invariants);
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
    let _ = writeln!(out, "</dl>\n</section>");
}

fn graphs(out: &mut String, page: &Page<'_>) {
    let report = page.report;
    let _ = writeln!(
        out,
        "<section id=\"graphs\" aria-labelledby=\"graphs-title\">\n\
         <h2 id=\"graphs-title\">The run on the {} stage graph</h2>\n\
         <p class=\"legend\"><span><span class=\"swatch heat\"></span>taken: darker and wider, the more scenarios took it</span>\
         <span><span class=\"swatch untaken\"></span>taken by no scenario</span>\
         <span><span class=\"swatch failing\"></span>a failing scenario's step (dashed: a step the graph does not have)</span></p>\n\
         <p class=\"muted\">Click an edge (or Tab to it and press Enter) to list the scenarios that took it; expand a scenario below to draw its path.</p>\n\
         <p id=\"focus-note\" class=\"panel\" hidden><button type=\"button\">show every scenario</button>Showing the path of <b class=\"name\"></b>.</p>\n\
         <div id=\"edge-panel\" class=\"panel\" aria-live=\"polite\" hidden><button type=\"button\" class=\"close\">close</button><h3></h3><p></p><ul></ul></div>\n\
         <div class=\"graphs\">",
        report.spec
    );
    for (kind, name, coverage, title) in [
        (
            GraphKind::Pipeline,
            GraphName::Pipeline,
            &report.coverage.edges,
            format!("Stage graph ({})", report.spec),
        ),
        (
            GraphKind::CodeMode,
            GraphName::CodeMode,
            &report.coverage.code_mode_edges,
            format!("Code Mode graph ({})", report.spec),
        ),
    ] {
        // A run no sub-call of which took the Code Mode graph shows it only as a number.
        if kind == GraphKind::CodeMode && coverage.taken == 0 {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No sub-call took the {} Code Mode graph: it is not drawn.</p>",
                report.spec
            );
            continue;
        }
        let graph = match kind {
            GraphKind::Pipeline => StageGraph::of(report.spec),
            GraphKind::CodeMode => StageGraph::code_mode(report.spec),
        };
        let slug = match name {
            GraphName::Pipeline => "pipeline",
            GraphName::CodeMode => "code-mode",
        };
        let _ = writeln!(
            out,
            "<figure class=\"graph\" id=\"graph-{slug}\" data-graph=\"{slug}\" data-title=\"{}\">\n\
             <figcaption>{}: {} of {} edges taken</figcaption>",
            escape(&title),
            escape(&title),
            coverage.taken,
            coverage.total
        );
        out.push_str(&drawing(
            picture(report.spec, kind),
            graph,
            slug,
            coverage,
            &failing(report, name),
            &title,
        ));
        let _ = writeln!(out, "</figure>");
    }
    let _ = writeln!(out, "</div>\n</section>");
}

/// The docs' picture of `graph`, with each edge's count and shade, the failing steps marked,
/// every edge focusable and described, and its ids made unique in the page.
fn drawing(
    svg: &str,
    graph: &StageGraph,
    slug: &str,
    coverage: &EdgeCoverage,
    failing: &Failing,
    title: &str,
) -> String {
    let shades = shades(coverage);
    let mut out = String::with_capacity(svg.len() + 8 * 1024);
    let mut boxes: BTreeMap<NodeId, [f64; 4]> = BTreeMap::new();
    let mut current_node: Option<NodeId> = None;
    let mut refused_drawn = false;
    for line in svg.lines() {
        let element = line.trim_start();
        // The file's generated-file comment is about the file, not this page.
        if element.starts_with("<!--") {
            continue;
        }
        if element.starts_with("<svg ") {
            let _ = writeln!(
                out,
                "{} role=\"group\" aria-label=\"{}\">",
                element.trim_end_matches('>'),
                escape(title)
            );
            continue;
        }
        let line = line
            .replace(" id=\"", &format!(" id=\"{slug}-"))
            .replace("url(#", &format!("url(#{slug}-"));
        if let Some(n) = group_attribute(element, "<g class=\"edge\" data-edge=\"") {
            let Ok(n) = n.parse::<usize>() else {
                out.push_str(&line);
                out.push('\n');
                continue;
            };
            let (count, share) = shades.get(n).copied().unwrap_or((0, 0.0));
            let label = graph
                .edges()
                .get(n)
                .map(|e| e.describe())
                .unwrap_or_default();
            let mut classes = String::from("edge");
            if count == 0 {
                classes.push_str(" untaken");
            }
            if failing.edges.contains(&n) {
                classes.push_str(" failing");
            }
            let taken = match count {
                1 => "taken by 1 scenario".to_owned(),
                n => format!("taken by {n} scenarios"),
            };
            let rest = element
                .strip_prefix("<g class=\"edge\"")
                .unwrap_or_default()
                .trim_end_matches('>');
            let _ = writeln!(
                out,
                "  <g class=\"{classes}\"{rest} data-count=\"{count}\" data-label=\"{label}\" style=\"--share: {share:.3}\" tabindex=\"0\" role=\"button\" aria-label=\"{label}: {taken}\">\n    <title>{label}: {taken}</title>",
                label = escape(&label)
            );
            continue;
        }
        if let Some(id) = group_attribute(element, "<g class=\"node\" data-node=\"") {
            current_node = graph
                .nodes()
                .iter()
                .map(|n| n.id)
                .find(|n| n.as_str() == id);
            let failed = current_node.is_some_and(|n| failing.nodes.contains(&n));
            if failed {
                let _ = writeln!(
                    out,
                    "  <g class=\"node failing\" data-node=\"{}\">",
                    escape(id)
                );
            } else {
                out.push_str(&line);
                out.push('\n');
            }
            // The refused steps go under the boxes, after the edges.
            if !refused_drawn {
                refused_drawn = true;
                out.push_str(&refused_placeholder(slug));
            }
            continue;
        }
        if let (Some(node), true) = (current_node, element.starts_with("<rect ")) {
            if let Some(rect) = rect_of(element) {
                boxes.insert(node, rect);
            }
            current_node = None;
        }
        out.push_str(&line);
        out.push('\n');
        // A wide transparent copy of an edge's path makes it easy to click.
        if element.starts_with("<path ")
            && element.contains("class=\"edgePath\"")
            && let Some(d) = attribute(element, "d")
        {
            let indent = &line[..line.len() - line.trim_start().len()];
            let _ = writeln!(out, "{indent}<path class=\"hit\" d=\"{}\"/>", escape(d));
        }
    }
    out.replace(
        &refused_placeholder(slug),
        &refused_steps(slug, failing, &boxes),
    )
}

fn refused_placeholder(slug: &str) -> String {
    format!("<!-- refused steps of {slug} -->\n")
}

/// The dashed lines of the steps the graph does not have, from box to box, with an arrowhead.
fn refused_steps(slug: &str, failing: &Failing, boxes: &BTreeMap<NodeId, [f64; 4]>) -> String {
    if failing.refused.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "  <defs><marker id=\"{slug}-refused-head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path class=\"refused-head\" d=\"M 0 0 L 10 5 L 0 10 z\"/></marker></defs>\n"
    );
    for (from, to) in &failing.refused {
        let (Some(a), Some(b)) = (boxes.get(from), boxes.get(to)) else {
            continue;
        };
        let center = |r: &[f64; 4]| (r[0] + r[2] / 2.0, r[1] + r[3] / 2.0);
        let ((x1, y1), (x2, y2)) = (center(a), center(b));
        // From the source box's edge to the target box's edge, along the line between centres.
        let leave = |r: &[f64; 4], dx: f64, dy: f64| {
            let tx = if dx.abs() > f64::EPSILON {
                (r[2] / 2.0) / dx.abs()
            } else {
                f64::INFINITY
            };
            let ty = if dy.abs() > f64::EPSILON {
                (r[3] / 2.0) / dy.abs()
            } else {
                f64::INFINITY
            };
            tx.min(ty).min(1.0)
        };
        let (dx, dy) = (x2 - x1, y2 - y1);
        let (s, e) = (leave(a, dx, dy), 1.0 - leave(b, dx, dy));
        let _ = writeln!(
            out,
            "  <g class=\"refused-step\" data-from=\"{from}\" data-to=\"{to}\"><title>{from} --> {to}: a step the graph does not have</title><path class=\"refused\" d=\"M {:.2},{:.2} L {:.2},{:.2}\" marker-end=\"url(#{slug}-refused-head)\"/></g>",
            x1 + dx * s,
            y1 + dy * s,
            x1 + dx * e,
            y1 + dy * e,
        );
    }
    out
}

/// The value after `prefix` (an element's start up to an attribute's opening quote), up to the
/// closing quote.
fn group_attribute<'a>(element: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = element.strip_prefix(prefix)?;
    Some(&rest[..rest.find('"')?])
}

fn attribute<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = element[start..].find('"')?;
    Some(&element[start..start + len])
}

fn rect_of(element: &str) -> Option<[f64; 4]> {
    let [x, y, w, h] = ["x", "y", "width", "height"]
        .map(|name| attribute(element, name).and_then(|v| v.parse::<f64>().ok()));
    Some([x?, y?, w?, h?])
}

fn scenarios(out: &mut String, page: &Page<'_>) {
    let report = page.report;
    let facts: BTreeMap<&str, &Scenario> = page.corpus.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut statuses: BTreeSet<&str> = BTreeSet::new();
    let mut invariants: BTreeSet<InvariantId> = BTreeSet::new();
    let mut capabilities = BTreeSet::new();
    for s in &report.scenarios {
        statuses.insert(status_class(s));
        invariants.extend(s.violations.iter().map(|v| v.invariant));
        if let Some(scenario) = facts.get(s.id.as_str()) {
            invariants.extend(scenario.exercises.iter().copied());
            capabilities.extend(scenario.requires.iter().copied());
        }
    }
    let _ = writeln!(
        out,
        "<section id=\"scenarios\" aria-labelledby=\"scenarios-title\">\n<h2 id=\"scenarios-title\">Scenarios</h2>\n<div class=\"filters\" role=\"group\" aria-label=\"Filter the scenarios\">"
    );
    let order = ["failed", "errored", "warned", "xfail", "passed", "skipped"];
    let statuses: Vec<&str> = order
        .iter()
        .copied()
        .filter(|s| statuses.contains(s))
        .collect();
    select(
        out,
        "status",
        "Status",
        &statuses.iter().map(|s| (*s, *s)).collect::<Vec<_>>(),
    );
    // In catalog order, the drive-mode expectations last.
    let invariants: Vec<(&str, &str)> = InvariantId::ALL
        .iter()
        .filter(|id| invariants.contains(id))
        .map(|id| (id.as_str(), id.as_str()))
        .collect();
    select(out, "invariants", "Invariant", &invariants);
    let capabilities: Vec<(&str, &str)> = capabilities
        .iter()
        .map(|c| (c.as_str(), c.as_str()))
        .collect();
    select(out, "capabilities", "Capability", &capabilities);
    let _ = writeln!(
        out,
        "<output id=\"shown\" aria-live=\"polite\">{n} of {n} scenarios shown</output>\n</div>\n\
         <table>\n<thead><tr><th scope=\"col\">Status</th><th scope=\"col\">Scenario</th><th scope=\"col\">Invariants broken, or why</th><th scope=\"col\">Needs</th><th scope=\"col\">Time</th></tr></thead>\n<tbody>",
        n = report.scenarios.len()
    );
    for (index, s) in report.scenarios.iter().enumerate() {
        row(out, page, index, s, facts.get(s.id.as_str()).copied());
    }
    let _ = writeln!(out, "</tbody>\n</table>\n</section>");
}

fn select(out: &mut String, filter: &str, label: &str, options: &[(&str, &str)]) {
    let _ = write!(
        out,
        "<label>{label} <select data-filter=\"{filter}\"><option value=\"\">all</option>"
    );
    for (value, text) in options {
        let _ = write!(
            out,
            "<option value=\"{}\">{}</option>",
            escape(value),
            escape(text)
        );
    }
    let _ = writeln!(out, "</select></label>");
}

fn numbers(edges: &[usize]) -> String {
    edges
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn row(
    out: &mut String,
    page: &Page<'_>,
    index: usize,
    s: &ScenarioReport,
    scenario: Option<&Scenario>,
) {
    let class = status_class(s);
    let mut invariants: Vec<&str> = s.violations.iter().map(|v| v.invariant.as_str()).collect();
    if let Some(scenario) = scenario {
        invariants.extend(scenario.exercises.iter().map(|i| i.as_str()));
    }
    let invariants: BTreeSet<&str> = invariants.into_iter().collect();
    let requires: Vec<&str> = scenario
        .map(|sc| sc.requires.iter().map(|c| c.as_str()).collect())
        .unwrap_or_default();
    let trace = page.traces.get(&s.id);
    let expandable =
        !s.violations.is_empty() || !s.notes.is_empty() || s.stderr.is_some() || trace.is_some();
    let broken: BTreeSet<&str> = s.violations.iter().map(|v| v.invariant.as_str()).collect();
    let why = if broken.is_empty() {
        s.reason.clone().unwrap_or_default()
    } else {
        broken.into_iter().collect::<Vec<_>>().join(", ")
    };
    // A check (no start time) has no durations.
    let time = if page.report.started_at.is_empty()
        || (s.status == Status::Skipped && s.duration_seconds == 0.0)
    {
        String::new()
    } else {
        format!("{:.3} s", s.duration_seconds)
    };
    let _ = write!(
        out,
        "<tr id=\"s-{index}\" class=\"scenario {class}{}\" data-name=\"{}\" data-status=\"{class}\" data-invariants=\"{}\" data-capabilities=\"{}\" data-edges=\"{}\" data-code-mode-edges=\"{}\">\
         <td><span class=\"status\">{}</span></td><td>",
        if expandable { " expandable" } else { "" },
        escape(&s.id),
        escape(&invariants.into_iter().collect::<Vec<_>>().join(" ")),
        escape(&requires.join(" ")),
        numbers(&s.edges),
        numbers(&s.code_mode_edges),
        status_tag(s),
    );
    if expandable {
        let _ = write!(
            out,
            "<button type=\"button\" class=\"expand id\" aria-expanded=\"false\" aria-controls=\"d-{index}\">{}</button>",
            escape(&s.id)
        );
    } else {
        let _ = write!(out, "<span class=\"id\">{}</span>", escape(&s.id));
    }
    let _ = writeln!(
        out,
        "</td><td class=\"why\">{}</td><td>{}</td><td class=\"time\">{time}</td></tr>",
        escape_text(&why),
        escape(&requires.join(", ")),
    );
    if expandable {
        let _ = writeln!(
            out,
            "<tr id=\"d-{index}\" class=\"detail\" hidden><td colspan=\"5\">"
        );
        detail(out, page, index, s, trace);
        let _ = writeln!(out, "</td></tr>");
    }
}

fn detail(
    out: &mut String,
    page: &Page<'_>,
    index: usize,
    s: &ScenarioReport,
    trace: Option<&TraceExcerpt>,
) {
    if let Some(reason) = &s.baseline_reason {
        let _ = writeln!(out, "<p>Expected by the baseline: {}</p>", escape(reason));
    }
    if let Some(reason) = s.reason.as_ref().filter(|_| s.violations.is_empty()) {
        let _ = writeln!(out, "<p>{}</p>", escape_text(reason));
    }
    let lines_shown: BTreeSet<usize> = trace
        .map(|t| t.lines.iter().map(|(n, _)| *n).collect())
        .unwrap_or_default();
    let line_link = |n: usize| {
        if lines_shown.contains(&n) {
            format!("<a href=\"#t-{index}-{n}\">{n}</a>")
        } else {
            n.to_string()
        }
    };
    if !s.violations.is_empty() {
        let _ = writeln!(out, "<ol class=\"violations\">");
        for v in &s.violations {
            violation(out, page, v, &line_link);
        }
        let _ = writeln!(out, "</ol>");
    }
    for note in &s.notes {
        let lines: Vec<String> = note.lines.iter().map(|&n| line_link(n)).collect();
        let _ = writeln!(
            out,
            "<p class=\"muted\">note{}: {}</p>",
            if lines.is_empty() {
                String::new()
            } else {
                format!(" (line {})", lines.join(", "))
            },
            escape_text(&note.message)
        );
    }
    if let Some(stderr) = &s.stderr {
        let _ = writeln!(
            out,
            "<p>The adapter's stderr (its tail):</p>\n<pre class=\"stderr\">{}</pre>",
            escape_text(stderr)
        );
    }
    if let Some(ctx) = page.rerun {
        let _ = writeln!(
            out,
            "<p class=\"muted\">rerun: <code>{}</code></p>",
            escape(&ctx.rerun_command(&s.id))
        );
    }
    if let Some(trace) = trace {
        let witnesses: BTreeSet<usize> = s
            .violations
            .iter()
            .flat_map(|v| v.lines.iter().copied())
            .collect();
        let _ = writeln!(
            out,
            "<p class=\"muted\">The trace{}: {} line(s){}; the witness lines are marked.</p>\n<ol class=\"trace\" aria-label=\"trace of {}\">",
            s.trace
                .as_ref()
                .map(|p| format!(" ({})", escape(p)))
                .unwrap_or_default(),
            trace.total,
            if trace.lines.len() < trace.total {
                ", the lines around the witnesses shown"
            } else {
                ""
            },
            escape(&s.id)
        );
        let mut previous = 0;
        for (n, text) in &trace.lines {
            if *n > previous + 1 {
                let _ = writeln!(
                    out,
                    "<li class=\"gap\"><span class=\"ln\">⋮</span><span>{} line(s) not shown</span></li>",
                    n - previous - 1
                );
            }
            previous = *n;
            let witness = witnesses.contains(n);
            let _ = writeln!(
                out,
                "<li id=\"t-{index}-{n}\"{}><span class=\"ln\">{n}</span><code>{}</code></li>",
                if witness { " class=\"witness\"" } else { "" },
                escape_text(text)
            );
        }
        if trace.total > previous {
            let _ = writeln!(
                out,
                "<li class=\"gap\"><span class=\"ln\">⋮</span><span>{} line(s) not shown</span></li>",
                trace.total - previous
            );
        }
        let _ = writeln!(out, "</ol>");
    }
}

fn violation(
    out: &mut String,
    page: &Page<'_>,
    v: &ViolationReport,
    line_link: &dyn Fn(usize) -> String,
) {
    let level = v.level.to_string();
    let step = v.step.as_ref().map(|step| {
        let graph = match step.graph {
            GraphName::Pipeline => "pipeline",
            GraphName::CodeMode => "code-mode",
        };
        let what = if step.refused {
            format!(
                "{} --> {}, a step the {} graph does not have",
                step.from,
                step.to,
                if step.graph == GraphName::Pipeline {
                    "stage"
                } else {
                    "Code Mode"
                }
            )
        } else if step.edge.is_some() {
            format!("{} --> {}", step.from, step.to)
        } else {
            format!("at {}", step.to)
        };
        (
            format!(
                " data-step-graph=\"{graph}\" data-step-from=\"{}\" data-step-to=\"{}\"{}",
                step.from,
                step.to,
                step.edge
                    .map(|e| format!(" data-step-edge=\"{e}\""))
                    .unwrap_or_default()
            ),
            what,
        )
    });
    let lines: Vec<String> = v.lines.iter().map(|&n| line_link(n)).collect();
    let mut place = Vec::new();
    if !lines.is_empty() {
        place.push(format!("line {}", lines.join(", ")));
    }
    if let Some(call) = &v.call {
        place.push(format!("call {}", escape(call)));
    }
    if let Some((_, what)) = &step {
        place.push(format!("step {}", escape(what)));
    }
    let _ = writeln!(
        out,
        "<li class=\"violation {}\"{}><a href=\"{}invariants.md#{id}\">{id}</a><span class=\"level\">{level}</span>{}\
         <span class=\"statement\">{}</span><span class=\"where\">{}</span></li>",
        level.to_lowercase(),
        step.as_ref()
            .map(|(attrs, _)| attrs.as_str())
            .unwrap_or_default(),
        escape(page.docs),
        escape_text(&v.message),
        escape_text(invariant(v.invariant).statement),
        place.join("; "),
        id = v.invariant.as_str(),
    );
}

/// Where `docs/` is seen from a report written to `report`: the nearest `docs/invariants.md` in
/// the report's directory or above it (a checkout of this repository), else `docs/` beside it.
pub fn docs_base(report: &std::path::Path) -> String {
    let dir = report
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let Ok(dir) = dir.canonicalize() else {
        return "docs/".to_owned();
    };
    for (up, ancestor) in dir.ancestors().enumerate() {
        if ancestor.join("docs").join("invariants.md").is_file() {
            return format!("{}docs/", "../".repeat(up));
        }
    }
    "docs/".to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use tep_reference::mutant::Mutant;

    use super::*;
    use crate::report::{self, RunContext};
    use crate::runner::{BuiltinReference, RunOptions, run_suite};
    use crate::scenario::corpus;

    const HOSTILE: &str = "</script><script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">";

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape(HOSTILE),
            "&lt;/script&gt;&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;\
             &lt;img src=x onerror=&quot;document.title=&#39;pwned&#39;&quot;&gt;"
        );
        assert_eq!(escape("a & b"), "a &amp; b");
        // In an element's content quotes need no escaping; the rest does.
        assert_eq!(
            escape_text(HOSTILE),
            "&lt;/script&gt;&lt;script&gt;document.title='pwned'&lt;/script&gt;\
             &lt;img src=x onerror=\"document.title='pwned'\"&gt;"
        );
        assert_eq!(escape_text("\u{1b}[1m"), "\u{fffd}[1m");
        // The ANSI escapes of an adapter's stderr, and NUL, are not carried; tabs and newlines are.
        assert_eq!(
            escape("\u{1b}[31mred\0\tx\n"),
            "\u{fffd}[31mred\u{fffd}\tx\n"
        );
        assert!(matches!(escape("plain text"), Cow::Borrowed(_)));
    }

    #[test]
    fn an_edge_is_shaded_by_its_share_of_the_most_taken() {
        let coverage = |counts: &[usize]| EdgeCoverage {
            taken: counts.iter().filter(|&&n| n > 0).count(),
            total: counts.len(),
            ratio: 0.0,
            missing: Vec::new(),
            edges: counts
                .iter()
                .map(|&scenarios| report::EdgeTaken {
                    edge: String::new(),
                    from: NodeId::Model,
                    to: NodeId::ToolCall,
                    scenarios,
                })
                .collect(),
        };
        assert_eq!(
            shades(&coverage(&[4, 0, 1, 2])),
            [(4, 1.0), (0, 0.0), (1, 0.25), (2, 0.5)]
        );
        // Nothing taken: nothing shaded (and no division by zero).
        assert_eq!(shades(&coverage(&[0, 0])), [(0, 0.0), (0, 0.0)]);
    }

    #[test]
    fn a_long_trace_is_shown_around_its_witnesses() {
        let short: String = (1..=5).map(|n| format!("line {n}\n")).collect();
        let excerpt = TraceExcerpt::of(&short, &BTreeSet::from([3]));
        assert_eq!(excerpt.total, 5);
        assert_eq!(excerpt.lines.len(), 5);
        assert_eq!(excerpt.lines[2], (3, "line 3".to_owned()));
        let long: String = (1..=2000).map(|n| format!("line {n}\r\n")).collect();
        let excerpt = TraceExcerpt::of(&long, &BTreeSet::from([400, 1500]));
        let shown: Vec<usize> = excerpt.lines.iter().map(|(n, _)| *n).collect();
        let expected: Vec<usize> = (1..=HEAD_LINES)
            .chain(400 - CONTEXT_LINES..=400 + CONTEXT_LINES)
            .chain(1500 - CONTEXT_LINES..=1500 + CONTEXT_LINES)
            .collect();
        assert_eq!(excerpt.total, 2000);
        assert_eq!(shown, expected);
        assert_eq!(excerpt.lines[HEAD_LINES + CONTEXT_LINES].1, "line 400");
    }

    #[test]
    fn each_picture_names_every_node_and_edge_of_its_graph() {
        for revision in Revision::ALL {
            for kind in [GraphKind::Pipeline, GraphKind::CodeMode] {
                let graph = match kind {
                    GraphKind::Pipeline => StageGraph::of(revision),
                    GraphKind::CodeMode => StageGraph::code_mode(revision),
                };
                let svg = picture(revision, kind);
                for (n, edge) in graph.edges().iter().enumerate() {
                    let group = format!(
                        "<g class=\"edge\" data-edge=\"{n}\" data-from=\"{}\" data-to=\"{}\">",
                        edge.from, edge.to
                    );
                    assert!(svg.contains(&group), "{revision} {kind:?}: {group}");
                }
                assert_eq!(
                    svg.matches("<g class=\"edge\"").count(),
                    graph.edges().len()
                );
                for node in graph.nodes() {
                    let group = format!("<g class=\"node\" data-node=\"{}\">", node.id);
                    assert!(svg.contains(&group), "{revision} {kind:?}: {group}");
                }
            }
        }
    }

    /// A small run of the reference broken by a mutant: a passing, two failing (one of them a
    /// Code Mode scenario) and a skipped scenario, with no time in it.
    fn small_run() -> (JsonReport, BTreeMap<String, TraceExcerpt>, Vec<Scenario>) {
        let corpus = corpus().unwrap();
        let ids = [
            "allow-runs-body",
            "pre-deny-skips-body",
            "code-mode-outer-call-is-ordinary",
            "tools-result-is-awaited-in-rev1",
        ];
        let selected: Vec<Scenario> = corpus
            .iter()
            .filter(|s| ids.contains(&s.id.as_str()))
            .cloned()
            .collect();
        let mut reference = BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]);
        let mut run = run_suite(&mut reference, &selected, &RunOptions::default()).unwrap();
        run.duration = Duration::ZERO;
        for s in &mut run.scenarios {
            s.duration = Duration::ZERO;
        }
        let traces = run
            .scenarios
            .iter()
            .filter(|s| s.status != Status::Passed)
            .filter_map(|s| {
                let jsonl = tep_reference::trace::to_jsonl(s.trace.as_ref()?);
                Some((s.id.clone(), TraceExcerpt::of(&jsonl, &BTreeSet::new())))
            })
            .collect();
        let ctx = context();
        let json = report::json(&run, None, &ctx, "sha256:0123456789abcdef");
        (json, traces, corpus)
    }

    fn context() -> RunContext {
        RunContext {
            started_at: "2025-06-01T10:15:00Z".to_owned(),
            rerun: ["tep", "run", "--mutant", "run-body-after-deny"]
                .map(String::from)
                .to_vec(),
            traces: BTreeMap::new(),
            run_dir: None,
        }
    }

    fn page<'a>(
        report: &'a JsonReport,
        traces: &'a BTreeMap<String, TraceExcerpt>,
        corpus: &'a [Scenario],
        ctx: &'a RunContext,
    ) -> Page<'a> {
        Page {
            title: "tep run",
            report,
            traces,
            corpus,
            docs: "../docs/",
            rerun: Some(ctx),
        }
    }

    /// The start tag of the group of edge `n` of the figure `slug`.
    fn edge_tag<'h>(html: &'h str, slug: &str, n: usize) -> &'h str {
        let figure = &html[html
            .find(&format!("<figure class=\"graph\" id=\"graph-{slug}\""))
            .unwrap()..];
        let start = figure.find(&format!(" data-edge=\"{n}\" ")).unwrap();
        let start = figure[..start].rfind('<').unwrap();
        &figure[start..start + figure[start..].find('>').unwrap()]
    }

    #[test]
    fn each_edge_carries_its_count_and_the_failing_steps_are_marked() {
        let (report, traces, corpus) = small_run();
        let ctx = context();
        let html = render(&page(&report, &traces, &corpus, &ctx));
        let mut untaken = 0;
        for (slug, coverage) in [
            ("pipeline", &report.coverage.edges),
            ("code-mode", &report.coverage.code_mode_edges),
        ] {
            for (n, edge) in coverage.edges.iter().enumerate() {
                let tag = edge_tag(&html, slug, n);
                assert!(
                    tag.contains(&format!("data-count=\"{}\"", edge.scenarios)),
                    "{tag}"
                );
                assert_eq!(tag.contains("untaken"), edge.scenarios == 0, "{tag}");
                assert!(tag.contains("tabindex=\"0\" role=\"button\""), "{tag}");
                untaken += usize::from(edge.scenarios == 0);
            }
        }
        assert!(untaken > 0, "a small run leaves edges untaken");
        // model --> toolCall: every scenario that ran took it, the most taken edge.
        let first = edge_tag(&html, "pipeline", 0);
        assert!(
            first.contains("data-count=\"3\"") && first.contains("--share: 1.000"),
            "{first}"
        );
        // The mutant runs denied calls' bodies: `denied` then `around`, a step the stage graph
        // does not have, drawn between the two boxes; both nodes are marked.
        assert!(html.contains("<g class=\"node failing\" data-node=\"denied\">"));
        assert!(html.contains("<g class=\"node failing\" data-node=\"around\">"));
        assert!(
            html.contains("<g class=\"refused-step\" data-from=\"denied\" data-to=\"around\">")
        );
        assert!(!html.contains("<g class=\"node failing\" data-node=\"model\">"));
        // The failing row expands to its trace, the witness lines marked, the violation linked.
        assert!(html.contains("<li class=\"violation must\" data-step-graph=\"pipeline\" data-step-from=\"denied\" data-step-to=\"around\"><a href=\"../docs/invariants.md#deny-skips-body\">deny-skips-body</a>"));
        assert!(html.contains("class=\"witness\""));
    }

    #[test]
    fn nothing_from_a_run_becomes_markup() {
        let (mut report, mut traces, corpus) = small_run();
        report.implementation.name = HOSTILE.to_owned();
        let failing = report
            .scenarios
            .iter_mut()
            .find(|s| s.status == Status::Failed)
            .unwrap();
        let id = failing.id.clone();
        failing.violations[0].message = HOSTILE.to_owned();
        failing.stderr = Some(HOSTILE.to_owned());
        failing.reason = Some(HOSTILE.to_owned());
        failing.trace = Some(HOSTILE.to_owned());
        failing.violations[0].call = Some(HOSTILE.to_owned());
        let trace = traces.get_mut(&id).unwrap();
        trace.lines[0].1 = format!("{{\"kind\":\"stage\",\"args\":{HOSTILE:?}}}");
        // A scenario named by a hostile trace file (tep check names its row after the file).
        report.scenarios[0].id = HOSTILE.to_owned();
        let ctx = context();
        let html = render(&page(&report, &traces, &corpus, &ctx));
        assert_eq!(
            html.matches("<script").count(),
            1,
            "only the page's own script"
        );
        // The tag stays text (its `onerror="..."` with it: text, not an attribute).
        assert!(!html.contains("<img"));
        assert!(html.contains(&*escape(HOSTILE)));
        assert!(html.contains(&*escape_text(HOSTILE)));
        // And only that script may run: the policy names it by its hash.
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
        assert!(html.contains(&format!("script-src 'sha256-{hash}'\">")));
        assert!(html.contains(&format!("<script>{SCRIPT}</script>")));
    }

    /// The page with the docs' pictures' own drawing (paths, arrowheads, labels, boxes), the
    /// stylesheet and the script left out: they are the committed SVGs (checked by `cargo xtask
    /// docs --check` and xtask's svg_layout tests) and the files beside this module. What is
    /// left is what the report writes.
    fn without_constants(html: &str) -> String {
        let mut out = String::new();
        let mut in_svg = false;
        for line in html.lines() {
            let element = line.trim_start();
            if element.starts_with("<svg ") {
                in_svg = true;
            }
            let keep = !in_svg
                || [
                    "<svg ",
                    "</svg>",
                    "<g class=\"edge",
                    "<g class=\"node",
                    "<title>",
                    "<g class=\"refused",
                    "<defs><marker id=\"pipeline-refused",
                ]
                .iter()
                .any(|p| element.starts_with(p));
            if keep {
                out.push_str(line);
                out.push('\n');
            }
            if element.starts_with("</svg>") {
                in_svg = false;
            }
        }
        out.replace(STYLE, "/* report.css */\n")
            .replace(SCRIPT, "/* report.js */")
    }

    #[test]
    fn the_page_of_a_small_run() {
        let (report, traces, corpus) = small_run();
        let ctx = context();
        let html = render(&page(&report, &traces, &corpus, &ctx));
        insta::assert_snapshot!(without_constants(&html));
    }

    #[test]
    fn the_docs_are_found_above_the_report() {
        let root = std::env::temp_dir().join(format!("tep-html-docs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let outside = root.join("a/b/report.html");
        assert_eq!(docs_base(&outside), "docs/", "no docs/invariants.md yet");
        std::fs::write(root.join("docs/invariants.md"), "# Invariant catalog\n").unwrap();
        assert_eq!(docs_base(&outside), "../../docs/");
        assert_eq!(docs_base(&root.join("report.html")), "docs/");
        let _ = std::fs::remove_dir_all(&root);
    }
}
