//! What a scenario asks of a harness driven from outside: whether each of its constructs has a
//! public interface (else the scenario is not applicable, naming the construct), and the script
//! the doubles play (the model's batch, the MCP bodies, the hook answers).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tep_conformance::scenario::{
    ApprovalAnswer, BodyStep, CallSpec, Listener, PostAction, PreAction, Scenario, WrapperSpec,
};

use crate::profile::{HookDialect, OverlaySpec, Profile};

/// The script of one run, written to the run directory for the MCP server and the hook command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunScript {
    pub scenario: String,
    /// The MCP tools: the scenario's exclusive tool names.
    pub tools: Vec<String>,
    /// The batch, in model order.
    pub calls: Vec<ScriptedCall>,
    pub pre: Vec<Listener<PreAction>>,
    pub post: Vec<Listener<PostAction>>,
    /// What the model answers after the batch.
    pub final_text: String,
    /// The pool cap the harness is configured with (the scenario's `maxParallel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<usize>,
    /// The timeout the shipped safe tool is configured with (the scenario's safe tools' shared
    /// `timeoutMs`, applied by its `timeout` wrapper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedCall {
    pub call_id: String,
    /// The scenario's tool name.
    pub tool: String,
    /// The name the model calls it by (the MCP name, the shipped safe tool's, or the
    /// scenario's for an unknown tool).
    pub model_name: String,
    pub arguments: Value,
    pub body: Vec<BodyStep>,
    /// For a call played by the shipped safe tool: the query that names it, which its backend
    /// receives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// The text a scripted body returns when it runs to its end (as the reference's does).
pub const DEFAULT_BODY_TEXT: &str = "ok";

/// What the model says after the batch.
pub const FINAL_TEXT: &str = "tep: scenario done";

