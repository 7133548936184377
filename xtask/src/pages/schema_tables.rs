//! JSON Schema tables: the field tables and type appendices the pages print from the schemas.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::cell;

pub(super) fn def_name(reference: &str) -> &str {
    reference.rsplit('/').next().unwrap_or(reference)
}

/// Renders schema types for one page, collecting the object types it refers to so the page can
/// describe them too.
pub(super) struct Types<'a> {
    defs: &'a Value,
    referenced: BTreeSet<String>,
    /// Types the page describes in sections of its own (they carry an anchor of that name).
    described: BTreeSet<String>,
}

impl<'a> Types<'a> {
    pub(super) fn new(defs: &'a Value) -> Self {
        Types {
            defs,
            referenced: BTreeSet::new(),
            described: BTreeSet::new(),
        }
    }

    /// Marks `name` as described by the page itself; returns the anchor to put there.
    pub(super) fn describe(&mut self, name: &str) -> String {
        self.described.insert(name.to_owned());
        format!("<a id=\"{}\"></a>", name.to_lowercase())
    }

    /// A short type: `string`, `array of ContentBlock`, `"tool/call"`, `"allow" | "deny"`.
    fn type_of(&mut self, schema: &Value) -> String {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = def_name(r);
            let def = &self.defs[name];
            // Strings, enums of strings, and unions of constants read better inline.
            let inline = def.get("properties").is_none()
                && def.get("oneOf").is_none_or(|v| {
                    v.as_array()
                        .is_some_and(|vs| vs.iter().all(|x| x.get("const").is_some()))
                });
            if inline && def.get("anyOf").is_none() {
                return self.type_of(&def.clone());
            }
            self.referenced.insert(name.to_owned());
            return format!("[`{name}`](#{})", name.to_lowercase());
        }
        if let Some(c) = schema.get("const") {
            return format!("`{c}`");
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return values
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(" | ");
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(parts) = schema.get(key).and_then(Value::as_array) {
                let parts: Vec<String> = parts
                    .iter()
                    .filter(|p| p.get("type") != Some(&json!("null")))
                    .map(|p| self.type_of(p))
                    .collect();
                return parts.join(" or ");
            }
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect(),
            _ => vec![],
        };
        match types.as_slice() {
            ["array"] => match schema.get("items") {
                Some(items) => format!("array of {}", self.type_of(items)),
                None => "array".to_owned(),
            },
            [] => "any JSON".to_owned(),
            ts => ts.join(" or "),
        }
    }

    /// A `| field | type | required | meaning |` table of an object schema's properties.
    pub(super) fn fields_table(&mut self, schema: &Value) -> String {
        let mut out = String::from("| field | type | required | meaning |\n|---|---|---|---|\n");
        let required: BTreeSet<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                let description = prop
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let ty = self.type_of(prop);
                let _ = writeln!(
                    out,
                    "| `{name}` | {} | {} | {} |",
                    cell(&ty),
                    if required.contains(name.as_str()) {
                        "yes"
                    } else {
                        "no"
                    },
                    cell(description)
                );
            }
        }
        out
    }

    /// A section per referenced object type, following references until none is new.
    pub(super) fn appendix(&mut self) -> String {
        let mut out = String::new();
        let mut done: BTreeSet<String> = self.described.clone();
        while let Some(name) = self.referenced.difference(&done).next().cloned() {
            done.insert(name.clone());
            let def = self.defs[&name].clone();
            let _ = writeln!(out, "### {name}\n");
            if let Some(d) = def.get("description").and_then(Value::as_str) {
                let _ = writeln!(out, "{d}\n");
            }
            let variants = def
                .get("oneOf")
                .or_else(|| def.get("anyOf"))
                .and_then(Value::as_array)
                .cloned();
            match variants {
                Some(variants) => {
                    for v in &variants {
                        if let Some(d) = v.get("description").and_then(Value::as_str) {
                            let _ = writeln!(out, "{d}\n");
                        }
                        if v.get("properties").is_some() {
                            out.push_str(&self.fields_table(v));
                        } else {
                            let _ = writeln!(out, "- {}", self.type_of(v));
                        }
                        out.push('\n');
                    }
                }
                None => {
                    out.push_str(&self.fields_table(&def));
                    out.push('\n');
                }
            }
        }
        out
    }
}

pub(super) fn schema_of<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

/// The description and the object schema(s) of a definition (variants for an untagged enum).
pub(super) fn definition<'a>(defs: &'a Value, name: &str) -> Vec<&'a Value> {
    let Some(def) = defs.get(name) else {
        return vec![];
    };
    match def
        .get("anyOf")
        .or_else(|| def.get("oneOf"))
        .and_then(Value::as_array)
    {
        Some(variants) => variants
            .iter()
            .filter_map(|v| v.get("$ref").and_then(Value::as_str))
            .filter_map(|r| defs.get(def_name(r)))
            .collect(),
        None => vec![def],
    }
}
