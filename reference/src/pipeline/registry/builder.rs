//! The builder: tools and extension points, registered in order.

use std::collections::BTreeMap;
#[cfg(feature = "mutants")]
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::{DEFAULT_MAX_PARALLEL, RUN_CODE, RegistryError, ToolRegistry};
use crate::fs::VirtualFs;
#[cfg(feature = "mutants")]
use crate::mutant::Mutant;
use crate::pipeline::extension::{
    Approval, ExecuteWrapper, Guard, PostExecute, PreExecute, Presenter, ResultObserver,
};
use crate::pipeline::faults::{self, Faults};
use crate::pipeline::tool::Tool;
use crate::recorder::Recorder;
use tep_model::graph::Revision;

/// Registers tools and extension points, in order.
#[derive(Default)]
pub struct RegistryBuilder {
    revision: Revision,
    tools: Vec<Arc<dyn Tool>>,
    pre: Vec<Arc<dyn PreExecute>>,
    approval: Option<Arc<dyn Approval>>,
    guards: Vec<Arc<dyn Guard>>,
    wrappers: Vec<Arc<dyn ExecuteWrapper>>,
    post: Vec<Arc<dyn PostExecute>>,
    observers: Vec<Arc<dyn ResultObserver>>,
    presenter: Option<Arc<dyn Presenter>>,
    fs: Option<VirtualFs>,
    max_parallel: Option<usize>,
    #[cfg(feature = "mutants")]
    mutants: BTreeSet<Mutant>,
    recorder: Option<Recorder>,
    code_mode: Option<Arc<dyn crate::pipeline::code_mode::ProgramLoader>>,
}

impl std::fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("revision", &self.revision)
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl RegistryBuilder {
    /// Which revision's pipeline to run (rev2 unless told).
    pub fn revision(mut self, revision: Revision) -> Self {
        self.revision = revision;
        self
    }

    pub fn tool(self, tool: impl Tool + 'static) -> Self {
        self.tool_arc(Arc::new(tool))
    }

    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a `tools/pre-execute` listener after those already registered.
    pub fn pre_execute(mut self, listener: Arc<dyn PreExecute>) -> Self {
        self.pre.push(listener);
        self
    }

    /// Mounts `ctx.approval`.
    pub fn approval(mut self, approval: Arc<dyn Approval>) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Adds a monotonic guard after those already registered.
    pub fn guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Adds a `tools/execute` wrapper inside those already registered.
    pub fn wrap(mut self, wrapper: Arc<dyn ExecuteWrapper>) -> Self {
        self.wrappers.push(wrapper);
        self
    }

    /// Adds a `tools/post-execute` listener after those already registered.
    pub fn post_execute(mut self, listener: Arc<dyn PostExecute>) -> Self {
        self.post.push(listener);
        self
    }

    /// Adds a `tools/result` observer.
    pub fn observe(mut self, observer: Arc<dyn ResultObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    pub fn presenter(mut self, presenter: Arc<dyn Presenter>) -> Self {
        self.presenter = Some(presenter);
        self
    }

    pub fn fs(mut self, fs: VirtualFs) -> Self {
        self.fs = Some(fs);
        self
    }

    /// Caps how many concurrency-safe calls execute at once (at least 1).
    pub fn max_parallel(mut self, cap: usize) -> Self {
        self.max_parallel = Some(cap.max(1));
        self
    }

    /// Records into `recorder` (shared with scripted parts that add marks) instead of a new one.
    pub fn recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Turns Code Mode on: the reserved `run_code` tool runs the programs `loader` provides.
    pub fn code_mode(mut self, loader: Arc<dyn crate::pipeline::code_mode::ProgramLoader>) -> Self {
        self.code_mode = Some(loader);
        self
    }

    /// Breaks the pipeline on purpose (see [`crate::mutant`]); only with the feature `mutants`.
    #[cfg(feature = "mutants")]
    pub fn mutant(mut self, mutant: Mutant) -> Self {
        self.mutants.insert(mutant);
        self
    }

    pub fn build(self) -> Result<ToolRegistry, RegistryError> {
        let mut tools = BTreeMap::new();
        for tool in self.tools {
            let name = tool.name().to_owned();
            if name == RUN_CODE {
                return Err(RegistryError::Reserved(name));
            }
            if tools.insert(name.clone(), tool).is_some() {
                return Err(RegistryError::Duplicate(name));
            }
        }
        #[cfg(feature = "mutants")]
        let faults = Faults::new(self.mutants);
        #[cfg(not(feature = "mutants"))]
        let faults = Faults::default();
        let recorder = self.recorder.unwrap_or_default();
        Ok(ToolRegistry {
            revision: self.revision,
            tools,
            pre: faults::pre_listeners(&faults, self.pre),
            approval: faults::approval(&faults, self.approval, &recorder),
            guards: self.guards,
            wrappers: faults::execute_wrappers(&faults, self.wrappers),
            post: self.post,
            observers: self.observers,
            presenter: self.presenter,
            fs: self.fs.unwrap_or_default(),
            recorder,
            max_parallel: self.max_parallel.unwrap_or(DEFAULT_MAX_PARALLEL),
            faults,
            run_code: self.code_mode.map(|loader| {
                Arc::new(crate::pipeline::code_mode::RunCode { loader }) as Arc<dyn Tool>
            }),
            tokens: AtomicU64::new(0),
            steps: AtomicU64::new(0),
        })
    }
}
