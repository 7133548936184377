//! One test per documented behaviour of the reference pipeline.
//!
//! Every test runs on tokio's paused clock, so timeouts and overlaps are exact and instant.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use serde_json::json;
use tep_model::graph::{NodeId, Outcome, Revision};
use tep_model::result::{AdditionalContext, ContentBlock, ContextOrigin, Failure, ToolResult};
use tep_model::session::EventBody;
use tep_model::trace::TraceRecord;
use tep_reference::execution::Execution;
use tep_reference::pipeline::{
    ApprovalOutcome, BoxFuture, DispatchCall, ExecuteNext, ExecuteWrapper, GuardVerdict, Named,
    PostDecision, PreDecision, RegistryError, ResultObserver, ToolRegistry, simple,
};
use tep_reference::wrappers::{MetricsWrapper, RetryWrapper, TimeoutWrapper};

fn deny(reason: &str) -> PreDecision {
    PreDecision::Deny {
        reason: reason.into(),
    }
}

fn ask() -> PreDecision {
    PreDecision::Ask { reason: None }
}

#[tokio::test(start_paused = true)]
async fn tool_call_is_logged_before_every_other_stage_and_presented_after_it() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("read", json!("hi")).finalize(|_| Ok(None)))
        .build()
        .unwrap();
    reg.run_batch(vec![call("c1", "read")]).await;
    let n = nodes(&reg.recorder().records(), "c1");
    assert_eq!(
        &n[..3],
        &[NodeId::ToolCall, NodeId::PresentCall, NodeId::Pre]
    );
    assert_eq!(
        n,
        vec![
            NodeId::ToolCall,
            NodeId::PresentCall,
            NodeId::Pre,
            NodeId::Guards,
            NodeId::Around,
            NodeId::ToolBody,
            NodeId::Around,
            NodeId::Post,
            NodeId::Finalize,
            NodeId::Final,
            NodeId::ToolResult,
            NodeId::PresentResult,
            NodeId::AllResults,
        ]
    );
    assert_walks(&reg, &["c1"]);
}

#[tokio::test(start_paused = true)]
async fn pre_execute_listeners_run_in_order_and_a_decision_vetoes_the_rest() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("read", json!("hi")))
        .pre_execute(simple::pre("p1", |_| Ok(None)))
        .pre_execute(simple::pre("p2", |_| Ok(Some(deny("p2 says no")))))
        .pre_execute(simple::pre("p3", |_| panic!("p3 must never run")))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "read")]).await;
    let pre = observations(&reg.recorder().records(), NodeId::Pre, "c1");
    assert_eq!(pre.len(), 1);
    assert_eq!(
        pre[0].listeners.as_deref(),
        Some(&["p1".to_owned(), "p2".to_owned()][..])
    );
    assert_eq!(pre[0].outcome, Some(Outcome::Deny));
    assert_eq!(report.outcomes[0].result.text(), "Error: p2 says no");
}

#[tokio::test(start_paused = true)]
async fn pre_execute_defaults_to_allow() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("read", json!("hi")))
        .pre_execute(simple::pre("pass", |_| Ok(None)))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "read")]).await;
    assert!(!report.outcomes[0].result.is_error);
    assert_eq!(report.outcomes[0].result.text(), "hi");
}

#[tokio::test(start_paused = true)]
async fn deny_skips_the_body_and_still_runs_post_execute() {
    let tool = TestTool::returning("read", json!("hi"));
    let dispatches = tool.dispatches.clone();
    let post_saw = Arc::new(Mutex::new(None));
    let seen = post_saw.clone();
    let reg = ToolRegistry::builder()
        .tool(tool)
        .pre_execute(simple::pre("policy", |_| {
            Ok(Some(deny("blocked by policy")))
        }))
        .post_execute(simple::post("audit", move |_, result| {
            *seen.lock().unwrap() = Some(result.clone());
            Ok(None)
        }))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "read")]).await;
    assert_eq!(*dispatches.lock().unwrap(), 0, "the body must not run");
    let n = nodes(&reg.recorder().records(), "c1");
    assert!(!n.contains(&NodeId::ToolBody) && !n.contains(&NodeId::Around));
    assert!(n.contains(&NodeId::Denied) && n.contains(&NodeId::Post));
    let saw = post_saw.lock().unwrap().clone().expect("post-execute ran");
    assert!(saw.is_error);
    assert_eq!(saw.text(), "Error: blocked by policy");
    assert!(report.outcomes[0].result.is_error);
    assert_walks(&reg, &["c1"]);
}

#[tokio::test(start_paused = true)]
async fn an_ask_with_no_approval_mounted_is_denied() {
    let tool = TestTool::returning("rm", json!("gone"));
    let dispatches = tool.dispatches.clone();
    let reg = ToolRegistry::builder()
        .tool(tool)
        .pre_execute(simple::pre("perm", |_| Ok(Some(ask()))))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "rm")]).await;
    assert_eq!(*dispatches.lock().unwrap(), 0);
    let approval = observations(&reg.recorder().records(), NodeId::Approval, "c1");
    assert_eq!(approval[0].outcome, Some(Outcome::Unavailable));
    assert_eq!(
        report.outcomes[0].result.text(),
        "Error: tool \"rm\" requires approval (not yet supported)"
    );
    assert_walks(&reg, &["c1"]);
}

