//! Which protocol version introduced each construct of the scenario language.
//!
//! [`CONSTRUCTS`] is the one table: every field and every variant of the scenario types (as the
//! JSON Schema names them) with the protocol version that introduced it. The schema's
//! `x-tep-protocol` annotations ([`schema`]) and the version table of `docs/adapter-protocol.md`
//! are generated from it; the runner and the fuzzer use [`Versions::newer_than`] to send no
//! construct newer than an adapter's declared protocol (such a scenario is N/A).
//!
//! A construct is found in a scenario by walking its JSON (what is sent) beside the schema, so a
//! field or variant added to the types is seen at once; a test fails until it has an entry here.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::Scenario;

/// One construct: a field or a variant of one part of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Construct {
    /// The part it belongs to: the type's name in the schema's `$defs` (without the digits
    /// schemars appends to a generic's instances), or `Scenario`.
    pub part: &'static str,
    /// Its JSON name: a field, a variant (an enum value or an externally tagged key), a tagged
    /// variant's `kind`, or `kind.field` for a field of a tagged variant.
    pub name: &'static str,
    /// The protocol version that introduced it.
    pub since: u32,
}

impl Construct {
    /// How a reader names it: "body step `slowStop`".
    pub fn describe(&self) -> String {
        format!("{} `{}`", part_label(self.part), self.name)
    }
}

/// What each part is called in messages and docs.
pub const PARTS: &[(&str, &str)] = &[
    ("Scenario", "scenario field"),
    ("ToolSpec", "tool field"),
    ("CallSpec", "call field"),
    ("ProgramStep", "program step"),
    ("BindingCall", "binding call field"),
    ("OnReject", "`onReject` value"),
    ("Listener", "listener field"),
    ("PreAction", "pre-execute action"),
    ("ApprovalSpec", "approval field"),
    ("ApprovalAnswer", "approval answer"),
    ("GuardAction", "guard action"),
    ("WrapperSpec", "wrapper"),
    ("ThrowPhase", "wrapper `phase`"),
    ("PostAction", "post-execute action"),
    ("AcceptSpec", "`accept` field"),
    ("BlockSpec", "`block` field"),
    ("ObserverSpec", "observer field"),
    ("FinalizeAction", "`finalize` action"),
    ("BodyStep", "body step"),
    ("WriteSpec", "`write` field"),
    ("EditSpec", "`edit` field"),
    ("HookSpec", "`hook` field"),
    ("Todo", "todo field"),
    ("TodoStatus", "todo status"),
    ("Capability", "capability"),
    ("Revision", "revision"),
    ("Expectation", "`expect` field"),
    ("CallExpectation", "call expectation field"),
    ("ExpectedContext", "expected context field"),
    ("Undetermined", "`expect.undetermined` field"),
];

/// Parts whose values are informative to an adapter (it reads nothing in them): not versioned
/// value by value. The invariant ids of `exercises` grow with the catalog.
pub const OPAQUE_PARTS: &[&str] = &["InvariantId"];

fn part_label(part: &str) -> &str {
    PARTS
        .iter()
        .find(|(p, _)| *p == part)
        .map_or(part, |(_, label)| label)
}

/// The parts of `expect`: judged by tep, never acted on by an adapter.
const EXPECTATION_PARTS: &[&str] = &[
    "Expectation",
    "CallExpectation",
    "ExpectedContext",
    "Undetermined",
];

const fn c(part: &'static str, name: &'static str, since: u32) -> Construct {
    Construct { part, name, since }
}

