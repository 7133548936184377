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

use base64::Engine as _;
use sha2::{Digest, Sha256};
use tep_model::graph::{GraphKind, NodeId, Revision, StageGraph};
use tep_model::trace::ObservationLevel;

use crate::outcome::Status;
use crate::report::{
    EdgeCoverage, GraphName, InvariantCheck, JsonReport, RunContext, ScenarioReport,
    ViolationReport,
};
use crate::scenario::Scenario;
use tep_check::StepRecord;
use tep_check::invariant;
use tep_check::invariants::{CheckKind, InvariantId};

pub mod compare;
pub mod matrix;
mod path;
mod results;

pub use path::{TakenPath, paths};
use path::{is_line, line_steps};

pub use compare::Comparison;
pub use results::docs_page;

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

#[cfg(test)]
use crate::excerpt::{CONTEXT_LINES, HEAD_LINES};
pub use crate::excerpt::{FULL_TRACE_LINES, TraceExcerpt};

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
    /// Each scenario's path: every record's step on its call's graph, in trace order.
    pub paths: &'a BTreeMap<String, TakenPath>,
    /// Where the project publishes `docs/` (`--docs-url`): the embedded invariants link there.
    pub docs_url: Option<&'a str>,
    /// How to rerun a scenario alone, for a run.
    pub rerun: Option<&'a RunContext>,
    /// What changed since an earlier run (`--compare`).
    pub compare: Option<&'a Comparison>,
}

impl Page<'_> {
    /// What took the graph's edges: a run's scenarios, or a check's traces (`tep check` has no
    /// scenarios, and no rerun).
    pub(crate) fn takers(&self) -> (&'static str, &'static str) {
        if self.rerun.is_some() {
            ("scenario", "scenarios")
        } else {
            ("trace", "traces")
        }
    }
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
pub(crate) fn status_class(s: &ScenarioReport) -> &'static str {
    if s.expected_failure {
        "xfail"
    } else {
        s.status.as_str()
    }
}

pub(crate) fn status_tag(s: &ScenarioReport) -> &'static str {
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

/// What one graph marks: the steps the graph refused to a failing scenario (red, with both
/// boxes), the stages where another invariant was broken (outlined), and every step of a path
/// that is not one edge (drawn box to box: refused, or through stages the level implies).
#[derive(Debug, Default)]
struct Marks {
    refused_nodes: BTreeSet<NodeId>,
    violated_nodes: BTreeSet<NodeId>,
    lines: BTreeMap<(NodeId, NodeId), Line>,
}

#[derive(Debug, Clone, Copy)]
struct Line {
    refused: bool,
    /// A failing scenario's violation claims it (drawn before any scenario is selected).
    failing: bool,
}

/// Whether a violation is about the trace (a place on the graph) rather than about the
/// scenario's expected outcome, which is shown on its call and never as a graph fault.
pub(crate) fn on_the_graph(v: &ViolationReport) -> bool {
    invariant(v.invariant).check != CheckKind::Expectation
}

fn marks(page: &Page<'_>, graph: GraphName) -> Marks {
    let mut marks = Marks::default();
    let steps = page
        .report
        .scenarios
        .iter()
        .filter(|s| s.status == Status::Failed)
        .flat_map(|s| &s.violations)
        .filter(|v| on_the_graph(v))
        .filter_map(|v| v.step.as_ref())
        .filter(|step| step.graph == graph);
    for step in steps {
        if step.refused {
            marks.refused_nodes.extend([step.from, step.to]);
            marks.lines.insert(
                (step.from, step.to),
                Line {
                    refused: true,
                    failing: true,
                },
            );
        } else {
            marks.violated_nodes.insert(step.to);
        }
    }
    let path_steps = page
        .paths
        .values()
        .flat_map(|p| &p.steps)
        .filter(|step| GraphName::from(step.graph) == graph && is_line(step));
    for step in path_steps {
        marks.lines.entry((step.from, step.to)).or_insert(Line {
            refused: step.refused,
            failing: false,
        });
    }
    marks
}

/// How many of the invariants that apply the run could judge, from its report.
fn checkable(report: &JsonReport) -> tep_check::Checkable {
    let count = |c: InvariantCheck| report.invariants.iter().filter(|i| i.status == c).count();
    let applicable = report.invariants.len() - count(InvariantCheck::NotApplicable);
    tep_check::Checkable::new(
        count(InvariantCheck::Checked),
        count(InvariantCheck::PartlyCheckable),
        applicable,
    )
}