#[tokio::test(start_paused = true)]
async fn allowed_once_continues_to_the_guards_and_the_body() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let (o1, o2) = (order.clone(), order.clone());
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("rm", json!("gone")))
        .pre_execute(simple::pre("perm", |_| Ok(Some(ask()))))
        .approval(simple::approval(move |_| {
            o1.lock().unwrap().push("approval");
            Ok(ApprovalOutcome::AllowedOnce)
        }))
        .guard(simple::guard("g", move |_| {
            o2.lock().unwrap().push("guard");
            Ok(GuardVerdict::Abstain)
        }))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "rm")]).await;
    assert_eq!(
        *order.lock().unwrap(),
        vec!["approval", "guard"],
        "approval comes before the guards"
    );
    assert!(!report.outcomes[0].result.is_error);
    let log = reg.recorder().session_log();
    assert_eq!(events_of_type(&log, "approval/asked").len(), 1);
    assert_eq!(events_of_type(&log, "approval/decided").len(), 1);
    assert_walks(&reg, &["c1"]);
}

#[tokio::test(start_paused = true)]
async fn every_approval_refusal_denies() {
    for (answer, outcome) in [
        (ApprovalOutcome::Rejected, Outcome::Rejected),
        (ApprovalOutcome::Cancelled, Outcome::Cancelled),
        (ApprovalOutcome::Unavailable, Outcome::Unavailable),
    ] {
        let tool = TestTool::returning("rm", json!("gone"));
        let dispatches = tool.dispatches.clone();
        let reg = ToolRegistry::builder()
            .tool(tool)
            .pre_execute(simple::pre("perm", |_| Ok(Some(ask()))))
            .approval(simple::approval(move |_| Ok(answer)))
            .guard(simple::guard("g", |_| {
                panic!("guards must not run after a refusal")
            }))
            .build()
            .unwrap();
        let report = reg.run_batch(vec![call("c1", "rm")]).await;
        assert_eq!(*dispatches.lock().unwrap(), 0, "{outcome}");
        assert!(report.outcomes[0].result.is_error);
        let approval = observations(&reg.recorder().records(), NodeId::Approval, "c1");
        assert_eq!(approval[0].outcome, Some(outcome));
        assert_walks(&reg, &["c1"]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_guard_cannot_be_overridden_by_a_forced_allow_and_the_first_reason_wins() {
    let tool = TestTool::returning("rm", json!("gone"));
    let dispatches = tool.dispatches.clone();
    let reg = ToolRegistry::builder()
        .tool(tool)
        // A listener that allows without passing on vetoes every later listener ...
        .pre_execute(simple::pre("force-allow", |_| Ok(Some(PreDecision::Allow))))
        .pre_execute(simple::pre("never", |_| Ok(Some(deny("unreachable")))))
        // ... but not the guards.
        .guard(simple::guard("quiet", |_| Ok(GuardVerdict::Abstain)))
        .guard(simple::guard("owner", |_| {
            Ok(GuardVerdict::Deny("owner policy".into()))
        }))
        .guard(simple::guard("later", |_| {
            Ok(GuardVerdict::Deny("later reason".into()))
        }))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "rm")]).await;
    assert_eq!(*dispatches.lock().unwrap(), 0);
    assert_eq!(report.outcomes[0].result.text(), "Error: owner policy");
    let guards = observations(&reg.recorder().records(), NodeId::Guards, "c1");
    assert_eq!(guards[0].outcome, Some(Outcome::Deny));
    assert_eq!(
        guards[0].verdicts.as_ref().map(Vec::len),
        Some(2),
        "later guards are not consulted"
    );
    assert_walks(&reg, &["c1"]);
}

#[tokio::test(start_paused = true)]
async fn guards_run_only_after_an_allow() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("rm", json!("gone")))
        .pre_execute(simple::pre("policy", |_| Ok(Some(deny("no")))))
        .guard(simple::guard("g", |_| {
            panic!("guards must not run after a deny")
        }))
        .build()
        .unwrap();
    reg.run_batch(vec![call("c1", "rm")]).await;
    assert!(observations(&reg.recorder().records(), NodeId::Guards, "c1").is_empty());
}

struct IdentityProbe {
    seen: Arc<Mutex<Vec<Execution>>>,
}

impl Named for IdentityProbe {
    fn id(&self) -> &str {
        "probe"
    }
}

impl ExecuteWrapper for IdentityProbe {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        Box::pin(async move {
            self.seen.lock().unwrap().push(call.exec.clone());
            next.run(call.cancel).await
        })
    }
}

impl ResultObserver for IdentityProbe {
    fn notify(
        &self,
        exec: &Execution,
        _result: &Arc<ToolResult>,
    ) -> Option<BoxFuture<'static, ()>> {
        self.seen.lock().unwrap().push(exec.clone());
        None
    }
}