/// Every construct of the scenario language and the protocol version that introduced it.
///
/// Protocol 1 is the language of the first corpus, Code Mode included. Protocol 2 added
/// `referenceContent` (and made an absent `finalize` mean "no `finalizeContent`"). Protocol 3
/// added what the teeth scenarios try and a conforming pipeline must refuse: `rewrite`, a guard's
/// `allow`, an observer's `mutate`, and `slowStop`.
#[rustfmt::skip]
pub const CONSTRUCTS: &[Construct] = &[
    c("Scenario", "id", 1),
    c("Scenario", "description", 1),
    c("Scenario", "spec", 1),
    c("Scenario", "revisions", 1),
    c("Scenario", "requires", 1),
    c("Scenario", "exercises", 1),
    c("Scenario", "tools", 1),
    c("Scenario", "calls", 1),
    c("Scenario", "pre", 1),
    c("Scenario", "approval", 1),
    c("Scenario", "guards", 1),
    c("Scenario", "wrappers", 1),
    c("Scenario", "post", 1),
    c("Scenario", "observers", 1),
    c("Scenario", "files", 1),
    c("Scenario", "maxParallel", 1),
    c("Scenario", "expect", 1),
    c("ToolSpec", "name", 1),
    c("ToolSpec", "concurrencySafe", 1),
    c("ToolSpec", "timeoutMs", 1),
    c("ToolSpec", "finalize", 1),
    c("CallSpec", "callId", 1),
    c("CallSpec", "tool", 1),
    c("CallSpec", "arguments", 1),
    c("CallSpec", "body", 1),
    c("CallSpec", "program", 1),
    c("ProgramStep", "call", 1),
    c("ProgramStep", "all", 1),
    c("ProgramStep", "callRunCode", 1),
    c("ProgramStep", "log", 1),
    c("ProgramStep", "return", 1),
    c("ProgramStep", "throw", 1),
    c("BindingCall", "tool", 1),
    c("BindingCall", "arguments", 1),
    c("BindingCall", "body", 1),
    c("BindingCall", "onReject", 1),
    c("OnReject", "continue", 1),
    c("OnReject", "fail", 1),
    c("Listener", "id", 1),
    c("Listener", "decide", 1),
    c("PreAction", "pass", 1),
    c("PreAction", "allow", 1),
    c("PreAction", "deny", 1),
    c("PreAction", "ask", 1),
    c("PreAction", "rewrite", 3),
    c("PreAction", "throw", 1),
    c("ApprovalSpec", "answers", 1),
    c("ApprovalAnswer", "allowed-once", 1),
    c("ApprovalAnswer", "rejected", 1),
    c("ApprovalAnswer", "cancelled", 1),
    c("ApprovalAnswer", "unavailable", 1),
    c("ApprovalAnswer", "throw", 1),
    c("GuardAction", "abstain", 1),
    c("GuardAction", "deny", 1),
    c("GuardAction", "allow", 3),
    c("GuardAction", "throw", 1),
    c("WrapperSpec", "timeout", 1),
    c("WrapperSpec", "retry", 1),
    c("WrapperSpec", "retry.attempts", 1),
    c("WrapperSpec", "retry.delayMs", 1),
    c("WrapperSpec", "metrics", 1),
    c("WrapperSpec", "context", 1),
    c("WrapperSpec", "context.text", 1),
    c("WrapperSpec", "context.calls", 1),
    c("WrapperSpec", "throw", 1),
    c("WrapperSpec", "throw.message", 1),
    c("WrapperSpec", "throw.phase", 1),
    c("WrapperSpec", "throw.calls", 1),
    c("ThrowPhase", "before", 1),
    c("ThrowPhase", "after", 1),
    c("PostAction", "pass", 1),
    c("PostAction", "addContext", 1),
    c("PostAction", "accept", 1),
    c("PostAction", "block", 1),
    c("PostAction", "throw", 1),
    c("AcceptSpec", "content", 1),
    c("AcceptSpec", "value", 1),
    c("AcceptSpec", "context", 1),
    c("BlockSpec", "feedback", 1),
    c("BlockSpec", "context", 1),
    c("ObserverSpec", "id", 1),
    c("ObserverSpec", "asyncMs", 1),
    c("ObserverSpec", "mutate", 3),
    c("FinalizeAction", "keep", 1),
    c("FinalizeAction", "prefix", 1),
    c("FinalizeAction", "replace", 1),
    c("FinalizeAction", "throw", 1),
    c("BodyStep", "sleep", 1),
    c("BodyStep", "hang", 1),
    c("BodyStep", "slowStop", 3),
    c("BodyStep", "read", 1),
    c("BodyStep", "write", 1),
    c("BodyStep", "edit", 1),
    c("BodyStep", "externalWrite", 1),
    c("BodyStep", "todo", 1),
    c("BodyStep", "hook", 1),
    c("BodyStep", "deferContext", 1),
    c("BodyStep", "failUntilAttempt", 1),
    c("BodyStep", "return", 1),
    c("BodyStep", "throw", 1),
    c("WriteSpec", "path", 1),
    c("WriteSpec", "content", 1),
    c("EditSpec", "path", 1),
    c("EditSpec", "old", 1),
    c("EditSpec", "new", 1),
    c("HookSpec", "point", 1),
    c("HookSpec", "handlerId", 1),
    c("HookSpec", "decision", 1),
    c("Todo", "content", 1),
    c("Todo", "status", 1),
    c("TodoStatus", "pending", 1),
    c("TodoStatus", "in_progress", 1),
    c("TodoStatus", "completed", 1),
    c("Capability", "approval", 1),
    c("Capability", "fs-gate", 1),
    c("Capability", "parallel", 1),
    c("Capability", "owned-events", 1),
    c("Capability", "ui", 1),
    c("Capability", "code-mode", 1),
    c("Revision", "rev1", 1),
    c("Revision", "rev2", 1),
    c("Expectation", "calls", 1),
    c("Expectation", "contexts", 1),
    c("CallExpectation", "isError", 1),
    c("CallExpectation", "bodyRuns", 1),
    c("CallExpectation", "postRuns", 1),
    c("CallExpectation", "content", 1),
    c("CallExpectation", "contentIncludes", 1),
    c("CallExpectation", "errorCode", 1),
    c("CallExpectation", "preRuns", 3),
    c("CallExpectation", "approvalRuns", 3),
    c("CallExpectation", "guardRuns", 3),
    c("Expectation", "undetermined", 3),
    c("Undetermined", "calls", 3),
    c("Undetermined", "contexts", 3),
    c("CallExpectation", "referenceContent", 2),
    c("ExpectedContext", "call", 1),
    c("ExpectedContext", "text", 1),
];

