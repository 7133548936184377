//! One clock for every record: wall-clock milliseconds since the Unix epoch, the clock of the
//! harness's session log (`time` is `Date.now()`), as a float for sub-millisecond order.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}
