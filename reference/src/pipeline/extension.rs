//! The extension points of the pipeline and their contracts.
//!
//! Every extension point is async and registered in order. The three waterfalls
//! (`tools/pre-execute`, `tools/execute`, `tools/post-execute`) are onions: each listener is
//! handed a `next` that runs the listeners after it (and, at the end, the default or the tool
//! body). A listener passes on by awaiting `next` and returning what it gives (possibly
//! transformed); a listener that does not call `next` vetoes every listener after it.
//!
//! A listener "throws" by returning `Err(Failure)` or by panicking; the pipeline catches both at
//! the stage boundary and normalizes them, so nothing escapes.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::execution::Execution;
use tep_model::result::{ContentBlock, Failure, ToolResult};

/// A boxed, sendable future: what every async extension point returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs a stage future, turning a panic into a [`Failure`].
pub(crate) async fn guarded<T>(
    fut: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(Failure::from_panic(&*payload)),
    }
}

/// Runs a synchronous callback, turning a panic into a [`Failure`].
pub(crate) fn guarded_sync<T>(f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(Failure::from_panic(&*payload)),
    }
}

/// What the listeners of a waterfall not yet entered are, and who entered so far.
struct Chain<'a, L: ?Sized> {
    rest: &'a [Arc<L>],
    entered: &'a Mutex<Vec<String>>,
}

impl<'a, L: ?Sized> Clone for Chain<'a, L> {
    fn clone(&self) -> Self {
        Chain {
            rest: self.rest,
            entered: self.entered,
        }
    }
}

impl<'a, L: ?Sized + Named> Chain<'a, L> {
    /// The next listener (recorded as entered) and the chain after it.
    fn enter(&self) -> Option<(&'a L, Chain<'a, L>)> {
        let (first, rest) = self.rest.split_first()?;
        self.entered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(first.id().to_owned());
        Some((
            first.as_ref(),
            Chain {
                rest,
                entered: self.entered,
            },
        ))
    }
}

/// Anything registered under an id. The ids of `tools/pre-execute` and `tools/post-execute`
/// listeners and of guards appear in traces (`listeners`, `verdicts`); the trace format has no
/// place for an execute wrapper's or a result observer's.
pub trait Named {
    fn id(&self) -> &str;
}

// ---------------------------------------------------------------------------------------------
// tools/pre-execute

/// A `tools/pre-execute` decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreDecision {
    Allow,
    Deny {
        reason: String,
    },
    Ask {
        reason: Option<String>,
    },
    /// An attempt to allow the call with other arguments. Identity is protected: a decision
    /// has no input rewrite, so the pipeline treats this as `Allow` and every stage keeps the
    /// arguments the model sent.
    Rewrite {
        arguments: Value,
    },
}

/// A `tools/pre-execute` listener: hooks, permission policy, sandbox selection.
pub trait PreExecute: Named + Send + Sync {
    fn call<'a>(
        &'a self,
        exec: &'a Execution,
        next: PreNext<'a>,
    ) -> BoxFuture<'a, Result<PreDecision, Failure>>;
}

/// The rest of the `tools/pre-execute` waterfall; its default is `allow`.
pub struct PreNext<'a> {
    chain: Chain<'a, dyn PreExecute>,
    exec: &'a Execution,
}

impl<'a> PreNext<'a> {
    pub(crate) fn new(
        listeners: &'a [Arc<dyn PreExecute>],
        exec: &'a Execution,
        entered: &'a Mutex<Vec<String>>,
    ) -> Self {
        PreNext {
            chain: Chain {
                rest: listeners,
                entered,
            },
            exec,
        }
    }