/// The entry of a construct, if the table has one.
pub fn entry(part: &str, name: &str) -> Option<&'static Construct> {
    CONSTRUCTS.iter().find(|c| c.part == part && c.name == name)
}

/// The newest protocol version of the language.
pub fn newest() -> u32 {
    CONSTRUCTS.iter().map(|c| c.since).max().unwrap_or(1)
}

/// A construct a scenario uses, by part and JSON name (found by [`Versions::used`]).
pub type Used = (String, String);

/// The scenario schema and what the walk over it needs: built once.
#[derive(Debug)]
pub struct Versions {
    root: Value,
    defs: Map<String, Value>,
}

/// The scenario schema and the walk over it.
pub fn versions() -> &'static Versions {
    static VERSIONS: OnceLock<Versions> = OnceLock::new();
    VERSIONS.get_or_init(|| {
        let root = serde_json::to_value(schemars::schema_for!(Scenario)).unwrap_or(Value::Null);
        let defs = root
            .get("$defs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Versions { root, defs }
    })
}

/// A `$defs` name without the digits schemars appends to a generic's instances
/// (`Listener2` is a `Listener`).
fn part_of(def: &str) -> &str {
    def.trim_end_matches(|c: char| c.is_ascii_digit())
}

fn def_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
}

impl Versions {
    /// Every construct the schema has, by part and JSON name.
    pub fn all(&self) -> BTreeSet<Used> {
        let mut out = BTreeSet::new();
        members(&self.root, "Scenario", &mut out);
        for (def, schema) in &self.defs {
            let part = part_of(def);
            if !OPAQUE_PARTS.contains(&part) {
                members(schema, part, &mut out);
            }
        }
        out
    }

    /// The constructs a scenario uses: what its JSON, as sent, holds.
    pub fn used(&self, scenario: &Scenario) -> BTreeSet<Used> {
        let mut out = BTreeSet::new();
        if let Ok(value) = serde_json::to_value(scenario) {
            self.walk(&value, &self.root, "Scenario", &mut out);
        }
        out
    }

    /// The constructs a scenario uses that are newer than `protocol`, oldest first. A construct
    /// the table lacks counts as newest (a test keeps the table complete).
    pub fn newer_than(&self, scenario: &Scenario, protocol: u32) -> Vec<NewerConstruct> {
        let mut newer: Vec<NewerConstruct> = self
            .used(scenario)
            .into_iter()
            // What `expect` says is tep's to judge; an adapter never acts on it, so an
            // expectation field is no reason to withhold a scenario.
            .filter(|(part, _)| !EXPECTATION_PARTS.contains(&part.as_str()))
            .filter_map(|(part, name)| {
                let since = entry(&part, &name).map_or(newest(), |c| c.since);
                (since > protocol).then(|| NewerConstruct {
                    describe: format!("{} `{name}`", part_label(&part)),
                    since,
                })
            })
            .collect();
        newer.sort_by(|a, b| (a.since, &a.describe).cmp(&(b.since, &b.describe)));
        newer
    }

