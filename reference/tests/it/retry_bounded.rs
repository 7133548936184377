//! The retry wrapper stops after `RetryWrapper::MAX_ATTEMPTS` dispatches, whatever it is told:
//! with no delay no time passes between attempts, so nothing else would stop it.

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use tep_reference::pipeline::ToolRegistry;
use tep_reference::wrappers::RetryWrapper;

#[tokio::test(start_paused = true)]
async fn a_huge_attempt_count_is_capped() {
    // Fails far more often than the cap, then would succeed: only the cap can stop it first.
    let tool = TestTool::new("flaky", Body::FlakyThenOk(10 * RetryWrapper::MAX_ATTEMPTS));
    let dispatches = tool.dispatches.clone();
    let reg = ToolRegistry::builder()
        .tool(tool)
        .wrap(Arc::new(RetryWrapper::new(u32::MAX, Duration::ZERO)))
        .build()
        .unwrap();
    let report = reg.run_batch(vec![call("c1", "flaky")]).await;
    assert_eq!(*dispatches.lock().unwrap(), RetryWrapper::MAX_ATTEMPTS);
    assert!(
        report.outcomes[0].result.is_error,
        "the last attempt failed"
    );
}
