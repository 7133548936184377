//! Validating a scenario: what serde cannot check, the references between its fields.

use std::collections::BTreeSet;

use tep_model::identity::CallId;
use tep_model::trace::Capability;

use super::{Scenario, ScenarioError, WrapperSpec, limits};
use tep_check::invariant;

impl Scenario {
    /// Checks what serde cannot: references between fields.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        limits::check_scenario(self)?;
        let fail = |message: String| ScenarioError {
            id: self.id.clone(),
            message,
        };
        self.check_naming().map_err(fail)?;
        let ids = self.check_batch().map_err(fail)?;
        self.check_references(&ids).map_err(fail)?;
        let declared: BTreeSet<Capability> = self.requires.iter().copied().collect();
        if let Some(missing) = self.used_capabilities().difference(&declared).next() {
            return Err(fail(format!(
                "the scripts use {missing} but `requires` does not list it"
            )));
        }
        Ok(())
    }

    /// The id, the revisions and what the scenario exercises; the error is the message.
    fn check_naming(&self) -> Result<(), String> {
        if self.id.is_empty()
            || !self
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err("the id must be kebab-case ASCII".into());
        }
        if self.revisions.is_empty() {
            return Err("`revisions` is empty".into());
        }
        if self.exercises.is_empty() {
            return Err(
                "`exercises` is empty: name the invariants the scenario would catch".into(),
            );
        }
        for id in &self.exercises {
            if !self.revisions.iter().any(|&r| invariant(*id).applies_to(r)) {
                return Err(format!(
                    "it exercises {id}, which applies to none of its revisions"
                ));
            }
        }
        Ok(())
    }

    /// The calls and tools of the batch, each named once, `run_code` only with a program;
    /// returns the call ids. The error is the message.
    fn check_batch(&self) -> Result<BTreeSet<&str>, String> {
        let mut ids = BTreeSet::new();
        for call in &self.calls {
            if !ids.insert(call.call_id.as_str()) {
                return Err(format!("duplicate call id {}", call.call_id));
            }
        }
        if self.calls.is_empty() {
            return Err("the batch has no calls".into());
        }
        let mut names = BTreeSet::new();
        for tool in &self.tools {
            if !names.insert(tool.name.as_str()) {
                return Err(format!("duplicate tool {}", tool.name));
            }
        }
        for call in &self.calls {
            let is_run_code = call.tool == tep_model::RUN_CODE;
            if is_run_code != call.program.is_some() {
                return Err(format!(
                    "call {}: a `run_code` call needs a `program`, and only a `run_code` call may have one",
                    call.call_id
                ));
            }
        }
        if self.tools.iter().any(|t| t.name == tep_model::RUN_CODE) {
            return Err("`run_code` is reserved and cannot be a tool".into());
        }
        Ok(ids)
    }

    /// Every call a script, a wrapper or an expectation names is in the batch (`ids`, or a
    /// sub-call of its programs); the error is the message.
    fn check_references(&self, ids: &BTreeSet<&str>) -> Result<(), String> {
        let sub_ids: Vec<String> = self
            .all_sub_calls()
            .iter()
            .map(|(id, _)| id.to_string())
            .collect();
        let known =
            |key: &String| key == "*" || ids.contains(key.as_str()) || sub_ids.contains(key);
        let keys = self
            .pre
            .iter()
            .flat_map(|l| l.decide.keys())
            .chain(self.guards.iter().flat_map(|l| l.decide.keys()))
            .chain(self.post.iter().flat_map(|l| l.decide.keys()))
            .chain(self.approval.iter().flat_map(|a| a.answers.keys()));
        for key in keys {
            if !known(key) {
                return Err(format!(
                    "a script names call {key}, which is not in the batch"
                ));
            }
        }
        for wrapper in &self.wrappers {
            if let WrapperSpec::Context { calls, .. } | WrapperSpec::Throw { calls, .. } = wrapper
                && let Some(c) = calls
                    .iter()
                    .find(|c| !ids.contains(c.as_str()) && !sub_ids.iter().any(|s| s == c.as_str()))
            {
                return Err(format!(
                    "a wrapper names call {c}, which is not in the batch"
                ));
            }
        }
        let expected: BTreeSet<&str> = self
            .expect
            .calls
            .keys()
            .map(String::as_str)
            .chain(self.expect.undetermined.calls.iter().map(CallId::as_str))
            .collect();
        let top: BTreeSet<&str> = expected
            .iter()
            .copied()
            .filter(|k| ids.contains(k))
            .collect();
        let stray = expected
            .iter()
            .any(|k| !ids.contains(k) && !sub_ids.iter().any(|s| s == k));
        if top != *ids || stray {
            return Err(
                "`expect.calls` must have one entry per call (and may have one per sub-call), unless `expect.undetermined.calls` lists it"
                    .into(),
            );
        }
        for ctx in &self.expect.contexts {
            if !ids.contains(ctx.call.as_str()) {
                return Err(format!(
                    "an expected context names call {}, which is not in the batch",
                    ctx.call
                ));
            }
        }
        Ok(())
    }
}
