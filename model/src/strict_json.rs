//! JSON read strictly: a key named twice in one object is an error, with its line and column.
//!
//! `serde_json::Value` keeps the last of two equal keys, as `JSON.parse` does. Where a forged
//! duplicate could mislead (`"conformant": false, "conformant": true` in a report, a session
//! event whose `type` is given twice) the readers parse with [`value_from_str`] instead: one
//! pass, the same `Value`, and the duplicate refused. Typed structs need no help: serde's
//! derive already refuses a field named twice ("duplicate field `x`").
//!
//! A reader that needs only part of a line builds the rest into nothing and still refuses what
//! [`value_from_str`] refuses, with the same error at the same place: [`Skip`] checks a value's
//! keys against a [`Keys`] stack that one line's readers share, and [`StrictValue`] builds the
//! parts it needs. Before either, [`sure::object_members`] settles the usual line without serde:
//! an object it is certain the strict reader accepts, its top-level members as text.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

pub mod sure;

/// Parses `text` as one JSON value, refusing a key named twice in any object. The error is
/// serde_json's, so it carries the line and column ("duplicate key `x` at line 3 column 17").
pub fn value_from_str(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<StrictValue>(text).map(|v| v.0)
}

/// A `Value` whose objects have no key twice: [`value_from_str`]'s reader, for a part of a
/// larger value.
#[derive(Debug)]
pub struct StrictValue(pub Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(deserializer).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
            }
            let StrictValue(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The keys of the objects a strict reader is inside, innermost last: one stack for a whole
/// line, so that checking an object's keys allocates nothing once the stack has grown.
#[derive(Debug, Default)]
pub struct Keys<'de>(Vec<Cow<'de, str>>);

impl<'de> Keys<'de> {
    /// Where the keys of an object about to be read begin.
    pub fn enter(&self) -> usize {
        self.0.len()
    }

    /// Adds a key of the object begun at `start`, refusing one it already has with
    /// [`value_from_str`]'s error.
    pub fn insert<E: de::Error>(&mut self, start: usize, key: Cow<'de, str>) -> Result<(), E> {
        if self.0.get(start..).is_some_and(|keys| keys.contains(&key)) {
            return Err(E::custom(format_args!("duplicate key `{key}`")));
        }
        self.0.push(key);
        Ok(())
    }

    /// Forgets the keys of the object begun at `start`, once it is read.
    pub fn leave(&mut self, start: usize) {
        self.0.truncate(start);
    }
}

/// An object key, borrowed from the input where it has no escapes.
#[derive(Debug, Clone, Copy)]
pub struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// Reads one JSON value and builds nothing, refusing what [`value_from_str`] refuses (a key named
/// twice in an object) with the same error: every scalar is read as `Value` reads it (strings
/// unescaped, numbers parsed), so a text it accepts is one `value_from_str` accepts.
#[derive(Debug)]
pub struct Skip<'k, 'de>(pub &'k mut Keys<'de>);

impl<'de> DeserializeSeed<'de> for Skip<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let start = self.0.enter();
        while let Some(key) = map.next_key_seed(Key)? {
            self.0.insert(start, key)?;
            map.next_value_seed(Skip(&mut *self.0))?;
        }
        self.0.leave(start);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_key_named_twice_is_refused_with_its_line() {
        let text = "{\"a\": 1,\n \"b\": {\"c\": false,\n \"c\": true}}";
        let e = value_from_str(text).unwrap_err().to_string();
        assert!(e.contains("duplicate key `c`"), "{e}");
        assert!(e.contains("line 3"), "{e}");
        // serde_json's own Value keeps the last, which is what the strict reader refuses.
        let lax: Value = serde_json::from_str(text).unwrap();
        assert_eq!(lax["b"]["c"], Value::Bool(true));
    }

    #[test]
    fn without_duplicates_it_reads_what_serde_json_reads() {
        for text in [
            r#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":{"a":1}}"#,
            "[]",
            "18446744073709551615",
            "\"\\u00e9\"",
        ] {
            let lax: Value = serde_json::from_str(text).unwrap();
            assert_eq!(value_from_str(text).unwrap(), lax, "{text}");
        }
        assert!(value_from_str("{} x").is_err());
        assert!(value_from_str(&("[".repeat(200) + &"]".repeat(200))).is_err());
    }

    /// What `Skip` makes of a text: `Ok` or serde_json's error message.
    fn skipped(text: &str) -> Result<(), String> {
        let mut keys = Keys::default();
        let mut de = serde_json::Deserializer::from_str(text);
        Skip(&mut keys)
            .deserialize(&mut de)
            .and_then(|()| de.end())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn skipping_refuses_what_the_strict_reader_refuses_with_its_error() {
        for text in [
            r#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":{"a":1}}"#,
            "{\"a\": 1,\n \"b\": {\"c\": false,\n \"c\": true}}",
            r#"{"a":{"b":1},"b":{"b":2},"a":3}"#,
            r#"{"a\u0062":1,"ab":2}"#,
            r#"[{"x":1},{"x":2},{"y":[{"x":1,"x":1}]}]"#,
            r#"{"a":1,"a":2,"b":[}"#,
            r#"{"b":[},"a":1,"a":2}"#,
            r#"{"a":"\ud800"}"#,
            "{} x",
            "18446744073709551616",
            &("[".repeat(200) + &"]".repeat(200)),
            &("[".repeat(100) + &"]".repeat(100)),
        ] {
            let strict = value_from_str(text).map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(skipped(text), strict, "{text}");
        }
        // Sibling objects may use the same keys; only one object's keys are compared.
        assert_eq!(skipped(r#"{"a":{"a":{"a":1}},"b":{"a":2}}"#), Ok(()));
    }
}