#[tokio::test(start_paused = true)]
async fn identity_is_one_shared_execution_through_every_stage() {
    let seen = Arc::new(Mutex::new(Vec::<Execution>::new()));
    let (s1, s2, s3) = (seen.clone(), seen.clone(), seen.clone());
    let probe = Arc::new(IdentityProbe { seen: seen.clone() });
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("read", json!("hi")))
        .pre_execute(simple::pre("p", move |e| {
            s1.lock().unwrap().push(e.clone());
            Ok(None)
        }))
        .guard(simple::guard("g", move |e| {
            s2.lock().unwrap().push(e.clone());
            Ok(GuardVerdict::Abstain)
        }))
        .wrap(probe.clone())
        .post_execute(simple::post("q", move |e, _| {
            s3.lock().unwrap().push(e.clone());
            Ok(None)
        }))
        .observe(probe)
        .build()
        .unwrap();
    reg.run_batch(vec![call("c1", "read")]).await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 5, "pre, guard, wrapper, post, tools/result");
    assert!(
        seen.iter().all(|e| e.same_as(&seen[0])),
        "every stage got the same execution"
    );
    assert_eq!(seen[0].arguments(), &json!({"path": "a.txt"}));
    // The trace agrees: every stage recorded the identity it saw, and they are all equal.
    let records = reg.recorder().records();
    let identities: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            TraceRecord::Stage(o) => o.identity.clone(),
            _ => None,
        })
        .collect();
    assert!(identities.len() >= 7);
    assert!(identities.iter().all(|i| i == &identities[0]));
}

struct ThrowingWrapper;

impl Named for ThrowingWrapper {
    fn id(&self) -> &str {
        "thrower"
    }
}

impl ExecuteWrapper for ThrowingWrapper {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let _ = next.run(call.cancel).await?;
            Err(Failure::new("wrapper exploded after dispatch"))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_throw_anywhere_skips_post_execute_and_still_reaches_finalize_and_tools_result() {
    type Setup =
        fn(tep_reference::pipeline::RegistryBuilder) -> tep_reference::pipeline::RegistryBuilder;
    let cases: Vec<(&str, Setup)> = vec![
        ("pre error", |b| {
            b.pre_execute(simple::pre("p", |_| Err(Failure::new("pre broke"))))
        }),
        ("pre panic", |b| {
            b.pre_execute(simple::pre("p", |_| panic!("pre panicked")))
        }),
        ("approval", |b| {
            b.pre_execute(simple::pre("p", |_| Ok(Some(ask()))))
                .approval(simple::approval(|_| Err(Failure::new("prompt broke"))))
        }),
        ("guard", |b| {
            b.guard(simple::guard("g", |_| Err(Failure::new("guard broke"))))
        }),
        ("wrapper", |b| b.wrap(Arc::new(ThrowingWrapper))),
        ("post", |b| {
            b.post_execute(simple::post("q", |_, _| panic!("post panicked")))
        }),
    ];
    for (name, setup) in cases {
        let finalized = Arc::new(Mutex::new(0));
        let f = finalized.clone();
        let tool = TestTool::returning("read", json!("hi")).finalize(move |_| {
            *f.lock().unwrap() += 1;
            Ok(None)
        });
        let post_calls = Arc::new(Mutex::new(0));
        let p = post_calls.clone();
        let mut builder = setup(ToolRegistry::builder().tool(tool));
        if name != "post" {
            builder = builder.post_execute(simple::post("counter", move |_, _| {
                *p.lock().unwrap() += 1;
                Ok(None)
            }));
        }
        let reg = builder.build().unwrap();
        let report = reg.run_batch(vec![call("c1", "read")]).await;
        let records = reg.recorder().records();
        let n = nodes(&records, "c1");
        assert_eq!(
            *post_calls.lock().unwrap(),
            0,
            "{name}: post-execute must be skipped"
        );
        assert_eq!(
            *finalized.lock().unwrap(),
            1,
            "{name}: finalizeContent runs once"
        );
        assert!(n.contains(&NodeId::Normalized), "{name}: {n:?}");
        assert_eq!(
            observations(&records, NodeId::Final, "c1").len(),
            1,
            "{name}"
        );
        assert!(report.outcomes[0].result.is_error, "{name}");
        assert_walks(&reg, &["c1"]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_body_is_normalized_before_the_wrappers_see_it_and_post_execute_runs() {
    let saw = Arc::new(Mutex::new(Vec::new()));
    struct Peek(Arc<Mutex<Vec<bool>>>);
    impl Named for Peek {
        fn id(&self) -> &str {
            "peek"
        }
    }
    impl ExecuteWrapper for Peek {
        fn wrap<'a>(
            &'a self,
            call: DispatchCall<'a>,
            next: ExecuteNext<'a>,
        ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
            Box::pin(async move {
                let r = next.run(call.cancel).await?;
                self.0.lock().unwrap().push(r.is_error);
                Ok(r)
            })
        }
    }
    for body in [
        Body::Fail("disk full".into()),
        Body::Panic("body panicked".into()),
    ] {
        let post_ran = Arc::new(Mutex::new(false));
        let p = post_ran.clone();
        let reg = ToolRegistry::builder()
            .tool(TestTool::new("write", body))
            .wrap(Arc::new(Peek(saw.clone())))
            .post_execute(simple::post("q", move |_, r| {
                assert!(r.is_error);
                *p.lock().unwrap() = true;
                Ok(None)
            }))
            .build()
            .unwrap();
        let report = reg.run_batch(vec![call("c1", "write")]).await;
        assert!(*post_ran.lock().unwrap());
        assert!(report.outcomes[0].result.is_error);
        assert!(!nodes(&reg.recorder().records(), "c1").contains(&NodeId::Normalized));
        assert_walks(&reg, &["c1"]);
    }
    assert_eq!(*saw.lock().unwrap(), vec![true, true]);
}

#[tokio::test(start_paused = true)]
async fn the_timeout_wrapper_cancels_cooperatively_and_reports_tool_timeout() {
    let started = tokio::time::Instant::now();
    let reg = ToolRegistry::builder()
        .tool(TestTool::new("sleep", Body::Hang).timeout_ms(250))
        .tool(TestTool::slow("quick", json!("done"), 10).timeout_ms(250))
        .wrap(Arc::new(TimeoutWrapper::new()))
        .build()
        .unwrap();
    let report = reg
        .run_batch(vec![call("c1", "sleep"), call("c2", "quick")])
        .await;
    let timed_out = &report.outcomes[0].result;
    assert!(timed_out.is_error);
    assert_eq!(timed_out.error_code(), Some("TOOL_TIMEOUT"));
    assert_eq!(timed_out.text(), "Error: tool call timed out after 250ms");
    assert!(
        !report.outcomes[1].result.is_error,
        "a body that finishes in time is untouched"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(260));
    // Post-execute still runs after a timeout.
    assert!(nodes(&reg.recorder().records(), "c1").contains(&NodeId::Post));
    assert_walks(&reg, &["c1", "c2"]);
}

#[tokio::test(start_paused = true)]
async fn the_retry_wrapper_dispatches_again_and_metrics_count_every_call() {
    let metrics = MetricsWrapper::new();
    let reg = ToolRegistry::builder()
        .tool(TestTool::new("flaky", Body::FlakyThenOk(2)))
        .wrap(Arc::new(metrics.clone()))
        .wrap(Arc::new(RetryWrapper::new(3, Duration::from_millis(5))))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "flaky")]).await;
    assert!(!report.outcomes[0].result.is_error);
    let n = nodes(&reg.recorder().records(), "c1");
    assert_eq!(n.iter().filter(|&&x| x == NodeId::ToolBody).count(), 3);
    assert_walks(&reg, &["c1"]);
    let stats = metrics.snapshot();
    assert_eq!(stats["flaky"].calls, 1);
    assert_eq!(stats["flaky"].errors, 0);
    assert_eq!(stats["flaky"].total, Duration::from_millis(10));
}