    /// The lowest protocol version that has every construct the scenario uses (its
    /// expectations aside: tep judges them, the adapter never reads them).
    pub fn needs(&self, scenario: &Scenario) -> u32 {
        self.used(scenario)
            .iter()
            .filter(|(part, _)| !EXPECTATION_PARTS.contains(&part.as_str()))
            .map(|(part, name)| entry(part, name).map_or(newest(), |c| c.since))
            .max()
            .unwrap_or(1)
    }

    fn walk(&self, value: &Value, schema: &Value, part: &str, out: &mut BTreeSet<Used>) {
        if let Some(def) = def_name(schema) {
            let part = part_of(def);
            if OPAQUE_PARTS.contains(&part) {
                return;
            }
            if let Some(schema) = self.defs.get(def) {
                self.walk(value, schema, part, out);
            }
            return;
        }
        if value.is_null() {
            return;
        }
        if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
            // `Option<T>`: the branch that is not `null`.
            if let Some(branch) = branches.iter().find(|b| !is_null_schema(b)) {
                self.walk(value, branch, part, out);
            }
            return;
        }
        if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
            self.walk_variant(value, branches, part, out);
            return;
        }
        match value {
            Value::Object(object) => {
                let properties = schema.get("properties").and_then(Value::as_object);
                let extra = schema.get("additionalProperties").filter(|s| s.is_object());
                for (key, item) in object {
                    if let Some(field) = properties.and_then(|p| p.get(key)) {
                        out.insert((part.to_owned(), key.clone()));
                        self.walk(item, field, part, out);
                    } else if let Some(values) = extra {
                        // A map: its keys are data (call ids, paths).
                        self.walk(item, values, part, out);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for item in items {
                        self.walk(item, item_schema, part, out);
                    }
                }
            }
            Value::String(s) if schema.get("enum").is_some() => {
                out.insert((part.to_owned(), s.clone()));
            }
            _ => {}
        }
    }

    /// A value of an enum: a unit variant (a string), an externally tagged variant (an object
    /// with one key) or a variant tagged by `kind`.
    fn walk_variant(
        &self,
        value: &Value,
        branches: &[Value],
        part: &str,
        out: &mut BTreeSet<Used>,
    ) {
        match value {
            Value::String(s) => {
                out.insert((part.to_owned(), s.clone()));
            }
            Value::Object(object) => {
                if let Some(kind) = object.get("kind").and_then(Value::as_str) {
                    let Some(branch) = branches.iter().find(|b| tag_of(b) == Some(kind)) else {
                        out.insert((part.to_owned(), kind.to_owned()));
                        return;
                    };
                    out.insert((part.to_owned(), kind.to_owned()));
                    for (key, item) in object.iter().filter(|(k, _)| *k != "kind") {
                        out.insert((part.to_owned(), format!("{kind}.{key}")));
                        if let Some(field) = branch.pointer(&format!("/properties/{key}")) {
                            self.walk(item, field, part, out);
                        }
                    }
                } else if let Some((key, item)) = object.iter().next() {
                    out.insert((part.to_owned(), key.clone()));
                    let field = branches
                        .iter()
                        .find_map(|b| b.pointer(&format!("/properties/{key}")));
                    if let Some(field) = field {
                        self.walk(item, field, part, out);
                    }
                }
            }
            _ => {}
        }
    }

    /// The scenario schema with every construct annotated `x-tep-protocol` (an enum listed as
    /// one `enum` gets a map from each value to its version).
    pub fn annotated_schema(&self) -> Value {
        let mut root = self.root.clone();
        annotate(&mut root, "Scenario");
        if let Some(defs) = root.get_mut("$defs").and_then(Value::as_object_mut) {
            for (def, schema) in defs.iter_mut() {
                let part = part_of(def).to_owned();
                if !OPAQUE_PARTS.contains(&part.as_str()) {
                    annotate(schema, &part);
                }
            }
        }
        root
    }
}

