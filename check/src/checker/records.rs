//! Reading one record: a stage, an event or a mark, and the call it belongs to.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Checker {
    pub(super) fn stage(&mut self, line: usize, obs: &Observation) -> Result<(), TraceError> {
        let node = obs.node;
        let tables = &self.walker.tables;
        let kind = tables.kind(node);
        if matches!(
            kind,
            Some(NodeKind::SessionEvent | NodeKind::OwnedEvents | NodeKind::ContextInjection)
        ) || matches!(node, NodeId::DispatchStart | NodeId::Dispatched)
        {
            return Err(TraceError::new(
                line,
                format!(
                    "stage `{node}` is observed through its session event, not as a stage record"
                ),
            ));
        }
        if node == NodeId::RunCode {
            return Err(TraceError::new(
                line,
                "stage `runCode` is observed through a binding mark (`binding-resolved` or `binding-rejected`)",
            ));
        }
        if node == NodeId::Model {
            return self.open_batch(line, obs);
        }
        let scope = tables.scope(node).unwrap_or(Scope::Call);
        if scope == Scope::Batch {
            if obs.call.is_some() {
                return Err(TraceError::new(
                    line,
                    format!("stage `{node}` is per batch and takes no `call`"),
                ));
            }
            return self.settle(line, node);
        }
        let call = obs
            .call
            .as_ref()
            .ok_or_else(|| TraceError::new(line, format!("stage `{node}` needs a `call`")))?;
        let present = |field: &str| match field {
            "outcome" => obs.outcome.is_some(),
            "result" => obs.result.is_some(),
            "intent" => obs.intent.is_some(),
            _ => true,
        };
        // Only a record that lacks a field pays for finding which.
        let lacks = ((tables.requires_outcome(node) || node == NodeId::FsGate)
            && obs.outcome.is_none())
            || (node == NodeId::Final && obs.result.is_none())
            || (node == NodeId::FsGate && obs.intent.is_none());
        if lacks
            && let Some(field) = required_fields(self.graph, node)
                .into_iter()
                .find(|f| !present(f))
        {
            let article = if field.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            let mut message = format!("stage `{node}` needs {article} `{field}`");
            if field == "outcome" {
                let outcomes: Vec<&str> = match node {
                    NodeId::FsGate => vec!["allow", "deny"],
                    _ => self
                        .graph
                        .decisive_outcomes(node)
                        .iter()
                        .map(|o| o.as_str())
                        .collect(),
                };
                message = format!(
                    "stage `{node}` needs an `outcome` (one of: {})",
                    outcomes.join(", ")
                );
            }
            return Err(TraceError::new(line, message));
        }
        let i = self.resolve_call(line, call, obs.parent.as_ref(), node == NodeId::Pre)?;
        self.visit(line, i, Some(node), obs.outcome, Record::Stage(obs));
        Ok(())
    }

    pub(super) fn event(&mut self, line: usize, rec: &EventRecord) -> Result<(), TraceError> {
        let event = &rec.event;
        // The call the event belongs to: the trace's attribution, or the event's own id.
        let own = event.body.named_call();
        let parent = match &event.body {
            EventBody::CodeDispatchStart(data) => Some(&data.parent_call_id),
            EventBody::CodeDispatch(data) => Some(&data.parent_call_id),
            _ => None,
        };
        // A tool/result or an injected context that names another call is a violation
        // (`result-names-its-call`); any other disagreement means the trace cannot be attributed.
        if let (Some(given), Some(own)) = (&rec.call, own)
            && given != own
            && !matches!(
                event.body,
                EventBody::ToolResult(_) | EventBody::UserMessage(_) | EventBody::ContextMessage(_)
            )
        {
            return Err(TraceError::new(
                line,
                format!(
                    "the record is attributed to call {given} but its {} names call {own}",
                    event.body.type_name()
                ),
            ));
        }
        let call = rec.call.as_ref().or(own);
        self.session_event(line, event, call);
        let Some(call) = call else {
            // Not a call's event: a user's own message, or an event a recording could not
            // attribute. Nothing but the session log's order applies to it.
            return match &event.body {
                EventBody::ToolCall(_) | EventBody::ToolResult(_) => Err(TraceError::new(
                    line,
                    format!("a `{}` event needs a call id", event.body.type_name()),
                )),
                _ => Ok(()),
            };
        };
        let starts = matches!(event.body, EventBody::CodeDispatchStart(_));
        let i = self.resolve_call(line, call, parent, starts)?;
        let is_sub_call = self
            .batch
            .as_ref()
            .is_some_and(|b| b.calls[i].is_sub_call());
        let node = if is_sub_call {
            EventBody::code_mode_node_of(event.body.type_name())
        } else {
            event.body.node()
        };
        self.visit(line, i, node, None, Record::Event(event));
        Ok(())
    }

    pub(super) fn mark(&mut self, line: usize, mark: &Mark) -> Result<(), TraceError> {
        let i = self.resolve_call(line, &mark.call, None, false)?;
        let (node, outcome) = match mark.mark {
            MarkKind::ObserverSettled | MarkKind::BodySettled => (None, None),
            MarkKind::BindingResolved | MarkKind::BindingRejected => {
                let is_sub_call = self
                    .batch
                    .as_ref()
                    .is_some_and(|b| b.calls[i].is_sub_call());
                if !is_sub_call {
                    return Err(TraceError::new(
                        line,
                        format!(
                            "a binding mark is for a Code Mode sub-call, not call {}",
                            mark.call
                        ),
                    ));
                }
                let outcome = if mark.mark == MarkKind::BindingRejected {
                    Outcome::Reject
                } else {
                    Outcome::Resolve
                };
                (Some(NodeId::RunCode), Some(outcome))
            }
        };
        self.visit(line, i, node, outcome, Record::Mark(mark));
        Ok(())
    }

    /// Rules that read every session event (the log's own order), attributed or not.
    pub(super) fn session_event(
        &mut self,
        line: usize,
        event: &SessionEvent,
        call: Option<&CallId>,
    ) {
        if self.dispatch.events.is_empty() {
            self.session.last_seq = Some((event.seq, line));
            return;
        }
        let index = call.and_then(|c| self.batch.as_ref()?.find(c));
        let Some(batch) = self.batch.as_ref() else {
            self.session.last_seq = Some((event.seq, line));
            return;
        };
        let mut cx = Cx {
            options: &self.options,
            batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in &self.dispatch.events {
            if let Some(f) = rule.event {
                f(&mut cx, line, event, index);
            }
        }
        self.session.last_seq = Some((event.seq, line));
        self.emit();
    }

    /// The index of `call` in the open batch. A Code Mode sub-call is added the first time it
    /// appears: its parent is the record's (`parent`, `parentCallId`), or read from the id
    /// scheme `<parent>:code:<n>`. A record that `starts` a sub-call (its dispatch start, or its
    /// pre-execute) after its program ran again names a new sub-call.
    pub(super) fn resolve_call(
        &mut self,
        line: usize,
        call: &CallId,
        parent: Option<&CallId>,
        starts: bool,
    ) -> Result<usize, TraceError> {
        let revision = self.options.revision;
        let batch = self.batch.as_mut().ok_or_else(|| {
            TraceError::new(
                line,
                "a record before the first `model` observation (every trace starts with the batch)",
            )
        })?;
        if let Some(i) = batch.find(call) {
            // A sub-call id names a new sub-call when its program runs again (a retry
            // dispatches the `run_code` body anew, and its numbering starts over).
            // (Later records of the earlier run's sub-call, an observer's mark, still name it.)
            let again = starts
                && batch.calls[i].parent.is_some_and(|p| {
                    batch.calls[p].code.dispatches != batch.calls[i].code.parent_dispatch
                });
            if !again {
                return Ok(i);
            }
        }
        let unknown = || {
            TraceError::new(
                line,
                format!(
                    "unknown call {call}: the batch declared at line {} does not list it (nor is it a Code Mode sub-call of one: no `parent`, and not `<call>:code:<n>`)",
                    batch.model_line
                ),
            )
        };
        let parent_id = match parent {
            Some(p) => p.clone(),
            // A record naming no parent (a hand-written trace): the default scheme's.
            None => call.sub_call_parent().ok_or_else(unknown)?,
        };
        let p = *batch.index.get(&parent_id).ok_or_else(unknown)?;
        if batch.calls[p].is_sub_call() {
            return Err(unknown());
        }
        let i = batch.calls.len();
        let mut sub = Call::new(
            call.clone(),
            String::new(),
            None,
            StageGraph::code_mode(revision),
            line,
        );
        sub.parent = Some(p);
        sub.code.parent_dispatch = batch.calls[p].code.dispatches;
        // The sub-calls of one run of the program are the last ones of its list.
        sub.code.number = match batch.calls[p].code.sub_calls.last() {
            Some(&k) if batch.calls[k].code.parent_dispatch == sub.code.parent_dispatch => {
                batch.calls[k].code.number + 1
            }
            _ => 1,
        };
        batch.calls[p].code.sub_calls.push(i);
        batch.calls.push(sub);
        batch.index_call(call.clone(), i);
        Ok(i)
    }

    // -----------------------------------------------------------------------------------------
    // Batches
}
