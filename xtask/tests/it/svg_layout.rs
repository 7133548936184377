//! The committed SVG pictures of the stage graphs are laid out for reading (issue 16): read back
//! from the SVG's own geometry (node boxes, edge paths, label boxes), each picture
//!
//! - flows top-down: every edge goes downwards, except the edges that close a cycle of the graph
//!   (found here from the graph definition, not listed by name);
//! - has no edge passing through or running along a box other than its two ends, and no edge
//!   coming back along its own ends;
//! - has at most a few crossings;
//! - has every label beside its edge, on no box and crossed by no other edge.
//!
//! Each picture also names what it draws (the HTML report of `tep run` relies on it): every node
//! is one `<g class="node" data-node="ID">` holding its box and label, every edge one
//! `<g class="edge" data-edge="N" data-from data-to>` holding its path (and label).
//!
//! `docs_are_fresh` (tests/it/docs.rs) keeps the files equal to what `cargo xtask docs` renders.

use std::fmt::Write as _;

use tep_model::graph::{NodeId, Revision, StageGraph};

/// How close an edge may come to a box it does not connect, in SVG units (pixels).
const CLEARANCE: f64 = 4.0;
/// An edge runs along a box when it stays within `ALONG` of it for more than `ALONG_LENGTH`
/// (measured along the edge). Leaving a box straight takes `ALONG`.
const ALONG: f64 = 12.0;
const ALONG_LENGTH: usize = 40;
/// How far apart two arrowheads on one box must be (an arrowhead is about 8 wide).
const ARROWHEAD: f64 = 8.0;
/// How far a label's box may be from its edge.
const LABEL_REACH: f64 = 12.0;
/// Slack for rounding (coordinates are written with two or three decimals).
const EPSILON: f64 = 0.5;

type Point = (f64, f64);

#[derive(Debug, Clone, Copy)]
struct Rect {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
}

impl Rect {
    fn distance(&self, (px, py): Point) -> f64 {
        let dx = (self.x - px).max(px - (self.x + self.width)).max(0.0);
        let dy = (self.y - py).max(py - (self.y + self.height)).max(0.0);
        dx.hypot(dy)
    }
}

/// What a picture shows, in the graph's declaration order.
struct Picture {
    boxes: Vec<Rect>,
    /// Each edge's path, flattened to a polyline.
    paths: Vec<Vec<Point>>,
    labels: Vec<Option<Rect>>,
}

fn number(node: roxmltree::Node<'_, '_>, name: &str) -> f64 {
    node.attribute(name)
        .unwrap_or_else(|| panic!("<{}> has no {name}", node.tag_name().name()))
        .parse()
        .unwrap()
}

fn rect(node: roxmltree::Node<'_, '_>) -> Rect {
    Rect {
        x: number(node, "x"),
        y: number(node, "y"),
        width: number(node, "width"),
        height: number(node, "height"),
    }
}

/// The polyline of an SVG path made of `M`, `L` and `Q` commands (what the renderer writes),
/// each quadratic piece flattened into short chords.
fn polyline(d: &str) -> Vec<Point> {
    let mut points: Vec<Point> = Vec::new();
    let mut tokens = d
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty());
    let read = |tokens: &mut dyn Iterator<Item = &str>| -> Point {
        let x = tokens.next().unwrap().parse().unwrap();
        let y = tokens.next().unwrap().parse().unwrap();
        (x, y)
    };
    while let Some(command) = tokens.next() {
        match command {
            "M" | "L" => points.push(read(&mut tokens)),
            "Q" => {
                let start = *points.last().unwrap();
                let control = read(&mut tokens);
                let end = read(&mut tokens);
                for i in 1..=8 {
                    let t = f64::from(i) / 8.0;
                    let u = 1.0 - t;
                    points.push((
                        u * u * start.0 + 2.0 * u * t * control.0 + t * t * end.0,
                        u * u * start.1 + 2.0 * u * t * control.1 + t * t * end.1,
                    ));
                }
            }
            other => panic!("unexpected path command {other:?} in {d:?}"),
        }
    }
    points
}

