//! The tools, played by an MCP server over stdio (newline-delimited JSON-RPC 2.0), served by the
//! `tep` binary itself (`tep harness-mcp RUN_DIR`): the scenario's tools with its scripted
//! bodies (sleep, return, throw). Each `tools/call` runs on a thread of its own, so calls that
//! overlap in the harness overlap here; each body's start and end are recorded
//! (`RUN_DIR/bodies.jsonl`, wall-clock ms).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tep_conformance::scenario::BodyStep;

use crate::clock::wall_ms;
use crate::script::{DEFAULT_BODY_TEXT, RunScript};

/// The file the script is read from, in the run directory.
pub const SCRIPT_FILE: &str = "script.json";
/// The file body records are appended to, in the run directory.
pub const BODIES_FILE: &str = "bodies.jsonl";

/// One body record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BodyRecord {
    pub wall_ms: f64,
    /// `start` or `end`.
    pub event: String,
    /// The scenario's call the body was matched to (`None`: no call of the script matches).
    pub call: Option<String>,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The arguments the MCP server was called with (the search backend's bodies have none):
    /// what tells calls of one tool apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

/// Why the server stopped.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("cannot read the run's script {path}: {message}")]
    Script { path: String, message: String },
    #[error("stdio: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads the script of a run directory.
pub fn read_script(run: &Path) -> Result<RunScript, McpError> {
    let path = run.join(SCRIPT_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| McpError::Script {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| McpError::Script {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// A `tools/call` and the scripted call it was matched to.
struct Claim {
    tool: String,
    arguments: Value,
    index: Option<usize>,
}

struct Server {
    script: RunScript,
    bodies: PathBuf,
    claimed: Mutex<Vec<String>>,
    out: Mutex<Box<dyn Write + Send>>,
}

/// Serves the run directory's script on `input` / `output` until `input` ends.
pub fn serve(
    run: &Path,
    input: impl BufRead,
    output: impl Write + Send + 'static,
) -> Result<(), McpError> {
    let server = Arc::new(Server {
        script: read_script(run)?,
        bodies: run.join(BODIES_FILE),
        claimed: Mutex::new(Vec::new()),
        out: Mutex::new(Box::new(output)),
    });
    let mut threads = Vec::new();
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            server.send(&json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "parse error"}}));
            continue;
        };
        let id = message.get("id").cloned();
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(id) = id else {
            // A notification (`notifications/initialized`, ...): nothing to answer.
            continue;
        };
        match method.as_str() {
            "initialize" => {
                let version = message
                    .pointer("/params/protocolVersion")
                    .cloned()
                    .unwrap_or_else(|| json!("2025-06-18"));
                server.reply(
                    id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": false}},
                        "serverInfo": {"name": "tep", "version": env!("CARGO_PKG_VERSION")},
                    }),
                );
            }
            "ping" => server.reply(id, json!({})),
            "tools/list" => {
                let tools: Vec<Value> = server
                    .script
                    .tools
                    .iter()
                    .map(|name| {
                        json!({
                            "name": name,
                            "description": format!("tep's scripted tool `{name}`"),
                            "inputSchema": {"type": "object"},
                        })
                    })
                    .collect();
                server.reply(id, json!({"tools": tools}));
            }
            "tools/call" => {
                // Claimed here, in arrival order; the body runs on a thread of its own.
                let claim = server.claim(&message);
                let server = server.clone();
                threads.push(std::thread::spawn(move || {
                    let result = server.call(claim);
                    server.reply(id, result);
                }));
            }
            _ => server.send(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("method not found: {method}")}})),
        }
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

impl Server {
    fn send(&self, message: &Value) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(out, "{message}");
        let _ = out.flush();
    }

    fn reply(&self, id: Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn record(&self, record: &BodyRecord) {
        append_line(&self.bodies, record);
    }

    /// The tool a `tools/call` names and the scripted call it is for (claimed: no later
    /// request gets it).
    fn claim(&self, message: &Value) -> Claim {
        let tool = message
            .pointer("/params/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let arguments = message
            .pointer("/params/arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let index = {
            let mut claimed = self.claimed.lock().unwrap_or_else(PoisonError::into_inner);
            let index = self.script.match_call(&tool, &arguments, &claimed);
            if let Some(i) = index {
                claimed.push(self.script.calls[i].call_id.clone());
            }
            index
        };
        Claim {
            tool,
            arguments,
            index,
        }
    }

    /// Runs the body of a claimed call.
    fn call(&self, claim: Claim) -> Value {
        let Claim {
            tool,
            arguments,
            index,
        } = claim;
        let call = index.map(|i| &self.script.calls[i]);
        let call_id = call.map(|c| c.call_id.clone());
        self.record(&BodyRecord {
            wall_ms: wall_ms(),
            event: "start".to_owned(),
            call: call_id.clone(),
            tool: tool.clone(),
            is_error: None,
            arguments: Some(arguments.clone()),
        });
        let (text, is_error) = match call {
            Some(call) => run_body(&call.body),
            None => (format!("tep: no scripted call of `{tool}` is left"), true),
        };
        self.record(&BodyRecord {
            wall_ms: wall_ms(),
            event: "end".to_owned(),
            call: call_id,
            tool,
            is_error: Some(is_error),
            arguments: Some(arguments),
        });
        json!({"content": [{"type": "text", "text": text}], "isError": is_error})
    }
}

/// Runs scripted body steps: the text it returns and whether it failed.
pub fn run_body(steps: &[BodyStep]) -> (String, bool) {
    for step in steps {
        match step {
            BodyStep::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            BodyStep::Return(Value::String(s)) => return (s.clone(), false),
            BodyStep::Return(v) => {
                return (
                    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
                    false,
                );
            }
            BodyStep::Throw(message) => return (message.clone(), true),
            // Not applicable in this mode (`RunScript::of` refuses them).
            _ => {}
        }
    }
    (DEFAULT_BODY_TEXT.to_owned(), false)
}

/// Appends one JSON line to `path` in a single write (O_APPEND: lines of concurrent writers do
/// not interleave).
pub fn append_line(path: &Path, value: &impl Serialize) {
    let Ok(mut line) = serde_json::to_vec(value) else {
        return;
    };
    line.push(b'\n');
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(&line);
    }
}

/// Reads the JSON lines of a record file (missing: none; a torn line is skipped).
pub fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}
