//! `ctx.approval`: how an `ask` is resolved.

use tokio_util::sync::CancellationToken;

use super::{Prepared, ToolRegistry};
use crate::graph::{NodeId, Outcome};
use crate::identity::Execution;
use crate::mutant::Mutant;
use crate::pipeline::extension::{ApprovalOutcome, ApprovalRequest, guarded};
use crate::session::{ApprovalAsked, ApprovalDecided, EventBody};

impl ToolRegistry {
    /// Resolves an `ask` through `ctx.approval`. `None` means allowed once.
    pub(super) async fn ask(&self, exec: &Execution, reason: Option<String>) -> Option<Prepared> {
        let id = exec.call_id();
        let obs = self.stage(NodeId::Approval, exec);
        let Some(approval) = &self.approval else {
            if self.broken(Mutant::AbsentApprovalAllows) {
                self.observe(obs.outcome(Outcome::AllowedOnce));
                return None;
            }
            let reason = reason.unwrap_or_else(|| {
                format!(
                    "tool \"{}\" requires approval (not yet supported)",
                    exec.name()
                )
            });
            self.observe(obs.outcome(Outcome::Unavailable).reason(reason.clone()));
            return Some(Prepared::Denied(reason));
        };
        if self.broken(Mutant::ApprovalAnswerReused) && self.reuse_answer(exec.name()) {
            // The first allowed-once answer for the tool is taken for this ask too.
            self.observe(obs.outcome(Outcome::AllowedOnce));
            return None;
        }
        let approval_id = format!("approval-{id}");
        let audited = !self.broken(Mutant::ApprovalUnaudited);
        if audited {
            self.recorder.append(
                Some(id),
                EventBody::ApprovalAsked(ApprovalAsked {
                    id: approval_id.clone(),
                    tool_name: exec.name().to_owned(),
                    call_id: Some(id.clone()),
                    reason: reason.clone(),
                }),
                None,
                None,
            );
        }
        let request = ApprovalRequest {
            tool_name: exec.name().to_owned(),
            call_id: id.clone(),
            reason,
            cancel: CancellationToken::new(),
        };
        let mut answer = guarded(approval.request(&request)).await;
        if self.broken(Mutant::ApprovalAskedTwice) {
            // Asked again, as a harness that re-prompts on a re-render would.
            self.recorder.append(
                Some(id),
                EventBody::ApprovalAsked(ApprovalAsked {
                    id: format!("approval-{id}-again"),
                    tool_name: exec.name().to_owned(),
                    call_id: Some(id.clone()),
                    reason: request.reason.clone(),
                }),
                None,
                None,
            );
            answer = guarded(approval.request(&request)).await;
        }
        let outcome = match answer {
            Err(failure) => {
                self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                return Some(Prepared::Threw(failure));
            }
            Ok(ApprovalOutcome::AllowedOnce) => Outcome::AllowedOnce,
            Ok(ApprovalOutcome::Rejected) => Outcome::Rejected,
            Ok(ApprovalOutcome::Cancelled) => Outcome::Cancelled,
            Ok(ApprovalOutcome::Unavailable) => Outcome::Unavailable,
        };
        if audited {
            self.recorder.append(
                Some(id),
                EventBody::ApprovalDecided(ApprovalDecided {
                    id: approval_id,
                    outcome,
                }),
                None,
                None,
            );
        }
        if outcome == Outcome::AllowedOnce {
            if self.broken(Mutant::ApprovalAnswerReused) {
                self.remember_answer(exec.name());
            }
            self.observe(obs.outcome(outcome));
            return None;
        }
        let reason = format!("approval {outcome} for tool \"{}\"", exec.name());
        self.observe(obs.outcome(outcome).reason(reason.clone()));
        Some(Prepared::Denied(reason))
    }
}
