//! The facts a record teaches, kept after the rules have seen it (so a rule always compares
//! a record with what came before it).

#[allow(clippy::wildcard_imports)]
use super::*;
use std::sync::Arc;

use crate::facts::recorded_content;
use crate::facts::state::{Arguments, RecordedText};

impl Checker {
    pub(super) fn stage_facts(&mut self, line: usize, i: usize, obs: &Observation, before: NodeId) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let node = obs.node;
        let outcome = obs.outcome;
        let call = &mut batch.calls[i];
        call.body.just_settled = false;
        if let Some(identity) = &obs.identity {
            if call.is_sub_call() && call.name.is_empty() {
                call.name = identity.name.clone();
                call.facts = self.options.call_facts(&identity.name);
            }
            if call.is_sub_call() && call.start.args.is_none() {
                call.start.args = Some(Arguments::Value(identity.arguments.clone()));
            }
            if call.start.first_token.is_none() {
                call.start.first_token = Some((identity.token.clone(), line));
            }
            if !call.start.handed_before(identity) {
                call.start.matched = call
                    .identity_diff(identity)
                    .is_empty()
                    .then(|| Arc::downgrade(identity));
            }
        }
        let denial = matches!(
            (node, outcome),
            (NodeId::Pre | NodeId::Guards, Some(Outcome::Deny))
                | (
                    NodeId::Approval,
                    Some(Outcome::Rejected | Outcome::Cancelled | Outcome::Unavailable)
                )
                | (NodeId::Denied, _)
        );
        if denial {
            call.decisions.denied.get_or_insert(line);
        }
        if outcome == Some(Outcome::Throw)
            && matches!(
                node,
                NodeId::Pre | NodeId::Approval | NodeId::Guards | NodeId::Around | NodeId::Post
            )
        {
            call.decisions.threw.get_or_insert((node, line));
        }
        match node {
            NodeId::Pre => {
                call.decisions.pre = Some(line);
                if outcome == Some(Outcome::Ask) {
                    call.decisions.pre_asked.get_or_insert(line);
                }
            }
            NodeId::Approval => call.approval.outcome = outcome,
            NodeId::Around if before == NodeId::ToolBody => {
                // The body returned to the wrappers.
                call.body.since = None;
                batch.running_bodies.remove(&i);
                batch.running_exclusive_bodies.remove(&i);
            }
            NodeId::ToolBody if before == NodeId::Around => {
                call.body.since = Some(line);
                call.code.dispatches += 1;
                if self.options.body_marks {
                    call.body.steps = Some(line);
                }
                if !call.is_sub_call() {
                    batch.running_bodies.insert(i);
                    if !call.may_overlap() {
                        batch.running_exclusive_bodies.insert(i);
                    }
                }
            }
            NodeId::Post => {
                if let Some(o) = outcome {
                    call.decisions.post = Some((o, line));
                }
            }
            // The pipeline failed applying post-execute's decision.
            NodeId::Normalized if before == NodeId::Post => {
                call.decisions.threw.get_or_insert((NodeId::Post, line));
            }
            NodeId::Finalize => {
                call.decisions.finalized.get_or_insert(line);
                if let Some(result) = &obs.result {
                    call.decisions.candidate =
                        Some((result.clone(), outcome == Some(Outcome::Throw), line));
                }
            }
            NodeId::Final => {
                if let Some(result) = &obs.result {
                    call.commit.notified.get_or_insert((result.clone(), line));
                }
                let parent = call.parent;
                if let Some(p) = parent
                    && batch.calls[p].code.open_sub == Some(i)
                {
                    batch.calls[p].code.open_sub = None;
                }
                if parent.is_none() && batch.completed.is_some() && batch.first_context.is_none() {
                    // An outcome announced after the batch completed (its result came first: a
                    // violation already) still owes its contexts.
                    batch.fifo = fifo(batch).into();
                }
            }
            NodeId::PresentCall => call.presented.call += 1,
            NodeId::PresentResult => call.presented.result += 1,
            _ => {}
        }
        open_sub_call(batch, i, node);
    }

    pub(super) fn event_facts(&mut self, line: usize, i: usize, event: &SessionEvent) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let call = &mut batch.calls[i];
        match &event.body {
            EventBody::ToolCall(data) if call.start.logged.is_none() => {
                call.start.logged = Some((line, event.seq));
                call.start.args = Some(Arguments::text(&data.arguments));
                call.start.matched = None;
                // The batch declared the name: it is copied only when it differs.
                if call.name != data.name {
                    call.name.clone_from(&data.name);
                }
                call.facts = self.options.call_facts(&data.name);
                if call.safe == Some(false) {
                    batch.open_exclusive.insert(i);
                }
                batch.advance_cursors();
            }
            EventBody::ToolResult(data) if call.commit.result.is_none() && !call.is_sub_call() => {
                call.commit.result = Some(line);
                let announced = call.commit.notified.as_ref().map(|(r, _)| &**r);
                let text = RecordedText::of(recorded_content(data), announced);
                call.commit.recorded = Some((text, data.is_error()));
                batch.open_exclusive.remove(&i);
                batch.advance_cursors();
                if batch.is_complete() && batch.completed.is_none() {
                    batch.completed = Some(line);
                    let mut expected = fifo(batch);
                    // Contexts injected too early were reported then; they are not owed again.
                    for (c, text) in std::mem::take(&mut batch.early_contexts) {
                        if let Some(k) = expected.iter().position(|(i, t, _)| *i == c && *t == text)
                        {
                            expected.remove(k);
                        }
                    }
                    batch.fifo = expected.into();
                }
            }
            EventBody::UserMessage(_) | EventBody::ContextMessage(_) => {
                if let Some(text) = context_text(&event.body) {
                    batch.consume_context(i, &text);
                    batch.injected.push((i, text, line));
                }
                batch.last_injected = Some(i);
                batch.first_context.get_or_insert(line);
                if batch.settled.is_none() && batch.is_complete() {
                    let settled = unrecorded_settle(&self.walker, self.options.level);
                    self.implied[0] |= settled.0 | settled.1;
                }
                if let (Some(_), Some(edge)) = (
                    batch.settled,
                    self.walker.tables.edge(NodeId::AllResults, NodeId::Context),
                ) {
                    self.taken.take(&mut self.report, GraphKind::Pipeline, edge);
                }
            }
            EventBody::ApprovalAsked(_) => {
                call.approval.asked.get_or_insert(line);
            }
            EventBody::ApprovalDecided(data) => {
                call.approval.decided.get_or_insert((data.outcome, line));
            }
            EventBody::CodeDispatchStart(data) => {
                call.code.dispatch_started.get_or_insert(line);
                if call.name.is_empty() {
                    call.name = data.name.clone();
                    call.start.args = Some(Arguments::Value(data.arguments.clone()));
                    call.start.matched = None;
                    call.facts = self.options.call_facts(&data.name);
                }
            }
            EventBody::CodeDispatch(data) => {
                call.code.dispatched.get_or_insert(line);
                if call.name.is_empty() {
                    call.name = data.name.clone();
                    call.start.args = Some(Arguments::Value(data.arguments.clone()));
                    call.start.matched = None;
                }
            }
            EventBody::FsObserved(data) => match data.state {
                FileState::Present { version } => {
                    self.session
                        .files
                        .insert(data.target.clone(), (version, line));
                }
                FileState::Absent => {
                    self.session.files.remove(&data.target);
                }
            },
            _ => {}
        }
        // A tool-owned event recorded while the body runs takes the edge into the side branch.
        if event.body.node() == Some(NodeId::Owned) && batch.calls[i].body.since.is_some() {
            let kind = batch.calls[i].graph.kind();
            let tables = match kind {
                GraphKind::Pipeline => &self.walker.tables,
                GraphKind::CodeMode => &self.code_walker.tables,
            };
            if let Some(edge) = tables.edge(NodeId::ToolBody, NodeId::Owned) {
                self.taken.take(&mut self.report, kind, edge);
            }
        }
        let node = if batch.calls[i].is_sub_call() {
            EventBody::code_mode_node_of(event.body.type_name())
        } else {
            event.body.node()
        };
        if let Some(n) = node {
            open_sub_call(batch, i, n);
        }
    }
}