/// The page.
pub fn render(page: &Page<'_>) -> String {
    let report = page.report;
    let mut out = String::with_capacity(256 * 1024);
    let checkable = checkable(report);
    let few = format!(
        "{} of {} invariants checkable, no violation",
        checkable.checked + checkable.partly,
        checkable.applicable
    );
    let verdict = if report.interrupted {
        ("interrupted", "interrupted")
    } else if report.conformant && !checkable.most() {
        // A pass where the level saw little says how little (a session log: about 1 in 5),
        // in tep check's words, never a plain green "conformant".
        ("conformant-few", few.as_str())
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
        "<a class=\"skip\" href=\"#results\">Skip to the results</a>\n<header>\n<h1><span>{}</span> <span class=\"verdict {}\">{}</span></h1>\n\
         <p class=\"sub\">{} against {}, observation level {}{}</p>\n</header>\n<main>",
        escape(page.title),
        verdict.0,
        verdict.1,
        escape(&implementation_line(report)),
        report.spec,
        report.observation,
        if report.strict { ", --strict" } else { "" }
    );
    results::results(&mut out, page);
    graphs(&mut out, page);
    scenarios(&mut out, page);
    results::invariants(&mut out, report, page.docs_url);
    // The list of an edge's takers: placed at the edge when one is selected.
    let _ = writeln!(
        out,
        "<div id=\"edge-panel\" class=\"panel\" role=\"dialog\" aria-live=\"polite\" data-one=\"{one}\" data-many=\"{many}\" hidden><button type=\"button\" class=\"close\" aria-label=\"close the edge's {many}\">close</button><h3></h3><p></p><ul></ul></div>",
        one = page.takers().0,
        many = page.takers().1
    );
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

pub(crate) fn implementation_line(report: &JsonReport) -> String {
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

fn graphs(out: &mut String, page: &Page<'_>) {
    let report = page.report;
    let (one, many) = page.takers();
    // Below `full` some edges are neither taken nor missing: the level cannot see them.
    let unseen = if report.observation < ObservationLevel::Full {
        format!(
            "<span><span class=\"swatch unseen\"></span>not seen at level {}: whether it was taken, this level does not record</span>",
            report.observation
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "<section id=\"graphs\" aria-labelledby=\"graphs-title\">\n\
         <h2 id=\"graphs-title\">The run on the {} stage graph</h2>\n\
         <p class=\"legend\"><span><span class=\"swatch heat\"></span>taken: darker and wider, the more {many} took it</span>\
         <span><span class=\"swatch untaken\"></span>taken by no {one}</span>{unseen}\
         <span><span class=\"swatch failing\"></span>a step the graph does not have, refused to a failing {one}</span>\
         <span><span class=\"swatch violated\"></span>a stage where an invariant was broken</span>\
         <span><span class=\"swatch implied\"></span>edges and stages the observation level implies, not recorded</span></p>\n\
         <p class=\"muted\">Click an edge (or Tab to it and press Enter) to list the {many} that took it; select a {one} to draw its path. Zoom with the buttons, Ctrl and the wheel, or + and − on a focused graph; drag to pan.</p>\n\
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
        // The figure's count is the report's: the same number as the results, the JSON, the
        // JUnit and the terminal.
        let caption = format!(
            "{title}: {} of {} edges taken{}",
            coverage.taken,
            coverage.total,
            below_full(report, coverage)
        );
        let _ = writeln!(
            out,
            "<div class=\"graph-home\" id=\"home-{slug}\"><p class=\"moved muted\" hidden>The graph is drawn beside the selected {one}, <a href=\"#\"></a>.</p>\n\
             <figure class=\"graph\" id=\"graph-{slug}\" data-graph=\"{slug}\" data-title=\"{}\" data-caption=\"{}\" data-taken=\"{}\" data-total=\"{}\">\n\
             <figcaption><span class=\"caption\">{}</span>\
             <span class=\"zoom\" role=\"group\" aria-label=\"zoom\"><button type=\"button\" data-zoom=\"out\" aria-label=\"zoom out\">−</button>\
             <button type=\"button\" data-zoom=\"fit\">fit</button><button type=\"button\" data-zoom=\"one\">100%</button>\
             <button type=\"button\" data-zoom=\"in\" aria-label=\"zoom in\">+</button>\
             <button type=\"button\" class=\"unfocus\" hidden>show every scenario</button></span></figcaption>\n\
             <div class=\"viewport\" tabindex=\"0\" aria-label=\"{}: + and − zoom, arrows pan\">",
            escape(&title),
            escape(&caption),
            coverage.taken,
            coverage.total,
            escape(&caption),
            escape(&title),
        );
        out.push_str(&drawing(
            picture(report.spec, kind),
            &Drawn {
                graph,
                slug,
                coverage,
                marks: &marks(page, name),
                title: &title,
                level: report.observation,
                takers: page.takers(),
            },
        ));
        let _ = writeln!(out, "</div>\n</figure>\n</div>");
    }
    let _ = writeln!(out, "</div>\n</section>");
}

/// Below `full`, how the figure's count splits: observed, implied, and the edges not seen.
fn below_full(report: &JsonReport, coverage: &EdgeCoverage) -> String {
    if report.observation >= ObservationLevel::Full {
        return String::new();
    }
    format!(
        " ({} observed, {} implied; {} not seen at level {})",
        coverage.taken - coverage.implied,
        coverage.implied,
        coverage.unseen.len(),
        report.observation
    )
}

/// What one graph's drawing shows.
struct Drawn<'a> {
    graph: &'a StageGraph,
    slug: &'a str,
    coverage: &'a EdgeCoverage,
    marks: &'a Marks,
    title: &'a str,
    /// The run's level: what an edge no trace took means.
    level: ObservationLevel,
    /// What took the edges ([`Page::takers`]).
    takers: (&'static str, &'static str),
}

/// What an edge's drawing says of it: its classes and its description.
fn edge_state(drawn: &Drawn<'_>, n: usize, label: &str, count: usize) -> (String, String) {
    let (one, many) = drawn.takers;
    let implied = drawn.coverage.edges.get(n).map_or(0, |e| e.implied);
    let mut classes = String::from("edge");
    let taken = if count > 0 {
        if implied == count {
            classes.push_str(" implied-edge");
        }
        let by = if count == 1 { one } else { many };
        match implied {
            0 => format!("taken by {count} {by}"),
            i if i == count => format!("implied by the records of {count} {by}, not recorded"),
            i => format!("taken by {count} {by} ({i} only implied)"),
        }
    } else if drawn.coverage.unseen.iter().any(|u| u == label) {
        classes.push_str(" unseen");
        format!(
            "not seen at level {}: this level does not record it",
            drawn.level
        )
    } else {
        classes.push_str(" untaken");
        format!("taken by no {one}")
    };
    (classes, taken)
}

/// The docs' picture of `graph`, with each edge's count and shade, the failing steps marked,
/// every edge focusable and described, and its ids made unique in the page.
fn drawing(svg: &str, drawn: &Drawn<'_>) -> String {
    let Drawn {
        graph,
        slug,
        coverage,
        marks,
        title,
        ..
    } = *drawn;
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
            let (classes, taken) = edge_state(drawn, n, &label, count);
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
            let class = match current_node {
                Some(n) if marks.refused_nodes.contains(&n) => Some("node failing"),
                Some(n) if marks.violated_nodes.contains(&n) => Some("node violated"),
                _ => None,
            };
            if let Some(class) = class {
                let _ = writeln!(out, "  <g class=\"{class}\" data-node=\"{}\">", escape(id));
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
    out.replace(&refused_placeholder(slug), &step_lines(slug, marks, &boxes))
}

fn refused_placeholder(slug: &str) -> String {
    format!("<!-- refused steps of {slug} -->\n")
}

/// The lines of the steps that are not one edge, from box to box, with an arrowhead: dashed
/// and red for a step the graph does not have, dotted for stages the level implies.
fn step_lines(slug: &str, marks: &Marks, boxes: &BTreeMap<NodeId, [f64; 4]>) -> String {
    if marks.lines.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "  <defs><marker id=\"{slug}-refused-head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path class=\"refused-head\" d=\"M 0 0 L 10 5 L 0 10 z\"/></marker>\
         <marker id=\"{slug}-implied-head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path class=\"implied-head\" d=\"M 0 0 L 10 5 L 0 10 z\"/></marker></defs>\n"
    );
    for ((from, to), line) in &marks.lines {
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
            "  <g class=\"step-line {kind}{failing}\" data-from=\"{from}\" data-to=\"{to}\"><title>{from} --> {to}: {what}</title><path class=\"{kind}\" d=\"M {:.2},{:.2} L {:.2},{:.2}\" marker-end=\"url(#{slug}-{kind}-head)\"/></g>",
            x1 + dx * s,
            y1 + dy * s,
            x1 + dx * e,
            y1 + dy * e,
            kind = if line.refused { "refused" } else { "implied" },
            failing = if line.failing { " failing" } else { "" },
            what = if line.refused {
                "a step the graph does not have"
            } else {
                "through stages the observation level implies"
            },
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
    let taken = page.paths.get(&s.id);
    let path = taken.map(|p| p.steps.as_slice()).unwrap_or_default();
    // The edges the report counts for it, observed or implied: the figure's counts are theirs.
    let union = |a: &[usize], b: &[usize]| -> Vec<usize> {
        a.iter()
            .chain(b)
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let edges = (
        union(&s.edges, &s.implied_edges),
        union(&s.code_mode_edges, &s.implied_code_mode_edges),
    );
    // Every scenario with a path can be selected, a passing one too: its path is drawn beside it.
    let expandable = !s.violations.is_empty()
        || !s.notes.is_empty()
        || s.stderr.is_some()
        || trace.is_some()
        || !edges.0.is_empty()
        || !edges.1.is_empty();
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
        "<tr id=\"s-{index}\" class=\"scenario {class}{}\" data-name=\"{}\" data-status=\"{class}\" data-invariants=\"{}\" data-capabilities=\"{}\" data-edges=\"{}\" data-code-mode-edges=\"{}\" data-steps=\"{}\" data-code-mode-steps=\"{}\">\
         <td><span class=\"status\">{}</span></td><td>",
        if expandable { " expandable" } else { "" },
        escape(&s.id),
        escape(&invariants.into_iter().collect::<Vec<_>>().join(" ")),
        escape(&requires.join(" ")),
        numbers(&edges.0),
        numbers(&edges.1),
        line_steps(path, GraphName::Pipeline),
        line_steps(path, GraphName::CodeMode),
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
            "<tr id=\"d-{index}\" class=\"detail\" hidden><td colspan=\"5\"><div class=\"with-graph\"><div class=\"beside\"></div><div class=\"about-scenario\">"
        );
        detail(out, page, index, s, trace);
        let _ = writeln!(out, "</div></div></td></tr>");
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
    if s.violations.is_empty() && s.reason.is_none() && trace.is_none() {
        let _ = writeln!(
            out,
            "<p class=\"muted\">{}: the graphs beside draw the path its trace took.</p>",
            match s.status {
                Status::Passed => "Passed",
                Status::Warned => "Warned",
                Status::Failed => "Failed",
                Status::Skipped => "Skipped",
                Status::Errored => "Errored",
            }
        );
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
            violation(out, v, &line_link);
        }
        let _ = writeln!(out, "</ol>");
    }
    off_the_graph(out, page.paths.get(&s.id).map(|p| &p.steps), &line_link);
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

/// The steps of a scenario's path that are not one edge, with their lines: what the graph
/// does not have, and where the observation level implies stages it does not record.
fn off_the_graph(
    out: &mut String,
    path: Option<&Vec<StepRecord>>,
    line_link: &dyn Fn(usize) -> String,
) {
    let steps: Vec<&StepRecord> = path.into_iter().flatten().filter(|s| is_line(s)).collect();
    if steps.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<p class=\"muted\">Steps that are not one edge of the graph:</p>\n<ul class=\"off-graph\">"
    );
    for step in steps {
        let graph = match step.graph {
            GraphKind::Pipeline => "stage",
            GraphKind::CodeMode => "Code Mode",
        };
        let _ = writeln!(
            out,
            "<li class=\"{}\">line {}: {} --> {}, {}</li>",
            if step.refused { "refused" } else { "implied" },
            line_link(step.line),
            step.from,
            step.to,
            if step.refused {
                format!("a step the {graph} graph does not have")
            } else {
                "through stages the observation level implies (not recorded)".to_owned()
            }
        );
    }
    let _ = writeln!(out, "</ul>");
}

fn violation(out: &mut String, v: &ViolationReport, line_link: &dyn Fn(usize) -> String) {
    let level = v.level.to_string();
    let expectation = !on_the_graph(v);
    let step = v.step.as_ref().filter(|_| !expectation).map(|step| {
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
    if expectation {
        place.push("the scenario's expected outcome, not a step on the graph".to_owned());
    }
    if let Some((_, what)) = &step {
        place.push(format!("step {}", escape(what)));
    }
    let _ = writeln!(
        out,
        "<li class=\"violation {}{}\"{}><a href=\"#invariant={id}\">{id}</a><span class=\"level\">{level}</span>{}\
         <span class=\"statement\">{}</span><span class=\"where\">{}</span></li>",
        level.to_lowercase(),
        if expectation { " expectation" } else { "" },
        step.as_ref()
            .map(|(attrs, _)| attrs.as_str())
            .unwrap_or_default(),
        escape_text(&v.message),
        results::inline_code(invariant(v.invariant).statement),
        place.join("; "),
        id = v.invariant.as_str(),
    );
}

#[cfg(test)]
mod tests;
