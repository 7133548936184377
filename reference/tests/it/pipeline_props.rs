//! Property: for random scripts of every extension point, the pipeline keeps its guarantees.
//!
//! - every call's observations form a walk on the stage graph;
//! - the body runs if and only if the call was allowed (directly or by `allowed-once`) and no
//!   guard denied (and nothing threw before dispatch);
//! - exactly one `tool/result` per `tool/call`;
//! - results are recorded in model order.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::*;
use proptest::prelude::*;
use serde_json::json;
use tep_model::graph::Revision;
use tep_model::result::{ContentBlock, Failure};
use tep_model::session::EventBody;
use tep_reference::pipeline::{
    ApprovalOutcome, GuardVerdict, PostDecision, PreDecision, RegistryBuilder, ToolRegistry, simple,
};
use tep_reference::wrappers::TimeoutWrapper;

#[derive(Debug, Clone, Copy)]
enum Pre {
    Pass,
    Allow,
    Deny,
    Ask,
    Throw,
}

#[derive(Debug, Clone, Copy)]
enum Answer {
    AllowedOnce,
    Rejected,
    Cancelled,
    Unavailable,
    Throw,
}

#[derive(Debug, Clone, Copy)]
enum Verdict {
    Abstain,
    Deny,
    Throw,
}

#[derive(Debug, Clone, Copy)]
enum BodyKind {
    Ok(u64),
    Fail,
    Panic,
    HangPastTimeout,
}

#[derive(Debug, Clone, Copy)]
enum Post {
    Pass,
    Replace,
    AddContext,
    Block,
    Throw,
}

#[derive(Debug, Clone)]
struct CallScript {
    pre: [Pre; 2],
    answer: Answer,
    guards: [Verdict; 2],
    body: BodyKind,
    post: [Post; 2],
    safe: bool,
}

fn pre() -> impl Strategy<Value = Pre> {
    prop_oneof![
        3 => Just(Pre::Pass),
        1 => Just(Pre::Allow),
        1 => Just(Pre::Deny),
        1 => Just(Pre::Ask),
        1 => Just(Pre::Throw),
    ]
}

fn call_script() -> impl Strategy<Value = CallScript> {
    (
        [pre(), pre()],
        prop_oneof![
            Just(Answer::AllowedOnce),
            Just(Answer::Rejected),
            Just(Answer::Cancelled),
            Just(Answer::Unavailable),
            Just(Answer::Throw)
        ],
        [
            prop_oneof![4 => Just(Verdict::Abstain), 1 => Just(Verdict::Deny), 1 => Just(Verdict::Throw)],
            prop_oneof![4 => Just(Verdict::Abstain), 1 => Just(Verdict::Deny), 1 => Just(Verdict::Throw)],
        ],
        prop_oneof![
            4 => (0u64..40).prop_map(BodyKind::Ok),
            1 => Just(BodyKind::Fail),
            1 => Just(BodyKind::Panic),
            1 => Just(BodyKind::HangPastTimeout),
        ],
        [
            prop_oneof![3 => Just(Post::Pass), 1 => Just(Post::Replace), 1 => Just(Post::AddContext), 1 => Just(Post::Block), 1 => Just(Post::Throw)],
            prop_oneof![3 => Just(Post::Pass), 1 => Just(Post::Replace), 1 => Just(Post::AddContext), 1 => Just(Post::Block), 1 => Just(Post::Throw)],
        ],
        any::<bool>(),
    )
        .prop_map(|(pre, answer, guards, body, post, safe)| CallScript {
            pre,
            answer,
            guards,
            body,
            post,
            safe,
        })
}

/// Whether the body must run, computed from the script with the documented semantics.
fn expect_body(script: &CallScript, approval_mounted: bool) -> bool {
    let decision = script.pre.iter().copied().find(|p| !matches!(p, Pre::Pass));
    let allowed = match decision {
        None | Some(Pre::Allow) => true,
        Some(Pre::Deny) | Some(Pre::Throw) => false,
        Some(Pre::Pass) => unreachable!(),
        Some(Pre::Ask) => approval_mounted && matches!(script.answer, Answer::AllowedOnce),
    };
    let guards_pass = script.guards.iter().all(|g| matches!(g, Verdict::Abstain));
    allowed && guards_pass
}

fn run_case(
    scripts: &[CallScript],
    approval_mounted: bool,
    revision: Revision,
) -> Result<(), TestCaseError> {
    let scripts: Scripts = Arc::new(
        scripts
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("c{}", i + 1), s.clone()))
            .collect(),
    );
    let registry = scripted_registry(&scripts, approval_mounted, revision)?;
    let calls: Vec<_> = scripts
        .keys()
        .map(|id| call(id, &format!("t-{id}")))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    runtime.block_on(registry.run_batch(calls));
    keeps_the_guarantees(&registry, &scripts, approval_mounted)
}

/// Each call's script, by call id (`c1`, `c2`, … in model order).
type Scripts = Arc<BTreeMap<String, CallScript>>;

