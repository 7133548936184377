//! The harness driver's integration tests, one binary (ripgrep's `tests/it` shape). None needs
//! the harness itself: each plays one side of the driver against a double or a recording.
//!
//! - `doubles`: the MCP server, the hook command and the session-log reader tep plays, on a byte
//!   stream, the real bridge's payloads and the real harness's log;
//! - `evidence`: what the bodies' and hooks' records show beyond the trace, caught and silent;
//! - `model_server`: the model server's protocol, spoken to by a real HTTP client;
//! - `next_request`: level `boundary` on a real run's log and requests, and its tampered copy;
//! - `faults`: fake harnesses that exit, never call the model, hang or write no log, each
//!   `errored` with nothing left running;
//! - `fuzz_restriction`: `tep fuzz --harness` generates only what a profile can drive.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod doubles;
mod evidence;
mod faults;
mod fuzz_restriction;
mod model_server;
mod next_request;

/// A run's script of `calls`, with the tools `read` and `rm` and no listeners.
fn script(
    calls: Vec<tep_harness::script::ScriptedCall>,
    max_parallel: Option<usize>,
) -> tep_harness::script::RunScript {
    tep_harness::script::RunScript {
        scenario: "s".to_owned(),
        tools: vec!["read".to_owned(), "rm".to_owned()],
        calls,
        pre: vec![],
        post: vec![],
        final_text: tep_harness::script::FINAL_TEXT.to_owned(),
        max_parallel,
        safe_timeout_ms: None,
    }
}
