//! The walk rule: how a call moves on its graph from one recorded visit to the next.
//!
//! A visit is a step of the graph when an edge from the call's position, selected by the
//! outcome it ended with, leads to it. At a level that does not record every stage, or past a
//! record with no hook, the step may instead pass over stages the trace does not have to hold
//! ([`Expectations::required`]): the walk then infers the path, taking for each passed-over
//! stage the outcome its absence implies ([`Expectations::assumed`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use tep_model::graph::{EdgeId, NodeId, NodeKind, Outcome, Phase, Scope, StageGraph, StepError};

pub(crate) use super::bit;
use super::state::Section;
use crate::observation::{CallFacts, Expectations, has_hook, level_of};

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

const NODES: usize = NodeId::ALL.len();
/// Every outcome, in the order of [`outcome_number`].
const ALL_OUTCOMES: [Outcome; 12] = [
    Outcome::Allow,
    Outcome::Deny,
    Outcome::Ask,
    Outcome::AllowedOnce,
    Outcome::Rejected,
    Outcome::Cancelled,
    Outcome::Unavailable,
    Outcome::Throw,
    Outcome::Accept,
    Outcome::Block,
    Outcome::Resolve,
    Outcome::Reject,
];
/// No outcome, then each outcome.
const OUTCOMES: usize = ALL_OUTCOMES.len() + 1;
/// Each of `finalizer` and `prompt` unknown, false or true.
const FACTS: usize = 9;

/// An outcome's place in [`ALL_OUTCOMES`]. The match has no wildcard: a new outcome does not
/// compile until the tables know it.
const fn outcome_number(outcome: Outcome) -> usize {
    match outcome {
        Outcome::Allow => 0,
        Outcome::Deny => 1,
        Outcome::Ask => 2,
        Outcome::AllowedOnce => 3,
        Outcome::Rejected => 4,
        Outcome::Cancelled => 5,
        Outcome::Unavailable => 6,
        Outcome::Throw => 7,
        Outcome::Accept => 8,
        Outcome::Block => 9,
        Outcome::Resolve => 10,
        Outcome::Reject => 11,
    }
}

fn outcome_index(outcome: Option<Outcome>) -> usize {
    outcome.map_or(0, |o| outcome_number(o) + 1)
}

fn outcome_bit(outcome: Outcome) -> u16 {
    1 << outcome_number(outcome)
}

fn facts_index(facts: CallFacts) -> usize {
    let three = |f: Option<bool>| match f {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    };
    three(facts.finalizer) * 3 + three(facts.prompt)
}

fn facts_of(index: usize) -> CallFacts {
    let three = |k: usize| match k {
        0 => None,
        1 => Some(false),
        _ => Some(true),
    };
    CallFacts {
        finalizer: three(index / 3),
        prompt: three(index % 3),
    }
}

/// A graph's queries as tables, built once: the checker asks them for every record, and the
/// graph answers them by scanning its node and edge lists.
#[derive(Debug)]
pub(crate) struct Tables {
    /// Nodes of the graph, and those of them without an outgoing edge.
    contains: u32,
    leaf: u32,
    /// Nodes whose every outgoing edge is labeled.
    requires_outcome: u32,
    /// Nodes made at a public extension point or that are session events.
    hooked: u32,
    kind: [Option<NodeKind>; NODES],
    scope: [Option<Scope>; NODES],
    section: [Option<Section>; NODES],
    /// `edge[from][to]`: the first edge `from --> to`.
    edge: [[Option<EdgeId>; NODES]; NODES],
    /// Per edge, the outcomes selecting it (bit per outcome; none: any outcome no sibling claims).
    edge_outcomes: Vec<u16>,
    /// Per node, the outcomes that label an edge leaving it.
    decisive: [u16; NODES],
    /// Per node, the edges entering it, in declaration order (the first edge of each source).
    incoming: Vec<Vec<(NodeId, EdgeId)>>,
    /// Per facts, the nodes a walk must visit ([`Expectations::required`]).
    required: [u32; FACTS],
}

