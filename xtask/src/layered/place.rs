//! Step 5, x: the ports on the boxes' sides, and the horizontal placement.

use super::{
    BOX_GAP, BOX_LINE_GAP, CLOSING_PULL, LINE_GAP, Layered, PLACEMENT_SWEEPS, PORT_CORNER,
    PORT_STEP, STRAIGHT_ENOUGH, Segment, Vertex,
};

/// Port offsets from a box's centre, per segment end: `(offset at upper, offset at lower)`.
/// The segments leaving a box are spread along its bottom in the order of their other ends, and
/// likewise those reaching it along its top, so they neither cross nor share an arrowhead.
pub(super) fn assign_ports(graph: &Layered, pos: &[usize]) -> Vec<(f64, f64)> {
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
pub(super) fn separation(left: &Vertex, right: &Vertex) -> f64 {
    let gap = match (left.node.is_some(), right.node.is_some()) {
        (true, true) => BOX_GAP,
        (false, false) => LINE_GAP,
        _ => BOX_LINE_GAP,
    };
    left.right + gap + right.left
}

/// The x of every vertex (a box's centre, a line's x).
pub(super) fn place_horizontally(
    graph: &Layered,
    order: &[Vec<usize>],
    ports: &[(f64, f64)],
) -> Vec<f64> {
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
