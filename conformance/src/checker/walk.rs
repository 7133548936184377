//! The walk rule: how a call moves on its graph from one recorded visit to the next.
//!
//! A visit is a step of the graph when an edge from the call's position, selected by the
//! outcome it ended with, leads to it. At a level that does not record every stage, or past a
//! record with no hook, the step may instead pass over stages the trace does not have to hold
//! ([`Expectations::required`]): the walk then infers the path, taking for each passed-over
//! stage the outcome its absence implies ([`Expectations::assumed`]).

use tep_reference::graph::{EdgeId, NodeId, Outcome, StageGraph, StepError};

use crate::observation::{CallFacts, Expectations};

/// How a visit relates to the call's position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Over one edge of the graph.
    Direct(EdgeId),
    /// Over stages the trace need not hold.
    Inferred,
    /// A repeated `around`: still inside the `tools/execute` waterfall.
    Stay,
    /// A side branch (UI card, Code Mode dispatch log) taken from a stage the call visited.
    Side(Option<EdgeId>),
    /// Not a step: why, and which required stages a path would have needed.
    Refused {
        error: StepError,
        missing: Vec<NodeId>,
    },
}

impl Step {
    pub fn is_refused(&self) -> bool {
        matches!(self, Step::Refused { .. })
    }
}

/// Walks one graph at one level.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walker {
    pub graph: &'static StageGraph,
    pub expect: Expectations,
}

/// Bit `n` stands for the node `NodeId::ALL[n]`.
pub(crate) fn bit(node: NodeId) -> u32 {
    1 << (node as u32)
}

impl Walker {
    /// The step from `(from, outcome)` to `to`, for a call with `facts` that has visited the
    /// nodes in `visited`.
    pub fn step(
        &self,
        from: NodeId,
        outcome: Option<Outcome>,
        to: NodeId,
        facts: CallFacts,
        visited: u32,
    ) -> Step {
        let g = self.graph;
        if to == NodeId::Around && from == NodeId::Around {
            return Step::Stay;
        }
        if g.is_leaf(to) {
            // A side branch hangs off the stage it leaves from, whenever that stage was visited
            // (or could not be seen at this level).
            let from_visited = g
                .incoming(to)
                .find(|e| visited & bit(e.from) != 0)
                .and_then(|e| g.edge(e.from, to).map(|(id, _)| id));
            if from_visited.is_some() {
                return Step::Side(from_visited);
            }
            if g.incoming(to).all(|e| !self.expect.required(e.from, facts)) {
                return Step::Side(None);
            }
            let missing = g.incoming(to).map(|e| e.from).collect();
            return Step::Refused {
                error: StepError::NoEdge { from, to },
                missing,
            };
        }
        // Post-execute decided, and then the pipeline failed to apply the decision (reference
        // semantics 32): the decision's record says accept or block, the stage threw.
        let outcome = match (from, outcome, to) {
            (NodeId::Post, Some(Outcome::Accept | Outcome::Block), NodeId::Normalized) => {
                Some(Outcome::Throw)
            }
            _ => outcome,
        };
        match g.step(from, outcome, to) {
            Ok((id, _)) => Step::Direct(id),
            Err(error) => {
                if self.passes_over(from, outcome, to, facts) {
                    Step::Inferred
                } else {
                    Step::Refused {
                        missing: self.missing(from, outcome, to, facts),
                        error,
                    }
                }
            }
        }
    }

