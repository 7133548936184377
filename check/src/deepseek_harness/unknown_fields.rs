//! Fields a newer harness adds to a pipeline event's data, which tep does not read: found
//! against the JSON Schema of tep's own event types (the types the reader builds) and passed
//! over, so that a log stays readable when the harness adds to its events. What tep reads keeps
//! its shape: a field it needs that is missing, or of another type, is still an error.
//!
//! Only where the type is closed (its schema says `additionalProperties: false`, serde's
//! `deny_unknown_fields`) is a member passed over: elsewhere serde ignores it already. An
//! untagged or tagged choice (`oneOf`, `anyOf`) is read as the branch the value fits: its
//! constant tags match, and of those, the one that knows most of the value's members.

use std::sync::OnceLock;

use serde_json::{Map, Value};
use tep_model::session::SessionEvent;

/// The schema of a session event, made the first time a line needs it.
fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| schemars::schema_for!(SessionEvent).to_value())
}

/// Removes from `event` (a session event's members) every member its type does not declare,
/// where the type refuses undeclared members. Returns where each one was, as a path from the
/// event (`data.message.futureField`; `[]` for any element of an array), in the order found.
pub(super) fn pass_over(event: &mut Value) -> Vec<String> {
    let root = schema();
    let no_defs = Map::new();
    let defs = root
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&no_defs);
    let mut walk = Walk {
        defs,
        passed_over: Vec::new(),
    };
    walk.prune(event, root, "");
    walk.passed_over
}

struct Walk<'s> {
    defs: &'s Map<String, Value>,
    passed_over: Vec<String>,
}

/// How many `$ref`s in a row are followed (tep's schemas have one at a time).
const MAX_REFS: usize = 8;