#[tokio::test(start_paused = true)]
async fn finalize_content_is_called_once_and_changes_content_only() {
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let reg = ToolRegistry::builder()
        .tool(
            TestTool::new("read", Body::DeferThenOk("ctx".into())).finalize(move |r| {
                *c.lock().unwrap() += 1;
                Ok(Some(vec![ContentBlock::text(format!(
                    "[final] {}",
                    r.text()
                ))]))
            }),
        )
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "read")]).await;
    let r = &report.outcomes[0].result;
    assert_eq!(*calls.lock().unwrap(), 1);
    assert_eq!(r.text(), "[final] ok");
    assert!(!r.is_error);
    assert_eq!(
        r.additional_contexts.len(),
        1,
        "contexts survive finalization"
    );
}

#[tokio::test(start_paused = true)]
async fn a_throwing_finalizer_becomes_a_plain_error_without_being_called_again() {
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let reg = ToolRegistry::builder()
        .tool(
            TestTool::new("read", Body::DeferThenOk("ctx".into())).finalize(move |_| {
                *c.lock().unwrap() += 1;
                Err(Failure::new("finalizer broke"))
            }),
        )
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "read")]).await;
    let r = &report.outcomes[0].result;
    assert_eq!(*calls.lock().unwrap(), 1);
    assert!(r.is_error);
    assert!(r.additional_contexts.is_empty());
}

struct Keep(Arc<Mutex<Vec<Arc<ToolResult>>>>);

impl Named for Keep {
    fn id(&self) -> &str {
        "keep"
    }
}

impl ResultObserver for Keep {
    fn notify(
        &self,
        _exec: &Execution,
        result: &Arc<ToolResult>,
    ) -> Option<BoxFuture<'static, ()>> {
        self.0.lock().unwrap().push(result.clone());
        None
    }
}

