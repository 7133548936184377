//! The model, played over the harness's model API: DeepSeek chat completions
//! (`POST {baseURL}/chat/completions`), streamed as server-sent events with OpenAI-style
//! `tool_calls` deltas. Step k of a conversation (k = the assistant messages already in the
//! request) answers the scenario's batch at k = 0 and the final text after; a request with no
//! `tools` is the harness's own (a session title) and gets a short title. Every request is
//! recorded.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

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

use crate::clock::wall_ms;
use crate::script::RunScript;

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
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/chat/completions", post(chat))
            .route("/v1/chat/completions", post(chat))
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
