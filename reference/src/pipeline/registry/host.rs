//! The registry as a tool body's host ([`Host`]): what `ToolContext` may reach.

use serde_json::Value;

use super::ToolRegistry;
use crate::execution::Execution;
use crate::fs::VirtualFs;
use crate::pipeline::extension::BoxFuture;
use crate::pipeline::faults::Faults;
use crate::pipeline::tool::{Host, ToolCallError, ToolContext};
use crate::recorder::Recorder;
use tep_model::graph::NodeId;
use tep_model::trace::Observation;

impl Host for ToolRegistry {
    fn fs(&self) -> &VirtualFs {
        ToolRegistry::fs(self)
    }

    fn faults(&self) -> &Faults {
        ToolRegistry::faults(self)
    }

    fn recorder(&self) -> &Recorder {
        ToolRegistry::recorder(self)
    }

    fn stage(&self, node: NodeId, exec: &Execution) -> Observation {
        ToolRegistry::stage(self, node, exec)
    }

    fn tool_names(&self) -> Vec<String> {
        ToolRegistry::tool_names(self)
    }

    fn run_sub_call<'a>(
        &'a self,
        parent: &'a ToolContext<'a>,
        n: usize,
        tool: &'a str,
        arguments: Value,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
        Box::pin(ToolRegistry::run_sub_call(self, parent, n, tool, arguments))
    }
}
