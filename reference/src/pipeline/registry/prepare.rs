//! Prepare: tool/call, presentCall, pre-execute, approval, guards, denial.

use std::sync::{Mutex, PoisonError};

use super::{CallPlan, Prepared, Started, ToolRegistry};
use crate::graph::{NodeId, Outcome};
use crate::identity::Execution;
use crate::mutant::Mutant;
use crate::pipeline::extension::{PreDecision, PreNext, guarded_sync};
use crate::result::Failure;
use crate::session::{EventBody, ToolCallData};
use crate::trace::Observation;

impl ToolRegistry {
    pub(super) fn log_call(&self, plan: &CallPlan, step: u64) -> u64 {
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
        let early_seq = (!self.broken(Mutant::LateToolCall)).then(|| self.log_call(plan, step));
        let (prepared, rewritten) = self.decide(&exec).await;
        let exec = rewritten.unwrap_or(exec);
        if let Prepared::Threw(failure) = &prepared
            && self.broken(Mutant::ThrowEscapes)
        {
            *self.escaped.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(failure.message.clone());
        }
        let call_seq = early_seq.unwrap_or_else(|| self.log_call(plan, step));
        if let Prepared::Denied(reason) = &prepared {
            self.observe(self.stage(NodeId::Denied, &exec).reason(reason.clone()));
        }
        Started {
            exec,
            call_seq,
            prepared,
        }
    }

    /// Pre-execute, approval and guards. The mutant `pre-rewrites-arguments` also returns the
    /// rewritten execution the later stages are then handed.
    pub(super) async fn decide(&self, exec: &Execution) -> (Prepared, Option<Execution>) {
        let entered = Mutex::new(Vec::new());
        let reversed: Vec<_>;
        let listeners = if self.broken(Mutant::PreListenersReversed) {
            reversed = self.pre.iter().rev().cloned().collect();
            &reversed
        } else {
            &self.pre
        };
        let decision = PreNext::new(listeners, exec, &entered).run().await;
        if let Ok(PreDecision::Rewrite { arguments }) = &decision
            && self.broken(Mutant::PreRewritesArguments)
        {
            let mut obs = self.stage(NodeId::Pre, exec).identity(exec.identity());
            obs.listeners = Some(entered.into_inner().unwrap_or_else(PoisonError::into_inner));
            self.observe(obs.outcome(Outcome::Allow));
            let rewritten = Execution::new(
                exec.token(),
                exec.call_id().clone(),
                exec.root_call_id().clone(),
                exec.name().to_owned(),
                arguments.clone(),
                exec.parent(),
            );
            return (self.run_guards(&rewritten).await, Some(rewritten));
        }
        (self.decided(exec, decision, entered).await, None)
    }

    pub(super) async fn decided(
        &self,
        exec: &Execution,
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
                self.run_guards(exec).await
            }
            Ok(PreDecision::Ask { reason }) => {
                let mut obs = obs.outcome(Outcome::Ask);
                obs.reason = reason.clone();
                self.observe(obs);
                if self.broken(Mutant::GuardsBeforeApproval) {
                    let guarded = self.run_guards(exec).await;
                    if !matches!(guarded, Prepared::Allowed) {
                        return guarded;
                    }
                    return self.ask(exec, reason).await.unwrap_or(Prepared::Allowed);
                }
                match self.ask(exec, reason).await {
                    Some(refused) => refused,
                    None => self.run_guards(exec).await,
                }
            }
        }
    }
}
