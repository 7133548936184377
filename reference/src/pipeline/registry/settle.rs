//! The model's phase `Settle`: once every result of the batch is recorded (graph node
//! `allResults`), the calls' additional contexts are injected (graph node `context`).

use super::{CallOutcome, ToolRegistry};
use crate::pipeline::faults;
use tep_model::graph::{NodeId, Revision};
use tep_model::result::ContentBlock;
use tep_model::session::{ContextMessage, EventBody, MessageSource, Role, SurfaceOp, UserMessage};
use tep_model::trace::Observation;

impl ToolRegistry {
    /// The batch settled: every call's contexts are injected, after all results are recorded.
    pub(super) fn settle(&self, outcomes: &[CallOutcome]) {
        self.observe(Observation::at(NodeId::AllResults));
        // Every call's contexts, in model order.
        for outcome in faults::contexts_after_all(&self.faults, outcomes.iter().collect()) {
            self.inject_contexts(outcome);
        }
    }

    /// Injects one call's additional contexts, in order: rev2 as `user/message` events of the
    /// active batch, rev1 as buffered `context/message` events.
    pub(super) fn inject_contexts(&self, outcome: &CallOutcome) {
        let id = &outcome.call_id;
        for (n, context) in outcome.result.additional_contexts.iter().enumerate() {
            let content = vec![ContentBlock::text(context.text.clone())];
            let source = MessageSource::Tool {
                call_id: id.clone(),
            };
            let (body, surface) = match self.revision {
                Revision::Rev2 => (
                    EventBody::UserMessage(UserMessage {
                        id: format!("context-{id}-{}", n + 1),
                        role: Role::User,
                        content,
                        source,
                    }),
                    Some(SurfaceOp::Append),
                ),
                Revision::Rev1 => (
                    EventBody::ContextMessage(ContextMessage { content, source }),
                    None,
                ),
            };
            self.recorder.append(Some(id), body, surface, None);
        }
    }
}
