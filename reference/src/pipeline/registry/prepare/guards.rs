//! Phase `Prepare`, graph node `guards`: the registered monotonic guards.

use crate::execution::Execution;
use crate::pipeline::extension::{GuardVerdict, guarded};
use crate::pipeline::faults;
use crate::pipeline::registry::{Prepared, ToolRegistry};
use tep_model::graph::{NodeId, Outcome};
use tep_model::result::Failure;
use tep_model::trace::{GuardVerdictKind, GuardVerdictRecord};

impl ToolRegistry {
    pub(super) async fn run_guards(&self, exec: &Execution) -> Prepared {
        let seen = faults::guard_view(&self.faults, exec);
        let mut verdicts = Vec::new();
        let mut denial: Option<String> = None;
        let mut threw: Option<Failure> = None;
        for guard in &self.guards {
            match guarded(guard.check(&seen)).await {
                Ok(GuardVerdict::Abstain) => verdicts.push(GuardVerdictRecord {
                    guard: guard.id().to_owned(),
                    verdict: GuardVerdictKind::Abstain,
                    reason: None,
                }),
                // Monotonic: an attempt to allow counts as abstaining.
                Ok(GuardVerdict::Allow) => {
                    verdicts.push(GuardVerdictRecord {
                        guard: guard.id().to_owned(),
                        verdict: GuardVerdictKind::Allow,
                        reason: None,
                    });
                    denial = faults::guard_allow(&self.faults, denial);
                }
                Ok(GuardVerdict::Deny(reason)) => {
                    verdicts.push(GuardVerdictRecord {
                        guard: guard.id().to_owned(),
                        verdict: GuardVerdictKind::Deny,
                        reason: Some(reason.clone()),
                    });
                    // A deny is final: its reason is the denial and later guards are not
                    // consulted, so the first deny wins.
                    denial = faults::guard_deny(&self.faults, denial, Some(reason));
                    if faults::guards_stop_at_deny(&self.faults, true) {
                        break;
                    }
                }
                Err(failure) => {
                    verdicts.push(GuardVerdictRecord {
                        guard: guard.id().to_owned(),
                        verdict: GuardVerdictKind::Throw,
                        reason: Some(failure.message.clone()),
                    });
                    threw = Some(failure);
                    break;
                }
            }
        }
        let (threw, denial) = faults::guard_throw(&self.faults, threw, denial);
        let mut obs = self.stage(NodeId::Guards, exec).identity(seen.identity());
        obs.listeners = Some(verdicts.iter().map(|v| v.guard.clone()).collect());
        obs.verdicts = Some(verdicts);
        if let Some(failure) = threw {
            self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
            Prepared::Threw(failure)
        } else if let Some(reason) = denial {
            self.observe(obs.outcome(Outcome::Deny).reason(reason.clone()));
            Prepared::Denied(reason)
        } else {
            self.observe(obs.outcome(Outcome::Allow));
            Prepared::Allowed
        }
    }
}
