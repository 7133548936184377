//! Tool definitions and what a tool body may do.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::extension::BoxFuture;
use super::faults::{self, Faults};
use crate::execution::Execution;
use crate::fs::VirtualFs;
use crate::recorder::Recorder;
use tep_model::graph::{NodeId, Outcome};
use tep_model::result::{ContentBlock, ErrorCode, Failure, ToolResult};
use tep_model::session::{
    EventBody, FileState, FsObserved, HookInvoked, HookResult, Todo, TodoWrite,
};
use tep_model::trace::{FsIntentKind, FsIntentRecord, Observation};

/// A registered tool.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;

    /// Whether this call may overlap other concurrency-safe calls. Anything but `true` (including
    /// a panic) makes the call exclusive.
    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        false
    }

    /// The timeout the definition declares; the timeout wrapper applies only then.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// The body. Cancellation is cooperative: a long body should watch
    /// [`ToolContext::cancellation`].
    fn execute<'a>(&'a self, ctx: ToolContext<'a>) -> BoxFuture<'a, Result<Value, Failure>>;

    /// Renders a success value as model-facing content: strings raw, other JSON pretty-printed.
    fn render(&self, _args: &Value, value: &Value) -> Vec<ContentBlock> {
        vec![ContentBlock::text(match value {
            Value::String(s) => s.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        })]
    }

    /// `ToolDefinition.finalizeContent`, when the definition has one. A definition without one
    /// (the default, like the reserved `run_code` transport) has no finalize stage at all.
    fn finalizer(&self) -> Option<&dyn FinalizeContent> {
        None
    }
}

/// `ToolDefinition.finalizeContent`: the last, synchronous, content-only transform. Called
/// exactly once per call with the candidate result; `Ok(None)` keeps the content. The type
/// allows changing nothing but content.
pub trait FinalizeContent: Send + Sync {
    fn finalize_content(
        &self,
        exec: &Execution,
        candidate: &ToolResult,
    ) -> Result<Option<Vec<ContentBlock>>, Failure>;
}

impl<F> FinalizeContent for F
where
    F: Fn(&Execution, &ToolResult) -> Result<Option<Vec<ContentBlock>>, Failure> + Send + Sync,
{
    fn finalize_content(
        &self,
        exec: &Execution,
        candidate: &ToolResult,
    ) -> Result<Option<Vec<ContentBlock>>, Failure> {
        self(exec, candidate)
    }
}

/// What a program sees when a binding call fails: the tool and a message, nothing else (no
/// content, no error code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{tool_name}: {message}")]
pub struct ToolCallError {
    pub tool_name: String,
    pub message: String,
    /// Fields beyond the tool name and the message. A conforming pipeline hands the program
    /// none; only a broken one (mutant `rejection-leaks-fields`) fills it.
    pub details: std::collections::BTreeMap<String, Value>,
}

/// What a tool body reaches through its context: the registry that runs it, seen only as what a
/// body may use (the filesystem, the recorder, sub-call dispatch for Code Mode). The registry
/// implements it (`registry/host.rs`); a body never sees the registry's type.
pub(in crate::pipeline) trait Host: Send + Sync {
    fn fs(&self) -> &VirtualFs;
    fn faults(&self) -> &Faults;
    fn recorder(&self) -> &Recorder;
    /// A stage observation of `exec`'s call at `node`.
    fn stage(&self, node: NodeId, exec: &Execution) -> Observation;
    /// The tools a program may call.
    fn tool_names(&self) -> Vec<String>;
    /// Runs sub-call `n` of the program running in `parent` through the pipeline.
    fn run_sub_call<'a>(
        &'a self,
        parent: &'a ToolContext<'a>,
        n: usize,
        tool: &'a str,
        arguments: Value,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>>;
}

/// What a tool body is handed: its execution, its cancellation signal, the filesystem behind the
/// intent gate, and the session events it owns.
pub struct ToolContext<'a> {
    pub(in crate::pipeline) registry: &'a dyn Host,
    pub(crate) exec: &'a Execution,
    pub(crate) cancel: CancellationToken,
    pub(crate) deferred: &'a Mutex<Vec<String>>,
}

