//! Phase `Prepare`, graph node `approval`: `ctx.approval` resolves an `ask`.

use tokio_util::sync::CancellationToken;

use crate::execution::Execution;
use crate::pipeline::extension::{ApprovalOutcome, ApprovalRequest, guarded};
use crate::pipeline::faults;
use crate::pipeline::registry::{Prepared, ToolRegistry};
use tep_model::graph::{NodeId, Outcome};
use tep_model::session::{ApprovalAsked, ApprovalDecided, EventBody};

impl ToolRegistry {
    /// Resolves an `ask` through `ctx.approval`: `Allowed` when it was allowed once.
    pub(super) async fn ask(&self, exec: &Execution, reason: Option<String>) -> Prepared {
        let id = exec.call_id();
        let obs = self.stage(NodeId::Approval, exec);
        let Some(approval) = &self.approval else {
            // Absent approval denies: an ask nobody can answer is refused.
            if faults::absent_approval_allows(&self.faults, false) {
                self.observe(obs.outcome(Outcome::AllowedOnce));
                return Prepared::Allowed;
            }
            let reason = reason.unwrap_or_else(|| {
                format!(
                    "tool \"{}\" requires approval (not yet supported)",
                    exec.name()
                )
            });
            self.observe(obs.outcome(Outcome::Unavailable).reason(reason.clone()));
            return Prepared::Denied(reason);
        };
        // One-shot: every ask is put to the approval, no earlier answer stands for it.
        if faults::answer_reused(&self.faults, exec.name(), false) {
            self.observe(obs.outcome(Outcome::AllowedOnce));
            return Prepared::Allowed;
        }
        let approval_id = format!("approval-{id}");
        faults::approval_audit(&self.faults, || {
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
        });
        let request = ApprovalRequest {
            tool_name: exec.name().to_owned(),
            call_id: id.clone(),
            reason,
            cancel: CancellationToken::new(),
        };
        let outcome = match guarded(approval.request(&request)).await {
            Err(failure) => {
                self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                return Prepared::Threw(failure);
            }
            Ok(ApprovalOutcome::AllowedOnce) => Outcome::AllowedOnce,
            Ok(ApprovalOutcome::Rejected) => Outcome::Rejected,
            Ok(ApprovalOutcome::Cancelled) => Outcome::Cancelled,
            Ok(ApprovalOutcome::Unavailable) => Outcome::Unavailable,
        };
        faults::approval_audit(&self.faults, || {
            self.recorder.append(
                Some(id),
                EventBody::ApprovalDecided(ApprovalDecided {
                    id: approval_id,
                    outcome,
                }),
                None,
                None,
            );
        });
        if outcome == Outcome::AllowedOnce {
            faults::answer_given(&self.faults, exec.name());
            self.observe(obs.outcome(outcome));
            return Prepared::Allowed;
        }
        let reason = format!("approval {outcome} for tool \"{}\"", exec.name());
        self.observe(obs.outcome(outcome).reason(reason.clone()));
        Prepared::Denied(reason)
    }
}
