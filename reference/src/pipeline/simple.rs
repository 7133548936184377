//! Extension points from plain functions, for the common case of a synchronous decision.
//!
//! ```
//! use tep_reference::pipeline::{simple, PreDecision};
//! let deny_rm = simple::pre("no-rm", |exec| {
//!     Ok((exec.name() == "rm").then(|| PreDecision::Deny { reason: "rm is off".into() }))
//! });
//! # let _ = deny_rm;
//! ```

use std::sync::Arc;

use super::extension::{
    Approval, ApprovalOutcome, ApprovalRequest, BoxFuture, Guard, GuardVerdict, Named,
    PostDecision, PostExecute, PostNext, PreDecision, PreExecute, PreNext,
};
use crate::execution::Execution;
use tep_model::result::{Failure, ToolResult};

type PreFn = dyn Fn(&Execution) -> Result<Option<PreDecision>, Failure> + Send + Sync;
type GuardFn = dyn Fn(&Execution) -> Result<GuardVerdict, Failure> + Send + Sync;
type PostFn =
    dyn Fn(&Execution, &ToolResult) -> Result<Option<PostDecision>, Failure> + Send + Sync;
type ApprovalFn = dyn Fn(&ApprovalRequest) -> Result<ApprovalOutcome, Failure> + Send + Sync;

/// A pre-execute listener that decides with `f`; `Ok(None)` passes on to the next listener.
pub fn pre(
    id: &str,
    f: impl Fn(&Execution) -> Result<Option<PreDecision>, Failure> + Send + Sync + 'static,
) -> Arc<dyn PreExecute> {
    Arc::new(SimplePre {
        id: id.to_owned(),
        f: Box::new(f),
    })
}

/// A guard that judges with `f`.
pub fn guard(
    id: &str,
    f: impl Fn(&Execution) -> Result<GuardVerdict, Failure> + Send + Sync + 'static,
) -> Arc<dyn Guard> {
    Arc::new(SimpleGuard {
        id: id.to_owned(),
        f: Box::new(f),
    })
}

/// A post-execute listener that decides with `f`; `Ok(None)` passes on.
pub fn post(
    id: &str,
    f: impl Fn(&Execution, &ToolResult) -> Result<Option<PostDecision>, Failure> + Send + Sync + 'static,
) -> Arc<dyn PostExecute> {
    Arc::new(SimplePost {
        id: id.to_owned(),
        f: Box::new(f),
    })
}

/// An approval prompt that answers with `f`.
pub fn approval(
    f: impl Fn(&ApprovalRequest) -> Result<ApprovalOutcome, Failure> + Send + Sync + 'static,
) -> Arc<dyn Approval> {
    Arc::new(SimpleApproval { f: Box::new(f) })
}

struct SimplePre {
    id: String,
    f: Box<PreFn>,
}

impl Named for SimplePre {
    fn id(&self) -> &str {
        &self.id
    }
}

impl PreExecute for SimplePre {
    fn call<'a>(
        &'a self,
        exec: &'a Execution,
        next: PreNext<'a>,
    ) -> BoxFuture<'a, Result<PreDecision, Failure>> {
        Box::pin(async move {
            match (self.f)(exec)? {
                Some(decision) => Ok(decision),
                None => next.run().await,
            }
        })
    }
}

struct SimpleGuard {
    id: String,
    f: Box<GuardFn>,
}

impl Named for SimpleGuard {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Guard for SimpleGuard {
    fn check<'a>(&'a self, exec: &'a Execution) -> BoxFuture<'a, Result<GuardVerdict, Failure>> {
        Box::pin(async move { (self.f)(exec) })
    }
}

struct SimplePost {
    id: String,
    f: Box<PostFn>,
}

impl Named for SimplePost {
    fn id(&self) -> &str {
        &self.id
    }
}

impl PostExecute for SimplePost {
    fn call<'a>(
        &'a self,
        exec: &'a Execution,
        result: &'a ToolResult,
        next: PostNext<'a>,
    ) -> BoxFuture<'a, Result<PostDecision, Failure>> {
        Box::pin(async move {
            match (self.f)(exec, result)? {
                Some(decision) => Ok(decision),
                None => next.run().await,
            }
        })
    }
}

struct SimpleApproval {
    f: Box<ApprovalFn>,
}

impl Approval for SimpleApproval {
    fn request<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalOutcome, Failure>> {
        Box::pin(async move { (self.f)(request) })
    }
}

macro_rules! debug_simple {
    ($($ty:ident),*) => {$(
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty)).finish_non_exhaustive()
            }
        }
    )*};
}
debug_simple!(SimplePre, SimpleGuard, SimplePost, SimpleApproval);
