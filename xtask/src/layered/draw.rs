//! Step 6, the drawing: the boxes' rectangles and the edges' routes through their lanes.

use super::order::positions;
use super::place::separation;
use super::{Drawing, LAYER_SPACING, LINE_GAP, Layered, MARGIN, Rect, RoutedEdge, STUB};

pub(super) fn draw(
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
    let (tops, heights, y) = layer_extents(graph, order);
    let frame = Frame {
        graph,
        order,
        xs,
        shift: MARGIN - min_x,
        tops,
        heights,
        pos: positions(graph, order),
    };
    let nodes = graph
        .vertices
        .iter()
        .enumerate()
        .filter(|(_, v)| v.node.is_some())
        .map(|(i, v)| Rect {
            x: frame.x(i) - v.left,
            y: frame.centre(i) - v.height / 2.0,
            width: v.left + v.right,
            height: v.height,
        })
        .collect();
    let routed = graph
        .chains
        .iter()
        .enumerate()
        .map(|(e, chain)| {
            let mut points = taut_path(&frame.windows(chain, ports));
            if closes[e] {
                points.reverse();
            }
            let label_center = graph.label_at[e].map(|v| (frame.x(v), frame.centre(v)));
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

/// Each layer's top and height, and the bottom of the last layer.
fn layer_extents(graph: &Layered, order: &[Vec<usize>]) -> (Vec<f64>, Vec<f64>, f64) {
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
    (tops, heights, y)
}

/// Where the drawing puts the vertices: their x (shifted so the drawing starts at the margin) and
/// their layers' extents.
struct Frame<'a> {
    graph: &'a Layered,
    order: &'a [Vec<usize>],
    xs: &'a [f64],
    shift: f64,
    tops: Vec<f64>,
    heights: Vec<f64>,
    /// Each vertex's position in its layer.
    pos: Vec<usize>,
}

impl Frame<'_> {
    fn x(&self, v: usize) -> f64 {
        self.xs[v] + self.shift
    }

    fn centre(&self, v: usize) -> f64 {
        let layer = self.graph.vertices[v].layer;
        self.tops[layer] + self.heights[layer] / 2.0
    }

    /// The band of x an edge's line may take where it crosses a layer: up to its neighbours' boxes
    /// and labels (less the gap to them), or halfway to their lines. A line through a label stays
    /// put.
    fn band(&self, v: usize) -> (f64, f64) {
        let graph = self.graph;
        let vertex = &graph.vertices[v];
        if vertex.right > 0.0 {
            return (self.x(v), self.x(v));
        }
        let layer = &self.order[vertex.layer];
        let i = self.pos[v];
        let lo = match i.checked_sub(1).map(|j| layer[j]) {
            None => f64::NEG_INFINITY,
            Some(n) if graph.vertices[n].right == 0.0 => (self.x(n) + self.x(v) + LINE_GAP) / 2.0,
            Some(n) => self.x(n) + separation(&graph.vertices[n], vertex),
        };
        let hi = match layer.get(i + 1) {
            None => f64::INFINITY,
            Some(&m) if graph.vertices[m].left == 0.0 => (self.x(v) + self.x(m) - LINE_GAP) / 2.0,
            Some(&m) => self.x(m) - separation(vertex, &graph.vertices[m]),
        };
        (lo.min(self.x(v)), hi.max(self.x(v)))
    }

    /// Where the edge of `chain` must pass, top to bottom: (y, lowest x, highest x).
    fn windows(&self, chain: &[usize], ports: &[(f64, f64)]) -> Vec<(f64, f64, f64)> {
        let graph = self.graph;
        let mut windows = Vec::new();
        let last = chain.len() - 1;
        for (i, &v) in chain.iter().enumerate() {
            let vertex = &graph.vertices[v];
            let layer = vertex.layer;
            let (top, bottom) = (self.tops[layer], self.tops[layer] + self.heights[layer]);
            if vertex.node.is_some() {
                // A box: the edge leaves from its bottom, or arrives at its top, at the
                // segment's port, straight down to a stub beyond its layer, so that it leaves
                // and arrives square instead of skimming along the box or its neighbours.
                let px = self.x(v)
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
                    windows.push((self.centre(v) + vertex.height / 2.0, px, px));
                    windows.push((bottom + STUB, px, px));
                } else {
                    windows.push((top - STUB, px, px));
                    windows.push((self.centre(v) - vertex.height / 2.0, px, px));
                }
            } else {
                // Past boxes, the band holds a little above and below the layer too, so that
                // a slanted line does not clip a box's corner.
                let margin = if layer.is_multiple_of(2) { STUB } else { 0.0 };
                let (lo, hi) = self.band(v);
                windows.push((top - margin, lo, hi));
                windows.push((bottom + margin, lo, hi));
            }
        }
        windows
    }
}

/// The shortest path down through `windows`, each a horizontal span `(y, lowest x, highest x)`,
/// in order of y; the first and last are points. This is the funnel algorithm of path finding,
/// for windows stacked top to bottom: the path runs straight until a window forces it to bend at
/// the end of an earlier one.
pub(super) fn taut_path(windows: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
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
