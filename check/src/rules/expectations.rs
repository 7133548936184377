//! Drive mode: does a trace end the way the scenario's scripts determine?
//!
//! The two catalog entries live here, with the other rules; the check itself needs the
//! scenario, so it is drive mode's (`tep_conformance::expectations`). Everything is read from
//! the trace itself (dispatches, post-execute visits, the recorded
//! outcomes, the injected contexts), so an adapter reports nothing but its trace. Only what the
//! scripts and the spec (or the reference semantics) fix is checked: the outcome's `isError`,
//! how often bodies ran, whether post-execute ran and the injected contexts are MUST; texts the
//! reference semantics fix (`Error: <reason>`, a timeout's message) and error codes are SHOULD.
//! The reference's own wording where nothing fixes it (`referenceContent`) is only shown, as a
//! note, when an implementation words it differently.

use super::Rule;
use crate::invariants::{
    CheckKind::Expectation,
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Scenario as Scripts, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Events;

pub(crate) const EXPECTED_OUTCOME: Rule = Rule::new(entry(
    I::ExpectedOutcome,
    Must,
    "The run ends as the scenario's scripts determine: each call's `isError` and the injected contexts (at every level), which bodies ran and how often, and whether post-execute ran (from level `hooks`).",
    &[Scripts],
    Expectation,
    Events,
    &[Read::Scenario],
));

pub(crate) const EXPECTED_CONTENT: Rule = Rule::new(entry(
    I::ExpectedContent,
    Should,
    "The model-facing content and error codes are those the scripts and the reference semantics fix (`Error: <reason>` for a denial or a throw, the timeout's message, content kept verbatim); other wording is only shown for information.",
    &[Scripts, Semantics(&[22, 31, 42])],
    Expectation,
    Events,
    &[Read::Scenario],
));