impl<'s> Walk<'s> {
    /// `schema` with its `$ref`s followed to the definition they name.
    fn resolve(&self, mut schema: &'s Value) -> &'s Value {
        for _ in 0..MAX_REFS {
            let Some(name) = schema
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
            else {
                break;
            };
            match self.defs.get(name) {
                Some(def) => schema = def,
                None => break,
            }
        }
        schema
    }

    fn prune(&mut self, value: &mut Value, schema: &'s Value, path: &str) {
        match value {
            Value::Object(members) => self.prune_object(members, schema, path),
            Value::Array(items) => {
                let Some(item) = self.items(schema) else {
                    return;
                };
                let path = format!("{path}[]");
                for element in items {
                    self.prune(element, item, &path);
                }
            }
            _ => {}
        }
    }

    fn prune_object(&mut self, members: &mut Map<String, Value>, schema: &'s Value, path: &str) {
        let parts = self.object_parts(schema, members);
        if parts.is_empty() {
            return;
        }
        let closed = parts
            .iter()
            .any(|p| p.get("additionalProperties") == Some(&Value::Bool(false)));
        let keys: Vec<String> = members.keys().cloned().collect();
        for key in keys {
            let inner = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match parts.iter().find_map(|p| p.get("properties")?.get(&key)) {
                Some(declared) => {
                    if let Some(member) = members.get_mut(&key) {
                        self.prune(member, declared, &inner);
                    }
                }
                None if closed => {
                    members.remove(&key);
                    self.passed_over.push(inner);
                }
                None => {}
            }
        }
    }

    /// The object schemas that together describe `members`: the schema's own (when it lists
    /// properties) and the one branch of its `oneOf` or `anyOf` that `members` fits best (a
    /// flattened enum's). Empty: the schema says nothing of an object's members, and nothing
    /// of it is passed over (tep's event types use no `allOf`).
    fn object_parts(&self, schema: &'s Value, members: &Map<String, Value>) -> Vec<&'s Value> {
        let schema = self.resolve(schema);
        let mut parts = Vec::new();
        if schema.get("properties").is_some() {
            parts.push(schema);
        }
        for choice in ["oneOf", "anyOf"] {
            let Some(branches) = schema.get(choice).and_then(Value::as_array) else {
                continue;
            };
            let best = branches
                .iter()
                .map(|branch| self.object_parts(branch, members))
                .filter(|branch| !branch.is_empty() && tags_match(branch, members))
                .max_by_key(|branch| std::cmp::Reverse(unknown_members(branch, members)));
            parts.extend(best.into_iter().flatten());
        }
        parts
    }

    /// The schema of an array's elements. (An array the schema reaches only through a
    /// choice is left as it is: none of tep's event types has one.)
    fn items(&self, schema: &'s Value) -> Option<&'s Value> {
        self.resolve(schema).get("items")
    }
}

/// Whether `members` can be the object `parts` describe: every constant tag it declares
/// (`type`, `kind`) has its value there.
fn tags_match(parts: &[&Value], members: &Map<String, Value>) -> bool {
    parts.iter().all(|part| {
        part.get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .all(|(key, declared)| match declared.get("const") {
                Some(tag) => members.get(key) == Some(tag),
                None => true,
            })
    })
}

/// How many of `members` none of `parts` declares.
fn unknown_members(parts: &[&Value], members: &Map<String, Value>) -> usize {
    members
        .keys()
        .filter(|key| {
            !parts.iter().any(|p| {
                p.get("properties")
                    .and_then(|props| props.get(*key))
                    .is_some()
            })
        })
        .count()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    /// The event read from `line` once what it does not declare is passed over, and where
    /// that was.
    fn read(mut line: Value) -> (Result<SessionEvent, String>, Vec<String>) {
        let passed_over = pass_over(&mut line);
        let event = serde_json::from_value(line).map_err(|e| e.to_string());
        (event, passed_over)
    }

    fn tool_result(message: Value) -> Value {
        json!({"seq": 3, "time": 0, "type": "tool/result",
               "data": {"turn": 1, "step": 1, "message": message}})
    }

    fn message() -> Value {
        json!({"id": "m1", "role": "user", "source": {"kind": "tool", "callId": "c1"},
               "content": [{"type": "tool-result", "toolCallId": "c1", "isError": false,
                            "content": [{"type": "text", "text": "ok"}]}]})
    }

    #[test]
    fn a_member_the_data_does_not_declare_is_passed_over() {
        let line = json!({"seq": 1, "time": 0, "type": "hook/invoked",
            "data": {"turn": 1, "point": "PreToolUse", "dialect": "claude-code",
                     "handlerId": "h1", "matcher": null, "sessionKey": "new"}});
        let (event, passed_over) = read(line.clone());
        assert_eq!(passed_over, ["data.sessionKey"]);
        let mut known = line;
        known["data"].as_object_mut().unwrap().remove("sessionKey");
        assert_eq!(event.unwrap(), serde_json::from_value(known).unwrap());
    }

    #[test]
    fn members_are_found_at_every_depth_of_an_untagged_result() {
        let mut added = message();
        added["future"] = json!(1);
        added["content"][0]["future"] = json!({"nested": [1, 2]});
        added["content"][0]["content"][0]["future"] = json!("x");
        let mut line = tool_result(added);
        line["data"]["future"] = json!(true);
        let (event, passed_over) = read(line);
        assert_eq!(
            passed_over,
            [
                "data.future",
                "data.message.content[].content[].future",
                "data.message.content[].future",
                "data.message.future",
            ]
        );
        assert_eq!(
            event.unwrap(),
            serde_json::from_value(tool_result(message())).unwrap()
        );
    }

    #[test]
    fn what_tep_reads_keeps_its_shape() {
        // A member it needs missing, or of another type: still refused.
        let mut missing = message();
        missing.as_object_mut().unwrap().remove("role");
        let mut line = tool_result(missing);
        line["data"]["future"] = json!(1);
        let (event, _) = read(line);
        assert!(event.is_err());
        let line = json!({"seq": 1, "time": 0, "type": "tool/call",
            "data": {"turn": 1, "step": 1, "callId": 7, "name": "read", "arguments": "{}"}});
        let (event, passed_over) = read(line);
        assert!(event.unwrap_err().contains("invalid type"));
        assert!(passed_over.is_empty());
    }

    #[test]
    fn a_log_tep_reads_already_is_left_as_it_is() {
        let line = tool_result(message());
        let mut pruned = line.clone();
        assert!(pass_over(&mut pruned).is_empty());
        assert_eq!(pruned, line);
        // Members of the envelope and of open objects are not tep's to pass over: serde
        // ignores them already.
        let mut line = line;
        line["extra"] = json!(1);
        line["data"]["message"]["source"]["extra"] = json!(2);
        let mut pruned = line.clone();
        assert!(pass_over(&mut pruned).is_empty());
        assert_eq!(pruned, line);
    }
}