/// A construct newer than an adapter's protocol, for the N/A reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewerConstruct {
    /// "body step `slowStop`".
    pub describe: String,
    pub since: u32,
}

/// The scenario schema, annotated: what `docs/schemas/scenario.schema.json` holds.
pub fn schema() -> Value {
    versions().annotated_schema()
}

/// The reason a scenario is N/A for an adapter declaring `protocol`, if it is.
pub fn not_applicable(scenario: &Scenario, protocol: u32) -> Option<String> {
    let newer = versions().newer_than(scenario, protocol);
    let needs = newer.iter().map(|n| n.since).max()?;
    let named: Vec<&str> = newer.iter().map(|n| n.describe.as_str()).collect();
    Some(format!(
        "N/A: it uses {} (protocol {needs}); the adapter declares protocol {protocol}",
        named.join(", ")
    ))
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// The `kind` a tagged variant's branch carries.
fn tag_of(branch: &Value) -> Option<&str> {
    branch
        .pointer("/properties/kind/const")
        .and_then(Value::as_str)
}

/// The names of a variant branch: its `const`, its `enum` values, its `kind`, or its one key.
fn branch_names(branch: &Value) -> Vec<String> {
    if let Some(s) = branch.get("const").and_then(Value::as_str) {
        return vec![s.to_owned()];
    }
    if let Some(values) = branch.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
    }
    if let Some(kind) = tag_of(branch) {
        return vec![kind.to_owned()];
    }
    branch
        .get("required")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str)
        .map(|k| vec![k.to_owned()])
        .unwrap_or_default()
}

/// The construct names of one schema (the root or a `$defs` entry).
fn members(schema: &Value, part: &str, out: &mut BTreeSet<Used>) {
    let mut add = |name: String| {
        out.insert((part.to_owned(), name));
    };
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        properties.keys().cloned().for_each(&mut add);
    }
    for value in schema
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(s) = value.as_str() {
            add(s.to_owned());
        }
    }
    for branch in schema
        .get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for name in branch_names(branch) {
            add(name);
        }
        if let Some(kind) = tag_of(branch) {
            let fields = branch.get("properties").and_then(Value::as_object);
            for key in fields.into_iter().flat_map(|f| f.keys()) {
                if key != "kind" {
                    add(format!("{kind}.{key}"));
                }
            }
        }
    }
}

fn since(part: &str, name: &str) -> Value {
    entry(part, name).map_or(Value::Null, |c| Value::from(c.since))
}

const KEY: &str = "x-tep-protocol";

/// Writes each construct's version into its own subschema.
fn annotate(schema: &mut Value, part: &str) {
    if let Some(values) = schema.get("enum").and_then(Value::as_array).cloned()
        && let Some(map) = schema.as_object_mut()
    {
        map.insert(KEY.to_owned(), enum_versions(part, &values));
    }
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for (key, field) in properties.iter_mut() {
            insert(field, since(part, key));
        }
    }
    let Some(branches) = schema.get_mut("oneOf").and_then(Value::as_array_mut) else {
        return;
    };
    for branch in branches {
        if let Some(values) = branch.get("enum").and_then(Value::as_array).cloned() {
            insert(branch, enum_versions(part, &values));
            continue;
        }
        let names = branch_names(branch);
        let kind = tag_of(branch).map(str::to_owned);
        if let Some(name) = names.first() {
            insert(branch, since(part, name));
        }
        if let Some(kind) = kind
            && let Some(fields) = branch.get_mut("properties").and_then(Value::as_object_mut)
        {
            for (key, field) in fields.iter_mut().filter(|(k, _)| *k != "kind") {
                insert(field, since(part, &format!("{kind}.{key}")));
            }
        }
    }
}

fn enum_versions(part: &str, values: &[Value]) -> Value {
    let map: BTreeMap<String, Value> = values
        .iter()
        .filter_map(Value::as_str)
        .map(|v| (v.to_owned(), since(part, v)))
        .collect();
    serde_json::to_value(map).unwrap_or(Value::Null)
}

fn insert(schema: &mut Value, since: Value) {
    if since.is_null() {
        return;
    }
    if schema == &Value::Bool(true) {
        // `true` accepts anything, and so does an object with only annotations.
        *schema = Value::Object(Map::new());
    }
    if let Some(map) = schema.as_object_mut() {
        map.insert(KEY.to_owned(), since);
    }
}
