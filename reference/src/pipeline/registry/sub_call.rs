//! Code Mode sub-calls: they re-enter the pipeline from pre-execute to tools/result.

use serde_json::Value;

use super::{Ended, ModelCall, Prepared, ToolRegistry};
use crate::execution::Execution;
use crate::pipeline::faults;
use crate::pipeline::tool::ToolContext;
use tep_model::graph::{NodeId, Revision};
use tep_model::result::content_text;
use tep_model::session::{CodeDispatch, CodeDispatchStart, EventBody};

impl ToolRegistry {
    /// A Code Mode sub-call: the `n`-th binding call of the program `parent` runs. It re-enters
    /// every stage from pre-execute to `tools/result`, logged by `tool/code-dispatch-start`
    /// (rev2) and `tool/code-dispatch`; the caller holds the lane, so sub-calls run one at a time.
    pub(crate) async fn run_sub_call(
        &self,
        parent: &ToolContext<'_>,
        n: usize,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, crate::pipeline::tool::ToolCallError> {
        let outer = parent.execution();
        let id = outer.call_id().code_sub_call(n);
        let plan = self.plan(ModelCall {
            call_id: id.clone(),
            name: tool.to_owned(),
            arguments: serde_json::to_string(&arguments).unwrap_or_default(),
        });
        let exec = Execution::new(
            self.mint(),
            id.clone(),
            outer.call_id().clone(),
            tool.to_owned(),
            plan.args.clone(),
            Some(outer.token()),
        );
        if self.revision == Revision::Rev2 {
            self.recorder.append(
                Some(&id),
                EventBody::CodeDispatchStart(CodeDispatchStart {
                    root_call_id: outer.root_call_id().clone(),
                    parent_call_id: outer.call_id().clone(),
                    sub_call_id: id.clone(),
                    name: tool.to_owned(),
                    arguments: plan.args.clone(),
                }),
                None,
                None,
            );
        }
        // Its dispatch events log a sub-call: it has no `tool/call`, it is not a model's call.
        let arguments = &plan.call.arguments;
        if let Some(event) = faults::sub_call_tool_call(&self.faults, &id, tool, arguments, None) {
            self.recorder.append(Some(&id), event, None, None);
        }
        let (prepared, exec) = self.decide(exec).await;
        let ended = match prepared {
            Prepared::Allowed => Ended::Executed(self.execute(0, &plan, exec.clone()).await.1),
            Prepared::Denied(reason) => {
                self.observe(self.stage(NodeId::Denied, &exec).reason(reason.clone()));
                Ended::Denied(reason)
            }
            Prepared::Threw(failure) => Ended::Threw(failure),
        };
        let frozen = self.freeze(&plan, &exec, ended).await;
        let frozen = self.announce(&exec, &frozen).await;
        // The doc: sub-calls omit their additional contexts (nothing can be injected mid-run
        // without breaking call/result adjacency).
        for text in faults::sub_call_contexts(&self.faults, &frozen, Vec::new()) {
            parent.defer_context(text);
        }
        faults::dispatch_log(&self.faults, || {
            let text = content_text(&frozen.content);
            self.recorder.append(
                Some(&id),
                EventBody::CodeDispatch(CodeDispatch {
                    root_call_id: (self.revision == Revision::Rev2)
                        .then(|| outer.root_call_id().clone()),
                    parent_call_id: outer.call_id().clone(),
                    sub_call_id: id.clone(),
                    name: tool.to_owned(),
                    arguments: plan.args.clone(),
                    is_error: frozen.is_error,
                    content: (self.revision == Revision::Rev2).then(|| frozen.content.clone()),
                    result_summary: (self.revision == Revision::Rev1)
                        .then(|| text.chars().take(200).collect()),
                }),
                None,
                None,
            );
        });
        if frozen.is_error {
            // The program is handed the tool name and the message, nothing else.
            let details =
                faults::rejection_details(&self.faults, std::collections::BTreeMap::new(), &frozen);
            Err(crate::pipeline::tool::ToolCallError {
                tool_name: tool.to_owned(),
                message: frozen
                    .error
                    .as_ref()
                    .map_or_else(|| content_text(&frozen.content), |e| e.message.clone()),
                details,
            })
        } else {
            Ok(frozen
                .value
                .clone()
                .unwrap_or_else(|| Value::String(content_text(&frozen.content))))
        }
    }
}
