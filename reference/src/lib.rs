//! # tep-reference
//!
//! The reference implementation of the **tool execution pipeline** of AI coding-agent
//! harnesses. The spec's data (the stage graph, identities, results, session events, trace
//! records) is `tep-model`'s, re-exported here under the same paths.
//!
//! - [`pipeline`]: a tokio [`pipeline::ToolRegistry`] that runs every box and arrow of the graph
//!   and records each stage visit.
//! - [`trace`]: the [`trace::Recorder`] a run writes its trace with; [`identity`]: the frozen
//!   [`identity::Execution`] every stage shares.
//! - [`wrappers`]: timeout, retry and metrics `tools/execute` wrappers.
//! - [`fs`]: an in-memory filesystem behind the read-before-edit intent gate.
//! - [`code_mode`]: the reserved `run_code` transport; its programs' sub-calls re-enter the
//!   pipeline.
//! - [`mutant`]: deliberate breakages, to prove a conformance suite catches them. Their
//!   behaviour is compiled in only with the cargo feature `mutants` (see `pipeline/faults.rs`).
//!
//! Architecture invariant: this crate never depends on the checker (`tep-check`): the
//! pipeline does not know its judge.

pub mod fs;
pub mod identity;
pub mod mutant;
pub mod pipeline;
pub mod trace;
pub mod wrappers;

// The spec's data lives in `tep-model`; these paths stay for the pipeline's users.
pub use tep_model::{RUN_CODE, graph, result, session, vocabulary};
// Code Mode's sub-calls re-enter the pipeline: it is a part of it, reachable where it was.
pub use pipeline::code_mode;
