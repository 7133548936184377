//! Real `tools/execute` wrappers: timeout, retry, metrics.
//!
//! Each wraps dispatch the way the spec's `around` box says ("timeout, retry, metrics (around
//! dispatch)"). They only ever swap the cancellation signal they pass on; they never touch the
//! call's identity.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::pipeline::{BoxFuture, DispatchCall, ExecuteNext, ExecuteWrapper, Named};
use tep_model::result::{ErrorCode, Failure, ToolResult};

/// Applies the timeout a tool definition declares. At the deadline it cancels the signal it
/// handed the body and keeps waiting for the body to stop (cooperative cancellation: the body is
/// never abandoned), then reports `TOOL_TIMEOUT`.
#[derive(Debug, Clone, Default)]
pub struct TimeoutWrapper {
    #[cfg(feature = "mutants")]
    abandon: bool,
}

impl TimeoutWrapper {
    pub fn new() -> Self {
        TimeoutWrapper::default()
    }

    /// Broken on purpose (mutant `timeout-abandons-body`, only with the feature `mutants`): at
    /// the deadline it returns without waiting for the body, which is dropped mid-run.
    #[cfg(feature = "mutants")]
    pub fn abandoning() -> Self {
        TimeoutWrapper { abandon: true }
    }

    /// What the body ends with once the deadline cancelled its signal: the wrapper waits for it
    /// to stop.
    async fn after_deadline(
        &self,
        body: impl Future<Output = Result<ToolResult, Failure>>,
    ) -> Result<ToolResult, Failure> {
        #[cfg(feature = "mutants")]
        if self.abandon {
            return Err(Failure::new("abandoned"));
        }
        body.await
    }
}

impl Named for TimeoutWrapper {
    fn id(&self) -> &str {
        "timeout"
    }
}

impl ExecuteWrapper for TimeoutWrapper {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let Some(limit) = call.declared_timeout else {
                return next.run(call.cancel).await;
            };
            let deadline = call.cancel.child_token();
            let mut run = std::pin::pin!(next.run(deadline.clone()));
            let (result, fired) = tokio::select! {
                biased;
                result = &mut run => (result, false),
                () = tokio::time::sleep(limit) => {
                    deadline.cancel();
                    (self.after_deadline(run).await, true)
                }
            };
            if fired && !call.cancel.is_cancelled() {
                return Ok(ToolResult::failure(
                    format!("tool call timed out after {}ms", limit.as_millis()),
                    Some(ErrorCode::ToolTimeout.into()),
                ));
            }
            result
        })
    }
}

/// Runs the body again while it fails, up to `attempts` dispatches in all (at most
/// [`RetryWrapper::MAX_ATTEMPTS`]).
#[derive(Debug, Clone)]
pub struct RetryWrapper {
    attempts: u32,
    delay: Duration,
    only: Option<Vec<String>>,
}

impl RetryWrapper {
    /// The most dispatches one wrapper makes. With no delay no time passes between attempts, so
    /// without a cap a body that always fails would be dispatched (and traced) without end.
    pub const MAX_ATTEMPTS: u32 = 100;

    /// Up to `attempts` dispatches (at least one, at most [`Self::MAX_ATTEMPTS`]), `delay` apart.
    pub fn new(attempts: u32, delay: Duration) -> Self {
        RetryWrapper {
            attempts: attempts.clamp(1, Self::MAX_ATTEMPTS),
            delay,
            only: None,
        }
    }

    /// Retries only calls of these tools.
    pub fn for_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.only = Some(names.into_iter().collect());
        self
    }
}

impl Named for RetryWrapper {
    fn id(&self) -> &str {
        "retry"
    }
}

impl ExecuteWrapper for RetryWrapper {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let applies = self
                .only
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == call.exec.name()));
            let attempts = if applies { self.attempts } else { 1 };
            let mut result = next.run(call.cancel.clone()).await?;
            for _ in 1..attempts {
                if !result.is_error || call.cancel.is_cancelled() {
                    break;
                }
                tokio::time::sleep(self.delay).await;
                result = next.run(call.cancel.clone()).await?;
            }
            Ok(result)
        })
    }
}

/// What [`MetricsWrapper`] counted for one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolStats {
    pub calls: u64,
    pub errors: u64,
    pub total: Duration,
}

/// Counts calls, failures and time spent per tool.
#[derive(Debug, Clone, Default)]
pub struct MetricsWrapper {
    stats: Arc<Mutex<BTreeMap<String, ToolStats>>>,
}

impl MetricsWrapper {
    pub fn new() -> Self {
        Self::default()
    }

    /// The counts so far, by tool name.
    pub fn snapshot(&self) -> BTreeMap<String, ToolStats> {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Named for MetricsWrapper {
    fn id(&self) -> &str {
        "metrics"
    }
}

impl ExecuteWrapper for MetricsWrapper {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            let result = next.run(call.cancel).await;
            let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = stats.entry(call.exec.name().to_owned()).or_default();
            entry.calls += 1;
            entry.errors += u64::from(result.as_ref().map_or(true, |r| r.is_error));
            entry.total += started.elapsed();
            result
        })
    }
}
