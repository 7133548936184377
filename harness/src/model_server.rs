//! The model, played over the harness's model API: DeepSeek chat completions
//! (`POST {baseURL}/chat/completions`), streamed as server-sent events with OpenAI-style
//! `tool_calls` deltas. Step k of a conversation (k = the assistant messages already in the
//! request) answers the scenario's batch at k = 0 and the final text after; a request with no
//! `tools` is the harness's own (a session title) and gets a short title. Every request is
//! recorded.
//!
//! The same server plays the search backend of the harness's shipped concurrency-safe tool
//! (`POST {base}/messages`, an Anthropic Messages search): the query names a scenario call
//! ([`RunScript::call_of_query`]); the backend plays that call's scripted body (sleep, return
//! text, throw = HTTP 500, hang until the harness drops the request) and records its start and
//! end in the run's body records, as the MCP server does.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use tep_conformance::scenario::BodyStep;

use crate::clock::wall_ms;
use crate::mcp::{BodyRecord, append_line};
use crate::script::{DEFAULT_BODY_TEXT, RunScript};

/// The title the model gives a session.
pub const TITLE: &str = "tep scenario";

/// What kind of request the harness sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestKind {
    /// A step of the conversation (it offers tools).
    Step,
    /// The harness's own request with no tools (a session title).
    Aux,
    /// Not a chat-completions request the script knows (answered 404 or 400).
    Other,
    /// A search the harness's shipped safe tool sent to its backend.
    Search,
}

/// One request as the model received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub wall_ms: f64,
    pub path: String,
    pub kind: RequestKind,
    /// For a step: the number of assistant messages already in the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The request's `user-agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    pub body: Value,
}

#[derive(Debug)]
struct Shared {
    script: RunScript,
    requests: Mutex<Vec<ModelRequest>>,
    /// Where the search backend's body records go (`None`: not recorded).
    bodies: Option<PathBuf>,
}

/// A running model server. Dropping it stops it.
#[derive(Debug)]
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

impl ModelServer {
    /// Starts serving `script` on 127.0.0.1 at a port the system picks (never one in use), on
    /// the current tokio runtime.
    pub async fn start(script: RunScript) -> std::io::Result<ModelServer> {
        ModelServer::start_recording(script, None).await
    }

    /// [`ModelServer::start`], with the search backend's body records appended to `bodies`.
    pub async fn start_recording(
        script: RunScript,
        bodies: Option<PathBuf>,
    ) -> std::io::Result<ModelServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script,
            requests: Mutex::new(Vec::new()),
            bodies,
        });
        let app = Router::new()
            .route("/chat/completions", post(chat))
            .route("/v1/chat/completions", post(chat))
            .route("/messages", post(search))
            .fallback(other)
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(ModelServer {
            addr,
            shared,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:PORT`, the harness's `baseURL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many steps of the conversation (requests with tools) arrived.
    pub fn steps(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.kind == RequestKind::Step)
            .count()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn record(shared: &Shared, request: ModelRequest) {
    shared
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
}

async fn other() -> Response {
    (
        StatusCode::NOT_FOUND,
        "tep's model serves /chat/completions",
    )
        .into_response()
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    body: axum::body::Bytes,
) -> Response {
    let wall_ms = wall_ms();
    let user_agent = headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        record(
            &shared,
            ModelRequest {
                wall_ms,
                path: uri.path().to_owned(),
                kind: RequestKind::Other,
                step: None,
                user_agent,
                body: Value::String(String::from_utf8_lossy(&body).into_owned()),
            },
        );
        return (StatusCode::BAD_REQUEST, "the body is not JSON").into_response();
    };
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let step = body
        .get("messages")
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .count()
        })
        .unwrap_or(0);
    let (kind, chunks) = if has_tools {
        let chunks = if step == 0 {
            batch_chunks(&shared.script)
        } else {
            text_chunks(&shared.script.final_text)
        };
        (RequestKind::Step, chunks)
    } else {
        (RequestKind::Aux, text_chunks(TITLE))
    };
    record(
        &shared,
        ModelRequest {
            wall_ms,
            path: uri.path().to_owned(),
            kind,
            step: has_tools.then_some(step),
            user_agent,
            body,
        },
    );
    let events = chunks
        .into_iter()
        .map(|c| Ok::<Event, Infallible>(Event::default().data(c.to_string())))
        .chain(std::iter::once(Ok(Event::default().data("[DONE]"))));
    Sse::new(futures_util::stream::iter(events)).into_response()
}

fn chunk(choices: Value) -> Value {
    json!({
        "id": "tep-model",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "tep-scripted",
        "choices": choices,
    })
}