/// A registry whose tools and stages do what each call's script says.
fn scripted_registry(
    scripts: &Scripts,
    approval_mounted: bool,
    revision: Revision,
) -> Result<ToolRegistry, TestCaseError> {
    let mut builder = ToolRegistry::builder()
        .revision(revision)
        .wrap(Arc::new(TimeoutWrapper::new()));
    for (id, s) in scripts.iter() {
        builder = builder.tool(scripted_tool(id, s));
    }
    for k in 0..2 {
        builder = scripted_stages(builder, scripts, k);
    }
    if approval_mounted {
        let sc = scripts.clone();
        builder = builder.approval(simple::approval(move |r| {
            match sc[r.call_id.as_str()].answer {
                Answer::AllowedOnce => Ok(ApprovalOutcome::AllowedOnce),
                Answer::Rejected => Ok(ApprovalOutcome::Rejected),
                Answer::Cancelled => Ok(ApprovalOutcome::Cancelled),
                Answer::Unavailable => Ok(ApprovalOutcome::Unavailable),
                Answer::Throw => Err(Failure::new("approval throws")),
            }
        }));
    }
    builder
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))
}

fn scripted_tool(id: &str, s: &CallScript) -> TestTool {
    let body = match s.body {
        BodyKind::Ok(ms) => Body::Return {
            value: json!(id),
            delay_ms: ms,
        },
        BodyKind::Fail => Body::Fail("body failed".into()),
        BodyKind::Panic => Body::Panic("body panicked".into()),
        BodyKind::HangPastTimeout => Body::Hang,
    };
    let tool = TestTool::new(&format!("t-{id}"), body).timeout_ms(100);
    if s.safe { tool.safe() } else { tool }
}

/// The `k`-th pre-execute listener, guard and post-execute listener, each doing what the
/// scripts say at position `k`.
fn scripted_stages(builder: RegistryBuilder, scripts: &Scripts, k: usize) -> RegistryBuilder {
    let sc = scripts.clone();
    let builder = builder.pre_execute(simple::pre(&format!("pre{k}"), move |e| {
        match sc[e.call_id().as_str()].pre[k] {
            Pre::Pass => Ok(None),
            Pre::Allow => Ok(Some(PreDecision::Allow)),
            Pre::Deny => Ok(Some(PreDecision::Deny {
                reason: format!("pre{k} denies"),
            })),
            Pre::Ask => Ok(Some(PreDecision::Ask { reason: None })),
            Pre::Throw => Err(Failure::new(format!("pre{k} throws"))),
        }
    }));
    let sc = scripts.clone();
    let builder = builder.guard(simple::guard(&format!("guard{k}"), move |e| {
        match sc[e.call_id().as_str()].guards[k] {
            Verdict::Abstain => Ok(GuardVerdict::Abstain),
            Verdict::Deny => Ok(GuardVerdict::Deny(format!("guard{k} denies"))),
            Verdict::Throw => Err(Failure::new(format!("guard{k} throws"))),
        }
    }));
    let sc = scripts.clone();
    builder.post_execute(simple::post(&format!("post{k}"), move |e, _| {
        match sc[e.call_id().as_str()].post[k] {
            Post::Pass => Ok(None),
            Post::Replace => Ok(Some(PostDecision::Accept {
                content: Some(vec![ContentBlock::text("replaced")]),
                value: None,
                contexts: vec![],
            })),
            Post::AddContext => Ok(Some(PostDecision::Accept {
                content: None,
                value: None,
                contexts: vec![format!("post{k} context")],
            })),
            Post::Block => Ok(Some(PostDecision::Block {
                feedback: vec![ContentBlock::text("blocked")],
                contexts: vec![],
            })),
            Post::Throw => Err(Failure::new(format!("post{k} throws"))),
        }
    }))
}

/// The guarantees a run keeps whatever the scripts: a legal walk for every call, the body run
/// exactly when the decisions allow it, and one `tool/call` and one `tool/result` per call,
/// both in model order.
fn keeps_the_guarantees(
    registry: &ToolRegistry,
    scripts: &Scripts,
    approval_mounted: bool,
) -> Result<(), TestCaseError> {
    let ids: Vec<&str> = scripts.keys().map(String::as_str).collect();
    assert_walks(registry, &ids);
    let records = registry.recorder().records();
    for (id, script) in scripts.iter() {
        let ran = nodes(&records, id).contains(&tep_model::graph::NodeId::ToolBody);
        prop_assert_eq!(
            ran,
            expect_body(script, approval_mounted),
            "call {} body",
            id
        );
    }
    let log = registry.recorder().session_log();
    let call_ids = |ty: &str| -> Vec<String> {
        log.iter()
            .filter(|e| e.body.type_name() == ty)
            .filter_map(|e| match &e.body {
                EventBody::ToolCall(c) => Some(c.call_id.to_string()),
                EventBody::ToolResult(r) => r.call_id().map(ToString::to_string),
                _ => None,
            })
            .collect()
    };
    let expected: Vec<String> = scripts.keys().cloned().collect();
    prop_assert_eq!(call_ids("tool/call"), expected.clone());
    prop_assert_eq!(call_ids("tool/result"), expected);
    Ok(())
}

proptest! {
    #[test]
    fn random_scripts_keep_the_documented_guarantees(
        scripts in proptest::collection::vec(call_script(), 1..6),
        approval_mounted in any::<bool>(),
    ) {
        run_case(&scripts, approval_mounted, Revision::Rev2)?;
    }
}