    /// Runs the listeners after this one and returns their decision.
    pub fn run(self) -> BoxFuture<'a, Result<PreDecision, Failure>> {
        Box::pin(async move {
            match self.chain.enter() {
                None => Ok(PreDecision::Allow),
                Some((listener, rest)) => {
                    let next = PreNext {
                        chain: rest,
                        exec: self.exec,
                    };
                    guarded(listener.call(self.exec, next)).await
                }
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// ctx.approval

/// The answer of the one-shot approval prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalOutcome {
    AllowedOnce,
    Rejected,
    Cancelled,
    Unavailable,
}

/// What the approval prompt is asked.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub tool_name: String,
    pub call_id: tep_model::identity::CallId,
    pub reason: Option<String>,
    pub cancel: CancellationToken,
}

/// `ctx.approval`: answers an `ask` once. Absent, the call is denied.
pub trait Approval: Send + Sync {
    fn request<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalOutcome, Failure>>;
}

// ---------------------------------------------------------------------------------------------
// Guards

/// A guard's verdict. There is no `Allow`: a guard can only deny or abstain, so no ordering of
/// guards can undo a denial ("monotonic").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardVerdict {
    Abstain,
    Deny(String),
    /// An attempt to allow. Guards are monotonic: the pipeline treats it as abstaining, so it
    /// can never undo another guard's denial.
    Allow,
}

/// A registered monotonic guard: owner policy that must not be reordered.
pub trait Guard: Named + Send + Sync {
    fn check<'a>(&'a self, exec: &'a Execution) -> BoxFuture<'a, Result<GuardVerdict, Failure>>;
}

// ---------------------------------------------------------------------------------------------
// tools/execute

/// What a `tools/execute` wrapper is handed.
#[derive(Debug, Clone)]
pub struct DispatchCall<'a> {
    pub exec: &'a Execution,
    /// The cancellation signal the body will see unless this wrapper swaps it.
    pub cancel: CancellationToken,
    /// The timeout the tool definition declares, if any.
    pub declared_timeout: Option<Duration>,
}

/// A `tools/execute` wrapper around dispatch: timeout, retry, metrics.
pub trait ExecuteWrapper: Named + Send + Sync {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>>;
}

/// Runs one dispatch of the tool body; implemented by the registry. A conforming dispatch
/// never fails (a body's failure is an `isError` result); only a mutant's does.
pub(crate) trait Dispatch: Send + Sync {
    fn dispatch<'a>(
        &'a self,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>>;
}