/// The words of a label as the picture draws them (the renderer may wrap lines).
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn read_picture(svg: &str, graph: &StageGraph) -> Picture {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let elements: Vec<roxmltree::Node<'_, '_>> =
        doc.descendants().filter(|n| n.is_element()).collect();
    // A node is drawn as a <rect> followed by the <text> of its label.
    let mut boxes = vec![None; graph.nodes().len()];
    for pair in elements.windows(2) {
        let (shape, text) = (pair[0], pair[1]);
        if shape.tag_name().name() != "rect"
            || shape.attribute("data-edge-id").is_some()
            || text.tag_name().name() != "text"
            || text.parent() != shape.parent()
        {
            continue;
        }
        let drawn = words(
            &text
                .children()
                .filter_map(|t| t.text())
                .collect::<Vec<_>>()
                .join(" "),
        );
        let node = graph
            .nodes()
            .iter()
            .position(|n| words(&n.label.plain_lines().join(" ")) == drawn)
            .unwrap_or_else(|| panic!("a box reads {drawn:?}, which labels no node"));
        assert!(boxes[node].is_none(), "two boxes read {drawn:?}");
        boxes[node] = Some(rect(shape));
    }
    let boxes = boxes
        .into_iter()
        .zip(graph.nodes())
        .map(|(b, n)| b.unwrap_or_else(|| panic!("no box for node {}", n.id)))
        .collect();
    let edge_index = |node: roxmltree::Node<'_, '_>| -> Option<usize> {
        node.attribute("data-edge-id")?
            .strip_prefix("edge-")?
            .parse()
            .ok()
    };
    let mut paths = vec![None; graph.edges().len()];
    let mut labels = vec![None; graph.edges().len()];
    for element in &elements {
        let Some(index) = edge_index(*element) else {
            continue;
        };
        match element.tag_name().name() {
            "path" => paths[index] = Some(polyline(element.attribute("d").unwrap())),
            "rect" if element.attribute("data-label-kind") == Some("center") => {
                labels[index] = Some(rect(*element));
            }
            _ => {}
        }
    }
    let paths = paths
        .into_iter()
        .zip(graph.edges())
        .map(|(p, e)| p.unwrap_or_else(|| panic!("no path for {}", e.describe())))
        .collect();
    Picture {
        boxes,
        paths,
        labels,
    }
}

/// The edges that close a cycle: a depth-first walk from the entry, out-edges in declaration
/// order, meets them pointing back to a node on its own path.
fn cycle_closing_edges(graph: &StageGraph) -> Vec<bool> {
    fn walk(
        graph: &StageGraph,
        node: NodeId,
        on_path: &mut Vec<NodeId>,
        seen: &mut Vec<NodeId>,
        closes: &mut [bool],
    ) {
        seen.push(node);
        on_path.push(node);
        for (i, edge) in graph.edges().iter().enumerate() {
            if edge.from != node {
                continue;
            }
            if on_path.contains(&edge.to) {
                closes[i] = true;
            } else if !seen.contains(&edge.to) {
                walk(graph, edge.to, on_path, seen, closes);
            }
        }
        on_path.pop();
    }
    let mut closes = vec![false; graph.edges().len()];
    let mut seen = Vec::new();
    walk(
        graph,
        graph.entry(),
        &mut Vec::new(),
        &mut seen,
        &mut closes,
    );
    for node in graph.nodes() {
        assert!(
            seen.contains(&node.id),
            "{} is not reachable from the entry",
            node.id
        );
    }
    closes
}

/// The polyline resampled every pixel or so, so that distances to boxes can be read off points.
fn dense(path: &[Point]) -> Vec<Point> {
    let mut out = vec![path[0]];
    for pair in path.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let steps = ((b.0 - a.0).hypot(b.1 - a.1)).ceil().max(1.0) as usize;
        for i in 1..=steps {
            let t = i as f64 / steps as f64;
            out.push((a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t));
        }
    }
    out
}

