//! The reference pipeline: a [`ToolRegistry`] runs each batch of calls through every stage of
//! the stage graph, recording each visit as an observation.
//!
//! - [`extension`] defines the extension points (waterfalls, approval, guards, wrappers,
//!   observers, presenters) and their contracts;
//! - [`tool`] defines tools and what a body may do (fs gate, owned events, deferred contexts);
//! - [`registry`] drives a batch: ordered stages in model order, bodies in parallel pools;
//! - [`code_mode`] is the reserved `run_code` tool, whose sub-calls re-enter the registry.
//! - `faults` is where the mutants live: decorators and the seams the stages hand their spec
//!   values to, the identity without the feature `mutants`.

pub mod code_mode;
pub mod extension;
mod faults;
pub mod registry;
pub mod simple;
pub mod tool;

pub use extension::{
    Approval, ApprovalOutcome, ApprovalRequest, BoxFuture, DispatchCall, ExecuteNext,
    ExecuteWrapper, Guard, GuardVerdict, Named, PostDecision, PostExecute, PostNext, PreDecision,
    PreExecute, PreNext, Presenter, ResultObserver,
};
pub use registry::{
    BatchReport, CallOutcome, DEFAULT_MAX_PARALLEL, ModelCall, RUN_CODE, RegistryBuilder,
    RegistryError, ToolRegistry,
};
pub use tool::{FinalizeContent, Tool, ToolContext, cancelled_failure};
