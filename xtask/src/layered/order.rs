//! Step 4, the order within layers: barycenter sweeps with transposition.

use super::{Layered, ORDER_SWEEPS};

/// The vertices of each layer, left to right.
pub(super) fn order_layers(graph: &Layered, entry: usize) -> Vec<Vec<usize>> {
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

pub(super) fn positions(graph: &Layered, order: &[Vec<usize>]) -> Vec<usize> {
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
