//! A layered, top-down drawing of a directed graph (Sugiyama's method, as Graphviz `dot` and
//! dagre, which GitHub's Mermaid uses, draw flowcharts), sized for the stage graphs.
//!
//! mermaid-rs-renderer 0.3.1 ranks a flowchart without its dotted edges, so the stage graphs'
//! throw target lands in the top rank and its edges run upwards, and its router lets edges run
//! along boxes (issue 16). This module places the boxes and routes the edges itself; the renderer
//! still measures the text and writes the SVG (`svg.rs`).
//!
//! 1. **Cycles.** A depth-first search from the entry, following out-edges in declaration order,
//!    finds the edges that close a cycle. They are laid out reversed, so they are the only edges
//!    drawn upwards.
//! 2. **Ranks.** Longest path from the sources.
//! 3. **Layers.** Between two ranks of boxes lies a gap layer. An edge becomes a chain with one
//!    point in every layer it crosses. A label is the point of the gap layer next to the edge's
//!    source, as wide as the label: it takes room like a box, so it sits on its own edge and on
//!    nothing else.
//! 4. **Order** within layers: barycenter sweeps with transposition; the order with the fewest
//!    crossings wins.
//! 5. **x**: the horizontal lengths of the edges' pieces are minimised under the order and the
//!    separations, by block coordinate descent over the layers, each layer solved exactly by
//!    pool-adjacent-violators. Squared lengths first, which centres a box over its neighbours;
//!    then lengths (reweighted), which makes most pieces exactly vertical.
//! 6. **Edges** leave a box straight down from a port of their own and arrive straight into one,
//!    and in between take the shortest path through their points' lanes: where an edge crosses a
//!    layer it keeps to its lane, clear of the boxes, labels and lines beside it, so it neither
//!    passes a box nor crosses an edge the order did not make it cross.
//!
//! Everything is plain `f64` arithmetic in a fixed order, so the result is the same on every
//! machine.

/// Width and height of a box or of a label.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    pub width: f64,
    pub height: f64,
}

/// An edge to lay out, between indices of the node list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdgeSpec {
    pub from: usize,
    pub to: usize,
    /// The label's box (text and padding), if the edge has one.
    pub label: Option<Size>,
}

/// A placed box: top-left corner and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// A routed edge: a polyline from its source's border to its target's border.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutedEdge {
    pub points: Vec<(f64, f64)>,
    /// Where the label's box is centred (on the edge).
    pub label_center: Option<(f64, f64)>,
}

/// The whole drawing, in the graph's declaration order; coordinates start at (0, 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Drawing {
    pub nodes: Vec<Rect>,
    pub edges: Vec<RoutedEdge>,
    pub width: f64,
    pub height: f64,
}

/// Why a graph cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("edge {edge} refers to node {node}, but there are only {nodes} nodes")]
    NoSuchNode {
        edge: usize,
        node: usize,
        nodes: usize,
    },
    #[error("edge {0} is a self-loop, which this layout does not draw")]
    SelfLoop(usize),
}

/// Margin around the drawing.
const MARGIN: f64 = 16.0;
/// Vertical space between a layer of boxes and the gap layer below or above it.
const LAYER_SPACING: f64 = 36.0;
/// How far an edge runs straight down out of its layer before it turns, leaving a box, and after
/// it last turned, arriving at one.
const STUB: f64 = 14.0;
/// Horizontal space between two boxes, a box and a line, two lines.
const BOX_GAP: f64 = 40.0;
const BOX_LINE_GAP: f64 = 24.0;
const LINE_GAP: f64 = 16.0;
/// How far the edge runs straight above and below its label.
const LABEL_MARGIN: f64 = 6.0;
/// Distance between neighbouring ports on a box side, and the part of the side kept free of ports
/// at each corner.
const PORT_STEP: f64 = 18.0;
const PORT_CORNER: f64 = 12.0;
/// How much less an edge that closes a cycle pulls its ends together.
const CLOSING_PULL: f64 = 0.25;
/// Below this horizontal length (pixels) a piece of an edge counts as straight when weighting.
const STRAIGHT_ENOUGH: f64 = 1.0;
/// Crossing-reduction sweeps, and x-placement sweeps (each down and up).
const ORDER_SWEEPS: usize = 24;
const PLACEMENT_SWEEPS: usize = 300;

