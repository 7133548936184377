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
/// Concurrency-safe tools, a pool cap and tools' own timeouts stay off: each is one flag here
/// once the driver plays them.
pub fn restriction(profile: &Profile) -> Restriction {
    let hooks = usize::from(profile.hooks.dialect != HookDialect::None);
    Restriction {
        guards: false,
        wrappers: false,
        observers: false,
        files: false,
        code_mode: false,
        max_pre: hooks,
        max_post: hooks,
        listener_extras: false,
        safe_tools: false,
        pool_cap: false,
        tool_timeouts: false,
        body_extras: false,
        max_sleep_ms: MAX_SLEEP_MS,
        approval_answers: false,
        finalize: false,
        unknown_tools: true,
    }
}