impl Tables {
    fn new(graph: &StageGraph, expect: Expectations) -> Self {
        let mut t = Tables {
            contains: 0,
            leaf: 0,
            requires_outcome: 0,
            hooked: 0,
            kind: [None; NODES],
            scope: [None; NODES],
            section: [None; NODES],
            edge: [[None; NODES]; NODES],
            edge_outcomes: Vec::new(),
            decisive: [0; NODES],
            incoming: vec![Vec::new(); NODES],
            required: [0; FACTS],
        };
        for node in graph.nodes() {
            let n = node.id as usize;
            t.contains |= bit(node.id);
            t.kind[n] = Some(node.kind);
            t.scope[n] = Some(node.scope);
            t.section[n] = match node.phase {
                Phase::Prepare => Some(Section::Prepare),
                Phase::Commit => Some(Section::Commit),
                _ => None,
            };
        }
        for &node in &NodeId::ALL {
            if graph.is_leaf(node) {
                t.leaf |= bit(node);
            }
            if graph.requires_outcome(node) {
                t.requires_outcome |= bit(node);
            }
            if has_hook(node) {
                t.hooked |= bit(node);
            }
            for o in graph.decisive_outcomes(node) {
                t.decisive[node as usize] |= outcome_bit(o);
            }
        }
        for (id, e) in graph.edge_ids() {
            t.edge_outcomes
                .push(e.outcomes.iter().fold(0, |m, &o| m | outcome_bit(o)));
            let slot = &mut t.edge[e.from as usize][e.to as usize];
            if slot.is_none() {
                *slot = Some(id);
            }
        }
        for e in graph.edges() {
            if let Some(id) = t.edge[e.from as usize][e.to as usize] {
                t.incoming[e.to as usize].push((e.from, id));
            }
        }
        for (f, required) in t.required.iter_mut().enumerate() {
            for &node in &NodeId::ALL {
                if expect.required(node, facts_of(f)) {
                    *required |= bit(node);
                }
            }
        }
        t
    }

    pub fn contains(&self, node: NodeId) -> bool {
        self.contains & bit(node) != 0
    }

    pub fn is_leaf(&self, node: NodeId) -> bool {
        self.leaf & bit(node) != 0
    }

    pub fn requires_outcome(&self, node: NodeId) -> bool {
        self.requires_outcome & bit(node) != 0
    }

    pub fn has_hook(&self, node: NodeId) -> bool {
        self.hooked & bit(node) != 0
    }

    pub fn kind(&self, node: NodeId) -> Option<NodeKind> {
        self.kind[node as usize]
    }

    pub fn scope(&self, node: NodeId) -> Option<Scope> {
        self.scope[node as usize]
    }

    pub fn section(&self, node: NodeId) -> Option<Section> {
        self.section[node as usize]
    }

    /// The edge `from --> to`, as [`StageGraph::edge`] finds it.
    pub fn edge(&self, from: NodeId, to: NodeId) -> Option<EdgeId> {
        self.edge[from as usize][to as usize]
    }

    /// The edge of [`StageGraph::step`] when the step is one.
    pub fn direct(&self, from: NodeId, outcome: Option<Outcome>, to: NodeId) -> Option<EdgeId> {
        let id = self.edge(from, to)?;
        let labels = self.edge_outcomes[id.0];
        let selected = if labels != 0 {
            outcome.is_some_and(|o| labels & outcome_bit(o) != 0)
        } else {
            outcome.is_none_or(|o| self.decisive[from as usize] & outcome_bit(o) == 0)
        };
        selected.then_some(id)
    }

    pub fn required(&self, node: NodeId, facts: CallFacts) -> bool {
        self.required[facts_index(facts)] & bit(node) != 0
    }
}

