//! A call's visit of a stage: the step it takes on its graph and what the rules make of it.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::facts::walk::Tables;

impl Checker {
    /// A record of call `i`: the step on its graph, the claim on a refused step, the rules that
    /// read it, then the facts it adds.
    pub(super) fn visit(
        &mut self,
        line: usize,
        i: usize,
        node: Option<NodeId>,
        outcome: Option<Outcome>,
        record: Record<'_>,
    ) {
        let Some(batch) = self.batch.as_ref() else {
            return;
        };
        let call = &batch.calls[i];
        let walker = if call.is_sub_call() {
            &self.code_walker
        } else {
            &self.walker
        };
        let step = match node {
            // Contexts and tool-owned events are placed by their own rules.
            None | Some(NodeId::Context | NodeId::Owned) => Step::Side(None),
            Some(n) if !walker.tables.contains(n) => Step::Refused {
                error: tep_model::graph::StepError::NoEdge {
                    from: call.walk.position,
                    to: n,
                },
                missing: Vec::new(),
            },
            Some(n) => walker.step(
                call.walk.position,
                call.walk.outcome,
                n,
                call.facts,
                call.walk.visited,
            ),
        };
        // On a detour the walk's position is not where the call is: what it implies from
        // there, the call did not take.
        if let (Step::Inferred, Some(to), None) = (&step, node, call.walk.detour) {
            self.implied[graph_index(call.graph.kind())] |=
                walker.implied(call.walk.position, call.walk.outcome, to, call.facts);
        }
        if let (Some(steps), Some(to)) = (self.steps.as_mut(), node) {
            let taken = taken_step(&walker.tables, call, &step, to);
            push_step(
                steps,
                &mut self.report.steps_omitted,
                StepRecord {
                    line,
                    graph: call.graph.kind(),
                    from: taken.from,
                    to,
                    edge: taken.edge,
                    refused: taken.refused,
                },
            );
        }
        let visit = Visit {
            line,
            call: i,
            node,
            outcome,
            record,
            step: &step,
        };
        let mut claimed: Option<(InvariantId, Claim)> = None;
        if let (Step::Refused { error, missing }, Some(n)) = (&step, node) {
            let refused = Refused {
                visit: &visit,
                node: n,
                call,
                graph: call.graph,
                error,
                missing,
                level: self.options.level,
            };
            claimed = self.dispatch.claims.iter().find_map(|rule| {
                rule.claim
                    .and_then(|f| f(&refused))
                    .map(|c| (rule.entry.id, c))
            });
        }
        let readers = match (node, record) {
            (Some(n), _) => &self.dispatch.by_node[n as usize],
            (None, Record::Mark(m)) if m.mark == MarkKind::BodySettled => &self.dispatch.body_marks,
            (None, Record::Mark(_)) => &self.dispatch.observer_marks,
            (None, _) => &self.dispatch.audit,
        };
        let mut cx = Cx {
            options: &self.options,
            batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for f in readers {
            f(&mut cx, &visit);
        }
        let keep = match claimed {
            Some((id, claim)) => {
                let keep = claim.keep_position;
                self.found.insert(
                    0,
                    Finding {
                        invariant: id,
                        call: Some(i),
                        lines: claim.lines,
                        message: claim.message,
                        once: true,
                    },
                );
                keep
            }
            None => false,
        };
        self.apply(line, i, node, outcome, record, &step, keep);
        self.emit();
    }

    /// Records what a visit adds to the call and the batch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply(
        &mut self,
        line: usize,
        i: usize,
        node: Option<NodeId>,
        outcome: Option<Outcome>,
        record: Record<'_>,
        step: &Step,
        keep: bool,
    ) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let before = batch.calls[i].walk.last_node;
        let top_level = !batch.calls[i].is_sub_call();
        let kind = batch.calls[i].graph.kind();
        {
            let tables = if top_level {
                &self.walker.tables
            } else {
                &self.code_walker.tables
            };
            let call = &batch.calls[i];
            // A step without a node is a side branch's, which `taken_step` places by its edge.
            let to = node.unwrap_or(call.walk.position);
            if let Some(edge) = taken_step(tables, call, step, to).edge {
                self.taken.take(&mut self.report, kind, edge);
            }
            let call = &mut batch.calls[i];
            call.walk.last_line = line;
            if let Some(n) = node {
                let moves = match step {
                    Step::Direct(_) | Step::Inferred => true,
                    Step::Refused { .. } => !keep && tables.contains(n),
                    // The last of consecutive `around` records is where the waterfall stands:
                    // its outcome (a wrapper's throw, or none) is the visit's.
                    Step::Stay => {
                        call.walk.outcome = outcome;
                        call.walk.position_line = line;
                        false
                    }
                    Step::Side(_) => false,
                };
                let moved = moves && !tables.is_leaf(n);
                if moved {
                    call.walk.position = n;
                    call.walk.outcome = outcome;
                    call.walk.position_line = line;
                }
                match step {
                    Step::Refused { .. } if !moved => call.walk.detour = Some(n),
                    Step::Direct(_) | Step::Inferred | Step::Refused { .. } => {
                        call.walk.detour = None;
                    }
                    Step::Stay | Step::Side(_) => {}
                }
                if tables.contains(n) && !tables.is_leaf(n) {
                    call.walk.last_node = n;
                }
                call.walk.visited |= bit(n);
            }
        }
        let call_facts = batch.calls[i].facts;
        match record {
            Record::Stage(obs) => self.stage_facts(line, i, obs, before),
            Record::Event(event) => self.event_facts(line, i, event),
            Record::Mark(mark) => {
                let call = &mut batch.calls[i];
                match mark.mark {
                    MarkKind::ObserverSettled => {
                        call.presented
                            .observer_marks
                            .push((line, mark.after_ms, mark.by.clone()));
                    }
                    MarkKind::BindingResolved | MarkKind::BindingRejected => {
                        call.code.binding.get_or_insert(line);
                    }
                    MarkKind::BodySettled => {
                        call.body.steps = None;
                        call.body.just_settled = true;
                    }
                }
            }
        }
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        // The ordered lane: the stages with a hook, in the prepare and commit phases.
        let tables = &self.walker.tables;
        if let Some(n) = node
            && top_level
            && !tables.is_leaf(n)
            && tables.has_hook(n)
            && !matches!(step, Step::Refused { .. } if keep)
            && let Some(sec) = tables.section(n)
        {
            if sec == Section::Commit {
                batch.calls[i].commit.started = true;
            }
            // Held until no ordered stage of the same section can come next (records without a
            // hook are looked past: they are not ordered stages; an ordered stage the call
            // already recorded, out of order, does not come again).
            let visited = batch.calls[i].walk.visited;
            let stays = self.walker.lane_stops(n, outcome, call_facts, sec) & !visited != 0;
            batch.lane = if stays { Some((i, sec, line)) } else { None };
        }
    }
}