#[tokio::test(start_paused = true)]
async fn tools_result_announces_the_frozen_outcome_that_tool_result_records() {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("read", json!({"lines": 3})))
        .observe(Arc::new(Keep(kept.clone())))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "read")]).await;
    let announced = kept.lock().unwrap()[0].clone();
    assert!(
        Arc::ptr_eq(&announced, &report.outcomes[0].result),
        "one frozen value"
    );
    let log = reg.recorder().session_log();
    let recorded = events_of_type(&log, "tool/result");
    let EventBody::ToolResult(data) = &recorded[0].body else {
        unreachable!()
    };
    assert_eq!(data.content(), announced.content);
    assert_eq!(data.is_error(), announced.is_error);
    assert_eq!(
        recorded[0].source_event_seqs,
        Some(vec![events_of_type(&log, "tool/call")[0].seq])
    );
    // tools/result comes before tool/result, and presentResult after it.
    let records = reg.recorder().records();
    let fin = positions(&records, is_stage(NodeId::Final, "c1"));
    let res = positions(&records, is_event("tool/result", "c1"));
    let ui = positions(&records, is_stage(NodeId::PresentResult, "c1"));
    assert!(fin[0] < res[0] && res[0] < ui[0]);
}

struct Slow(Arc<Mutex<Vec<&'static str>>>);

impl Named for Slow {
    fn id(&self) -> &str {
        "slow-observer"
    }
}

impl ResultObserver for Slow {
    fn notify(
        &self,
        _exec: &Execution,
        _result: &Arc<ToolResult>,
    ) -> Option<BoxFuture<'static, ()>> {
        let log = self.0.clone();
        Some(Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            log.lock().unwrap().push("observer finished");
        }))
    }
}

#[tokio::test(start_paused = true)]
async fn rev2_does_not_await_observers_but_rev1_does() {
    for (revision, awaited) in [(Revision::Rev2, false), (Revision::Rev1, true)] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let reg = ToolRegistry::builder()
            .revision(revision)
            .tool(TestTool::returning("read", json!("hi")))
            .observe(Arc::new(Slow(log.clone())))
            .build()
            .unwrap();
        let started = tokio::time::Instant::now();
        reg.run_batch(vec![call("c1", "read")]).await;
        assert_eq!(
            started.elapsed() >= Duration::from_millis(50),
            awaited,
            "{revision}"
        );
        assert_eq!(
            log.lock().unwrap().len(),
            usize::from(awaited),
            "{revision}"
        );
    }
}

struct ContextWrapper;

impl Named for ContextWrapper {
    fn id(&self) -> &str {
        "ctx-wrapper"
    }
}

impl ExecuteWrapper for ContextWrapper {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let mut r = next.run(call.cancel.clone()).await?;
            r.additional_contexts.push(AdditionalContext {
                origin: ContextOrigin::Wrapper,
                text: format!("wrapper:{}", call.exec.call_id()),
            });
            Ok(r)
        })
    }
}

#[tokio::test(start_paused = true)]
async fn contexts_are_injected_fifo_after_every_result_is_recorded() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::new("a", Body::DeferThenOk("tool:c1".into())).safe())
        .tool(TestTool::slow("b", json!("b"), 1).safe())
        .wrap(Arc::new(ContextWrapper))
        .post_execute(simple::post("q", |e, _| {
            Ok(Some(PostDecision::Accept {
                content: None,
                value: None,
                contexts: vec![format!("post:{}", e.call_id())],
            }))
        }))
        .build()
        .unwrap();
    reg.run_batch(vec![call("c1", "a"), call("c2", "b")]).await;
    let log = reg.recorder().session_log();
    assert_eq!(
        injected(&log),
        vec!["tool:c1", "wrapper:c1", "post:c1", "wrapper:c2", "post:c2"]
    );
    let records = reg.recorder().records();
    let last_result = positions(
        &records,
        |r| matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == "tool/result"),
    );
    let settled = positions(
        &records,
        |r| matches!(r, TraceRecord::Stage(o) if o.node == NodeId::AllResults),
    );
    let contexts = positions(
        &records,
        |r| matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == "user/message"),
    );
    assert!(last_result.iter().all(|&p| p < settled[0]));
    assert!(contexts.iter().all(|&p| p > settled[0]));
    assert_walks(&reg, &["c1", "c2"]);
}

#[tokio::test(start_paused = true)]
async fn a_block_drops_earlier_contexts_and_keeps_its_own() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::new("a", Body::DeferThenOk("tool".into())))
        .wrap(Arc::new(ContextWrapper))
        .post_execute(simple::post("q", |_, _| {
            Ok(Some(PostDecision::Block {
                feedback: vec![ContentBlock::text("not allowed to see this")],
                contexts: vec!["block".into()],
            }))
        }))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "a")]).await;
    let r = &report.outcomes[0].result;
    assert!(r.is_error);
    assert_eq!(r.text(), "not allowed to see this");
    assert_eq!(injected(&reg.recorder().session_log()), vec!["block"]);
}

#[tokio::test(start_paused = true)]
async fn deferred_contexts_survive_a_throwing_body() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::new("a", Body::DeferThenFail("kept".into())))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "a")]).await;
    assert!(report.outcomes[0].result.is_error);
    assert_eq!(injected(&reg.recorder().session_log()), vec!["kept"]);
}