/// A body step's name in the scenario language (`sleep`, `hang`, ...).
fn step_name(step: &BodyStep) -> String {
    let value = serde_json::to_value(step).ok();
    value
        .as_ref()
        .and_then(|v| v.as_object().and_then(|m| m.keys().next().cloned()))
        .or_else(|| value.as_ref().and_then(|v| v.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

impl RunScript {
    /// The script of `scenario` for the harness `profile` describes, or why it cannot be driven:
    /// the construct with no public interface.
    pub fn of(scenario: &Scenario, profile: &Profile) -> Result<RunScript, String> {
        let none = |what: &str| format!("{what} has no public interface in {}", profile.name);
        if !scenario.guards.is_empty() {
            return Err(none("a guard"));
        }
        let timeout_wrapper = wrappers(scenario, &none)?;
        if !scenario.observers.is_empty() {
            return Err(none("a `tools/result` observer"));
        }
        if !scenario.files.is_empty() {
            return Err(none("a file in the scripted filesystem"));
        }
        let safe_timeout_ms = tools(scenario, profile, timeout_wrapper, &none)?;
        if scenario.max_parallel.is_some() && profile.overlay.pool_cap_row.is_empty() {
            return Err(none("a pool cap (the profile has no `pool_cap_row`)"));
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
        listeners(scenario, profile, &none)?;
        let calls = scenario
            .calls
            .iter()
            .map(|call| scripted_call(scenario, profile, call, &none))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RunScript {
            scenario: scenario.id.clone(),
            tools: scenario
                .tools
                .iter()
                .filter(|t| !t.concurrency_safe)
                .map(|t| t.name.clone())
                .collect(),
            calls,
            pre: scenario.pre.clone(),
            post: scenario.post.clone(),
            final_text: FINAL_TEXT.to_owned(),
            max_parallel: scenario.max_parallel,
            safe_timeout_ms,
        })
    }

    /// The overlay rows this script sets (placeholder, text): the shipped safe tool's row (with
    /// its timeout) and the pool cap's.
    pub fn overlay_rows(&self, overlay: &OverlaySpec) -> [(&'static str, String); 2] {
        let safe = match self.safe_timeout_ms {
            Some(ms) => overlay
                .safe_tool_timeout_row
                .replace("{timeout_ms}", &ms.to_string()),
            None => overlay.safe_tool_row.clone(),
        };
        let cap = self.max_parallel.map_or_else(String::new, |n| {
            overlay
                .pool_cap_row
                .replace("{max_parallel}", &n.to_string())
        });
        [("safe_tool_rows", safe), ("pool_cap_rows", cap)]
    }

    /// Whether the scenario scripts any hook.
    pub fn uses_hooks(&self) -> bool {
        !self.pre.is_empty() || !self.post.is_empty()
    }

    /// The calls the shipped safe tool plays: (call id, the shipped tool's name, the
    /// scenario's tool name).
    pub fn played_by_safe_tool(&self) -> Vec<(String, String, String)> {
        self.calls
            .iter()
            .filter(|c| c.query.is_some())
            .map(|c| (c.call_id.clone(), c.model_name.clone(), c.tool.clone()))
            .collect()
    }

    /// The call a search for `text` is for: the call whose query the text is, or ends with
    /// after a space (a backend may wrap the query in words of its own).
    pub fn call_of_query(&self, text: &str) -> Option<usize> {
        let text = text.trim();
        self.calls.iter().position(|c| {
            c.query
                .as_deref()
                .is_some_and(|q| text == q || text.ends_with(&format!(" {q}")))
        })
    }

    /// The call a body is for: the first call not yet `claimed` with this tool and these
    /// arguments, else with this tool. MCP tools are exclusive, so calls with equal arguments
    /// arrive in model order.
    pub fn match_call(&self, tool: &str, arguments: &Value, claimed: &[String]) -> Option<usize> {
        let open = |c: &&ScriptedCall| {
            c.tool == tool && c.query.is_none() && !claimed.contains(&c.call_id)
        };
        let position = |wanted: &ScriptedCall| self.calls.iter().position(|c| c == wanted);
        self.calls
            .iter()
            .filter(open)
            .find(|c| &c.arguments == arguments)
            .or_else(|| self.calls.iter().find(open))
            .and_then(position)
    }
}

/// The scenario's `tools/execute` wrappers: only a `timeout` wrapper has a public interface
/// (the shipped `tool-call-timeout-policy`). Whether one is mounted.
fn wrappers(scenario: &Scenario, none: &dyn Fn(&str) -> String) -> Result<bool, String> {
    let mut timeout = false;
    for w in &scenario.wrappers {
        if matches!(w, WrapperSpec::Timeout) {
            timeout = true;
            continue;
        }
        let kind = serde_json::to_value(w)
            .ok()
            .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        return Err(none(&format!("a `tools/execute` wrapper (`{kind}`)")));
    }
    Ok(timeout)
}

/// The scenario's tools: each needs a public interface. The timeout the shipped safe tool is
/// given, if the `timeout` wrapper applies one.
fn tools(
    scenario: &Scenario,
    profile: &Profile,
    timeout_wrapper: bool,
    none: &dyn Fn(&str) -> String,
) -> Result<Option<u64>, String> {
    let mut safe_timeouts = BTreeSet::new();
    for tool in &scenario.tools {
        if tool.finalize.is_some() {
            return Err(none(&format!("`finalizeContent` (`{}`)", tool.name)));
        }
        if tool.concurrency_safe {
            if profile.tools.safe.is_none() {
                return Err(none(&format!(
                    "a concurrency-safe scripted tool (`{}`: MCP tools are exclusive, and the profile names no shipped safe tool)",
                    tool.name
                )));
            }
            if timeout_wrapper {
                safe_timeouts.insert(tool.timeout_ms);
            }
        } else if timeout_wrapper && tool.timeout_ms.is_some() {
            return Err(none(&format!(
                "a timeout on an exclusive tool (`{}`: MCP tools have none)",
                tool.name
            )));
        }
    }
    let timeout = match safe_timeouts.len() {
        0 => None,
        1 => safe_timeouts.into_iter().next().flatten(),
        _ => {
            return Err(none(
                "concurrency-safe tools with different timeouts (the shipped safe tool has one)",
            ));
        }
    };
    if timeout.is_some() && profile.overlay.safe_tool_timeout_row.is_empty() {
        return Err(none(
            "a safe tool's own timeout (the profile has no `safe_tool_timeout_row`)",
        ));
    }
    Ok(timeout)
}

/// The scenario's listeners: one per stage, each through the hook bridge.
fn listeners(
    scenario: &Scenario,
    profile: &Profile,
    none: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    let hooks = profile.hooks.dialect != HookDialect::None;
    let no_hooks = |what: &str| {
        format!(
            "{what}: the installed {} has no hook bridge (profile hook dialect `none`)",
            profile.name
        )
    };
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
    Ok(())
}

/// One call of the batch as the model sends it.
fn scripted_call(
    scenario: &Scenario,
    profile: &Profile,
    call: &CallSpec,
    none: &dyn Fn(&str) -> String,
) -> Result<ScriptedCall, String> {
    if call.program.is_some() || call.tool == tep_model::RUN_CODE {
        return Err(none("a Code Mode program in the scenario language"));
    }
    let tool = scenario.tools.iter().find(|t| t.name == call.tool);
    if tool.is_none()
        && (profile.tools.shipped.contains(&call.tool)
            || call.tool.starts_with(&profile.tools.prefix))
    {
        return Err(none(&format!(
            "an unknown tool named like a shipped one (`{}`)",
            call.tool
        )));
    }
    let safe = tool
        .filter(|t| t.concurrency_safe)
        .and(profile.tools.safe.as_ref());
    for step in &call.body {
        match step {
            BodyStep::Sleep(_) | BodyStep::Return(_) | BodyStep::Throw(_) => {}
            // The backend's request is aborted when the harness cancels the body.
            BodyStep::Hang if safe.is_some() => {}
            other => {
                let over = safe.map_or("MCP", |s| s.tool.as_str());
                return Err(none(&format!(
                    "a body step `{}` over {over}",
                    step_name(other)
                )));
            }
        }
    }
    let id = call.call_id.as_str();
    let (model_name, arguments, query) = match (tool, safe) {
        (Some(_), Some(safe)) => {
            let query = safe.query.replace("{call}", id);
            let text = safe.arguments.replace("{query}", &query);
            let arguments = serde_json::from_str(&text).map_err(|e| {
                format!(
                    "the profile's `tools.safe.arguments` is not JSON once filled ({text}): {e}"
                )
            })?;
            (safe.tool.clone(), arguments, Some(query))
        }
        (Some(_), None) => (
            format!("{}{}", profile.tools.prefix, call.tool),
            call.arguments.clone(),
            None,
        ),
        (None, _) => (call.tool.clone(), call.arguments.clone(), None),
    };
    Ok(ScriptedCall {
        call_id: id.to_owned(),
        tool: call.tool.clone(),
        model_name,
        arguments,
        body: call.body.clone(),
        query,
    })
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

    #[test]
    fn safe_tools_are_played_by_the_shipped_safe_tool_with_the_pool_cap() {
        let profile = Profile::load("deepseek-harness").unwrap();
        let s = script("parallel-pool-is-capped", &profile).unwrap();
        assert_eq!(s.max_parallel, Some(2));
        assert!(s.tools.is_empty(), "no MCP tool: {:?}", s.tools);
        assert_eq!(s.calls[0].model_name, "web_search");
        assert_eq!(s.calls[0].query.as_deref(), Some("tep c1"));
        assert_eq!(
            s.calls[0].arguments,
            serde_json::json!({"queries": ["tep c1"]})
        );
        assert_eq!(
            s.call_of_query("Perform a web search for the query: tep c3"),
            Some(2)
        );
        assert_eq!(
            s.call_of_query("Perform a web search for the query: tep c33"),
            None
        );
        let [(_, safe), (_, cap)] = s.overlay_rows(&profile.overlay);
        assert!(cap.contains("maxParallelToolCalls: 2"), "{cap}");
        assert!(!safe.contains("searchTimeoutMs"), "{safe}");
        // An exclusive tool beside it is still an MCP tool.
        let s = script("exclusive-call-is-a-barrier", &profile).unwrap();
        assert_eq!(s.tools, ["write"]);
        assert_eq!(s.calls[2].model_name, "mcp__tep__write");
        assert_eq!(s.calls[2].query, None);
    }

    #[test]
    fn a_shared_safe_timeout_maps_and_others_are_named() {
        let mut profile = Profile::load("deepseek-harness").unwrap();
        let s = script("timed-out-call-in-a-parallel-pool", &profile).unwrap();
        assert_eq!(s.safe_timeout_ms, Some(1500));
        let [(_, safe), _] = s.overlay_rows(&profile.overlay);
        assert!(safe.contains("searchTimeoutMs: 1500"), "{safe}");
        // The timeout wrapper on an exclusive tool: MCP tools have no timeout.
        let e = script("timeout-cancels-a-hanging-body", &profile).unwrap_err();
        assert!(e.contains("a timeout on an exclusive tool (`sleep`"), "{e}");
        // Two safe tools with different timeouts: the shipped safe tool has one.
        let corpus = corpus().unwrap();
        let mut two = corpus
            .iter()
            .find(|s| s.id == "timed-out-call-in-a-parallel-pool")
            .unwrap()
            .clone();
        let mut other = two.tools[0].clone();
        other.name = "search".to_owned();
        other.timeout_ms = Some(900);
        two.tools.push(other);
        two.calls[0].tool = "search".to_owned();
        let e = RunScript::of(&two, &profile).unwrap_err();
        assert!(e.contains("different timeouts"), "{e}");
        // A slow stop has no backend step.
        let e = script("timeout-waits-for-a-slow-body", &profile).unwrap_err();
        assert!(e.contains("exclusive tool"), "{e}");
        // A harness with no shipped safe tool: the construct is named.
        profile.tools.safe = None;
        let e = script("parallel-pool-is-capped", &profile).unwrap_err();
        assert!(
            e.starts_with("a concurrency-safe scripted tool (`fetch`"),
            "{e}"
        );
    }
}
