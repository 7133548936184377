//! The names the docs may write in code spans: extension points, callbacks, components and
//! fields, next to the session event types, node ids and capabilities other modules define.
//!
//! `cargo xtask docs --check` fails when curated prose names something in backticks that is not
//! here, not a session event type and not a graph node: that is how prose and code stay in step.

use crate::graph::{NodeId, StageGraph};
use crate::session::EventBody;

/// What a known name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermKind {
    /// A registry extension point.
    ExtensionPoint,
    /// A callback a tool definition provides.
    Callback,
    /// A filesystem intent gated below the fs tools.
    FsIntent,
    /// A component or reserved tool.
    Component,
    /// A field of a result or a call.
    Field,
}

/// A name the docs may use, with what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    pub name: &'static str,
    pub kind: TermKind,
    pub meaning: &'static str,
}

/// Every extension point, callback, component and field the docs refer to.
pub const TERMS: &[Term] = &[
    Term {
        name: "tools/pre-execute",
        kind: TermKind::ExtensionPoint,
        meaning: "Ordered waterfall before dispatch; each listener passes on or decides allow, deny or ask.",
    },
    Term {
        name: "ctx.approval",
        kind: TermKind::ExtensionPoint,
        meaning: "One-shot approval prompt that answers an ask; absent or unanswerable means deny.",
    },
    Term {
        name: "tools/execute",
        kind: TermKind::ExtensionPoint,
        meaning: "Waterfall of wrappers around dispatch of the tool body (timeout, retry, metrics).",
    },
    Term {
        name: "tools/post-execute",
        kind: TermKind::ExtensionPoint,
        meaning: "Ordered waterfall after dispatch: accept, block, replace content, add context.",
    },
    Term {
        name: "tools/result",
        kind: TermKind::ExtensionPoint,
        meaning: "Notification of the frozen, authoritative outcome of a call.",
    },
    Term {
        name: "tools/code-dispatch-log",
        kind: TermKind::ExtensionPoint,
        meaning: "Waterfall that may reshape the durable copy of a Code Mode dispatch event.",
    },
    Term {
        name: "finalizeContent",
        kind: TermKind::Callback,
        meaning: "Definition-owned, synchronous, content-only transform, called exactly once per call.",
    },
    Term {
        name: "isConcurrencySafe",
        kind: TermKind::Callback,
        meaning: "Definition-owned classifier; only an exact true lets a call overlap others in tools/execute.",
    },
    Term {
        name: "fs/write-intent",
        kind: TermKind::FsIntent,
        meaning: "Gate for creating or overwriting a file.",
    },
    Term {
        name: "fs/edit-intent",
        kind: TermKind::FsIntent,
        meaning: "Gate for changing an existing file; refused unless read at its current version.",
    },
    Term {
        name: "tool-fs",
        kind: TermKind::Component,
        meaning: "The filesystem tools; read-before-edit checks live below them.",
    },
    Term {
        name: "run_code",
        kind: TermKind::Component,
        meaning: "The reserved Code Mode transport tool; cannot be registered, shadowed or called from a program.",
    },
    Term {
        name: "additionalContexts",
        kind: TermKind::Field,
        meaning: "Model-visible texts a call asks to inject after the batch's results.",
    },
    Term {
        name: "ctx.tools.execute()",
        kind: TermKind::ExtensionPoint,
        meaning: "The entry a Code Mode binding call re-enters the pipeline through (rev1's words).",
    },
    Term {
        name: "additionalContext",
        kind: TermKind::Field,
        meaning: "rev1's single model-visible context per result, injected as a buffered context/message.",
    },
    Term {
        name: "@deepseek-ai/dsh-timeout-policy",
        kind: TermKind::Component,
        meaning: "The original harness's tool-call timeout policy, a tools/execute wrapper (named by rev1).",
    },
    Term {
        name: "isError",
        kind: TermKind::Field,
        meaning: "Whether a result is a failure; every throw is normalized into one.",
    },
];

/// Whether `name` is a name the project knows: a term, a session event type (of any revision),
/// a node id or a code name of a node label. `prefix/*` matches when some known name starts
/// with `prefix/`.
pub fn is_known(name: &str) -> bool {
    let known = |candidate: &str| -> bool {
        TERMS.iter().any(|t| t.name == candidate)
            || EventBody::TYPES.contains(&candidate)
            || crate::trace::Capability::ALL
                .iter()
                .any(|c| c.as_str() == candidate)
            || crate::graph::Revision::ALL.iter().any(|&r| {
                let g = StageGraph::of(r);
                g.nodes().iter().any(|n| {
                    g.decisive_outcomes(n.id)
                        .iter()
                        .any(|o| o.as_str() == candidate)
                })
            })
            || NodeId::ALL.iter().any(|n| n.as_str() == candidate)
            || crate::graph::Revision::ALL.iter().any(|&r| {
                StageGraph::of(r).code_names().contains(&candidate)
                    || StageGraph::code_mode(r).code_names().contains(&candidate)
            })
    };
    match name.strip_suffix('*') {
        Some(prefix) if prefix.ends_with('/') => TERMS
            .iter()
            .map(|t| t.name)
            .chain(EventBody::TYPES)
            .any(|n| n.starts_with(prefix)),
        _ => known(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_terms_events_nodes_and_globs() {
        assert!(is_known("tools/pre-execute"));
        assert!(is_known("tool/code-dispatch"));
        assert!(is_known("fsGate"));
        assert!(is_known("fs/*"));
        assert!(!is_known("tools/pre-exec"));
        assert!(!is_known("zz/*"));
        // A name from each source: an event type, a capability, a decisive outcome, a node id.
        assert!(is_known("todo/write"));
        assert!(is_known("owned-events"));
        assert!(is_known("allowed-once"));
        assert!(is_known("presentResult"));
        // A glob is a prefix ending in `/`; anything else is a name.
        assert!(!is_known("fs*"));
    }

    #[test]
    fn every_label_code_name_is_a_term_or_an_event() {
        for rev in crate::graph::Revision::ALL {
            let graphs = [StageGraph::of(rev), StageGraph::code_mode(rev)];
            for name in graphs.iter().flat_map(|g| g.code_names()) {
                assert!(
                    TERMS.iter().any(|t| t.name == name) || EventBody::TYPES.contains(&name),
                    "{name} is written in a label but defined nowhere"
                );
            }
        }
    }
}
