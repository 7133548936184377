//! The model server's protocol, spoken to by a real HTTP client (hyper): the batch as SSE
//! `tool_calls` deltas at step 0, the final text after, a title to a request with no tools,
//! every request recorded.

use std::collections::BTreeMap;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tep_conformance::scenario::BodyStep;
use tep_harness::mcp::{BodyRecord, read_lines};
use tep_harness::model_server::{ModelServer, RequestKind, TITLE};
use tep_harness::script::{FINAL_TEXT, RunScript, ScriptedCall};

fn script() -> RunScript {
    let call = |id: &str, name: &str| ScriptedCall {
        call_id: id.to_owned(),
        tool: name.to_owned(),
        model_name: format!("mcp__tep__{name}"),
        arguments: json!({"path": id}),
        body: vec![BodyStep::Return(json!("x"))],
        query: None,
    };
    RunScript {
        scenario: "s".to_owned(),
        tools: vec!["read".to_owned()],
        calls: vec![call("c1", "read"), call("c2", "read")],
        pre: vec![],
        post: vec![],
        final_text: FINAL_TEXT.to_owned(),
        max_parallel: None,
        safe_timeout_ms: None,
    }
}

/// POSTs `body` as JSON to `path` of the server, with `headers` besides the JSON ones.
async fn send(
    server: &ModelServer,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> hyper::Response<hyper::body::Incoming> {
    let url: hyper::Uri = format!("{}{path}", server.url()).parse().unwrap();
    let stream = tokio::net::TcpStream::connect((url.host().unwrap(), url.port_u16().unwrap()))
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::post(url.path())
        .header("host", "127.0.0.1")
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    sender.send_request(request).await.unwrap()
}

/// POSTs `body` to the server and returns the status and the `data:` payloads of the stream.
async fn post(server: &ModelServer, path: &str, body: Value) -> (u16, Vec<String>) {
    let response = send(server, path, &[("user-agent", "test-client/1")], &body).await;
    let status = response.status().as_u16();
    if status == 200 {
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "an SSE stream"
        );
    }
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        .map(str::to_owned)
        .collect();
    (status, data)
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "mcp__tep__read", "parameters": {}}}])
}