/// Walks one graph at one level.
#[derive(Debug)]
pub(crate) struct Walker {
    pub graph: &'static StageGraph,
    pub expect: Expectations,
    pub tables: Tables,
    /// [`Walker::passes_over`] per (from, outcome, to, facts): 0 not yet asked, 1 no, 2 yes.
    passes: Vec<Cell<u8>>,
    /// [`Walker::lane_stops`] per (node, outcome, facts); [`UNKNOWN`] until asked.
    lane: Vec<Cell<u32>>,
    /// [`Walker::implied`] per (from, outcome, to, facts), filled as asked: few keys occur.
    implied: RefCell<HashMap<usize, u128>>,
}

/// The outcome a step leaves `from` with. Post-execute decided, and then the pipeline failed
/// to apply the decision (reference semantics 32): the decision's record says accept or block,
/// the stage threw.
fn applied(from: NodeId, outcome: Option<Outcome>, to: NodeId) -> Option<Outcome> {
    match (from, outcome, to) {
        (NodeId::Post, Some(Outcome::Accept | Outcome::Block), NodeId::Normalized) => {
            Some(Outcome::Throw)
        }
        _ => outcome,
    }
}

/// The memo slot of a question about the step from `(from, outcome)` to `to` with `facts`.
fn step_key(from: NodeId, outcome: Option<Outcome>, to: NodeId, facts: CallFacts) -> usize {
    ((from as usize * OUTCOMES + outcome_index(outcome)) * NODES + to as usize) * FACTS
        + facts_index(facts)
}

/// A node mask no question answers (there are fewer nodes than bits).
const UNKNOWN: u32 = u32::MAX;

/// A memo of a pure question.
fn memo(slot: &Cell<u8>, answer: impl FnOnce() -> bool) -> bool {
    match slot.get() {
        0 => {
            let yes = answer();
            slot.set(if yes { 2 } else { 1 });
            yes
        }
        known => known == 2,
    }
}

