//! The model's phase `Prepare`: the ordered stages before dispatch, in model order.
//!
//! Graph nodes: `tool/call` and `presentCall` (here), `tools/pre-execute` (here), `ctx.approval`
//! ([`approval`]), the monotonic guards ([`guards`]), and `denied` (here).

mod approval;
mod guards;

use std::sync::{Mutex, PoisonError};

use super::{CallPlan, Prepared, Started, ToolRegistry};
use crate::execution::Execution;
use crate::pipeline::extension::{BoxFuture, PreDecision, PreNext, guarded_sync};
use crate::pipeline::faults;
use tep_model::graph::{NodeId, Outcome};
use tep_model::result::Failure;
use tep_model::session::{EventBody, ToolCallData};
use tep_model::trace::Observation;

impl ToolRegistry {
    fn log_call(&self, plan: &CallPlan, step: u64) -> u64 {
        let seq = self.recorder.append(
            Some(&plan.call.call_id),
            EventBody::ToolCall(ToolCallData {
                turn: 1,
                step,
                call_id: plan.call.call_id.clone(),
                name: plan.call.name.clone(),
                arguments: plan.call.arguments.clone(),
            }),
            None,
            None,
        );
        self.observe(Observation::at(NodeId::PresentCall).call(&plan.call.call_id));
        if let Some(presenter) = &self.presenter {
            // A presenter that fails falls back to the generic card; nothing else changes.
            let _ = guarded_sync(|| {
                presenter.present_call(&plan.call.call_id, &plan.args);
                Ok(())
            });
        }
        seq
    }

    pub(super) async fn prepare(&self, plan: &CallPlan, step: u64) -> Started {
        let id = &plan.call.call_id;
        let exec = Execution::new(
            self.mint(),
            id.clone(),
            id.clone(),
            plan.call.name.clone(),
            plan.args.clone(),
            None,
        );
        let (call_seq, (prepared, exec)) = faults::tool_call_then(
            &self.faults,
            || self.log_call(plan, step),
            self.decide(exec),
        )
        .await;
        faults::throw_escapes(&self.faults, &prepared);
        if let Prepared::Denied(reason) = &prepared {
            self.observe(self.stage(NodeId::Denied, &exec).reason(reason.clone()));
        }
        Started {
            exec,
            call_seq,
            prepared,
        }
    }

    /// Pre-execute, approval and guards. Returns how they ended and the call the later stages
    /// are handed.
    pub(super) async fn decide(&self, exec: Execution) -> (Prepared, Execution) {
        let entered = Mutex::new(Vec::new());
        let decision = PreNext::new(&self.pre, &exec, &entered).run().await;
        // Identity is protected: the later stages are handed the call itself.
        let later = faults::pre_rewritten(&self.faults, &decision, exec.clone());
        let prepared = self.decided(&exec, &later, decision, entered).await;
        (prepared, later)
    }

    /// Records the pre-execute decision on `exec` and runs what it calls for; `later` is the
    /// call the guards judge.
    async fn decided(
        &self,
        exec: &Execution,
        later: &Execution,
        decision: Result<PreDecision, Failure>,
        entered: Mutex<Vec<String>>,
    ) -> Prepared {
        let mut obs = self.stage(NodeId::Pre, exec).identity(exec.identity());
        obs.listeners = Some(entered.into_inner().unwrap_or_else(PoisonError::into_inner));
        match decision {
            Err(failure) => {
                self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                Prepared::Threw(failure)
            }
            Ok(PreDecision::Deny { reason }) => {
                self.observe(obs.outcome(Outcome::Deny).reason(reason.clone()));
                Prepared::Denied(reason)
            }
            // Identity is protected: an attempt to rewrite the arguments is an allow.
            Ok(PreDecision::Allow | PreDecision::Rewrite { .. }) => {
                self.observe(obs.outcome(Outcome::Allow));
                self.run_guards(later).await
            }
            Ok(PreDecision::Ask { reason }) => {
                let mut obs = obs.outcome(Outcome::Ask);
                obs.reason = reason.clone();
                self.observe(obs);
                // The ask is answered first; the guards judge every call it allowed.
                let approval: BoxFuture<'_, Prepared> = Box::pin(self.ask(exec, reason));
                let guards: BoxFuture<'_, Prepared> = Box::pin(self.run_guards(exec));
                let (first, then) = faults::approval_then_guards(&self.faults, approval, guards);
                match first.await {
                    Prepared::Allowed if faults::guards_after_allowed_once(&self.faults, true) => {
                        then.await
                    }
                    refused => refused,
                }
            }
        }
    }
}
