//! # tep-reference
//!
//! The reference implementation of the **tool execution pipeline** of AI coding-agent
//! harnesses, and the **stage graph** the rest of the toolkit is derived from.
//!
//! - [`graph`]: the spec's flowchart as typed data (nodes, labeled and dotted edges, kinds,
//!   phases) with a small query API, a Mermaid printer and reader. The single source of truth.
//! - [`pipeline`]: a tokio [`pipeline::ToolRegistry`] that runs every box and arrow of the graph
//!   and records each stage visit.
//! - [`trace`], [`session`], [`result`], [`identity`]: the data a run produces, serializable
//!   with serde: session events in the shapes of the reference semantics and stage observations.
//! - [`wrappers`]: timeout, retry and metrics `tools/execute` wrappers.
//! - [`fs`]: an in-memory filesystem behind the read-before-edit intent gate.
//! - [`code_mode`]: the reserved `run_code` transport; its programs' sub-calls re-enter the
//!   pipeline.
//! - [`mutant`]: deliberate breakages, to prove a conformance suite catches them.

pub mod code_mode;
pub mod fs;
pub mod graph;
pub mod identity;
pub mod mutant;
pub mod pipeline;
pub mod result;
pub mod session;
pub mod trace;
pub mod vocabulary;
pub mod wrappers;