fn usage() -> Value {
    let mut c = chunk(json!([]));
    c["usage"] = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    c
}

/// The batch: one chunk per call, then `finish_reason: "tool_calls"`, then usage.
pub fn batch_chunks(script: &RunScript) -> Vec<Value> {
    let mut out = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
    )];
    for (i, call) in script.calls.iter().enumerate() {
        out.push(chunk(json!([{
            "index": 0,
            "delta": {"tool_calls": [{
                "index": i,
                "id": call.call_id,
                "type": "function",
                "function": {
                    "name": call.model_name,
                    "arguments": serde_json::to_string(&call.arguments).unwrap_or_else(|_| "{}".to_owned()),
                },
            }]},
            "finish_reason": null,
        }])));
    }
    out.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    ));
    out.push(usage());
    out
}

/// A text answer, then `finish_reason: "stop"`, then usage.
pub fn text_chunks(text: &str) -> Vec<Value> {
    vec![
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]),
        ),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "stop"}])),
        usage(),
    ]
}

/// The search backend's body of one call: records its end when it finishes or when the harness
/// drops the request (a cancelled body: `is_error` unknown).
struct SearchBody {
    shared: Arc<Shared>,
    call: Option<String>,
    tool: String,
    is_error: Option<bool>,
}

impl SearchBody {
    fn start(shared: Arc<Shared>, call: Option<String>, tool: String) -> SearchBody {
        let body = SearchBody {
            shared,
            call,
            tool,
            is_error: None,
        };
        body.record("start");
        body
    }

    fn record(&self, event: &str) {
        if let Some(path) = &self.shared.bodies {
            append_line(
                path,
                &BodyRecord {
                    wall_ms: wall_ms(),
                    event: event.to_owned(),
                    call: self.call.clone(),
                    tool: self.tool.clone(),
                    is_error: self.is_error,
                    arguments: None,
                },
            );
        }
    }
}

impl Drop for SearchBody {
    fn drop(&mut self) {
        self.record("end");
    }
}

/// The query of an Anthropic Messages search: the text of its first user message.
fn search_query(body: &Value) -> Option<String> {
    let content = body.pointer("/messages/0/content")?;
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => blocks
            .iter()
            .find_map(|b| b.get("text").and_then(Value::as_str).map(str::to_owned)),
        _ => None,
    }
}

async fn search(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    body: axum::body::Bytes,
) -> Response {
    let user_agent = headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = serde_json::from_slice::<Value>(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    record(
        &shared,
        ModelRequest {
            wall_ms: wall_ms(),
            path: uri.path().to_owned(),
            kind: RequestKind::Search,
            step: None,
            user_agent,
            body: body.clone(),
        },
    );
    let index = search_query(&body).and_then(|q| shared.script.call_of_query(&q));
    let call = index.map(|i| shared.script.calls[i].clone());
    let tool = call
        .as_ref()
        .map_or_else(|| "?".to_owned(), |c| c.tool.clone());
    let mut played = SearchBody::start(
        shared.clone(),
        call.as_ref().map(|c| c.call_id.clone()),
        tool,
    );
    let Some(call) = call else {
        played.is_error = Some(true);
        return search_failure("tep: no scripted call is named by this search");
    };
    let (text, is_error) = play(&call.body).await;
    played.is_error = Some(is_error);
    if is_error {
        search_failure(&text)
    } else {
        search_answer(&call.call_id, &text)
    }
}

/// Plays scripted body steps as the search backend: the text it answers, and whether it fails.
/// A hang waits until the harness drops the request (the handler is dropped with it).
async fn play(steps: &[BodyStep]) -> (String, bool) {
    for step in steps {
        match step {
            BodyStep::Sleep(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
            BodyStep::Hang => std::future::pending::<()>().await,
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

/// A failed search: HTTP 500 with an Anthropic error whose message is `message`.
fn search_failure(message: &str) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        axum::Json(json!({"type": "error", "error": {"type": "api_error", "message": message}})),
    )
        .into_response()
}

/// A search's answer: one `web_search_tool_result` whose one result is titled `text` (the
/// harness formats it as a list of sources: the text does not reach the model as it is).
fn search_answer(call: &str, text: &str) -> Response {
    axum::Json(json!({
        "id": format!("msg_tep_{call}"),
        "type": "message",
        "role": "assistant",
        "model": "tep-scripted",
        "content": [{
            "type": "web_search_tool_result",
            "tool_use_id": format!("srvtoolu_tep_{call}"),
            "content": [{
                "type": "web_search_result",
                "url": format!("https://example.invalid/{call}"),
                "title": text,
            }],
        }],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }))
    .into_response()
}
