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

mod draw;
mod order;
mod place;

use draw::draw;
use order::{order_layers, positions};
use place::{assign_ports, place_horizontally};

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

#[cfg(test)]
mod tests {
    use super::draw::taut_path;
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
