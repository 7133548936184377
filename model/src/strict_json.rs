//! JSON read strictly: a key named twice in one object is an error, with its line and column.
//!
//! `serde_json::Value` keeps the last of two equal keys, as `JSON.parse` does. Where a forged
//! duplicate could mislead (`"conformant": false, "conformant": true` in a report, a session
//! event whose `type` is given twice) the readers parse with [`value_from_str`] instead: one
//! pass, the same `Value`, and the duplicate refused. Typed structs need no help: serde's
//! derive already refuses a field named twice ("duplicate field `x`").

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `text` as one JSON value, refusing a key named twice in any object. The error is
/// serde_json's, so it carries the line and column ("duplicate key `x` at line 3 column 17").
pub fn value_from_str(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<StrictValue>(text).map(|v| v.0)
}

/// A `Value` whose objects have no key twice.
struct StrictValue(Value);

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
}
