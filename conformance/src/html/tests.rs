//! The page's unit tests: escaping, shading, excerpts, the pictures, the marks and paths, and
//! the page of a small run (a snapshot).
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
        implied: 0,
        missing: Vec::new(),
        unseen: Vec::new(),
        edges: counts
            .iter()
            .map(|&scenarios| report::EdgeTaken {
                edge: String::new(),
                from: NodeId::Model,
                to: NodeId::ToolCall,
                scenarios,
                implied: 0,
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
fn small_run() -> (
    JsonReport,
    BTreeMap<String, TraceExcerpt>,
    Vec<Scenario>,
    BTreeMap<String, TakenPath>,
) {
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
            let jsonl = tep_model::trace::to_jsonl(s.trace.as_ref()?);
            Some((s.id.clone(), TraceExcerpt::of(&jsonl, &BTreeSet::new())))
        })
        .collect();
    let ctx = context();
    let json = report::json(&run, None, &ctx, "sha256:0123456789abcdef");
    (json, traces, corpus, paths(&run))
}

fn context() -> RunContext {
    RunContext {
        started_at: "2025-06-01T10:15:00Z".to_owned(),
        rerun: ["tep", "run", "--mutant", "run-body-after-deny"]
            .map(String::from)
            .to_vec(),
        command: [
            "tep",
            "run",
            "--mutant",
            "run-body-after-deny",
            "--html",
            "my report.html",
        ]
        .map(String::from)
        .to_vec(),
        traces: BTreeMap::new(),
        run_dir: None,
        excerpts: BTreeMap::new(),
        subset: true,
        verbose: false,
    }
}

fn page<'a>(
    report: &'a JsonReport,
    traces: &'a BTreeMap<String, TraceExcerpt>,
    corpus: &'a [Scenario],
    paths: &'a BTreeMap<String, TakenPath>,
    ctx: &'a RunContext,
) -> Page<'a> {
    Page {
        title: "tep run",
        report,
        traces,
        corpus,
        paths,
        docs_url: None,
        rerun: Some(ctx),
        compare: None,
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
    let (report, traces, corpus, paths) = small_run();
    let ctx = context();
    let html = render(&page(&report, &traces, &corpus, &paths, &ctx));
    let mut untaken = 0;
    // The figure's counts are the JSON report's, edge for edge.
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
        assert!(html.contains(&format!(
            "data-taken=\"{}\" data-total=\"{}\"",
            coverage.taken, coverage.total
        )));
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
    assert!(html.contains(
        "<g class=\"step-line refused failing\" data-from=\"denied\" data-to=\"around\">"
    ));
    assert!(!html.contains("<g class=\"node failing\" data-node=\"model\">"));
    // The path is the detour the call took: around, toolBody, around, post. The checker holds
    // the call at `denied`, but counts the edges it really took, never `denied --> post`.
    let graph = StageGraph::of(Revision::Rev2);
    let edge = |from, to| graph.edge(from, to).unwrap().0.0;
    let denied_post = edge(NodeId::Denied, NodeId::Post);
    let around_post = edge(NodeId::Around, NodeId::Post);
    let pipeline = &report.coverage.edges;
    assert_eq!(pipeline.edges[denied_post].scenarios, 0);
    assert!(pipeline.missing.contains(&pipeline.edges[denied_post].edge));
    // Every scenario that ran: the allowed calls, and the detour of pre-deny-skips-body.
    assert_eq!(pipeline.edges[around_post].scenarios, 3);
    let detour = report
        .scenarios
        .iter()
        .find(|s| s.id == "pre-deny-skips-body")
        .unwrap();
    assert!(!detour.edges.contains(&denied_post));
    assert!(detour.edges.contains(&around_post));
    // Only the refused step's boxes are red: no edge, and not the expected-outcome
    // witness (tool/result), which is shown on its call.
    assert!(!html.contains("class=\"edge failing"));
    assert_eq!(html.matches("<g class=\"node failing\"").count(), 2);
    assert!(html.contains(
        "<li class=\"violation must expectation\"><a href=\"#invariant=expected-outcome\">"
    ));
    // The failing row expands to its trace, the witness lines marked, the violation linked
    // to its embedded entry.
    assert!(html.contains("<li class=\"violation must\" data-step-graph=\"pipeline\" data-step-from=\"denied\" data-step-to=\"around\"><a href=\"#invariant=deny-skips-body\">deny-skips-body</a>"));
    assert!(html.contains("<article class=\"invariant must\" id=\"inv-deny-skips-body\""));
    assert!(html.contains("class=\"witness\""));
}

#[test]
fn nothing_from_a_run_becomes_markup() {
    let (mut report, mut traces, corpus, paths) = small_run();
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
    let html = render(&page(&report, &traces, &corpus, &paths, &ctx));
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
    let (report, traces, corpus, paths) = small_run();
    let ctx = context();
    let html = render(&page(&report, &traces, &corpus, &paths, &ctx));
    insta::assert_snapshot!(without_constants(&html));
}

/// A passing run whose level could judge few invariants wears a badge that says how few, in
/// tep check's words; one that could judge most says "conformant".
#[test]
fn a_pass_that_could_check_little_says_how_little_in_its_badge() {
    let corpus = corpus().unwrap();
    let allow: Vec<Scenario> = corpus
        .iter()
        .filter(|s| s.id == "allow-runs-body")
        .cloned()
        .collect();
    let badge = |level| {
        let mut reference = BuiltinReference::new(vec![]);
        let options = RunOptions {
            observed: Some(level),
            ..RunOptions::default()
        };
        let run = run_suite(&mut reference, &allow, &options).unwrap();
        let json = report::json(&run, None, &context(), "sha256:0");
        let ctx = context();
        let paths = paths(&run);
        let html = render(&page(&json, &BTreeMap::new(), &corpus, &paths, &ctx));
        let at = html.find("<span class=\"verdict ").unwrap();
        html[at..at + html[at..].find("</span>").unwrap()].to_owned()
    };
    let events = badge(tep_model::trace::ObservationLevel::Events);
    assert!(
        events.starts_with("<span class=\"verdict conformant-few\">")
            && events.ends_with("invariants checkable, no violation"),
        "{events}"
    );
    let full = badge(tep_model::trace::ObservationLevel::Full);
    assert_eq!(full, "<span class=\"verdict conformant\">conformant");
}