impl Walker {
    pub fn new(graph: &'static StageGraph, expect: Expectations) -> Self {
        Walker {
            graph,
            expect,
            tables: Tables::new(graph, expect),
            passes: vec![Cell::new(0); NODES * OUTCOMES * NODES * FACTS],
            lane: vec![Cell::new(UNKNOWN); NODES * OUTCOMES * FACTS],
            implied: RefCell::new(HashMap::new()),
        }
    }

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
        let t = &self.tables;
        if to == NodeId::Around && from == NodeId::Around {
            return Step::Stay;
        }
        if t.is_leaf(to) {
            // A side branch hangs off the stage it leaves from, whenever that stage was visited
            // (or could not be seen at this level).
            let incoming = &t.incoming[to as usize];
            if let Some(&(_, id)) = incoming.iter().find(|(from, _)| visited & bit(*from) != 0) {
                return Step::Side(Some(id));
            }
            if incoming.iter().all(|(from, _)| !t.required(*from, facts)) {
                return Step::Side(None);
            }
            let missing = incoming.iter().map(|(from, _)| *from).collect();
            return Step::Refused {
                error: StepError::NoEdge { from, to },
                missing,
            };
        }
        let outcome = applied(from, outcome, to);
        if let Some(id) = t.direct(from, outcome, to) {
            return Step::Direct(id);
        }
        let key = step_key(from, outcome, to, facts);
        if memo(&self.passes[key], || {
            self.passes_over(from, outcome, to, facts)
        }) {
            return Step::Inferred;
        }
        match self.graph.step(from, outcome, to) {
            // The tables agree with the graph (tested); this is not reached.
            Ok((id, _)) => Step::Direct(id),
            Err(error) => Step::Refused {
                missing: self.missing(from, outcome, to, facts),
                error,
            },
        }
    }

    /// The edges an inferred step from `(from, outcome)` to `to` took (bit per edge): those
    /// on every way between the two records. Only stages the level never records are passed
    /// over here, an approval, whose `unavailable` answer only `full` records, and a finalize
    /// stage the definition may not have: a stage the level records, and that the trace does
    /// not hold, did not run. So where one way leads through, the records around it imply
    /// each of its edges (an inferred `denied`); where two do, only the edges both share.
    pub fn implied(
        &self,
        from: NodeId,
        outcome: Option<Outcome>,
        to: NodeId,
        facts: CallFacts,
    ) -> u128 {
        let key = step_key(from, outcome, to, facts);
        let outcome = applied(from, outcome, to);
        if let Some(&bits) = self.implied.borrow().get(&key) {
            return bits;
        }
        let bits = self.edges_on_every_way(from, outcome, to, facts);
        self.implied.borrow_mut().insert(key, bits);
        bits
    }

    fn edges_on_every_way(
        &self,
        from: NodeId,
        outcome: Option<Outcome>,
        to: NodeId,
        facts: CallFacts,
    ) -> u128 {
        let passable = |n: NodeId| {
            n != from
                && n != to
                && !self.tables.required(n, facts)
                && (level_of(n) > self.expect.level
                    || matches!(n, NodeId::Approval | NodeId::Finalize))
        };
        // A call whose definition has no `finalizeContent` has no finalize stage: passing over
        // it may be skipping it, so the edges at it are not implied.
        let skipped = |n: NodeId| n == NodeId::Finalize && facts.finalizer != Some(true);
        // The edges a way may take: from `from` as its outcome selects, then on from each
        // passed-over stage as its absence implies.
        let mut ways: Vec<(NodeId, NodeId, usize)> = Vec::new();
        let mut seen = bit(from);
        let mut stack = vec![(from, Some(outcome))];
        while let Some((n, selects)) = stack.pop() {
            for (id, e) in self.graph.edge_ids().filter(|(_, e)| e.from == n) {
                if self.graph.is_leaf(e.to) {
                    continue;
                }
                let selected = match selects {
                    None => true,
                    Some(o) => matches!(self.graph.step(n, o, e.to), Ok((first, _)) if first == id),
                };
                if !selected || id.0 >= 128 {
                    continue;
                }
                ways.push((n, e.to, id.0));
                if passable(e.to) && seen & bit(e.to) == 0 {
                    seen |= bit(e.to);
                    stack.push((e.to, self.expect.assumed(e.to).map(Some)));
                }
            }
        }
        // Keep the edges on some way to `to`, then those no way avoids.
        let reaches = |without: Option<usize>| -> u32 {
            let mut reached = bit(to);
            loop {
                let before = reached;
                for &(a, b, id) in &ways {
                    if Some(id) != without && reached & bit(b) != 0 && (b == to || passable(b)) {
                        reached |= bit(a);
                    }
                }
                if reached == before {
                    return reached;
                }
            }
        };
        let back = reaches(None);
        if back & bit(from) == 0 {
            return 0;
        }
        ways.iter()
            .filter(|&&(a, b, _)| back & bit(a) != 0 && back & bit(b) != 0)
            .filter(|&&(a, b, _)| !skipped(a) && !skipped(b))
            .filter(|&&(_, _, id)| reaches(Some(id)) & bit(from) == 0)
            .fold(0, |bits, &(_, _, id)| bits | 1u128 << id)
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

    /// The ordered stages of `section` a top-level call that recorded `(node, outcome)` may
    /// record next (bit per node): while one it has not visited remains, it holds the lane.
    /// Stages without a hook are looked past, as are those the trace need not hold.
    pub fn lane_stops(
        &self,
        node: NodeId,
        outcome: Option<Outcome>,
        facts: CallFacts,
        section: Section,
    ) -> u32 {
        let key = (node as usize * OUTCOMES + outcome_index(outcome)) * FACTS + facts_index(facts);
        let slot = &self.lane[key];
        if slot.get() != UNKNOWN {
            return slot.get();
        }
        let t = &self.tables;
        let stops = self
            .next_stops(node, outcome, facts, |m| {
                t.required(m, facts) && t.has_hook(m)
            })
            .into_iter()
            .filter(|&m| t.section(m) == Some(section))
            .fold(0, |mask, m| mask | bit(m));
        slot.set(stops);
        stops
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
    use tep_model::graph::Revision;
    use tep_model::trace::{Capability, ObservationLevel};

    use NodeId as N;

    fn walker(level: ObservationLevel) -> Walker {
        Walker::new(
            StageGraph::of(Revision::Rev2),
            Expectations::new(level, |_| true),
        )
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

    fn described(w: &Walker, bits: u128) -> Vec<String> {
        w.graph
            .edge_ids()
            .filter(|(id, _)| bits & 1u128 << id.0 != 0)
            .map(|(_, e)| e.describe())
            .collect()
    }

    #[test]
    fn the_records_around_an_unrecorded_stage_imply_its_edges_where_one_way_leads() {
        let w = walker(ObservationLevel::Hooks);
        assert_eq!(
            described(&w, w.implied(N::Pre, Some(Outcome::Deny), N::Post, NONE)),
            ["pre -->|deny| denied", "denied --> post"]
        );
        // An unanswered ask: the approval only `full` records, then the denial.
        assert_eq!(
            described(&w, w.implied(N::Pre, Some(Outcome::Ask), N::Post, NONE)),
            [
                "pre -->|ask| approval",
                "approval -->|rejected, cancelled, unavailable| denied",
                "denied --> post"
            ]
        );
        // A throw to `final`: `normalized` is implied; the finalize stage the definition may
        // not have is not, nor the edges at it.
        assert_eq!(
            described(&w, w.implied(N::Pre, Some(Outcome::Throw), N::Final, NONE)),
            ["pre -->|throw| normalized"]
        );
        let with_finalizer = CallFacts {
            finalizer: Some(true),
            ..NONE
        };
        assert_eq!(
            described(
                &w,
                w.implied(N::Pre, Some(Outcome::Throw), N::Finalize, with_finalizer)
            ),
            ["pre -->|throw| normalized", "normalized --> finalize"]
        );
        // `full` records every stage: nothing is implied there.
        let full = walker(ObservationLevel::Full);
        assert_eq!(full.implied(N::Post, None, N::Final, NONE), 0);
    }

    #[test]
    fn where_ways_part_only_the_edges_all_share_are_implied() {
        let w = walker(ObservationLevel::Events);
        let shared = described(&w, w.implied(N::ToolCall, None, N::ToolResult, NONE));
        // Every way from the logged call to its result passes pre-execute and `final`; none
        // of the edges where allow, deny, ask and throw part is implied.
        assert_eq!(shared, ["toolCall --> pre", "final --> toolResult"]);
        // No way at all: nothing.
        assert_eq!(w.implied(N::ToolResult, None, N::ToolCall, NONE), 0);
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

    #[test]
    fn the_tables_answer_what_the_graph_and_the_level_answer() {
        for revision in Revision::ALL {
            for graph in [StageGraph::of(revision), StageGraph::code_mode(revision)] {
                for level in ObservationLevel::ALL {
                    for ui in [false, true] {
                        let expect = Expectations::new(level, |c| ui || c != Capability::Ui);
                        let t = &Walker::new(graph, expect).tables;
                        for &n in &NodeId::ALL {
                            let node = graph.node(n);
                            assert_eq!(t.contains(n), graph.contains(n));
                            assert_eq!(t.is_leaf(n), graph.is_leaf(n));
                            assert_eq!(t.requires_outcome(n), graph.requires_outcome(n));
                            assert_eq!(t.has_hook(n), has_hook(n));
                            assert_eq!(t.kind(n), node.map(|d| d.kind));
                            assert_eq!(t.scope(n), node.map(|d| d.scope));
                            for f in 0..FACTS {
                                let facts = facts_of(f);
                                assert_eq!(facts_index(facts), f);
                                assert_eq!(t.required(n, facts), expect.required(n, facts));
                            }
                            for &to in &NodeId::ALL {
                                assert_eq!(t.edge(n, to), graph.edge(n, to).map(|(id, _)| id));
                                let outcomes = std::iter::once(None).chain(ALL_OUTCOMES.map(Some));
                                for o in outcomes {
                                    let by_graph = graph.step(n, o, to).ok().map(|(id, _)| id);
                                    assert_eq!(t.direct(n, o, to), by_graph, "{n} {o:?} {to}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The walk as the graph answers it, without tables or memos (what `step` computed before).
    fn step_by_graph(
        w: &Walker,
        from: N,
        outcome: Option<Outcome>,
        to: N,
        facts: CallFacts,
        visited: u32,
    ) -> Step {
        let g = w.graph;
        if to == N::Around && from == N::Around {
            return Step::Stay;
        }
        if g.is_leaf(to) {
            let from_visited = g
                .incoming(to)
                .find(|e| visited & bit(e.from) != 0)
                .and_then(|e| g.edge(e.from, to).map(|(id, _)| id));
            if from_visited.is_some() {
                return Step::Side(from_visited);
            }
            if g.incoming(to).all(|e| !w.expect.required(e.from, facts)) {
                return Step::Side(None);
            }
            let missing = g.incoming(to).map(|e| e.from).collect();
            return Step::Refused {
                error: StepError::NoEdge { from, to },
                missing,
            };
        }
        let outcome = match (from, outcome, to) {
            (N::Post, Some(Outcome::Accept | Outcome::Block), N::Normalized) => {
                Some(Outcome::Throw)
            }
            _ => outcome,
        };
        match g.step(from, outcome, to) {
            Ok((id, _)) => Step::Direct(id),
            Err(_) if w.passes_over(from, outcome, to, facts) => Step::Inferred,
            Err(error) => Step::Refused {
                missing: w.missing(from, outcome, to, facts),
                error,
            },
        }
    }

    #[test]
    fn every_lane_answer_is_its_own_whatever_was_asked_before() {
        // One walker asked everything in turn agrees with a fresh walker asked one thing: the
        // memo gives each (node, outcome, facts) its own slot.
        for level in ObservationLevel::ALL {
            let shared = walker(level);
            let mut held = 0;
            for &n in &NodeId::ALL {
                let Some(section) = shared.tables.section(n) else {
                    continue;
                };
                for o in std::iter::once(None).chain(ALL_OUTCOMES.map(Some)) {
                    for f in 0..FACTS {
                        let facts = facts_of(f);
                        let fresh = walker(level).lane_stops(n, o, facts, section);
                        assert_eq!(
                            shared.lane_stops(n, o, facts, section),
                            fresh,
                            "{level}: {n} {o:?} {facts:?}"
                        );
                        held += usize::from(fresh != 0);
                    }
                }
            }
            // Some answers hold the lane, so a wrong slot would show.
            assert!(held > 0, "{level}");
        }
    }

    #[test]
    fn every_step_is_the_graph_s_asked_twice() {
        for level in ObservationLevel::ALL {
            let w = walker(level);
            for &from in &NodeId::ALL {
                for o in std::iter::once(None).chain(ALL_OUTCOMES.map(Some)) {
                    for &to in &NodeId::ALL {
                        // Facts unknown, all false, all true.
                        for f in [0, 4, 8] {
                            for visited in [0, bit(N::ToolCall) | bit(N::Pre)] {
                                let facts = facts_of(f);
                                let expected = step_by_graph(&w, from, o, to, facts, visited);
                                // The second answer comes from the memo.
                                assert_eq!(w.step(from, o, to, facts, visited), expected);
                                assert_eq!(w.step(from, o, to, facts, visited), expected);
                            }
                        }
                    }
                }
            }
        }
    }
}