/// The edges that close a cycle: those a depth-first search from `entry` (then from any node it
/// did not reach, in declaration order), following out-edges in declaration order, finds pointing
/// to a node still on its path.
fn cycle_closing_edges(
    node_count: usize,
    edges: &[EdgeSpec],
    entry: usize,
) -> Result<Vec<bool>, LayoutError> {
    check(node_count, edges)?;
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); node_count];
    for (i, e) in edges.iter().enumerate() {
        out[e.from].push(i);
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; node_count];
    let mut closes = vec![false; edges.len()];
    let roots = std::iter::once(entry).chain(0..node_count);
    for root in roots {
        if root >= node_count || mark[root] != Mark::New {
            continue;
        }
        // (node, index of the next out-edge to follow)
        let mut stack = vec![(root, 0usize)];
        mark[root] = Mark::OnPath;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&edge) = out[node].get(*next) {
                *next += 1;
                let to = edges[edge].to;
                match mark[to] {
                    Mark::New => {
                        mark[to] = Mark::OnPath;
                        stack.push((to, 0));
                    }
                    Mark::OnPath => closes[edge] = true,
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    Ok(closes)
}

fn check(node_count: usize, edges: &[EdgeSpec]) -> Result<(), LayoutError> {
    for (i, e) in edges.iter().enumerate() {
        for node in [e.from, e.to] {
            if node >= node_count {
                return Err(LayoutError::NoSuchNode {
                    edge: i,
                    node,
                    nodes: node_count,
                });
            }
        }
        if e.from == e.to {
            return Err(LayoutError::SelfLoop(i));
        }
    }
    Ok(())
}

/// A point of the layered graph: a box, or the place where an edge crosses a layer.
#[derive(Debug, Clone, Copy)]
struct Vertex {
    layer: usize,
    /// Extent left and right of the vertex's x (where its line runs, or its centre).
    left: f64,
    right: f64,
    height: f64,
    /// The box, for a node's vertex.
    node: Option<usize>,
}

/// A piece of an edge between two adjacent layers.
#[derive(Debug, Clone, Copy)]
struct Segment {
    upper: usize,
    lower: usize,
    /// Whether the segment belongs to an edge that closes a cycle.
    closing: bool,
}

struct Layered {
    vertices: Vec<Vertex>,
    segments: Vec<Segment>,
    /// Per vertex, the segments leaving it downwards and arriving from above.
    below: Vec<Vec<usize>>,
    above: Vec<Vec<usize>>,
    /// Per edge, its vertices from top to bottom (the first and last are boxes).
    chains: Vec<Vec<usize>>,
    /// Per edge, the vertex its label sits on.
    label_at: Vec<Option<usize>>,
    layer_count: usize,
}

/// Lays out `nodes` (box sizes) and `edges`, top-down from `entry`.
pub fn layout(nodes: &[Size], edges: &[EdgeSpec], entry: usize) -> Result<Drawing, LayoutError> {
    let closes = cycle_closing_edges(nodes.len(), edges, entry)?;
    // The acyclic orientation: each edge as (upper node, lower node).
    let oriented: Vec<(usize, usize)> = edges
        .iter()
        .zip(&closes)
        .map(|(e, &c)| if c { (e.to, e.from) } else { (e.from, e.to) })
        .collect();
    let ranks = longest_path_ranks(nodes.len(), &oriented);
    let graph = build_layers(nodes, edges, &oriented, &closes, &ranks);
    let order = order_layers(&graph, entry);
    let pos = positions(&graph, &order);
    let ports = assign_ports(&graph, &pos);
    let xs = place_horizontally(&graph, &order, &ports);
    Ok(draw(&graph, &order, &ports, &xs, &closes))
}

/// Rank of every node: the length of the longest oriented path reaching it.
fn longest_path_ranks(node_count: usize, oriented: &[(usize, usize)]) -> Vec<usize> {
    let mut indegree = vec![0usize; node_count];
    for &(_, to) in oriented {
        indegree[to] += 1;
    }
    let mut rank = vec![0usize; node_count];
    // Kahn's algorithm; the smallest ready index first, so the result does not depend on
    // anything but the declaration order.
    let mut ready: std::collections::BTreeSet<usize> =
        (0..node_count).filter(|&n| indegree[n] == 0).collect();
    while let Some(node) = ready.pop_first() {
        for &(from, to) in oriented {
            if from == node {
                rank[to] = rank[to].max(rank[node] + 1);
                indegree[to] -= 1;
                if indegree[to] == 0 {
                    ready.insert(to);
                }
            }
        }
    }
    rank
}

fn build_layers(
    nodes: &[Size],
    edges: &[EdgeSpec],
    oriented: &[(usize, usize)],
    closes: &[bool],
    ranks: &[usize],
) -> Layered {
    let mut vertices: Vec<Vertex> = nodes
        .iter()
        .zip(ranks)
        .enumerate()
        .map(|(i, (size, &rank))| Vertex {
            layer: 2 * rank,
            left: size.width / 2.0,
            right: size.width / 2.0,
            height: size.height,
            node: Some(i),
        })
        .collect();
    let mut chains = Vec::with_capacity(edges.len());
    let mut label_at = Vec::with_capacity(edges.len());
    for (i, &(upper, lower)) in oriented.iter().enumerate() {
        let (top, bottom) = (vertices[upper].layer, vertices[lower].layer);
        // The label goes to the gap layer next to the edge's source: below it for an edge drawn
        // downwards, above it for one that closes a cycle.
        let label_layer = if closes[i] { bottom - 1 } else { top + 1 };
        let mut chain = vec![upper];
        let mut label_vertex = None;
        for layer in top + 1..bottom {
            let label = edges[i].label.filter(|_| layer == label_layer);
            if label.is_some() {
                label_vertex = Some(vertices.len());
            }
            chain.push(vertices.len());
            vertices.push(Vertex {
                layer,
                left: label.map_or(0.0, |l| l.width / 2.0),
                right: label.map_or(0.0, |l| l.width / 2.0),
                height: label.map_or(0.0, |l| l.height + 2.0 * LABEL_MARGIN),
                node: None,
            });
        }
        chain.push(lower);
        chains.push(chain);
        label_at.push(label_vertex);
    }
    let mut segments = Vec::new();
    let mut below = vec![Vec::new(); vertices.len()];
    let mut above = vec![Vec::new(); vertices.len()];
    for (chain, &closing) in chains.iter().zip(closes) {
        for pair in chain.windows(2) {
            below[pair[0]].push(segments.len());
            above[pair[1]].push(segments.len());
            segments.push(Segment {
                upper: pair[0],
                lower: pair[1],
                closing,
            });
        }
    }
    let layer_count = vertices.iter().map(|v| v.layer + 1).max().unwrap_or(0);
    Layered {
        vertices,
        segments,
        below,
        above,
        chains,
        label_at,
        layer_count,
    }
}

/// The vertices of each layer, left to right.
fn order_layers(graph: &Layered, entry: usize) -> Vec<Vec<usize>> {
    // Start from the order a depth-first walk from the entry meets the vertices in, which keeps
    // each chain and each branch together.
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); graph.layer_count];
    let mut seen = vec![false; graph.vertices.len()];
    let roots = std::iter::once(entry).chain(0..graph.vertices.len());
    for root in roots {
        if seen[root] {
            continue;
        }
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            if seen[v] {
                continue;
            }
            seen[v] = true;
            order[graph.vertices[v].layer].push(v);
            for &s in graph.below[v].iter().rev() {
                stack.push(graph.segments[s].lower);
            }
        }
    }
    let mut best = order.clone();
    let mut best_crossings = total_crossings(graph, &order);
    for sweep in 0..ORDER_SWEEPS {
        if best_crossings == 0 {
            break;
        }
        let downwards = sweep % 2 == 0;
        let layers: Vec<usize> = if downwards {
            (1..graph.layer_count).collect()
        } else {
            (0..graph.layer_count.saturating_sub(1)).rev().collect()
        };
        for layer in layers {
            let pos = positions(graph, &order);
            let mut keyed: Vec<(f64, usize)> = order[layer]
                .iter()
                .map(|&v| {
                    let (neighbours, side): (&[usize], bool) = if downwards {
                        (&graph.above[v], true)
                    } else {
                        (&graph.below[v], false)
                    };
                    let key = if neighbours.is_empty() {
                        pos[v] as f64
                    } else {
                        neighbours
                            .iter()
                            .map(|&s| {
                                let seg = graph.segments[s];
                                pos[if side { seg.upper } else { seg.lower }] as f64
                            })
                            .sum::<f64>()
                            / neighbours.len() as f64
                    };
                    (key, v)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            order[layer] = keyed.into_iter().map(|(_, v)| v).collect();
        }
        transpose(graph, &mut order);
        let crossings = total_crossings(graph, &order);
        if crossings < best_crossings {
            best_crossings = crossings;
            best = order.clone();
        }
    }
    best
}

fn positions(graph: &Layered, order: &[Vec<usize>]) -> Vec<usize> {
    let mut pos = vec![0usize; graph.vertices.len()];
    for layer in order {
        for (i, &v) in layer.iter().enumerate() {
            pos[v] = i;
        }
    }
    pos
}

/// Crossings between the segments below one layer. Segments that share an end do not cross: they
/// leave or reach their box at ports ordered like their other ends.
fn layer_crossings(graph: &Layered, layer: &[usize], pos: &[usize]) -> usize {
    let ends: Vec<(usize, usize)> = layer
        .iter()
        .flat_map(|&v| graph.below[v].iter())
        .map(|&s| {
            let seg = graph.segments[s];
            (pos[seg.upper], pos[seg.lower])
        })
        .collect();
    let mut count = 0;
    for (i, a) in ends.iter().enumerate() {
        for b in &ends[i + 1..] {
            if (a.0 < b.0 && a.1 > b.1) || (a.0 > b.0 && a.1 < b.1) {
                count += 1;
            }
        }
    }
    count
}

fn total_crossings(graph: &Layered, order: &[Vec<usize>]) -> usize {
    let pos = positions(graph, order);
    order
        .iter()
        .map(|layer| layer_crossings(graph, layer, &pos))
        .sum()
}

/// Swaps neighbours in a layer while that removes crossings.
fn transpose(graph: &Layered, order: &mut [Vec<usize>]) {
    let mut improved = true;
    let mut rounds = 0;
    while improved && rounds < 64 {
        improved = false;
        rounds += 1;
        for layer in 0..order.len() {
            for i in 0..order[layer].len().saturating_sub(1) {
                let pos = positions(graph, order);
                let (v, w) = (order[layer][i], order[layer][i + 1]);
                let before = pair_crossings(graph, &pos, v, w);
                let after = pair_crossings(graph, &pos, w, v);
                if after < before {
                    order[layer].swap(i, i + 1);
                    improved = true;
                }
            }
        }
    }
}

/// Crossings between the segments of `left` and `right` if `left` stands left of `right`.
fn pair_crossings(graph: &Layered, pos: &[usize], left: usize, right: usize) -> usize {
    let mut count = 0;
    for (lists, upper) in [(&graph.above, true), (&graph.below, false)] {
        for &a in &lists[left] {
            for &b in &lists[right] {
                let other = |s: usize| {
                    let seg = graph.segments[s];
                    pos[if upper { seg.upper } else { seg.lower }]
                };
                if other(a) > other(b) {
                    count += 1;
                }
            }
        }
    }
    count
}

/// Port offsets from a box's centre, per segment end: `(offset at upper, offset at lower)`.
/// The segments leaving a box are spread along its bottom in the order of their other ends, and
/// likewise those reaching it along its top, so they neither cross nor share an arrowhead.
fn assign_ports(graph: &Layered, pos: &[usize]) -> Vec<(f64, f64)> {
    let mut ports = vec![(0.0, 0.0); graph.segments.len()];
    for (v, vertex) in graph.vertices.iter().enumerate() {
        if vertex.node.is_none() {
            continue;
        }
        let width = vertex.left + vertex.right;
        for (list, at_upper) in [(&graph.below[v], true), (&graph.above[v], false)] {
            let mut segs = list.clone();
            segs.sort_by_key(|&s| {
                let seg = graph.segments[s];
                pos[if at_upper { seg.lower } else { seg.upper }]
            });
            let k = segs.len();
            if k < 2 {
                continue;
            }
            let step = PORT_STEP.min((width - 2.0 * PORT_CORNER).max(0.0) / (k - 1) as f64);
            for (i, &s) in segs.iter().enumerate() {
                let offset = (i as f64 - (k - 1) as f64 / 2.0) * step;
                if at_upper {
                    ports[s].0 = offset;
                } else {
                    ports[s].1 = offset;
                }
            }
        }
    }
    ports
}

/// The horizontal space `left` and `right` (neighbours in a layer, in that order) need.
fn separation(left: &Vertex, right: &Vertex) -> f64 {
    let gap = match (left.node.is_some(), right.node.is_some()) {
        (true, true) => BOX_GAP,
        (false, false) => LINE_GAP,
        _ => BOX_LINE_GAP,
    };
    left.right + gap + right.left
}

/// The x of every vertex (a box's centre, a line's x).
fn place_horizontally(graph: &Layered, order: &[Vec<usize>], ports: &[(f64, f64)]) -> Vec<f64> {
    // Dot's weights: a long edge's inner pieces pull hardest, so chains run straight. An edge
    // that closes a cycle pulls less, so the flow it returns to stays straight and the loop goes
    // round it.
    let weight = |seg: &Segment| {
        let pull = match (
            graph.vertices[seg.upper].node.is_some(),
            graph.vertices[seg.lower].node.is_some(),
        ) {
            (true, true) => 1.0,
            (false, false) => 8.0,
            _ => 2.0,
        };
        if seg.closing {
            pull * CLOSING_PULL
        } else {
            pull
        }
    };
    let mut x = vec![0.0f64; graph.vertices.len()];
    for layer in order {
        let mut at = 0.0;
        for (i, &v) in layer.iter().enumerate() {
            if i > 0 {
                at += separation(&graph.vertices[layer[i - 1]], &graph.vertices[v]);
            }
            x[v] = at;
        }
    }
    for sweep in 0..PLACEMENT_SWEEPS {
        let layers: Vec<usize> = if sweep % 2 == 0 {
            (0..order.len()).collect()
        } else {
            (0..order.len()).rev().collect()
        };
        // After a start on squared lengths, each piece's weight is divided by its current length
        // (iteratively reweighted least squares), which minimises the lengths themselves, as
        // dot's network simplex does: pieces then tend to be exactly vertical rather than all a
        // little slanted.
        let straighten = sweep >= PLACEMENT_SWEEPS / 4;
        let pull = |s: usize, x: &[f64]| {
            let seg = graph.segments[s];
            let w = weight(&seg);
            if straighten {
                let length = (x[seg.upper] + ports[s].0 - x[seg.lower] - ports[s].1).abs();
                w / length.max(STRAIGHT_ENOUGH)
            } else {
                w
            }
        };
        for layer in layers {
            let targets: Vec<(f64, f64)> = order[layer]
                .iter()
                .map(|&v| {
                    let mut sum = 0.0;
                    let mut total = 0.0;
                    for &s in &graph.above[v] {
                        let seg = graph.segments[s];
                        let w = pull(s, &x);
                        sum += w * (x[seg.upper] + ports[s].0 - ports[s].1);
                        total += w;
                    }
                    for &s in &graph.below[v] {
                        let seg = graph.segments[s];
                        let w = pull(s, &x);
                        sum += w * (x[seg.lower] + ports[s].1 - ports[s].0);
                        total += w;
                    }
                    if total == 0.0 {
                        (x[v], 1.0)
                    } else {
                        (sum / total, total)
                    }
                })
                .collect();
            let placed = closest_ordered(graph, &order[layer], &targets);
            for (&v, value) in order[layer].iter().zip(placed) {
                x[v] = value;
            }
        }
    }
    x
}

/// The positions closest to `targets` (weighted least squares) that keep the layer's order and
/// separations: pool-adjacent-violators on the positions less their cumulative separations.
fn closest_ordered(graph: &Layered, layer: &[usize], targets: &[(f64, f64)]) -> Vec<f64> {
    let mut offsets = Vec::with_capacity(layer.len());
    let mut at = 0.0;
    for (i, &v) in layer.iter().enumerate() {
        if i > 0 {
            at += separation(&graph.vertices[layer[i - 1]], &graph.vertices[v]);
        }
        offsets.push(at);
    }
    // Blocks of (weight, weighted sum, length), each at its weighted mean.
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for (&(target, w), offset) in targets.iter().zip(&offsets) {
        blocks.push((w, w * (target - offset), 1));
        while blocks.len() > 1 {
            let (w2, s2, n2) = blocks[blocks.len() - 1];
            let (w1, s1, n1) = blocks[blocks.len() - 2];
            if s1 / w1 <= s2 / w2 {
                break;
            }
            blocks.truncate(blocks.len() - 2);
            blocks.push((w1 + w2, s1 + s2, n1 + n2));
        }
    }
    let mut out = Vec::with_capacity(layer.len());
    for (w, s, n) in blocks {
        for _ in 0..n {
            let offset = offsets[out.len()];
            out.push(s / w + offset);
        }
    }
    out
}

fn draw(
    graph: &Layered,
    order: &[Vec<usize>],
    ports: &[(f64, f64)],
    xs: &[f64],
    closes: &[bool],
) -> Drawing {
    let min_x = graph
        .vertices
        .iter()
        .zip(xs)
        .map(|(v, x)| x - v.left)
        .fold(f64::INFINITY, f64::min);
    let max_x = graph
        .vertices
        .iter()
        .zip(xs)
        .map(|(v, x)| x + v.right)
        .fold(f64::NEG_INFINITY, f64::max);
    let shift = MARGIN - min_x;
    let x = |v: usize| xs[v] + shift;
    // Each layer's top and height.
    let mut tops = Vec::with_capacity(order.len());
    let mut heights = Vec::with_capacity(order.len());
    let mut y = MARGIN;
    for (i, layer) in order.iter().enumerate() {
        let height = layer
            .iter()
            .map(|&v| graph.vertices[v].height)
            .fold(0.0, f64::max);
        if i > 0 {
            y += LAYER_SPACING;
        }
        tops.push(y);
        heights.push(height);
        y += height;
    }
    let centre = |v: usize| {
        let layer = graph.vertices[v].layer;
        tops[layer] + heights[layer] / 2.0
    };
    let nodes = graph
        .vertices
        .iter()
        .enumerate()
        .filter(|(_, v)| v.node.is_some())
        .map(|(i, v)| Rect {
            x: x(i) - v.left,
            y: centre(i) - v.height / 2.0,
            width: v.left + v.right,
            height: v.height,
        })
        .collect();
    let pos = positions(graph, order);
    // The band of x an edge's line may take where it crosses a layer: up to its neighbours' boxes
    // and labels (less the gap to them), or halfway to their lines. A line through a label stays
    // put.
    let band = |v: usize| -> (f64, f64) {
        let vertex = &graph.vertices[v];
        if vertex.right > 0.0 {
            return (x(v), x(v));
        }
        let layer = &order[vertex.layer];
        let i = pos[v];
        let lo = match i.checked_sub(1).map(|j| layer[j]) {
            None => f64::NEG_INFINITY,
            Some(n) if graph.vertices[n].right == 0.0 => (x(n) + x(v) + LINE_GAP) / 2.0,
            Some(n) => x(n) + separation(&graph.vertices[n], vertex),
        };
        let hi = match layer.get(i + 1) {
            None => f64::INFINITY,
            Some(&m) if graph.vertices[m].left == 0.0 => (x(v) + x(m) - LINE_GAP) / 2.0,
            Some(&m) => x(m) - separation(vertex, &graph.vertices[m]),
        };
        (lo.min(x(v)), hi.max(x(v)))
    };
    let routed = graph
        .chains
        .iter()
        .enumerate()
        .map(|(e, chain)| {
            // Where the edge must pass, top to bottom: (y, lowest x, highest x).
            let mut windows = Vec::new();
            let last = chain.len() - 1;
            for (i, &v) in chain.iter().enumerate() {
                let vertex = &graph.vertices[v];
                let layer = vertex.layer;
                let (top, bottom) = (tops[layer], tops[layer] + heights[layer]);
                if vertex.node.is_some() {
                    // A box: the edge leaves from its bottom, or arrives at its top, at the
                    // segment's port, straight down to a stub beyond its layer, so that it leaves
                    // and arrives square instead of skimming along the box or its neighbours.
                    let px = x(v)
                        + if i == 0 {
                            graph.below[v]
                                .iter()
                                .find(|&&s| graph.segments[s].lower == chain[1])
                                .map_or(0.0, |&s| ports[s].0)
                        } else {
                            graph.above[v]
                                .iter()
                                .find(|&&s| graph.segments[s].upper == chain[last - 1])
                                .map_or(0.0, |&s| ports[s].1)
                        };
                    if i == 0 {
                        windows.push((centre(v) + vertex.height / 2.0, px, px));
                        windows.push((bottom + STUB, px, px));
                    } else {
                        windows.push((top - STUB, px, px));
                        windows.push((centre(v) - vertex.height / 2.0, px, px));
                    }
                } else {
                    // Past boxes, the band holds a little above and below the layer too, so that
                    // a slanted line does not clip a box's corner.
                    let margin = if layer.is_multiple_of(2) { STUB } else { 0.0 };
                    let (lo, hi) = band(v);
                    windows.push((top - margin, lo, hi));
                    windows.push((bottom + margin, lo, hi));
                }
            }
            let mut points = taut_path(&windows);
            if closes[e] {
                points.reverse();
            }
            let label_center = graph.label_at[e].map(|v| (x(v), centre(v)));
            RoutedEdge {
                points,
                label_center,
            }
        })
        .collect();
    Drawing {
        nodes,
        edges: routed,
        width: max_x - min_x + 2.0 * MARGIN,
        height: y + MARGIN,
    }
}

/// The shortest path down through `windows`, each a horizontal span `(y, lowest x, highest x)`,
/// in order of y; the first and last are points. This is the funnel algorithm of path finding,
/// for windows stacked top to bottom: the path runs straight until a window forces it to bend at
/// the end of an earlier one.
fn taut_path(windows: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    // Windows at the same height (a layer without height) are one window.
    let mut merged: Vec<(f64, f64, f64)> = Vec::with_capacity(windows.len());
    for &(y, lo, hi) in windows {
        match merged.last_mut() {
            Some(last) if y - last.0 < 1e-9 => {
                last.1 = last.1.max(lo);
                last.2 = last.2.min(hi).max(last.1);
            }
            _ => merged.push((y, lo, hi)),
        }
    }
    let Some(&(y0, x0, _)) = merged.first() else {
        return Vec::new();
    };
    let mut path = vec![(x0, y0)];
    let mut apex = 0;
    'bend: loop {
        let (ax, ay) = path[path.len() - 1];
        // The slopes (dx per dy) still open, and the windows that closed them so far.
        let (mut min_slope, mut max_slope) = (f64::NEG_INFINITY, f64::INFINITY);
        let (mut min_at, mut max_at) = (apex, apex);
        for (i, &(y, lo, hi)) in merged.iter().enumerate().skip(apex + 1) {
            let (low, high) = ((lo - ax) / (y - ay), (hi - ax) / (y - ay));
            if low > max_slope {
                // The window lies right of every open slope: bend where the right side closed.
                path.push((merged[max_at].2, merged[max_at].0));
                apex = max_at;
                continue 'bend;
            }
            if high < min_slope {
                path.push((merged[min_at].1, merged[min_at].0));
                apex = min_at;
                continue 'bend;
            }
            if low > min_slope {
                (min_slope, min_at) = (low, i);
            }
            if high < max_slope {
                (max_slope, max_at) = (high, i);
            }
        }
        break;
    }
    if let Some(&(y, x, _)) = merged.last()
        && merged.len() > 1
    {
        path.push((x, y));
    }
    path.dedup();
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: usize, to: usize) -> EdgeSpec {
        EdgeSpec {
            from,
            to,
            label: None,
        }
    }

    #[test]
    fn cycle_closing_edges_follow_declaration_order() {
        // 0 -> 1 -> 2 -> 1, 2 -> 0: the walk from 0 meets 2 -> 1 and 2 -> 0 on its path.
        let edges = [edge(0, 1), edge(1, 2), edge(2, 1), edge(2, 0), edge(0, 2)];
        assert_eq!(
            cycle_closing_edges(3, &edges, 0).unwrap(),
            vec![false, false, true, true, false]
        );
        // From another entry, other edges close the cycles.
        assert_eq!(
            cycle_closing_edges(3, &edges, 2).unwrap(),
            vec![false, true, false, false, true]
        );
    }

    #[test]
    fn a_taut_path_runs_straight_and_bends_only_where_a_window_makes_it() {
        let open = [(0.0, 0.0, 0.0), (10.0, -5.0, 5.0), (20.0, 0.0, 0.0)];
        assert_eq!(taut_path(&open), vec![(0.0, 0.0), (0.0, 20.0)]);
        let aside = [(0.0, 0.0, 0.0), (10.0, 50.0, 60.0), (20.0, 0.0, 0.0)];
        assert_eq!(
            taut_path(&aside),
            vec![(0.0, 0.0), (50.0, 10.0), (0.0, 20.0)]
        );
        // Windows at one height (a layer without height) are one window.
        let flat = [
            (0.0, 0.0, 0.0),
            (10.0, 4.0, 9.0),
            (10.0, 6.0, 20.0),
            (20.0, 30.0, 30.0),
        ];
        assert_eq!(
            taut_path(&flat),
            vec![(0.0, 0.0), (9.0, 10.0), (30.0, 20.0)]
        );
    }

    #[test]
    fn a_diamond_with_a_loop_flows_down_and_only_the_loop_goes_up() {
        let size = Size {
            width: 120.0,
            height: 40.0,
        };
        let label = Some(Size {
            width: 50.0,
            height: 20.0,
        });
        let edges = [
            edge(0, 1),
            EdgeSpec {
                label,
                ..edge(0, 2)
            },
            edge(1, 3),
            edge(2, 3),
            EdgeSpec {
                label,
                ..edge(3, 0)
            },
            edge(0, 3),
        ];
        let drawing = layout(&[size; 4], &edges, 0).unwrap();
        let rises = |points: &[(f64, f64)]| points.windows(2).any(|w| w[1].1 < w[0].1);
        let falls = |points: &[(f64, f64)]| points.windows(2).any(|w| w[1].1 > w[0].1);
        for (i, routed) in drawing.edges.iter().enumerate() {
            let closing = i == 4;
            assert_eq!(
                rises(&routed.points),
                closing,
                "edge {i}: {:?}",
                routed.points
            );
            assert_eq!(
                falls(&routed.points),
                !closing,
                "edge {i}: {:?}",
                routed.points
            );
            // From its source's border to its target's.
            let (from, to) = (drawing.nodes[edges[i].from], drawing.nodes[edges[i].to]);
            let on_border = |r: Rect, (x, y): (f64, f64)| {
                (r.x..=r.x + r.width).contains(&x) && (y == r.y || y == r.y + r.height)
            };
            assert!(on_border(from, routed.points[0]), "edge {i}");
            assert!(
                on_border(to, routed.points[routed.points.len() - 1]),
                "edge {i}"
            );
            assert_eq!(routed.label_center.is_some(), edges[i].label.is_some());
        }
        // Boxes do not overlap, and the drawing holds them.
        for (i, a) in drawing.nodes.iter().enumerate() {
            assert!(a.x >= 0.0 && a.x + a.width <= drawing.width);
            assert!(a.y >= 0.0 && a.y + a.height <= drawing.height);
            for b in &drawing.nodes[i + 1..] {
                let apart = a.x + a.width <= b.x
                    || b.x + b.width <= a.x
                    || a.y + a.height <= b.y
                    || b.y + b.height <= a.y;
                assert!(apart, "{a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn bad_edges_are_refused() {
        let size = Size {
            width: 10.0,
            height: 10.0,
        };
        assert_eq!(
            layout(&[size; 2], &[edge(0, 2)], 0),
            Err(LayoutError::NoSuchNode {
                edge: 0,
                node: 2,
                nodes: 2
            })
        );
        assert_eq!(
            layout(&[size; 2], &[edge(0, 1), edge(1, 1)], 0),
            Err(LayoutError::SelfLoop(1))
        );
    }
}