/// Where segments `a` and `b` cross, if they do.
fn intersection(a: (Point, Point), b: (Point, Point)) -> Option<Point> {
    let (p, r) = (a.0, (a.1.0 - a.0.0, a.1.1 - a.0.1));
    let (q, s) = (b.0, (b.1.0 - b.0.0, b.1.1 - b.0.1));
    let denominator = r.0 * s.1 - r.1 * s.0;
    if denominator.abs() < 1e-9 {
        return None;
    }
    let t = ((q.0 - p.0) * s.1 - (q.1 - p.1) * s.0) / denominator;
    let u = ((q.0 - p.0) * r.1 - (q.1 - p.1) * r.0) / denominator;
    ((0.0..=1.0).contains(&t) && (0.0..=1.0).contains(&u)).then_some((p.0 + t * r.0, p.1 + t * r.1))
}

fn distance_to_path(path: &[Point], rect: &Rect) -> f64 {
    dense(path)
        .into_iter()
        .map(|p| rect.distance(p))
        .fold(f64::INFINITY, f64::min)
}

/// What is wrong with a picture, and its counts.
#[derive(Default)]
struct Findings {
    crossings: usize,
    upward: usize,
    intrusions: usize,
    problems: Vec<String>,
}

fn examine(svg: &str, graph: &StageGraph) -> Findings {
    let picture = read_picture(svg, graph);
    let closes = cycle_closing_edges(graph);
    let mut findings = Findings::default();
    for (i, edge) in graph.edges().iter().enumerate() {
        let drawn = DrawnEdge {
            i,
            name: edge.describe(),
            from: node_index(graph, edge.from),
            to: node_index(graph, edge.to),
            path: &picture.paths[i],
        };
        joins_its_boxes(&picture, &drawn, &mut findings);
        // Downwards, unless it closes a cycle.
        let rises = drawn.path.windows(2).any(|w| w[1].1 < w[0].1 - EPSILON);
        if rises {
            findings.upward += 1;
            if !closes[i] {
                let name = &drawn.name;
                findings
                    .problems
                    .push(format!("{name}: runs upwards but closes no cycle"));
            }
        }
        keeps_clear_of_boxes(&picture, graph, &drawn, &mut findings);
        match &picture.labels[i] {
            Some(label) => label_is_placed(&picture, graph, &drawn, label, &mut findings),
            None if edge.label.is_some() => {
                let name = &drawn.name;
                findings
                    .problems
                    .push(format!("{name}: its label is not drawn"));
            }
            None => {}
        }
    }
    arrowheads_do_not_stack(&picture, graph, &mut findings);
    findings.crossings = crossings(&picture, graph);
    findings
}

/// One edge of the graph as the picture draws it.
struct DrawnEdge<'p> {
    /// Its index in the graph's edges (and the picture's paths and labels).
    i: usize,
    name: String,
    /// The indices of its source and target boxes.
    from: usize,
    to: usize,
    path: &'p [Point],
}

fn node_index(graph: &StageGraph, id: NodeId) -> usize {
    graph.nodes().iter().position(|n| n.id == id).unwrap()
}

/// An edge starts at its source's box and ends at its target's.
fn joins_its_boxes(picture: &Picture, edge: &DrawnEdge<'_>, findings: &mut Findings) {
    let name = &edge.name;
    let (start, end) = (edge.path[0], edge.path[edge.path.len() - 1]);
    if picture.boxes[edge.from].distance(start) > CLEARANCE {
        findings
            .problems
            .push(format!("{name}: starts away from its source"));
    }
    if picture.boxes[edge.to].distance(end) > CLEARANCE {
        findings
            .problems
            .push(format!("{name}: ends away from its target"));
    }
}

/// Never through or along a box: an edge keeps clear of every box but its own two, and stays
/// near those only where it leaves and where it arrives.
fn keeps_clear_of_boxes(
    picture: &Picture,
    graph: &StageGraph,
    edge: &DrawnEdge<'_>,
    findings: &mut Findings,
) {
    let points = dense(edge.path);
    for (b, rect) in picture.boxes.iter().enumerate() {
        let near = points.iter().filter(|p| rect.distance(**p) < ALONG).count();
        let touches = if b == edge.from {
            points
                .iter()
                .skip_while(|p| rect.distance(**p) < ALONG)
                .any(|p| rect.distance(*p) < CLEARANCE)
        } else if b == edge.to {
            points
                .iter()
                .rev()
                .skip_while(|p| rect.distance(**p) < ALONG)
                .any(|p| rect.distance(*p) < CLEARANCE)
        } else {
            points.iter().any(|p| rect.distance(*p) < CLEARANCE)
        };
        if touches || near > ALONG_LENGTH {
            findings.intrusions += 1;
            findings.problems.push(format!(
                "{}: passes through or along the box of {}",
                edge.name,
                graph.nodes()[b].id
            ));
        }
    }
}

