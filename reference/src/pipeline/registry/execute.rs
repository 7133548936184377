//! Execute: the tools/execute waterfall around the body. The only stage that overlaps.

use std::sync::{Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use super::{CallPlan, ToolRegistry};
use crate::execution::Execution;
use crate::pipeline::extension::{BoxFuture, Dispatch, ExecuteNext, guarded, guarded_sync};
use crate::pipeline::faults;
use crate::pipeline::tool::{Tool, ToolContext};
use tep_model::graph::{NodeId, Outcome};
use tep_model::result::{AdditionalContext, ContextOrigin, ErrorCode, Failure, ToolResult};

impl ToolRegistry {
    pub(super) async fn execute<'a>(
        &'a self,
        index: usize,
        plan: &'a CallPlan,
        exec: Execution,
    ) -> (usize, Result<ToolResult, Failure>) {
        let deferred = Mutex::new(Vec::new());
        let dispatcher = BodyDispatcher {
            registry: self,
            exec: &exec,
            tool: plan.tool.as_deref(),
            deferred: &deferred,
        };
        let declared = plan.tool.as_ref().and_then(|t| t.timeout());
        let next = ExecuteNext::new(&self.wrappers, &exec, declared, &dispatcher);
        let outcome = next.run(CancellationToken::new()).await;
        let obs = self.stage(NodeId::Around, &exec).identity(exec.identity());
        self.observe(match &outcome {
            Err(failure) => obs.outcome(Outcome::Throw).reason(failure.message.clone()),
            Ok(_) => obs,
        });
        let deferred = deferred
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let outcome = outcome.map(|mut result| {
            // Tool-deferred contexts come first, then the wrappers'.
            let mut contexts: Vec<AdditionalContext> =
                faults::deferred_kept(&self.faults, &result, deferred)
                    .into_iter()
                    .map(|text| AdditionalContext {
                        origin: ContextOrigin::Tool,
                        text,
                    })
                    .collect();
            contexts.append(&mut result.additional_contexts);
            result.additional_contexts = contexts;
            result
        });
        (index, outcome)
    }
}

/// The innermost `next()` of `tools/execute`: one dispatch of the tool body.
struct BodyDispatcher<'a> {
    registry: &'a ToolRegistry,
    exec: &'a Execution,
    tool: Option<&'a dyn Tool>,
    deferred: &'a Mutex<Vec<String>>,
}

impl Dispatch for BodyDispatcher<'_> {
    fn dispatch<'b>(
        &'b self,
        cancel: CancellationToken,
    ) -> BoxFuture<'b, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let Some(tool) = self.tool else {
                return Ok(ToolResult::failure(
                    format!("unknown tool: {}", self.exec.name()),
                    Some(ErrorCode::UnknownTool.into()),
                ));
            };
            if cancel.is_cancelled() {
                return Ok(ToolResult::failure(
                    "tool call was cancelled before dispatch",
                    Some(ErrorCode::AbortedBeforeDispatch.into()),
                ));
            }
            let registry = self.registry;
            // Control leaves the wrappers for the body.
            registry.observe(
                registry
                    .stage(NodeId::Around, self.exec)
                    .identity(self.exec.identity()),
            );
            registry.observe(
                registry
                    .stage(NodeId::ToolBody, self.exec)
                    .identity(self.exec.identity()),
            );
            let ctx = ToolContext {
                registry: self.registry,
                exec: self.exec,
                cancel,
                deferred: self.deferred,
            };
            let executed = guarded(tool.execute(ctx)).await;
            // The body's own failure is normalized here, before any wrapper sees it.
            let normalized = match &executed {
                Ok(value) => {
                    let args = self.exec.arguments();
                    match guarded_sync(|| Ok(tool.render(args, value))) {
                        Ok(content) => ToolResult::success(value.clone(), content),
                        Err(failure) => ToolResult::from_failure(&failure),
                    }
                }
                Err(failure) => ToolResult::from_failure(failure),
            };
            let result = faults::body_throw(registry.faults(), &executed, Ok(normalized), |f| {
                registry.observe(
                    registry
                        .stage(NodeId::Around, self.exec)
                        .identity(self.exec.identity())
                        .outcome(Outcome::Throw)
                        .reason(f.message.clone()),
                );
            })?;
            // Control returns to the innermost wrapper with what the dispatch produced.
            registry.observe(
                registry
                    .stage(NodeId::Around, self.exec)
                    .identity(self.exec.identity())
                    .result(&result),
            );
            Ok(result)
        })
    }
}
