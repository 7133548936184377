//! What `tep fuzz --harness` may generate for a harness: only the constructs [`RunScript::of`]
//! can drive through the profile's public interfaces, as a [`Restriction`] of the generator.
//!
//! [`RunScript::of`]: crate::script::RunScript::of

use tep_conformance::fuzz::Restriction;

use crate::profile::{HookDialect, Profile};

/// The longest sleep a generated body scripts, in ms. The harness is a Node process whose own
/// latency is tens of milliseconds; a scripted sleep only orders work, and MCP tools run one
/// at a time, so it can stay small.
pub const MAX_SLEEP_MS: u64 = 20;

/// The constructs a harness driven through `profile` has a public interface for: exclusive
/// scripted tools (MCP), calls to unknown tools, bodies that sleep and then return or throw,
/// approval answers that are `unavailable` (headless mounts no answerer), and, only with a
/// hook dialect, one pre- and one post-execute listener deciding what a hook command answers.
/// No guards, wrappers, observers, files, Code Mode programs or `finalizeContent`.
///
/// Concurrency-safe tools when the profile names a shipped safe tool that plays them
/// (`[tools.safe]`), and a pool cap when its overlay has a row for one. Tools' own timeouts
/// stay off: the driver maps one only through a `timeout` wrapper, which is not generated.
pub fn restriction(profile: &Profile) -> Restriction {
    let hooks = usize::from(profile.hooks.dialect != HookDialect::None);
    let safe_tools = profile.tools.safe.is_some();
    Restriction {
        guards: false,
        wrappers: false,
        observers: false,
        files: false,
        code_mode: false,
        max_pre: hooks,
        max_post: hooks,
        listener_extras: false,
        safe_tools,
        pool_cap: safe_tools && !profile.overlay.pool_cap_row.is_empty(),
        tool_timeouts: false,
        body_extras: false,
        max_sleep_ms: MAX_SLEEP_MS,
        approval_answers: false,
        finalize: false,
        unknown_tools: true,
    }
}