/// An edge's label lies beside it, on no box, crossed by no other edge.
fn label_is_placed(
    picture: &Picture,
    graph: &StageGraph,
    edge: &DrawnEdge<'_>,
    label: &Rect,
    findings: &mut Findings,
) {
    let name = &edge.name;
    if distance_to_path(edge.path, label) > LABEL_REACH {
        findings
            .problems
            .push(format!("{name}: its label is not beside it"));
    }
    for (b, rect) in picture.boxes.iter().enumerate() {
        let overlap = label.x < rect.x + rect.width
            && rect.x < label.x + label.width
            && label.y < rect.y + rect.height
            && rect.y < label.y + label.height;
        if overlap {
            findings.problems.push(format!(
                "{name}: its label lies on the box of {}",
                graph.nodes()[b].id
            ));
        }
    }
    for (j, other) in picture.paths.iter().enumerate() {
        if j != edge.i && distance_to_path(other, label) < 1.0 {
            findings.problems.push(format!(
                "{name}: its label is crossed by {}",
                graph.edges()[j].describe()
            ));
        }
    }
}

/// Arrowheads do not stack: the edges into a box arrive at distinct points.
fn arrowheads_do_not_stack(picture: &Picture, graph: &StageGraph, findings: &mut Findings) {
    for node in graph.nodes() {
        let ends: Vec<Point> = graph
            .edges()
            .iter()
            .zip(&picture.paths)
            .filter(|(e, _)| e.to == node.id)
            .map(|(_, p)| p[p.len() - 1])
            .collect();
        for (i, a) in ends.iter().enumerate() {
            if ends[i + 1..]
                .iter()
                .any(|b| (a.0 - b.0).hypot(a.1 - b.1) < ARROWHEAD)
            {
                findings
                    .problems
                    .push(format!("arrowheads stack up on the box of {}", node.id));
                break;
            }
        }
    }
}

/// Pairs of edges whose paths meet, except near a box both edges end at.
fn crossings(picture: &Picture, graph: &StageGraph) -> usize {
    let edges = graph.edges();
    let mut crossings = 0;
    for i in 0..edges.len() {
        for j in i + 1..edges.len() {
            let shared: Vec<Rect> = [edges[i].from, edges[i].to]
                .into_iter()
                .filter(|n| [edges[j].from, edges[j].to].contains(n))
                .map(|n| picture.boxes[node_index(graph, n)])
                .collect();
            let cross = picture.paths[i].windows(2).any(|a| {
                picture.paths[j].windows(2).any(|b| {
                    intersection((a[0], a[1]), (b[0], b[1]))
                        .is_some_and(|p| shared.iter().all(|r| r.distance(p) > CLEARANCE))
                })
            });
            if cross {
                crossings += 1;
            }
        }
    }
    crossings
}

struct Case {
    path: &'static str,
    graph: &'static StageGraph,
    max_crossings: usize,
}

fn cases() -> [Case; 4] {
    [
        Case {
            path: "docs/tool-execution-pipeline.svg",
            graph: StageGraph::rev2(),
            max_crossings: 10,
        },
        Case {
            path: "docs/revisions/rev1/tool-execution-pipeline.svg",
            graph: StageGraph::rev1(),
            max_crossings: 1,
        },
        Case {
            path: "docs/code-mode.svg",
            graph: StageGraph::code_mode(Revision::Rev2),
            max_crossings: 12,
        },
        Case {
            path: "docs/revisions/rev1/code-mode.svg",
            graph: StageGraph::code_mode(Revision::Rev1),
            max_crossings: 1,
        },
    ]
}