#[tokio::test(start_paused = true)]
async fn post_execute_can_replace_content_or_value_but_not_both_nor_a_failed_value() {
    let accept = |content: Option<&str>, value: Option<serde_json::Value>| PostDecision::Accept {
        content: content.map(|c| vec![ContentBlock::text(c)]),
        value,
        contexts: vec![],
    };
    let cases = [
        (
            Body::Return {
                value: json!("orig"),
                delay_ms: 0,
            },
            accept(Some("replaced"), None),
            Some("replaced"),
        ),
        (
            Body::Return {
                value: json!("orig"),
                delay_ms: 0,
            },
            accept(None, Some(json!("new value"))),
            Some("new value"),
        ),
        (
            Body::Return {
                value: json!("orig"),
                delay_ms: 0,
            },
            accept(Some("x"), Some(json!(1))),
            None,
        ),
        (Body::Fail("bad".into()), accept(None, Some(json!(1))), None),
    ];
    for (body, decision, expected) in cases {
        let reg = ToolRegistry::builder()
            .tool(TestTool::new("t", body))
            .post_execute(simple::post("q", move |_, _| Ok(Some(decision.clone()))))
            .build()
            .unwrap();
        let report = reg.run_batch(vec![call("c1", "t")]).await;
        let r = &report.outcomes[0].result;
        match expected {
            Some(text) => assert_eq!((r.is_error, r.text().as_str()), (false, text)),
            None => {
                // A TypeError of the listener: normalized like any throw.
                assert!(
                    r.is_error && r.text().starts_with("Error: a post-execute accept cannot"),
                    "{r:?}"
                );
                assert!(nodes(&reg.recorder().records(), "c1").contains(&NodeId::Normalized));
            }
        }
        assert_walks(&reg, &["c1"]);
    }
}

#[tokio::test(start_paused = true)]
async fn results_commit_in_model_order_when_a_later_parallel_call_finishes_first() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::slow("slow", json!("slow"), 100).safe())
        .tool(TestTool::slow("fast", json!("fast"), 10).safe())
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let report = reg
        .run_batch(vec![call("c1", "slow"), call("c2", "fast")])
        .await;
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(100),
        "the bodies overlapped"
    );
    assert_eq!(report.outcomes[0].call_id.as_str(), "c1");
    let records = reg.recorder().records();
    let body_end_c2 = positions(&records, is_stage(NodeId::Around, "c2"))[1];
    let body_end_c1 = positions(&records, is_stage(NodeId::Around, "c1"))[1];
    assert!(body_end_c2 < body_end_c1, "c2's body finished first");
    let r1 = positions(&records, is_event("tool/result", "c1"))[0];
    let r2 = positions(&records, is_event("tool/result", "c2"))[0];
    assert!(r1 < r2, "but c1's result is committed first");
    // c2's post-execute waits for c1's commit: commit stages never interleave.
    let post2 = positions(&records, is_stage(NodeId::Post, "c2"))[0];
    assert!(r1 < post2);
    assert_walks(&reg, &["c1", "c2"]);
}

#[tokio::test(start_paused = true)]
async fn only_bodies_overlap_and_prepare_stages_run_in_model_order() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::slow("slow", json!("s"), 50).safe())
        .build()
        .unwrap();
    reg.run_batch(vec![
        call("c1", "slow"),
        call("c2", "slow"),
        call("c3", "slow"),
    ])
    .await;
    let records = reg.recorder().records();
    let tc = |c| positions(&records, is_event("tool/call", c))[0];
    let body = |c| positions(&records, is_stage(NodeId::ToolBody, c))[0];
    let guards = |c| positions(&records, is_stage(NodeId::Guards, c))[0];
    assert!(tc("c1") < tc("c2") && tc("c2") < tc("c3"));
    assert!(
        guards("c1") < tc("c2") && guards("c2") < tc("c3"),
        "prepare stages do not interleave"
    );
    let body_end_c1 = positions(&records, is_stage(NodeId::Around, "c1"))[1];
    assert!(
        body("c2") < body_end_c1 && body("c3") < body_end_c1,
        "bodies overlap"
    );
    assert_walks(&reg, &["c1", "c2", "c3"]);
}

#[tokio::test(start_paused = true)]
async fn an_exclusive_call_runs_alone_between_parallel_calls() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::slow("read", json!("r"), 30).safe())
        .tool(TestTool::slow("write", json!("w"), 30))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    reg.run_batch(vec![
        call("c1", "read"),
        call("c2", "read"),
        call("c3", "write"),
        call("c4", "read"),
    ])
    .await;
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(90),
        "c1+c2 together, then c3, then c4"
    );
    let records = reg.recorder().records();
    let r2 = positions(&records, is_event("tool/result", "c2"))[0];
    let tc3 = positions(&records, is_event("tool/call", "c3"))[0];
    let r3 = positions(&records, is_event("tool/result", "c3"))[0];
    let tc4 = positions(&records, is_event("tool/call", "c4"))[0];
    assert!(r2 < tc3 && r3 < tc4, "the exclusive call is a barrier");
}

#[tokio::test(start_paused = true)]
async fn the_parallel_pool_is_capped() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::slow("read", json!("r"), 10).safe())
        .max_parallel(2)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let calls: Vec<_> = (1..=4).map(|i| call(&format!("c{i}"), "read")).collect();
    reg.run_batch(calls).await;
    assert_eq!(started.elapsed(), Duration::from_millis(20));
}

