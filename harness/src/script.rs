//! What a scenario asks of a harness driven from outside: whether each of its constructs has a
//! public interface (else the scenario is not applicable, naming the construct), and the script
//! the doubles play (the model's batch, the MCP bodies, the hook answers).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tep_conformance::scenario::{
    ApprovalAnswer, BodyStep, Listener, PostAction, PreAction, Scenario,
};

use crate::profile::{HookDialect, Profile};

/// The script of one run, written to the run directory for the MCP server and the hook command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunScript {
    pub scenario: String,
    /// The MCP tools: the scenario's tool names.
    pub tools: Vec<String>,
    /// The batch, in model order.
    pub calls: Vec<ScriptedCall>,
    pub pre: Vec<Listener<PreAction>>,
    pub post: Vec<Listener<PostAction>>,
    /// What the model answers after the batch.
    pub final_text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedCall {
    pub call_id: String,
    /// The scenario's tool name.
    pub tool: String,
    /// The name the model calls it by (the MCP name, or the scenario's for an unknown tool).
    pub model_name: String,
    pub arguments: Value,
    pub body: Vec<BodyStep>,
}

/// The text a scripted body returns when it runs to its end (as the reference's does).
pub const DEFAULT_BODY_TEXT: &str = "ok";

/// What the model says after the batch.
pub const FINAL_TEXT: &str = "tep: scenario done";

impl RunScript {
    /// The script of `scenario` for the harness `profile` describes, or why it cannot be driven:
    /// the construct with no public interface.
    pub fn of(scenario: &Scenario, profile: &Profile) -> Result<RunScript, String> {
        let hooks = profile.hooks.dialect != HookDialect::None;
        let no_hooks = |what: &str| {
            format!(
                "{what}: the installed {} has no hook bridge (profile hook dialect `none`)",
                profile.name
            )
        };
        let none = |what: &str| format!("{what} has no public interface in {}", profile.name);
        if !scenario.guards.is_empty() {
            return Err(none("a guard"));
        }
        if let Some(w) = scenario.wrappers.first() {
            return Err(none(&format!(
                "a `tools/execute` wrapper (`{}`)",
                serde_json::to_value(w)
                    .ok()
                    .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default()
            )));
        }
        if !scenario.observers.is_empty() {
            return Err(none("a `tools/result` observer"));
        }
        if !scenario.files.is_empty() {
            return Err(none("a file in the scripted filesystem"));
        }
        if scenario.max_parallel.is_some() {
            return Err(none(
                "a pool cap on scripted tools (MCP tools are exclusive)",
            ));
        }
        for tool in &scenario.tools {
            if tool.concurrency_safe {
                return Err(none(&format!(
                    "a concurrency-safe scripted tool (`{}`: MCP tools are exclusive)",
                    tool.name
                )));
            }
            if tool.timeout_ms.is_some() {
                return Err(none(&format!(
                    "a tool's own timeout (`{}`: MCP tools have none)",
                    tool.name
                )));
            }
            if tool.finalize.is_some() {
                return Err(none(&format!("`finalizeContent` (`{}`)", tool.name)));
            }
        }
        if let Some(approval) = &scenario.approval
            && approval
                .answers
                .values()
                .any(|a| *a != ApprovalAnswer::Unavailable)
        {
            return Err(none(
                "an approval answer other than `unavailable` (headless mounts no answerer)",
            ));
        }
        // One hook per event plays the stage: its listeners' order and how their decisions
        // combine would be tep's, not the harness's, and one hook answers one context.
        if scenario.pre.len() > 1 {
            return Err(none(
                "more than one pre-execute listener (tep's hook is one listener)",
            ));
        }
        if scenario.post.len() > 1 {
            return Err(none(
                "more than one post-execute listener (tep's hook is one listener)",
            ));
        }
        for listener in &scenario.pre {
            if !hooks {
                return Err(no_hooks("a pre-execute listener"));
            }
            for action in listener.decide.values() {
                match action {
                    PreAction::Rewrite(_) => {
                        return Err(none(
                            "a pre-execute argument rewrite (`updatedInput` is ignored)",
                        ));
                    }
                    PreAction::Throw(_) => return Err(none("a pre-execute listener that throws")),
                    _ => {}
                }
            }
        }
        for listener in &scenario.post {
            if !hooks {
                return Err(no_hooks("a post-execute listener"));
            }
            for action in listener.decide.values() {
                match action {
                    PostAction::Accept(_) => {
                        return Err(none("a post-execute replacement (`accept`)"));
                    }
                    PostAction::Throw(_) => {
                        return Err(none("a post-execute listener that throws"));
                    }
                    PostAction::Block(b) if b.context.is_some() => {
                        return Err(none("a post-execute block that adds a context"));
                    }
                    _ => {}
                }
            }
        }
        let mut calls = Vec::new();
        for call in &scenario.calls {
            if call.program.is_some() || call.tool == tep_model::RUN_CODE {
                return Err(none("a Code Mode program in the scenario language"));
            }
            let known = scenario.tools.iter().any(|t| t.name == call.tool);
            if !known
                && (profile.tools.shipped.contains(&call.tool)
                    || call.tool.starts_with(&profile.tools.prefix))
            {
                return Err(none(&format!(
                    "an unknown tool named like a shipped one (`{}`)",
                    call.tool
                )));
            }
            for step in &call.body {
                match step {
                    BodyStep::Sleep(_) | BodyStep::Return(_) | BodyStep::Throw(_) => {}
                    other => {
                        let name = serde_json::to_value(other)
                            .ok()
                            .and_then(|v| v.as_object().and_then(|m| m.keys().next().cloned()))
                            .or_else(|| {
                                serde_json::to_value(other)
                                    .ok()
                                    .and_then(|v| v.as_str().map(str::to_owned))
                            })
                            .unwrap_or_default();
                        return Err(none(&format!("a body step `{name}` over MCP")));
                    }
                }
            }
            calls.push(ScriptedCall {
                call_id: call.call_id.as_str().to_owned(),
                tool: call.tool.clone(),
                model_name: if known {
                    format!("{}{}", profile.tools.prefix, call.tool)
                } else {
                    call.tool.clone()
                },
                arguments: call.arguments.clone(),
                body: call.body.clone(),
            });
        }
        Ok(RunScript {
            scenario: scenario.id.clone(),
            tools: scenario.tools.iter().map(|t| t.name.clone()).collect(),
            calls,
            pre: scenario.pre.clone(),
            post: scenario.post.clone(),
            final_text: FINAL_TEXT.to_owned(),
        })
    }

