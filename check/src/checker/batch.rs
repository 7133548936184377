//! A batch opens at its `model` record, settles at `allResults` and closes at the next batch.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Checker {
    pub(super) fn open_batch(&mut self, line: usize, obs: &Observation) -> Result<(), TraceError> {
        if obs.call.is_some() {
            return Err(TraceError::new(
                line,
                "stage `model` is per batch and takes no `call`",
            ));
        }
        let declared = obs.calls.as_ref().ok_or_else(|| {
            TraceError::new(
                line,
                "stage `model` needs `calls` (the batch, in model order)",
            )
        })?;
        self.close_batch()?;
        let mut batch = Batch::open(line, std::mem::take(&mut self.spare));
        for d in declared {
            let mut call = Call::new(
                d.call_id.clone(),
                d.name.clone(),
                d.concurrency_safe,
                self.graph,
                line,
            );
            call.facts = self.options.call_facts(&d.name);
            if !batch.declare(call) {
                return Err(TraceError::new(
                    line,
                    format!("duplicate call id {} in the batch", d.call_id),
                ));
            }
        }
        self.batch = Some(batch);
        self.report.batches += 1;
        Ok(())
    }

    /// The batch-level `allResults` record.
    pub(super) fn settle(&mut self, line: usize, node: NodeId) -> Result<(), TraceError> {
        if node != NodeId::AllResults {
            return Err(TraceError::new(
                line,
                format!(
                    "stage `{node}` is not a batch stage of {}",
                    self.options.revision
                ),
            ));
        }
        let Some(batch) = self.batch.as_mut() else {
            return Err(TraceError::new(
                line,
                "a record before the first `model` observation",
            ));
        };
        let mut cx = Cx {
            options: &self.options,
            batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in &self.dispatch.settle {
            if let Some(f) = rule.settle {
                f(&mut cx, line);
            }
        }
        if batch.settled.is_none() {
            batch.settled = Some(line);
            let edge = self
                .walker
                .tables
                .edge(NodeId::ToolResult, NodeId::AllResults);
            if let Some(edge) = edge.filter(|_| batch.is_complete()) {
                self.taken.take(&mut self.report, GraphKind::Pipeline, edge);
            }
            if let Some(steps) = self.steps.as_mut() {
                push_step(
                    steps,
                    &mut self.report.steps_omitted,
                    StepRecord {
                        line,
                        graph: GraphKind::Pipeline,
                        from: NodeId::ToolResult,
                        to: NodeId::AllResults,
                        edge,
                        refused: false,
                    },
                );
            }
        }
        self.emit();
        Ok(())
    }

    /// A batch every call of which has its result, at a level that does not record
    /// `allResults`, settled there: the edge into it is implied.
    pub(super) fn imply_settled(&mut self, batch: &Batch) {
        if batch.settled.is_none() && batch.is_complete() {
            self.implied[0] |= unrecorded_settle(&self.walker, self.options.level).0;
        }
    }

    /// The model's next request after the open batch.
    pub(super) fn request(&mut self, line: usize, request: &NextRequest) -> Result<(), TraceError> {
        let Some(batch) = self.batch.as_ref() else {
            return Err(TraceError::new(
                line,
                "a `request` record before the first `model` observation",
            ));
        };
        let mut cx = Cx {
            options: &self.options,
            batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in &self.dispatch.request {
            if let Some(f) = rule.request {
                f(&mut cx, line, request);
            }
        }
        self.emit();
        Ok(())
    }

    pub(super) fn close_batch(&mut self) -> Result<(), TraceError> {
        // A cut ends the batch open when it was made, and no later one.
        let cut_short = std::mem::take(&mut self.cut_short);
        let Some(batch) = self.batch.take() else {
            return Ok(());
        };
        if self.options.level >= ObservationLevel::Hooks && looks_like_a_session_log(&batch) {
            return Err(TraceError::new(
                batch.model_line,
                format!(
                    "the batch declared here has session events but no stage record at all: this looks like a session log (level `events`), not a trace at level `{}`; check it with `--observed events`, or say so in its header (\"observation\": \"events\")",
                    self.options.level
                ),
            ));
        }
        if self.escaped || cut_short {
            return Ok(());
        }
        self.imply_settled(&batch);
        let mut cx = Cx {
            options: &self.options,
            batch: &batch,
            fs: &self.session,
            found: &mut self.found,
        };
        for rule in &self.dispatch.batch_end {
            if let Some(f) = rule.batch_end {
                f(&mut cx);
            }
        }
        self.batch = Some(batch);
        self.emit();
        if let Some(batch) = self.batch.take() {
            self.spare = batch.into_spare();
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Visits
}

/// A sub-call holds its program's lane from its first record until its `tools/result`.
pub(super) fn open_sub_call(batch: &mut Batch, i: usize, node: NodeId) {
    let Some(p) = batch.calls[i].parent else {
        return;
    };
    let call = &batch.calls[i];
    let running = call.commit.notified.is_none()
        && !call.has_visited(NodeId::Final)
        && !matches!(node, NodeId::Final | NodeId::Dispatched | NodeId::RunCode);
    if running && batch.calls[p].code.open_sub.is_none() {
        batch.calls[p].code.open_sub = Some(i);
    }
}

/// The contexts the announced outcomes carry, in call order and each call's order.
pub(super) fn fifo(batch: &Batch) -> Vec<(usize, String, usize)> {
    batch
        .top_level()
        .flat_map(|(i, c)| {
            c.commit.notified.iter().flat_map(move |(result, l)| {
                result
                    .additional_contexts
                    .iter()
                    .map(move |ctx| (i, ctx.text.clone(), *l))
            })
        })
        .collect()
}

/// The stage records a trace at level `hooks` or `full` holds (bit per node).
static STAGE_RECORDS: std::sync::LazyLock<u32> = std::sync::LazyLock::new(|| {
    NodeId::ALL
        .iter()
        .filter(|&&n| {
            crate::observation::level_of(n) == ObservationLevel::Hooks
                || crate::observation::level_of(n) == ObservationLevel::Full
        })
        .filter(|&&n| n != NodeId::AllResults && n != NodeId::RunCode)
        .fold(0, |acc, &n| acc | bit(n))
});

/// A batch whose calls have session events but not one stage record.
pub(super) fn looks_like_a_session_log(batch: &Batch) -> bool {
    let hooks = *STAGE_RECORDS;
    let started = batch.top_level().any(|(_, c)| c.start.logged.is_some());
    started && batch.calls.iter().all(|c| c.walk.visited & hooks == 0)
}