#[tokio::test(start_paused = true)]
async fn an_unknown_tool_is_an_error_result_that_still_runs_post_execute() {
    let reg = ToolRegistry::builder().build().unwrap();
    let report = reg.run_batch(vec![call("c1", "nope")]).await;
    assert_eq!(report.outcomes[0].result.error_code(), Some("UNKNOWN_TOOL"));
    let n = nodes(&reg.recorder().records(), "c1");
    assert!(n.contains(&NodeId::Post) && !n.contains(&NodeId::ToolBody));
    assert_walks(&reg, &["c1"]);
}

#[test]
fn run_code_is_reserved_and_names_are_unique() {
    let err = ToolRegistry::builder()
        .tool(TestTool::returning("run_code", json!(1)))
        .build()
        .err();
    assert_eq!(err, Some(RegistryError::Reserved("run_code".into())));
    let err = ToolRegistry::builder()
        .tool(TestTool::returning("a", json!(1)))
        .tool(TestTool::returning("a", json!(2)))
        .build()
        .err();
    assert_eq!(err, Some(RegistryError::Duplicate("a".into())));
}

#[tokio::test(start_paused = true)]
async fn session_log_and_trace_serialize_to_json_and_back() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::new("a", Body::DeferThenOk("x".into())))
        .pre_execute(simple::pre("p", |_| Ok(Some(ask()))))
        .approval(simple::approval(|_| Ok(ApprovalOutcome::AllowedOnce)))
        .build()
        .unwrap();
    reg.run_batch(vec![call("c1", "a")]).await;
    let jsonl = reg.recorder().to_jsonl();
    let back: Vec<TraceRecord> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(back, reg.recorder().records());
    let log = serde_json::to_string(&reg.recorder().session_log()).unwrap();
    let log_back: Vec<tep_model::session::SessionEvent> = serde_json::from_str(&log).unwrap();
    assert_eq!(log_back, reg.recorder().session_log());
    assert_eq!(
        log_back.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=log_back.len() as u64).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn rev1_has_no_normalization_node_no_finalizer_and_buffers_context_messages() {
    let finalized = Arc::new(Mutex::new(0));
    let f = finalized.clone();
    let reg = ToolRegistry::builder()
        .revision(Revision::Rev1)
        .tool(
            TestTool::new("a", Body::DeferThenOk("ctx".into())).finalize(move |_| {
                *f.lock().unwrap() += 1;
                Ok(None)
            }),
        )
        .build()
        .unwrap();
    // The graph the walks below are checked against.
    assert_eq!(reg.revision(), Revision::Rev1);
    reg.run_batch(vec![call("c1", "a")]).await;
    assert_eq!(*finalized.lock().unwrap(), 0);
    let log = reg.recorder().session_log();
    assert_eq!(events_of_type(&log, "context/message").len(), 1);
    assert!(events_of_type(&log, "user/message").is_empty());
    assert_walks(&reg, &["c1"]);
}

struct Cards {
    shown: Arc<Mutex<Vec<String>>>,
    panic_on: &'static str,
}

impl tep_reference::pipeline::Presenter for Cards {
    fn present_call(&self, call_id: &tep_model::identity::CallId, _args: &serde_json::Value) {
        if call_id.as_str() == self.panic_on {
            panic!("the card renderer crashed");
        }
        self.shown
            .lock()
            .unwrap()
            .push(format!("pending {call_id}"));
    }

    fn present_result(
        &self,
        call_id: &tep_model::identity::CallId,
        _args: &serde_json::Value,
        result: &ToolResult,
    ) {
        self.shown
            .lock()
            .unwrap()
            .push(format!("done {call_id}: {}", result.text()));
    }
}

