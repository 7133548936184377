//! The hooks, played by `tep` itself as the harness's hook command (`tep harness-hook RUN_DIR`),
//! in Claude Code's dialect: the payload on stdin (`hook_event_name`, `tool_name`,
//! `tool_input`, `tool_use_id`, ...), the answer on stdout. The scenario's listener of the
//! stage is the hook (a scenario with more than one is not applicable: `RunScript::of`). Each
//! invocation is recorded (`RUN_DIR/hooks.jsonl`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tep_conformance::scenario::{PostAction, PreAction};
use tep_model::identity::CallId;

use crate::clock::wall_ms;
use crate::mcp::append_line;
use crate::script::RunScript;

/// The file hook records are appended to, in the run directory.
pub const HOOKS_FILE: &str = "hooks.jsonl";

/// What the hook command answers: its stdout, its stderr and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookAnswer {
    pub stdout: String,
    pub stderr: String,
    pub exit: i32,
}

/// One invocation, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRecord {
    pub wall_ms: f64,
    pub event: String,
    pub call: Option<String>,
    pub payload: Value,
    pub stdout: String,
    pub exit: i32,
}

/// The answer of the scenario's listeners to one hook payload.
pub fn answer(script: &RunScript, payload: &Value) -> HookAnswer {
    let event = payload
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(call) = payload
        .get("tool_use_id")
        .and_then(Value::as_str)
        .map(|id| CallId::new(id.to_owned()))
    else {
        return pass();
    };
    match event {
        "PreToolUse" => pre(script, &call),
        "PostToolUse" => post(script, &call),
        _ => pass(),
    }
}

fn pass() -> HookAnswer {
    HookAnswer {
        stdout: String::new(),
        stderr: String::new(),
        exit: 0,
    }
}

fn output(value: Value) -> HookAnswer {
    HookAnswer {
        stdout: value.to_string(),
        ..pass()
    }
}

fn pre(script: &RunScript, call: &CallId) -> HookAnswer {
    for listener in &script.pre {
        let decision = |d: &str, reason: Option<&String>| {
            let mut out = json!({"hookEventName": "PreToolUse", "permissionDecision": d});
            if let Some(r) = reason {
                out["permissionDecisionReason"] = json!(r);
            }
            output(json!({ "hookSpecificOutput": out }))
        };
        match listener.action(call) {
            PreAction::Pass => continue,
            PreAction::Allow => return decision("allow", None),
            PreAction::Deny(reason) => return decision("deny", Some(&reason)),
            PreAction::Ask(reason) => return decision("ask", reason.as_ref()),
            // Not applicable in this mode (`RunScript::of` refuses them).
            PreAction::Rewrite(_) | PreAction::Throw(_) => return pass(),
        }
    }
    pass()
}

fn post(script: &RunScript, call: &CallId) -> HookAnswer {
    let mut contexts: Vec<String> = Vec::new();
    for listener in &script.post {
        match listener.action(call) {
            PostAction::Pass => {}
            PostAction::AddContext(text) => contexts.push(text),
            PostAction::Block(block) => {
                return output(json!({"decision": "block", "reason": block.feedback}));
            }
            PostAction::Accept(_) | PostAction::Throw(_) => return pass(),
        }
    }
    match contexts.as_slice() {
        [] => pass(),
        // One listener adds one context (`RunScript::of` refuses more listeners).
        [context, ..] => output(json!({"hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": context,
        }})),
    }
}

/// Runs one invocation: reads the payload, answers, records. `script` is the run's.
pub fn invoke(run: &std::path::Path, script: &RunScript, stdin: &str) -> HookAnswer {
    let payload: Value = serde_json::from_str(stdin).unwrap_or(Value::Null);
    let answer = answer(script, &payload);
    append_line(
        &run.join(HOOKS_FILE),
        &HookRecord {
            wall_ms: wall_ms(),
            event: payload
                .get("hook_event_name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            call: payload
                .get("tool_use_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            payload: payload.clone(),
            stdout: answer.stdout.clone(),
            exit: answer.exit,
        },
    );
    answer
}

/// The Claude Code `hooks.json` that runs `command` for both events on every tool.
pub fn hooks_json(command: &str) -> Value {
    let entry = json!([{"matcher": ".*", "hooks": [{"type": "command", "command": command}]}]);
    json!({"hooks": {"PreToolUse": entry, "PostToolUse": entry}})
}