    /// Whether the scenario scripts any hook.
    pub fn uses_hooks(&self) -> bool {
        !self.pre.is_empty() || !self.post.is_empty()
    }

    /// The call a body is for: the first call not yet `claimed` with this tool and these
    /// arguments, else with this tool. MCP tools are exclusive, so calls with equal arguments
    /// arrive in model order.
    pub fn match_call(&self, tool: &str, arguments: &Value, claimed: &[String]) -> Option<usize> {
        let open = |c: &&ScriptedCall| c.tool == tool && !claimed.contains(&c.call_id);
        let position = |wanted: &ScriptedCall| self.calls.iter().position(|c| c == wanted);
        self.calls
            .iter()
            .filter(open)
            .find(|c| &c.arguments == arguments)
            .or_else(|| self.calls.iter().find(open))
            .and_then(position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_conformance::scenario::corpus;

    fn script(id: &str, profile: &Profile) -> Result<RunScript, String> {
        let corpus = corpus().unwrap();
        let scenario = corpus.iter().find(|s| s.id == id).unwrap();
        RunScript::of(scenario, profile)
    }

    #[test]
    fn an_unknown_tool_is_called_by_its_own_name_and_known_ones_through_mcp() {
        let profile = Profile::load("deepseek-harness").unwrap();
        let s = script("unknown-tool-is-an-error-result", &profile).unwrap();
        assert_eq!(s.calls[0].model_name, "nope");
        assert_eq!(s.tools, ["read"]);
    }

    #[test]
    fn constructs_without_an_interface_are_named() {
        let mut profile = Profile::load("deepseek-harness").unwrap();
        let e = script("guards-first-reason-wins", &profile).unwrap_err();
        assert!(e.starts_with("a guard has no public interface"), "{e}");
        let e = script("pre-deny-skips-body", &profile).unwrap_err();
        assert!(e.contains("no hook bridge"), "{e}");
        profile.hooks.dialect = HookDialect::ClaudeCode;
        assert!(script("pre-deny-skips-body", &profile).is_ok());
        let e = script("pre-throws", &profile).unwrap_err();
        assert!(e.contains("throws"), "{e}");
        // Two post listeners that each add a context: one hook answers one context.
        let e = script("post-waterfall-is-an-onion", &profile).unwrap_err();
        assert!(e.contains("more than one post-execute listener"), "{e}");
    }

    #[test]
    fn equal_arguments_match_calls_in_model_order() {
        let mut profile = Profile::load("deepseek-harness").unwrap();
        profile.hooks.dialect = HookDialect::ClaudeCode;
        let s = script("pre-deny-skips-body", &profile).unwrap();
        let first = s.match_call(&s.calls[0].tool, &s.calls[0].arguments, &[]);
        assert_eq!(first, Some(0));
        let claimed = vec![s.calls[0].call_id.clone()];
        let next = s.match_call(&s.calls[0].tool, &s.calls[0].arguments, &claimed);
        assert_ne!(next, Some(0));
    }
}
