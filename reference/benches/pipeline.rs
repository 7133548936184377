//! The reference pipeline's own cost: calls per second through `ToolRegistry::run_batch`.
//!
//! - `plain`: one allowed call of a tool that returns at once, no extension registered;
//! - `mixed`: a batch of six calls through a pre-execute policy, an approval prompt, a guard,
//!   the timeout wrapper and a post-execute listener: two concurrency-safe reads (one deferring
//!   a context), a call the policy denies, one it asks about and the prompt allows, one the
//!   guard denies, and an exclusive write.
//!
//! Each iteration runs one batch on a fresh registry (its recorder keeps every record, so a
//! registry is not reused); building it is not timed. Criterion prints the throughput in calls
//! per second (`thrpt`). Run with `cargo bench -p tep-reference --bench pipeline`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use tep_model::result::Failure;
use tep_reference::pipeline::{
    ApprovalOutcome, BoxFuture, GuardVerdict, ModelCall, PostDecision, PreDecision, Tool,
    ToolContext, ToolRegistry, simple,
};
use tep_reference::wrappers::TimeoutWrapper;

/// Builds a registry for one iteration.
type Build = fn() -> ToolRegistry;

/// A tool whose body returns at once.
struct Instant {
    name: &'static str,
    safe: bool,
    defers: bool,
}

impl Tool for Instant {
    fn name(&self) -> &str {
        self.name
    }

    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        self.safe
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(60))
    }

    fn execute<'a>(&'a self, ctx: ToolContext<'a>) -> BoxFuture<'a, Result<Value, Failure>> {
        Box::pin(async move {
            if self.defers {
                ctx.defer_context("read notes.txt");
            }
            Ok(json!("contents"))
        })
    }
}

fn tool(name: &'static str, safe: bool, defers: bool) -> Instant {
    Instant { name, safe, defers }
}

fn plain() -> ToolRegistry {
    ToolRegistry::builder()
        .tool(tool("read", true, false))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn mixed() -> ToolRegistry {
    ToolRegistry::builder()
        .tool(tool("read", true, false))
        .tool(tool("note", true, true))
        .tool(tool("rm", false, false))
        .tool(tool("write", false, false))
        .pre_execute(simple::pre("policy", |exec| {
            Ok(match exec.call_id().as_str() {
                "c3" => Some(PreDecision::Deny {
                    reason: "rm needs approval".into(),
                }),
                "c4" => Some(PreDecision::Ask {
                    reason: Some("confirm rm".into()),
                }),
                _ => None,
            })
        }))
        .approval(simple::approval(|_| Ok(ApprovalOutcome::AllowedOnce)))
        .guard(simple::guard("owner", |exec| {
            Ok(if exec.call_id().as_str() == "c5" {
                GuardVerdict::Deny("owner says no".into())
            } else {
                GuardVerdict::Abstain
            })
        }))
        .wrap(Arc::new(TimeoutWrapper::new()))
        .post_execute(simple::post("notes", |exec, _| {
            Ok(
                (exec.call_id().as_str() == "c4").then(|| PostDecision::Accept {
                    content: None,
                    value: None,
                    contexts: vec!["approved once".into()],
                }),
            )
        }))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn calls(spec: &[(&str, &str)]) -> Vec<ModelCall> {
    spec.iter()
        .map(|(id, name)| ModelCall::new(id, name, r#"{"path":"notes.txt"}"#))
        .collect()
}

fn pipeline(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("pipeline");
    let cases: [(&str, Build, Vec<ModelCall>); 2] = [
        ("plain", plain, calls(&[("c1", "read")])),
        (
            "mixed",
            mixed,
            calls(&[
                ("c1", "read"),
                ("c2", "note"),
                ("c3", "rm"),
                ("c4", "rm"),
                ("c5", "write"),
                ("c6", "write"),
            ]),
        ),
    ];
    // The mixed batch does what it says: the denied calls end as errors, the others do not.
    let report = runtime.block_on(mixed().run_batch(cases[1].2.clone()));
    let errors: Vec<bool> = report.outcomes.iter().map(|o| o.result.is_error).collect();
    assert_eq!(errors, [false, false, true, false, true, false]);
    for (name, registry, batch) in cases {
        group.throughput(Throughput::Elements(batch.len() as u64));
        group.bench_function(name, |b| {
            b.iter_batched(
                || (registry(), batch.clone()),
                // The registry goes back out, to be dropped untimed with its records.
                |(registry, batch)| {
                    let report = runtime.block_on(registry.run_batch(batch));
                    black_box((registry, report))
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
