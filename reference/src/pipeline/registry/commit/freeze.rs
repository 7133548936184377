//! Phase `Commit`, its first stages: `tools/post-execute`, outer normalization and
//! `finalizeContent` (graph nodes `post`, `normalized`, `finalize`): the candidate becomes the
//! frozen outcome.

use std::sync::{Arc, Mutex, PoisonError};

use crate::execution::Execution;
use crate::pipeline::extension::{PostDecision, PostNext, guarded_sync};
use crate::pipeline::faults;
use crate::pipeline::registry::{CallPlan, Ended, ToolRegistry};
use tep_model::graph::{NodeId, Outcome, Revision};
use tep_model::result::{
    AdditionalContext, ContentBlock, ContextOrigin, Failure, ToolResult, content_text,
};

impl ToolRegistry {
    /// Post-execute, outer normalization and `finalizeContent`: the candidate becomes the frozen
    /// outcome. Shared by a model's calls and Code Mode sub-calls.
    pub(in crate::pipeline::registry) async fn freeze(
        &self,
        plan: &CallPlan,
        exec: &Execution,
        ended: Ended,
    ) -> Arc<ToolResult> {
        let (mut result, mut threw, denied) = match ended {
            Ended::Denied(reason) => (
                faults::denial_result(&self.faults, ToolResult::denial(&reason)),
                None,
                true,
            ),
            Ended::Threw(failure) => (ToolResult::from_failure(&failure), Some(failure), false),
            Ended::Executed(Ok(result)) => (result, None, false),
            Ended::Executed(Err(failure)) => {
                (ToolResult::from_failure(&failure), Some(failure), false)
            }
        };

        // Post-execute sees a denial too, and is skipped after a throw only.
        let skip_post = faults::skip_post(&self.faults, threw.is_some(), denied);
        if !skip_post {
            let entered = Mutex::new(Vec::new());
            let decision = PostNext::new(&self.post, exec, &result, &entered)
                .run()
                .await;
            let mut obs = self
                .stage(NodeId::Post, exec)
                .identity(exec.identity())
                .result(&result);
            obs.listeners = Some(entered.into_inner().unwrap_or_else(PoisonError::into_inner));
            let kind = match &decision {
                Ok(PostDecision::Block { .. }) => Outcome::Block,
                _ => Outcome::Accept,
            };
            match decision.and_then(|d| self.apply_post(d, result.clone(), plan)) {
                Ok(next) => {
                    self.observe(obs.outcome(kind));
                    result = next;
                }
                Err(failure) => {
                    self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                    threw = Some(failure);
                }
            }
        }

        if let Some(failure) = threw {
            // Outer normalization: the throw becomes an `isError` result; contexts are lost.
            if self.revision == Revision::Rev2 {
                self.observe(
                    self.stage(NodeId::Normalized, exec)
                        .reason(failure.message.clone()),
                );
            }
            result = ToolResult::from_failure(&failure);
        }

        if self.revision == Revision::Rev2 {
            result = self.finalize(plan, exec, result);
            result = faults::finalize_again(&self.faults, result, |r| self.finalize(plan, exec, r));
        }
        Arc::new(result)
    }

    fn apply_post(
        &self,
        decision: PostDecision,
        mut result: ToolResult,
        plan: &CallPlan,
    ) -> Result<ToolResult, Failure> {
        let post_context = |text| AdditionalContext {
            origin: ContextOrigin::Post,
            text,
        };
        match decision {
            PostDecision::Accept {
                content: Some(_),
                value: Some(_),
                ..
            } => Err(Failure::new(
                "a post-execute accept cannot replace both content and value",
            )),
            PostDecision::Accept {
                content,
                value,
                contexts,
            } => {
                if let Some(value) = value {
                    if result.is_error {
                        return Err(Failure::new(
                            "a post-execute accept cannot replace the value of a failed result",
                        ));
                    }
                    result.content = match &plan.tool {
                        Some(tool) => tool.render(&plan.args, &value),
                        None => vec![ContentBlock::text(value.to_string())],
                    };
                    result.value = Some(value);
                }
                if let Some(content) = content {
                    result.content = content;
                }
                result
                    .additional_contexts
                    .extend(contexts.into_iter().map(post_context));
                Ok(result)
            }
            PostDecision::Block { feedback, contexts } => {
                let text = content_text(&feedback);
                let message = if text.is_empty() {
                    "tool result blocked by post-execute policy".to_owned()
                } else {
                    text
                };
                // Earlier contexts are dropped; only the block's own remain.
                let mut kept =
                    faults::kept_by_block(&self.faults, result.additional_contexts, Vec::new());
                kept.extend(contexts.into_iter().map(post_context));
                Ok(ToolResult {
                    is_error: true,
                    content: feedback,
                    error: Some(tep_model::result::ResultError {
                        message,
                        info: None,
                    }),
                    meta: None,
                    additional_contexts: kept,
                    value: None,
                })
            }
        }
    }

    /// The definition's `finalizeContent`, captured when the call was planned. A call whose
    /// definition has none (an unknown tool, `run_code`) has no finalize stage.
    fn finalize(&self, plan: &CallPlan, exec: &Execution, candidate: ToolResult) -> ToolResult {
        let finalizer = plan.tool.as_ref().and_then(|t| t.finalizer());
        let Some(finalizer) = faults::finalizer(&self.faults, finalizer, &candidate) else {
            return candidate;
        };
        let outcome = guarded_sync(|| finalizer.finalize_content(exec, &candidate));
        let obs = self
            .stage(NodeId::Finalize, exec)
            .identity(exec.identity())
            .result(&candidate);
        match outcome {
            Ok(content) => {
                self.observe(obs);
                match content {
                    Some(content) => ToolResult {
                        content,
                        ..candidate
                    },
                    None => candidate,
                }
            }
            Err(failure) => {
                // The callback is not called again; the call ends as a plain error.
                self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                ToolResult::from_failure(&failure)
            }
        }
    }
}
