//! # tep-reference
//!
//! The reference implementation of the **tool execution pipeline** of AI coding-agent
//! harnesses. The spec's data (the stage graph, identities, results, session events, trace
//! records) is `tep-model`'s: import it from there.
//!
//! - [`pipeline`]: a tokio [`pipeline::ToolRegistry`] that runs every box and arrow of the graph
//!   and records each stage visit.
//! - [`recorder`]: the [`recorder::Recorder`] a run writes its trace with; [`execution`]: the
//!   frozen [`execution::Execution`] every stage shares.
//! - [`wrappers`]: timeout, retry and metrics `tools/execute` wrappers.
//! - [`fs`]: an in-memory filesystem behind the read-before-edit intent gate.
//! - [`pipeline::code_mode`]: the reserved `run_code` transport; its programs' sub-calls re-enter the
//!   pipeline.
//! - [`mutant`]: deliberate breakages, to prove a conformance suite catches them. Their
//!   behaviour is compiled in only with the cargo feature `mutants` (see `pipeline/faults.rs`).
//!
//! Architecture invariant: this crate never depends on the checker (`tep-check`): the
//! pipeline does not know its judge.

pub mod execution;
pub mod fs;
pub mod mutant;
pub mod pipeline;
pub mod recorder;
pub mod wrappers;