#[test]
fn the_pictures_are_laid_out_for_reading() {
    let mut report = String::new();
    let mut failed = false;
    for case in cases() {
        let svg = std::fs::read_to_string(xtask::repo_root().join(case.path)).unwrap();
        let mut findings = examine(&svg, case.graph);
        if findings.crossings > case.max_crossings {
            findings.problems.push(format!(
                "{} pairs of edges cross (at most {})",
                findings.crossings, case.max_crossings
            ));
        }
        let _ = writeln!(
            report,
            "{}: {} crossing pairs, {} upward edges, {} box intrusions",
            case.path, findings.crossings, findings.upward, findings.intrusions
        );
        for problem in &findings.problems {
            let _ = writeln!(report, "  {problem}");
        }
        failed |= !findings.problems.is_empty();
    }
    eprintln!("{report}");
    assert!(!failed, "{report}");
}

#[test]
fn an_edge_through_a_box_is_caught() {
    // The checks have teeth: move the first box onto the last edge's path.
    let case = &cases()[1];
    let svg = std::fs::read_to_string(xtask::repo_root().join(case.path)).unwrap();
    let picture = read_picture(&svg, case.graph);
    let last = picture.paths.len() - 1;
    let (mx, my) = picture.paths[last][picture.paths[last].len() / 2];
    let first = picture.boxes[0];
    let moved = svg.replacen(
        &format!("<rect x=\"{:.2}\" y=\"{:.2}\"", first.x, first.y),
        &format!("<rect x=\"{:.2}\" y=\"{:.2}\"", mx - 10.0, my - 10.0),
        1,
    );
    assert_ne!(moved, svg, "the first box was found in the text");
    let findings = examine(&moved, case.graph);
    assert!(findings.intrusions >= 1, "{:?}", findings.problems);
}

#[test]
fn every_node_and_edge_is_a_named_group() {
    for case in cases() {
        let svg = std::fs::read_to_string(xtask::repo_root().join(case.path)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let groups = |class: &str| -> Vec<roxmltree::Node<'_, '_>> {
            doc.descendants()
                .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(class))
                .collect()
        };
        let nodes = groups("node");
        assert_eq!(nodes.len(), case.graph.nodes().len(), "{}", case.path);
        for node in case.graph.nodes() {
            let group: Vec<_> = nodes
                .iter()
                .filter(|g| g.attribute("data-node") == Some(node.id.as_str()))
                .collect();
            assert_eq!(group.len(), 1, "{}: the group of {}", case.path, node.id);
            // It holds the box and the label of that node, nothing else.
            let children: Vec<&str> = group[0]
                .children()
                .filter(|c| c.is_element())
                .map(|c| c.tag_name().name())
                .collect();
            assert_eq!(children, ["rect", "text"], "{}: {}", case.path, node.id);
            let label = words(
                &group[0]
                    .descendants()
                    .filter(|t| t.is_text())
                    .filter_map(|t| t.text())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            assert_eq!(
                label,
                words(&node.label.plain_lines().join(" ")),
                "{}",
                case.path
            );
        }
        let edges = groups("edge");
        assert_eq!(edges.len(), case.graph.edges().len(), "{}", case.path);
        for (i, edge) in case.graph.edges().iter().enumerate() {
            let group = edges[i];
            let name = edge.describe();
            assert_eq!(
                group.attribute("data-edge"),
                Some(i.to_string().as_str()),
                "{name}"
            );
            assert_eq!(
                group.attribute("data-from"),
                Some(edge.from.as_str()),
                "{name}"
            );
            assert_eq!(group.attribute("data-to"), Some(edge.to.as_str()), "{name}");
            let id = format!("edge-{i}");
            // Everything the renderer drew for this edge is in its group, and only that.
            let drawn: Vec<_> = doc
                .descendants()
                .filter(|n| n.attribute("data-edge-id") == Some(id.as_str()))
                .collect();
            assert!(drawn.iter().any(|n| n.has_tag_name("path")), "{name}");
            for n in drawn {
                assert!(
                    n.ancestors().any(|a| a == group),
                    "{name}: {n:?} outside its group"
                );
            }
            let polygons = group
                .descendants()
                .filter(|n| n.has_tag_name("polygon"))
                .count();
            assert_eq!(polygons, 1, "{name}: its arrowhead");
            let label: Vec<&str> = group
                .descendants()
                .filter(|t| t.is_text())
                .filter_map(|t| t.text())
                .collect();
            let label = words(&label.join(" "));
            assert_eq!(label, edge.label.map(words).unwrap_or_default(), "{name}");
        }
    }
}