#[tokio::test]
async fn the_batch_then_the_final_text_then_a_title_all_recorded() {
    let server = ModelServer::start(script()).await.unwrap();
    let first = json!({"model": "m", "stream": true, "tools": tools(),
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]});
    let (status, data) = post(&server, "/chat/completions", first).await;
    assert_eq!(status, 200);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    // One tool call per chunk, in model order, each with its index, id, name and arguments.
    let calls: Vec<(u64, String, String, String)> = chunks
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0"))
        .map(|t| {
            (
                t["index"].as_u64().unwrap(),
                t["id"].as_str().unwrap().to_owned(),
                t["function"]["name"].as_str().unwrap().to_owned(),
                t["function"]["arguments"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (
                0,
                "c1".into(),
                "mcp__tep__read".into(),
                r#"{"path":"c1"}"#.into()
            ),
            (
                1,
                "c2".into(),
                "mcp__tep__read".into(),
                r#"{"path":"c2"}"#.into()
            ),
        ]
    );
    let finishes: Vec<&str> = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(finishes, ["tool_calls"]);
    assert!(
        chunks.iter().any(|c| c.get("usage").is_some()),
        "a usage chunk"
    );

    // The harness's own request: no tools.
    let title = json!({"model": "m", "stream": true, "max_tokens": 64,
        "messages": [{"role": "user", "content": "title this"}]});
    let (_, data) = post(&server, "/chat/completions", title).await;
    assert!(data[0].contains(TITLE), "{data:?}");

    // After the batch (one assistant message): the final text, finish `stop`.
    let next = json!({"model": "m", "stream": true, "tools": tools(), "messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "x"}]});
    let (_, data) = post(&server, "/chat/completions", next).await;
    let text: String = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, FINAL_TEXT);
    assert!(data.iter().any(|d| d.contains(r#""finish_reason":"stop""#)));

    let requests = server.requests();
    let kinds: Vec<(RequestKind, Option<usize>)> =
        requests.iter().map(|r| (r.kind, r.step)).collect();
    assert_eq!(
        kinds,
        [
            (RequestKind::Step, Some(0)),
            (RequestKind::Aux, None),
            (RequestKind::Step, Some(1))
        ]
    );
    assert_eq!(requests[2].body["messages"][2]["tool_call_id"], "c1");
    assert_eq!(requests[0].user_agent.as_deref(), Some("test-client/1"));
    assert!(requests.windows(2).all(|w| w[0].wall_ms <= w[1].wall_ms));
}

#[tokio::test]
async fn other_paths_and_bodies_are_refused_not_answered() {
    let server = ModelServer::start(script()).await.unwrap();
    let (status, _) = post(&server, "/v1/messages", json!({})).await;
    assert_eq!(status, 404);
    let (status, _) = post(&server, "/chat/completions", json!("not an object")).await;
    // A JSON string is JSON: answered as a request with no tools (the title).
    assert_eq!(status, 200);
    let kinds: BTreeMap<String, usize> =
        server.requests().iter().fold(BTreeMap::new(), |mut m, r| {
            *m.entry(format!("{:?}", r.kind)).or_default() += 1;
            m
        });
    assert_eq!(kinds, BTreeMap::from([("Aux".to_owned(), 1)]));
}

/// A call played by the shipped safe tool: its query names it.
fn searched(id: &str, body: Vec<BodyStep>) -> ScriptedCall {
    ScriptedCall {
        call_id: id.to_owned(),
        tool: "fetch".to_owned(),
        model_name: "web_search".to_owned(),
        arguments: json!({"queries": [format!("tep {id}")]}),
        body,
        query: Some(format!("tep {id}")),
    }
}

/// POSTs an Anthropic Messages search for `query` (as deepseek-harness's provider words it).
async fn search(server: &ModelServer, query: &str) -> (u16, Value) {
    let body = json!({"model": "deepseek-v4-flash", "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text",
            "text": format!("Perform a web search for the query: {query}")}]}],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]});
    let response = send(server, "/messages", &[], &body).await;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn the_search_backend_plays_the_named_calls_body_and_records_it() {
    let dir = tempfile::tempdir().unwrap();
    let bodies = dir.path().join("bodies.jsonl");
    let mut s = script();
    s.calls = vec![
        searched(
            "c1",
            vec![BodyStep::Sleep(30), BodyStep::Return(json!("slow"))],
        ),
        searched("c11", vec![BodyStep::Throw("backend down".to_owned())]),
    ];
    let server = ModelServer::start_recording(s, Some(bodies.clone()))
        .await
        .unwrap();
    let (status, answer) = search(&server, "tep c1").await;
    assert_eq!(status, 200, "{answer}");
    let result = &answer["content"][0];
    assert_eq!(result["type"], "web_search_tool_result");
    assert_eq!(result["content"][0]["type"], "web_search_result");
    assert_eq!(result["content"][0]["title"], "slow", "the returned text");
    // `tep c11` is not `tep c1`: each query names one call.
    let (status, answer) = search(&server, "tep c11").await;
    assert_eq!(status, 500);
    assert_eq!(
        answer["error"]["message"], "backend down",
        "a throw is a failure"
    );
    let (status, _) = search(&server, "tep c9").await;
    assert_eq!(status, 500, "a search that names no call fails");
    let records: Vec<BodyRecord> = read_lines(&bodies);
    let seen: Vec<(String, Option<String>, Option<bool>)> = records
        .iter()
        .map(|r| (r.event.clone(), r.call.clone(), r.is_error))
        .collect();
    let s = |e: &str, c: Option<&str>, err: Option<bool>| (e.to_owned(), c.map(str::to_owned), err);
    assert_eq!(
        seen,
        [
            s("start", Some("c1"), None),
            s("end", Some("c1"), Some(false)),
            s("start", Some("c11"), None),
            s("end", Some("c11"), Some(true)),
            s("start", None, None),
            s("end", None, Some(true)),
        ]
    );
    assert!(
        records[1].wall_ms - records[0].wall_ms >= 30.0,
        "the body slept"
    );
    let kinds: Vec<RequestKind> = server.requests().iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [RequestKind::Search; 3], "every search is recorded");
}
