//! The model's phase `Dispatch` (graph node `model`: the batch arrives), and the driver of the
//! phases after it: each call planned, then run in groups (a rolling pool of concurrency-safe
//! calls, or one exclusive call), results committed in model order, then the batch settled.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;

use super::{
    BatchReport, CallOutcome, CallPlan, Ended, ModelCall, Prepared, RUN_CODE, Started, ToolRegistry,
};
use crate::pipeline::extension::{BoxFuture, guarded_sync};
use crate::pipeline::faults;
use tep_model::graph::NodeId;
use tep_model::identity::parse_arguments;
use tep_model::result::{Failure, ToolResult};
use tep_model::trace::{DeclaredCall, Observation};

type Inflight<'a> = FuturesUnordered<BoxFuture<'a, (usize, Result<ToolResult, Failure>)>>;

impl ToolRegistry {
    /// Runs the calls of one assistant message through the pipeline and injects their contexts.
    pub async fn run_batch(&self, calls: Vec<ModelCall>) -> BatchReport {
        let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        let plans: Vec<CallPlan> = calls.into_iter().map(|call| self.plan(call)).collect();
        let mut model = Observation::at(NodeId::Model);
        model.calls = Some(
            plans
                .iter()
                .map(|p| DeclaredCall {
                    call_id: p.call.call_id.clone(),
                    name: p.call.name.clone(),
                    concurrency_safe: Some(p.safe),
                })
                .collect(),
        );
        self.observe(model);

        let mut outcomes = Vec::with_capacity(plans.len());
        let mut start = 0;
        while start < plans.len() {
            // Consecutive concurrency-safe calls share a rolling pool; any other call runs alone
            // and is a barrier.
            let joins_pool = |p: &CallPlan| faults::joins_pool(&self.faults, p.safe);
            let end = if joins_pool(&plans[start]) {
                plans[start..]
                    .iter()
                    .position(|p| !joins_pool(p))
                    .map_or(plans.len(), |k| start + k)
            } else {
                start + 1
            };
            self.run_group(&plans[start..end], step, &mut outcomes)
                .await;
            // A throw never escapes the pipeline: the batch goes on.
            if faults::batch_abandoned(&self.faults, false) {
                return BatchReport { outcomes };
            }
            start = end;
        }

        self.settle(&outcomes);
        BatchReport { outcomes }
    }

    pub(super) fn plan(&self, call: ModelCall) -> CallPlan {
        let args = parse_arguments(&call.arguments);
        let tool = if call.name == RUN_CODE {
            self.run_code.clone()
        } else {
            self.tools.get(&call.name).cloned()
        };
        // Only an exact `true` from the visible definition makes a call parallel; a panicking
        // classifier makes it exclusive.
        let safe = tool
            .as_ref()
            .is_some_and(|t| guarded_sync(|| Ok(t.is_concurrency_safe(&args))).unwrap_or(false));
        CallPlan {
            call,
            args,
            tool,
            safe,
        }
    }

    /// Whether a call runs its body: only one its prepare stages allowed.
    fn runs_body(&self, prepared: &Prepared) -> bool {
        faults::runs_body(
            &self.faults,
            prepared,
            matches!(prepared, Prepared::Allowed),
        )
    }

    /// Runs `fut` (an ordered stage) while the bodies in flight keep running.
    pub(super) async fn polling<T>(
        &self,
        fut: impl Future<Output = T>,
        inflight: &mut Inflight<'_>,
        finished: &mut BTreeMap<usize, Result<ToolResult, Failure>>,
    ) -> T {
        let mut fut = std::pin::pin!(fut);
        loop {
            // Bodies first: a call allowed a moment ago starts its body before the next
            // ordered stage of another call.
            tokio::select! {
                biased;
                Some((i, r)) = inflight.next(), if !inflight.is_empty() => {
                    finished.insert(i, r);
                }
                out = &mut fut => return out,
            }
        }
    }

    pub(super) async fn run_group(
        &self,
        plans: &[CallPlan],
        step: u64,
        outcomes: &mut Vec<CallOutcome>,
    ) {
        let mut inflight: Inflight<'_> = FuturesUnordered::new();
        let mut finished: BTreeMap<usize, Result<ToolResult, Failure>> = BTreeMap::new();
        let mut started: Vec<Started> = Vec::with_capacity(plans.len());
        let mut committed = vec![false; plans.len()];
        let mut next_commit = 0;
        while next_commit < plans.len() {
            // A call is ready to commit once prepared and, if it runs its body, executed.
            let ready = |i: usize| {
                started
                    .get(i)
                    .is_some_and(|s| !self.runs_body(&s.prepared) || finished.contains_key(&i))
            };
            let head = faults::commit_head(
                &self.faults,
                Some(next_commit).filter(|&i| ready(i)),
                started.len(),
                |i| !committed[i] && ready(i),
            );
            if let Some(i) = head {
                let body = finished.remove(&i);
                let ended = match (&started[i].prepared, body) {
                    (Prepared::Denied(reason), _) => Ended::Denied(reason.clone()),
                    (Prepared::Threw(failure), _) => Ended::Threw(failure.clone()),
                    (Prepared::Allowed, Some(result)) => Ended::Executed(result),
                    (Prepared::Allowed, None) => continue,
                };
                let outcome = self
                    .polling(
                        self.commit(&plans[i], &started[i], ended, step),
                        &mut inflight,
                        &mut finished,
                    )
                    .await;
                // Contexts wait for the batch to settle: none is injected at a commit.
                if let Some(early) = faults::contexts_on_commit(&self.faults, &outcome, None) {
                    self.inject_contexts(early);
                }
                outcomes.push(outcome);
                committed[i] = true;
                while next_commit < plans.len() && committed[next_commit] {
                    next_commit += 1;
                }
                continue;
            }
            let cap = faults::pool_cap(&self.faults, self.max_parallel);
            if started.len() < plans.len() && inflight.len() < cap {
                let i = started.len();
                let s = self
                    .polling(self.prepare(&plans[i], step), &mut inflight, &mut finished)
                    .await;
                if self.runs_body(&s.prepared) {
                    inflight.push(Box::pin(self.execute(i, &plans[i], s.exec.clone())));
                }
                started.push(s);
                if faults::batch_abandoned(&self.faults, false) {
                    return;
                }
                continue;
            }
            match inflight.next().await {
                Some((i, result)) => {
                    finished.insert(i, result);
                }
                // Unreachable: the head of line is either settled or in flight.
                None => break,
            }
        }
    }
}
