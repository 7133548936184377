//! The model's phase `Commit`: the ordered stages after dispatch, in model order, ending with
//! the recorded `tool/result`.
//!
//! Graph nodes: `tools/post-execute`, outer normalization and `finalizeContent` ([`freeze`]: the
//! candidate becomes the frozen outcome), then the `tools/result` notification, the recorded
//! `tool/result` and `presentResult` (here).

mod freeze;

use std::sync::Arc;

use super::{CallOutcome, CallPlan, Ended, Started, ToolRegistry};
use crate::execution::Execution;
use crate::pipeline::extension::{BoxFuture, guarded_sync};
use crate::pipeline::faults;
use tep_model::graph::{NodeId, Revision};
use tep_model::result::ToolResult;
use tep_model::session::{EventBody, FlatToolResult, SurfaceOp, ToolResultData, ToolResultRecord};
use tep_model::trace::Observation;

impl ToolRegistry {
    /// The `tools/result` notification of the frozen outcome.
    /// Returns the outcome to record: the frozen one (observers' attempts to change it are
    /// ignored; the mutant `observer-mutates-outcome` lets them through).
    pub(super) async fn announce(
        &self,
        exec: &Execution,
        frozen: &Arc<ToolResult>,
    ) -> Arc<ToolResult> {
        self.observe(
            self.stage(NodeId::Final, exec)
                .identity(exec.identity())
                .result(frozen),
        );
        let recorded = faults::recorded_outcome(&self.faults, &self.observers, exec, frozen);
        let work: Vec<BoxFuture<'static, ()>> = self
            .observers
            .iter()
            .filter_map(|o| guarded_sync(|| Ok(o.notify(exec, frozen))).ok().flatten())
            .collect();
        match self.revision {
            // Synchronous notification: observers were called; their async work is not awaited.
            Revision::Rev2 => {
                for w in work {
                    tokio::spawn(w);
                }
            }
            // Parallel notification: the observers' work is awaited together.
            Revision::Rev1 => {
                futures_util::future::join_all(work).await;
            }
        }
        recorded
    }

    /// Freezes, announces and records a model's call, in model order.
    pub(super) async fn commit(
        &self,
        plan: &CallPlan,
        started: &Started,
        ended: Ended,
        step: u64,
    ) -> CallOutcome {
        let exec = &started.exec;
        let id = exec.call_id();
        let frozen = self.freeze(plan, exec, ended).await;
        faults::notify_then_record(
            &self.faults,
            &frozen,
            self.announce(exec, &frozen),
            |recorded| self.record_result(plan, started, recorded, step),
        )
        .await;
        self.observe(Observation::at(NodeId::PresentResult).call(id));
        if let Some(presenter) = &self.presenter {
            let _ = guarded_sync(|| {
                presenter.present_result(id, &plan.args, &frozen);
                Ok(())
            });
        }
        CallOutcome {
            call_id: id.clone(),
            result: frozen,
        }
    }

    fn record_result(
        &self,
        plan: &CallPlan,
        started: &Started,
        frozen: &Arc<ToolResult>,
        step: u64,
    ) -> u64 {
        let id = &plan.call.call_id;
        let content = faults::recorded_content(&self.faults, frozen.content.clone());
        let error = frozen.error.as_ref().and_then(|e| e.info.clone());
        let flat = FlatToolResult {
            call_id: id.clone(),
            content,
            is_error: frozen.is_error,
            error,
            meta: frozen.meta.clone(),
        };
        let data = match self.revision {
            Revision::Rev2 => ToolResultData::Message(ToolResultRecord::from_flat(flat, step)),
            Revision::Rev1 => ToolResultData::Flat(flat),
        };
        self.recorder.append(
            Some(id),
            EventBody::ToolResult(data),
            Some(SurfaceOp::Append),
            Some(vec![started.call_seq]),
        )
    }
}