#[tokio::test(start_paused = true)]
async fn the_presenter_shows_each_card_and_a_crashing_one_changes_nothing() {
    let shown = Arc::new(Mutex::new(Vec::new()));
    let reg = ToolRegistry::builder()
        .tool(TestTool::returning("read", json!("hi")))
        .presenter(Arc::new(Cards {
            shown: shown.clone(),
            panic_on: "c2",
        }))
        .build()
        .unwrap();
    let report = reg
        .run_batch(vec![call("c1", "read"), call("c2", "read")])
        .await;
    assert_eq!(
        *shown.lock().unwrap(),
        vec!["pending c1", "done c1: hi", "done c2: hi"],
        "c2's pending card fell back to the generic one"
    );
    assert!(report.outcomes.iter().all(|o| !o.result.is_error));
    assert_walks(&reg, &["c1", "c2"]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_wrapper_for_other_tools_does_not_retry() {
    let reg = ToolRegistry::builder()
        .tool(TestTool::new("flaky", Body::FlakyThenOk(1)))
        .wrap(Arc::new(
            RetryWrapper::new(3, Duration::ZERO).for_tools(["fetch".to_owned()]),
        ))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "flaky")]).await;
    assert!(
        report.outcomes[0].result.is_error,
        "one dispatch, which failed"
    );
    let n = nodes(&reg.recorder().records(), "c1");
    assert_eq!(n.iter().filter(|&&x| x == NodeId::ToolBody).count(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_retry_wrapper_stops_at_the_first_success_and_metrics_count_failures() {
    let metrics = MetricsWrapper::new();
    let flaky = TestTool::new("flaky", Body::FlakyThenOk(1));
    let dispatches = flaky.dispatches.clone();
    let reg = ToolRegistry::builder()
        .tool(flaky)
        .tool(TestTool::new("broken", Body::Fail("no".into())))
        .wrap(Arc::new(metrics.clone()))
        .wrap(Arc::new(
            RetryWrapper::new(5, Duration::from_millis(5)).for_tools(["flaky".to_owned()]),
        ))
        .build()
        .unwrap();
    let report = reg
        .run_batch(vec![call("c1", "flaky"), call("c2", "broken")])
        .await;
    assert!(!report.outcomes[0].result.is_error);
    assert_eq!(*dispatches.lock().unwrap(), 2, "one failure, one success");
    assert!(report.outcomes[1].result.is_error);
    let stats = metrics.snapshot();
    assert_eq!((stats["flaky"].calls, stats["flaky"].errors), (1, 0));
    assert_eq!((stats["broken"].calls, stats["broken"].errors), (1, 1));
}

/// `finalizeContent` as a plain function.
type FinalizeFn = fn(&Execution, &ToolResult) -> Result<Option<Vec<ContentBlock>>, Failure>;

/// A tool written against the public API alone: no declared timeout, a finalizer that is a
/// plain function, and a body that uses what its context offers.
struct Scribe {
    finalizer: FinalizeFn,
}

impl tep_reference::pipeline::Tool for Scribe {
    fn name(&self) -> &str {
        "scribe"
    }

    fn execute<'a>(
        &'a self,
        ctx: tep_reference::pipeline::ToolContext<'a>,
    ) -> BoxFuture<'a, Result<serde_json::Value, Failure>> {
        use tep_model::session::{HookInvoked, HookResult, Todo, TodoStatus};
        Box::pin(async move {
            ctx.write_todos(vec![Todo {
                content: "write it down".into(),
                status: TodoStatus::Pending,
            }]);
            ctx.record_hook(
                HookInvoked {
                    turn: 1,
                    point: "PreToolUse".into(),
                    dialect: "claude-code".into(),
                    matcher: None,
                    handler_id: "h1".into(),
                },
                HookResult {
                    turn: 1,
                    point: "PreToolUse".into(),
                    handler_id: "h1".into(),
                    decision: "allow".into(),
                    exit_code: None,
                    stderr_summary: None,
                    duration_ms: 0.into(),
                },
            );
            // Far past any deadline: the tool declares none, so no timeout applies.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(ctx.arguments().clone())
        })
    }

    fn finalizer(&self) -> Option<&dyn tep_reference::pipeline::FinalizeContent> {
        Some(&self.finalizer)
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_on_the_public_api_alone_runs_untimed_owns_its_events_and_is_finalized() {
    fn shout(_: &Execution, candidate: &ToolResult) -> Result<Option<Vec<ContentBlock>>, Failure> {
        Ok(Some(vec![ContentBlock::text(
            candidate.text().to_uppercase(),
        )]))
    }
    let started = tokio::time::Instant::now();
    let reg = ToolRegistry::builder()
        .tool(Scribe { finalizer: shout })
        .wrap(Arc::new(TimeoutWrapper::new()))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "scribe")]).await;
    assert_eq!(started.elapsed(), Duration::from_secs(3600));
    let result = &report.outcomes[0].result;
    assert!(!result.is_error, "{}", result.text());
    // The arguments the model sent, rendered as JSON, then finalized.
    assert_eq!(result.text(), "{\n  \"PATH\": \"A.TXT\"\n}");
    let records = reg.recorder().records();
    let body = positions(&records, is_stage(NodeId::ToolBody, "c1"))[0];
    let back = positions(&records, is_stage(NodeId::Around, "c1"))[1];
    for ty in ["todo/write", "hook/invoked", "hook/result"] {
        let at = positions(&records, is_event(ty, "c1"));
        assert_eq!(at.len(), 1, "{ty}");
        assert!(body < at[0] && at[0] < back, "{ty} inside the body");
    }
    assert_walks(&reg, &["c1"]);
}

/// A body that stops only when its cancellation signal fires.
struct Patient;

impl tep_reference::pipeline::Tool for Patient {
    fn name(&self) -> &str {
        "patient"
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(100))
    }

    fn execute<'a>(
        &'a self,
        ctx: tep_reference::pipeline::ToolContext<'a>,
    ) -> BoxFuture<'a, Result<serde_json::Value, Failure>> {
        Box::pin(async move {
            ctx.cancellation().cancelled().await;
            Err(tep_reference::pipeline::cancelled_failure())
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_watching_its_cancellation_signal_stops_at_the_deadline() {
    let reg = ToolRegistry::builder()
        .tool(Patient)
        .wrap(Arc::new(TimeoutWrapper::new()))
        .build()
        .unwrap();
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        reg.run_batch(vec![call("c1", "patient")]),
    )
    .await
    .expect("the signal reached the body");
    assert_eq!(report.outcomes[0].result.error_code(), Some("TOOL_TIMEOUT"));
}