/// The step a visit took, from where its call really is: on a detour (the walk holds the call
/// where a refused step left it) a step starts where the detour led, and is an edge only when
/// the graph has one from there. So an edge the walk would take from where it holds the call
/// is never counted for a call that was elsewhere.
struct TakenStep {
    from: NodeId,
    edge: Option<EdgeId>,
    refused: bool,
}

fn taken_step(tables: &Tables, call: &Call, step: &Step, to: NodeId) -> TakenStep {
    match (step, call.walk.detour) {
        (Step::Side(edge), _) => TakenStep {
            from: edge
                .and_then(|e| call.graph.edges().get(e.0))
                .map_or(call.walk.position, |e| e.from),
            edge: *edge,
            refused: false,
        },
        (Step::Direct(_) | Step::Inferred | Step::Refused { .. }, Some(really)) => {
            let edge = tables.edge(really, to);
            TakenStep {
                from: really,
                edge,
                refused: edge.is_none(),
            }
        }
        (Step::Direct(e), None) => TakenStep {
            from: call
                .graph
                .edges()
                .get(e.0)
                .map_or(call.walk.position, |e| e.from),
            edge: Some(*e),
            refused: false,
        },
        (_, _) => TakenStep {
            from: call.walk.position,
            edge: None,
            refused: step.is_refused(),
        },
    }
}