/// The rest of the `tools/execute` waterfall. It may be run more than once (retry); the
/// innermost dispatch never fails: a body's error or panic arrives as an `isError` result.
#[derive(Clone)]
pub struct ExecuteNext<'a> {
    rest: &'a [Arc<dyn ExecuteWrapper>],
    exec: &'a Execution,
    declared_timeout: Option<Duration>,
    dispatcher: &'a dyn Dispatch,
    /// Set once `rest` ran (`retry-skips-inner-wrappers`: then only the body runs).
    #[cfg(feature = "mutants")]
    ran_once: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl<'a> ExecuteNext<'a> {
    pub(crate) fn new(
        wrappers: &'a [Arc<dyn ExecuteWrapper>],
        exec: &'a Execution,
        declared_timeout: Option<Duration>,
        dispatcher: &'a dyn Dispatch,
    ) -> Self {
        ExecuteNext {
            rest: wrappers,
            exec,
            declared_timeout,
            dispatcher,
            #[cfg(feature = "mutants")]
            ran_once: None,
        }
    }

    /// This `next()`, broken (`retry-skips-inner-wrappers`): its first run goes through the
    /// wrappers after this one, every later run straight to the body.
    #[cfg(feature = "mutants")]
    pub(crate) fn inner_wrappers_once(self) -> Self {
        ExecuteNext {
            ran_once: Some(Arc::default()),
            ..self
        }
    }

    /// Runs the wrappers after this one and then the body, with `cancel` as the signal.
    pub fn run(&self, cancel: CancellationToken) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        let this = self.clone();
        Box::pin(async move {
            #[cfg(feature = "mutants")]
            if let Some(ran) = &this.ran_once
                && ran.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                return this.dispatcher.dispatch(cancel).await;
            }
            match this.rest.split_first() {
                None => this.dispatcher.dispatch(cancel).await,
                Some((wrapper, rest)) => {
                    let next = ExecuteNext {
                        rest,
                        #[cfg(feature = "mutants")]
                        ran_once: None,
                        ..this.clone()
                    };
                    let call = DispatchCall {
                        exec: this.exec,
                        cancel,
                        declared_timeout: this.declared_timeout,
                    };
                    guarded(wrapper.wrap(call, next)).await
                }
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// tools/post-execute

/// A `tools/post-execute` decision.
#[derive(Debug, Clone, PartialEq)]
pub enum PostDecision {
    /// Keep the result; optionally replace its content (or its value, re-rendered), and add
    /// contexts after the tool-deferred and wrapper ones.
    Accept {
        content: Option<Vec<ContentBlock>>,
        value: Option<Value>,
        contexts: Vec<String>,
    },
    /// Turn the result into an error whose content is `feedback`. Earlier contexts are dropped;
    /// only these `contexts` remain.
    Block {
        feedback: Vec<ContentBlock>,
        contexts: Vec<String>,
    },
}

impl PostDecision {
    /// The default decision: accept unchanged.
    pub fn accept() -> Self {
        PostDecision::Accept {
            content: None,
            value: None,
            contexts: Vec::new(),
        }
    }
}

/// A `tools/post-execute` listener. It runs for denied calls too (it sees the denial result),
/// and is skipped after a throw.
pub trait PostExecute: Named + Send + Sync {
    fn call<'a>(
        &'a self,
        exec: &'a Execution,
        result: &'a ToolResult,
        next: PostNext<'a>,
    ) -> BoxFuture<'a, Result<PostDecision, Failure>>;
}

/// The rest of the `tools/post-execute` waterfall; its default is `accept`.
pub struct PostNext<'a> {
    chain: Chain<'a, dyn PostExecute>,
    exec: &'a Execution,
    result: &'a ToolResult,
}

impl<'a> PostNext<'a> {
    pub(crate) fn new(
        listeners: &'a [Arc<dyn PostExecute>],
        exec: &'a Execution,
        result: &'a ToolResult,
        entered: &'a Mutex<Vec<String>>,
    ) -> Self {
        PostNext {
            chain: Chain {
                rest: listeners,
                entered,
            },
            exec,
            result,
        }
    }

    /// Runs the listeners after this one and returns their decision.
    pub fn run(self) -> BoxFuture<'a, Result<PostDecision, Failure>> {
        Box::pin(async move {
            match self.chain.enter() {
                None => Ok(PostDecision::accept()),
                Some((listener, rest)) => {
                    let next = PostNext {
                        chain: rest,
                        ..self
                    };
                    guarded(listener.call(self.exec, self.result, next)).await
                }
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// tools/result and the UI

/// A `tools/result` observer. rev2 calls it synchronously with the frozen outcome and does not
/// await the work it returns; rev1 awaits the returned work of all observers together before
/// recording `tool/result`.
pub trait ResultObserver: Named + Send + Sync {
    fn notify(&self, exec: &Execution, result: &Arc<ToolResult>) -> Option<BoxFuture<'static, ()>>;

    /// An observer's attempt to change the announced outcome's content. The outcome is frozen:
    /// the pipeline ignores it, and `tool/result` records what `tools/result` announced.
    fn amend(&self, _exec: &Execution, _result: &ToolResult) -> Option<Vec<ContentBlock>> {
        None
    }
}

/// The UI cards. A presenter that panics falls back to the generic card (nothing is lost).
pub trait Presenter: Send + Sync {
    fn present_call(&self, call_id: &tep_model::identity::CallId, args: &Value);
    fn present_result(
        &self,
        call_id: &tep_model::identity::CallId,
        args: &Value,
        result: &ToolResult,
    );
}

macro_rules! debug_next {
    ($($ty:ident),*) => {$(
        impl std::fmt::Debug for $ty<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("call", self.exec.call_id())
                    .finish_non_exhaustive()
            }
        }
    )*};
}
debug_next!(PreNext, ExecuteNext, PostNext);
