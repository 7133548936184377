//! The registry: runs a batch of calls through every stage of the graph.
//!
//! One driver task runs every *ordered* stage (the call event, pre-execute, approval, guards,
//! post-execute, normalization, `finalizeContent`, `tools/result`, the recorded `tool/result`)
//! strictly one at a time and in model order, while it keeps polling the `tools/execute` +
//! body futures of concurrency-safe calls. So bodies overlap and nothing else does, and a
//! head-of-line cursor commits results in model order however the bodies finish.
//!
//! One module per phase of the model's graph (`tep_model::graph::Phase`), each naming the graph
//! nodes it owns: `batch` (`Dispatch`: the batch arrives, and the driver that runs the phases
//! below), `prepare` (`Prepare`), `execute` (`Execute`), `commit` (`Commit`) and
//! `settle` (`Settle`). `sub_call` runs a Code Mode sub-call through the same stages;
//! `builder` builds a registry, `host` is what a tool body may reach, `types` what the
//! stages hand each other and the fault seams.

mod batch;
mod builder;
mod commit;
mod execute;
mod host;
mod prepare;
mod settle;
mod sub_call;
pub(super) mod types;

pub(super) use types::Prepared;
pub use types::{BatchReport, CallOutcome};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::extension::{
    Approval, ExecuteWrapper, Guard, PostExecute, PreExecute, Presenter, ResultObserver,
};
use super::faults::{self, Faults};
use super::tool::Tool;
use crate::execution::{Execution, Token};
use crate::fs::VirtualFs;
use crate::recorder::Recorder;
use tep_model::graph::{NodeId, Revision};
use tep_model::identity::CallId;
use tep_model::result::{Failure, ToolResult};
use tep_model::trace::Observation;

pub use builder::RegistryBuilder;

pub use tep_model::RUN_CODE;

/// The default cap of concurrently executing calls in one parallel pool.
pub const DEFAULT_MAX_PARALLEL: usize = 10;

/// One call of an assistant message's tool-call block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    pub call_id: CallId,
    pub name: String,
    /// The raw argument string the model wrote.
    pub arguments: String,
}

impl ModelCall {
    pub fn new(call_id: &str, name: &str, arguments: &str) -> Self {
        ModelCall {
            call_id: call_id.into(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }
}

/// Why a registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("`{0}` is reserved for the Code Mode transport and cannot be registered")]
    Reserved(String),
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
}

/// The tool execution pipeline (see the module docs).
pub struct ToolRegistry {
    revision: Revision,
    tools: BTreeMap<String, Arc<dyn Tool>>,
    pre: Vec<Arc<dyn PreExecute>>,
    approval: Option<Arc<dyn Approval>>,
    guards: Vec<Arc<dyn Guard>>,
    wrappers: Vec<Arc<dyn ExecuteWrapper>>,
    post: Vec<Arc<dyn PostExecute>>,
    observers: Vec<Arc<dyn ResultObserver>>,
    presenter: Option<Arc<dyn Presenter>>,
    fs: VirtualFs,
    recorder: Recorder,
    max_parallel: usize,
    faults: Faults,
    /// The reserved `run_code` tool, when Code Mode is on.
    run_code: Option<Arc<dyn Tool>>,
    tokens: AtomicU64,
    steps: AtomicU64,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("revision", &self.revision)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("mutants", &self.faults)
            .finish_non_exhaustive()
    }
}

/// A call of the batch, classified before anything runs.
struct CallPlan {
    call: ModelCall,
    args: Value,
    /// The visible definition, captured once: its `finalizeContent` is the one called even if
    /// the registry changed meanwhile.
    tool: Option<Arc<dyn Tool>>,
    safe: bool,
}

/// A call whose prepare stages ran.
struct Started {
    exec: Execution,
    call_seq: u64,
    prepared: Prepared,
}

/// How a call's prepare and execute stages ended: what it brings to its commit.
enum Ended {
    Denied(String),
    Threw(Failure),
    Executed(Result<ToolResult, Failure>),
}

impl ToolRegistry {
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The trace of everything this registry ran.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    pub fn fs(&self) -> &VirtualFs {
        &self.fs
    }

    /// What escaped the pipeline, when a throw did (a conforming registry lets none escape:
    /// only the mutant `throw-escapes` abandons the batch with one).
    pub fn escaped(&self) -> Option<String> {
        faults::escaped(&self.faults, None)
    }

    /// The mutants this registry runs with (see [`super::faults`]).
    pub(in crate::pipeline) fn faults(&self) -> &Faults {
        &self.faults
    }

    fn mint(&self) -> Token {
        Token::mint(self.tokens.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn observe(&self, observation: Observation) {
        self.recorder.observe(observation);
    }

    /// A visit of `node` by `exec`: its call id, and for a Code Mode sub-call its parent call.
    pub(crate) fn stage(&self, node: NodeId, exec: &Execution) -> Observation {
        let mut obs = Observation::at(node).call(exec.call_id());
        if exec.parent().is_some() {
            obs.parent = Some(exec.root_call_id().clone());
        }
        obs
    }

    /// The names of the registered tools (never `run_code`).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }
}
