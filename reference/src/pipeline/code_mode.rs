//! Code Mode: the reserved `run_code` transport and the sub-calls its program makes.
//!
//! A model's `run_code` call is an ordinary call of its batch: it goes through every stage, and
//! its body runs a [`Program`]. Each binding call the program makes re-enters the pipeline as a
//! *sub-call* (pre-execute, approval, guards, `tools/execute`, post-execute, normalization,
//! `finalizeContent`, `tools/result`), one at a time in submission order, carrying the parent's
//! token and the id `<parent>:code:<n>`, and is logged as `tool/code-dispatch` (with a
//! `tool/code-dispatch-start` when it actually starts, in rev2). A denied or failed sub-call
//! rejects its binding with the tool name and message only. Following the doc, a sub-call's
//! additional contexts are omitted: nothing of them reaches the batch.
//!
//! Programs are data here (the conformance scenarios script them); no language runtime is
//! embedded. [`ProgramLoader`] turns a `run_code` call into a program.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::execution::Execution;
use crate::pipeline::BoxFuture;
use crate::pipeline::ToolContext;
// Defined beside `ToolContext`, whose host dispatches sub-calls; a binding call rejects with it.
pub use crate::pipeline::tool::ToolCallError;
use tep_model::result::{ContentBlock, ErrorCode, Failure};

/// What a program leaves behind: its log lines and its value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgramOutput {
    pub logs: Vec<String>,
    pub value: Option<Value>,
}

impl ProgramOutput {
    /// The model-facing content: the logs, then the value (a string as is, other JSON
    /// pretty-printed), or a placeholder when there is neither (reference semantics 50).
    pub fn content(&self) -> Vec<ContentBlock> {
        let mut parts = self.logs.clone();
        match &self.value {
            Some(Value::String(s)) => parts.push(s.clone()),
            Some(other) => parts.push(serde_json::to_string_pretty(other).unwrap_or_default()),
            None => {}
        }
        if parts.is_empty() {
            parts.push("(run_code completed with no output)".to_owned());
        }
        vec![ContentBlock::text(parts.join("\n"))]
    }
}

/// A Code Mode program.
pub trait Program: Send + Sync {
    /// Runs the program; its binding calls go through `bindings`. An `Err` is a runtime
    /// failure of the program (`CODE_RUN_FAILED`).
    fn run<'a>(
        &'a self,
        bindings: &'a Bindings<'a>,
    ) -> BoxFuture<'a, Result<ProgramOutput, Failure>>;
}

/// Turns a `run_code` call (its arguments) into the program to run.
pub trait ProgramLoader: Send + Sync {
    fn load(&self, exec: &Execution) -> Result<Arc<dyn Program>, Failure>;
}

/// The bindings a program calls tools through. Every call is a sub-call of the `run_code`
/// execution: it gets the next id `<parent>:code:<n>` when it is issued and waits its turn in
/// the one lane sub-calls run in.
pub struct Bindings<'a> {
    pub(crate) ctx: &'a ToolContext<'a>,
    pub(crate) issued: AtomicUsize,
    pub(crate) lane: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Bindings<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bindings")
            .field("parent", self.ctx.execution().call_id())
            .field("issued", &self.issued)
            .finish_non_exhaustive()
    }
}

impl<'a> Bindings<'a> {
    pub(crate) fn new(ctx: &'a ToolContext<'a>) -> Self {
        Bindings {
            ctx,
            issued: AtomicUsize::new(0),
            lane: tokio::sync::Mutex::new(()),
        }
    }

    /// The `run_code` execution the program runs in.
    pub fn parent(&self) -> &Execution {
        self.ctx.execution()
    }

    /// The tools a program may call: every registered tool; never `run_code`.
    pub fn tools(&self) -> Vec<String> {
        self.ctx.registry.tool_names()
    }

    /// Calls a tool. Resolves with the sub-call's value (its content when it has none);
    /// rejects with the tool name and message when it is denied or fails.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolCallError> {
        if tool == crate::pipeline::RUN_CODE {
            // Programs are never given a binding to the transport itself.
            return Err(ToolCallError {
                tool_name: tool.to_owned(),
                message: "run_code is not available to programs".to_owned(),
                details: Default::default(),
            });
        }
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let _turn =
            super::faults::sub_call_turn(self.ctx.registry.faults(), self.lane.lock()).await;
        self.ctx
            .registry
            .run_sub_call(self.ctx, n, tool, arguments)
            .await
    }

    /// Issues several calls at once (like `Promise.all`). They still run one at a time, in the
    /// order given; the results come back in that order.
    pub async fn call_all(&self, calls: Vec<(String, Value)>) -> Vec<Result<Value, ToolCallError>> {
        futures_util::future::join_all(
            calls
                .into_iter()
                .map(|(tool, args)| async move { self.call(&tool, args).await }),
        )
        .await
    }
}

/// The `run_code` tool the registry provides when Code Mode is on.
pub(crate) struct RunCode {
    pub(crate) loader: Arc<dyn ProgramLoader>,
}

impl crate::pipeline::Tool for RunCode {
    fn name(&self) -> &str {
        crate::pipeline::RUN_CODE
    }

    fn execute<'a>(&'a self, ctx: ToolContext<'a>) -> BoxFuture<'a, Result<Value, Failure>> {
        Box::pin(async move {
            let program = self.loader.load(ctx.execution())?;
            let bindings = Bindings::new(&ctx);
            let output = crate::pipeline::extension::guarded(program.run(&bindings))
                .await
                .map_err(|f| Failure::coded(ErrorCode::CodeRunFailed, f.message))?;
            Ok(Value::String(tep_model::result::content_text(
                &output.content(),
            )))
        })
    }
}