impl<'a> ToolContext<'a> {
    pub fn execution(&self) -> &'a Execution {
        self.exec
    }

    pub fn arguments(&self) -> &'a Value {
        self.exec.arguments()
    }

    /// The signal to watch; a timeout wrapper cancels it at its deadline.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The filesystem as other actors see it. Writes through it bypass the intent gate and are
    /// not observed by the agent: use it to simulate another process changing a file.
    pub fn shared_fs(&self) -> &'a crate::fs::VirtualFs {
        self.registry.fs()
    }

    /// Defers a context to be injected after the batch's results (before wrapper and
    /// post-execute contexts of this call). Deferred contexts survive a throwing body.
    pub fn defer_context(&self, text: impl Into<String>) {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(text.into());
    }

    fn owned_event(&self, body: EventBody) {
        self.registry
            .recorder()
            .append(Some(self.exec.call_id()), body, None, None);
    }

    /// Reads a file and records the version seen (`fs/observed`).
    pub fn read_file(&self, path: &str) -> Result<String, Failure> {
        let seen = self.registry.fs().observe(path);
        let state = match &seen {
            Some((_, version)) => FileState::Present { version: *version },
            None => FileState::Absent,
        };
        self.owned_event(EventBody::FsObserved(FsObserved {
            target: path.to_owned(),
            state,
            actor: "agent".to_owned(),
        }));
        seen.map(|(content, _)| content)
            .ok_or_else(|| Failure::new(format!("no such file: {path}")))
    }

    /// Creates or overwrites a file through `fs/write-intent`.
    pub fn write_file(&self, path: &str, content: &str) -> Result<(), Failure> {
        self.gate(FsIntentKind::Write, path)?;
        self.commit(path, content);
        Ok(())
    }

    /// Replaces `old` with `new` in a file through `fs/edit-intent`.
    pub fn edit_file(&self, path: &str, old: &str, new: &str) -> Result<(), Failure> {
        self.gate(FsIntentKind::Edit, path)?;
        let (current, _) = self
            .registry
            .fs()
            .get(path)
            .ok_or_else(|| Failure::new(format!("no such file: {path}")))?;
        if !current.contains(old) {
            return Err(Failure::new(format!("text to replace not found in {path}")));
        }
        self.commit(path, &current.replacen(old, new, 1));
        Ok(())
    }

    /// Presents a mutation to the gate: records the `fsGate` visit and the body resuming.
    fn gate(&self, intent: FsIntentKind, path: &str) -> Result<(), Failure> {
        let fs = self.registry.fs();
        // The gate enforces read-before-edit.
        let enforce = faults::read_before_edit(self.registry.faults(), true);
        let verdict = fs.gate(intent, path, enforce);
        let mut obs = self.registry.stage(NodeId::FsGate, self.exec);
        obs.intent = Some(FsIntentRecord {
            intent,
            target: path.to_owned(),
            version: fs.version(path),
        });
        obs = match &verdict {
            Ok(()) => obs.outcome(Outcome::Allow),
            Err(refusal) => obs.outcome(Outcome::Deny).reason(refusal.to_string()),
        };
        let recorder = self.registry.recorder();
        recorder.observe(obs);
        // Control is back in the body, whichever way the gate went.
        recorder.observe(
            self.registry
                .stage(NodeId::ToolBody, self.exec)
                .identity(self.exec.identity()),
        );
        verdict.map_err(|refusal| Failure::new(refusal.to_string()))
    }

    fn commit(&self, path: &str, content: &str) {
        let version = self.registry.fs().commit_write(path, content);
        self.owned_event(EventBody::FsObserved(FsObserved {
            target: path.to_owned(),
            state: FileState::Present { version },
            actor: "agent".to_owned(),
        }));
    }

    /// Records a whole-list `todo/write` snapshot.
    pub fn write_todos(&self, todos: Vec<Todo>) {
        self.owned_event(EventBody::TodoWrite(TodoWrite { todos }));
    }

    /// Records that a hook handler ran inside this tool, with its outcome.
    pub fn record_hook(&self, invoked: HookInvoked, result: HookResult) {
        self.owned_event(EventBody::HookInvoked(invoked));
        self.owned_event(EventBody::HookResult(result));
    }

    /// Waits until the body is cancelled (for bodies that only stop when told to).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}

/// The failure a body reports when it stopped because it was cancelled.
pub fn cancelled_failure() -> Failure {
    Failure::coded(ErrorCode::Aborted, "tool call was cancelled")
}

impl std::fmt::Debug for ToolContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call", self.exec.call_id())
            .finish_non_exhaustive()
    }
}