    /// The edges leaving `node` that `outcome` may select; `None` selects any.
    fn leaving(
        &self,
        node: NodeId,
        outcome: Option<Option<Outcome>>,
    ) -> impl Iterator<Item = NodeId> + '_ {
        self.graph
            .outgoing(node)
            .filter(move |e| match outcome {
                None => true,
                Some(o) => self.graph.step(node, o, e.to).is_ok(),
            })
            .map(|e| e.to)
            .filter(move |&n| !self.graph.is_leaf(n))
    }

    /// Whether `to` is reached from `(from, outcome)` over stages the trace need not hold.
    fn passes_over(
        &self,
        from: NodeId,
        outcome: Option<Outcome>,
        to: NodeId,
        facts: CallFacts,
    ) -> bool {
        let mut seen = bit(from);
        let mut stack: Vec<NodeId> = self.leaving(from, Some(outcome)).collect();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if seen & bit(n) != 0 || self.expect.required(n, facts) {
                continue;
            }
            seen |= bit(n);
            let assumed = self.expect.assumed(n).map(Some);
            stack.extend(self.leaving(n, assumed));
        }
        false
    }

    /// The required stages on the shortest path from `(from, outcome)` to `to` that the trace
    /// did not record (empty when no path exists).
    fn missing(
        &self,
        from: NodeId,
        outcome: Option<Outcome>,
        to: NodeId,
        facts: CallFacts,
    ) -> Vec<NodeId> {
        // Breadth first over any stage, remembering how each node was reached.
        let mut came_from: Vec<(NodeId, NodeId)> = Vec::new();
        let mut seen = bit(from);
        let mut frontier: Vec<NodeId> = Vec::new();
        for n in self.leaving(from, Some(outcome)) {
            if seen & bit(n) == 0 {
                seen |= bit(n);
                came_from.push((n, from));
                frontier.push(n);
            }
        }
        while !frontier.is_empty() && seen & bit(to) == 0 {
            let mut next = Vec::new();
            for n in frontier {
                let assumed = if self.expect.required(n, facts) {
                    None
                } else {
                    self.expect.assumed(n).map(Some)
                };
                for m in self.leaving(n, assumed) {
                    if seen & bit(m) == 0 {
                        seen |= bit(m);
                        came_from.push((m, n));
                        next.push(m);
                    }
                }
            }
            frontier = next;
        }
        if seen & bit(to) == 0 {
            return Vec::new();
        }
        let mut path = Vec::new();
        let mut at = to;
        while let Some(&(_, prev)) = came_from.iter().find(|(n, _)| *n == at) {
            if prev == from {
                break;
            }
            path.push(prev);
            at = prev;
        }
        path.reverse();
        path.retain(|&n| self.expect.required(n, facts));
        path
    }

    /// The stages a call at `(node, outcome)` may record next among those `stops` selects,
    /// looking past the others (the walk's assumptions hold for stages the trace need not hold).
    pub fn next_stops(
        &self,
        node: NodeId,
        outcome: Option<Outcome>,
        facts: CallFacts,
        stops: impl Fn(NodeId) -> bool,
    ) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut seen = bit(node);
        let mut stack: Vec<NodeId> = self.leaving(node, Some(outcome)).collect();
        while let Some(n) = stack.pop() {
            if seen & bit(n) != 0 {
                continue;
            }
            seen |= bit(n);
            if stops(n) {
                out.push(n);
            } else {
                let assumed = if self.expect.required(n, facts) {
                    None
                } else {
                    self.expect.assumed(n).map(Some)
                };
                stack.extend(self.leaving(n, assumed));
            }
        }
        out
    }

    /// The required stages a call at `(node, outcome)` may record next.
    #[cfg(test)]
    pub fn next_required(
        &self,
        node: NodeId,
        outcome: Option<Outcome>,
        facts: CallFacts,
    ) -> Vec<NodeId> {
        self.next_stops(node, outcome, facts, |n| self.expect.required(n, facts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_reference::graph::Revision;
    use tep_reference::trace::ObservationLevel;

    use NodeId as N;

    fn walker(level: ObservationLevel) -> Walker {
        Walker {
            graph: StageGraph::of(Revision::Rev2),
            expect: Expectations::new(level, |_| true),
        }
    }

    const NONE: CallFacts = CallFacts {
        finalizer: None,
        prompt: None,
    };

    #[test]
    fn events_pass_over_every_hook() {
        let w = walker(ObservationLevel::Events);
        assert_eq!(
            w.step(N::ToolCall, None, N::ToolResult, NONE, 0),
            Step::Inferred
        );
        assert!(
            w.step(N::ToolResult, None, N::ToolCall, NONE, 0)
                .is_refused()
        );
    }

    #[test]
    fn hooks_pass_over_what_has_no_hook_only() {
        let w = walker(ObservationLevel::Hooks);
        // A denial goes to post-execute with or without its `denied` record.
        assert_eq!(
            w.step(N::Pre, Some(Outcome::Deny), N::Post, NONE, 0),
            Step::Inferred
        );
        // A throw reaches `final` past `normalized` (and `finalize`, unknown definition).
        assert_eq!(
            w.step(N::Pre, Some(Outcome::Throw), N::Final, NONE, 0),
            Step::Inferred
        );
        let with_finalizer = CallFacts {
            finalizer: Some(true),
            ..NONE
        };
        let refused = w.step(N::Pre, Some(Outcome::Throw), N::Final, with_finalizer, 0);
        assert!(
            matches!(&refused, Step::Refused { missing, .. } if missing == &vec![N::Finalize]),
            "{refused:?}"
        );
        // pre-execute itself cannot be passed over.
        assert!(
            matches!(w.step(N::ToolCall, None, N::Guards, NONE, 0), Step::Refused { missing, .. } if missing == vec![N::Pre])
        );
        // An unanswered ask is an `unavailable` denial: never a way to the guards.
        assert!(
            w.step(N::Pre, Some(Outcome::Ask), N::Guards, NONE, 0)
                .is_refused()
        );
        assert_eq!(
            w.step(N::Pre, Some(Outcome::Ask), N::Post, NONE, 0),
            Step::Inferred
        );
    }

    #[test]
    fn repeated_around_stays_and_side_branches_hang_off_their_stage() {
        let w = walker(ObservationLevel::Hooks);
        assert_eq!(w.step(N::Around, None, N::Around, NONE, 0), Step::Stay);
        assert!(matches!(
            w.step(N::Pre, None, N::PresentCall, NONE, bit(N::ToolCall)),
            Step::Side(Some(_))
        ));
        assert!(w.step(N::Model, None, N::PresentCall, NONE, 0).is_refused());
    }

    #[test]
    fn the_commit_lane_ends_at_the_recorded_result() {
        let w = walker(ObservationLevel::Hooks);
        assert_eq!(w.next_required(N::ToolResult, None, NONE), vec![]);
        assert_eq!(
            w.next_required(N::Pre, Some(Outcome::Deny), NONE),
            vec![N::Post]
        );
    }
}
