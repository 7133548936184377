//! Mutations: bytes (flips, tokens, cuts, splices), lines (drop, repeat, swap, transplant) and
//! JSON values (retype, extreme numbers, dictionary strings, removed or repeated keys, deep
//! nesting). The dictionary is every key and string value of the seeds, so a mutation tends to
//! produce a node, call id or event type the reader knows rather than noise.

use std::collections::BTreeSet;

use serde_json::Value;

/// The largest input a mutation produces: big enough for a long trace, small enough to keep
/// cases fast.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Byte strings that tend to matter to a JSON Lines reader.
const TOKENS: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"null",
    b"true",
    b"-1",
    b"0",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"1e308",
    b"1e999",
    b"-0.0",
    b"\"\\u0000\"",
    b"\"\\ud800\"",
    b"\xff\xfe",
    b"\xe2\x82",
    b"{\"kind\":\"stage\",",
];

#[derive(Debug)]
pub struct Mutator {
    rng: fastrand::Rng,
    dictionary: Vec<String>,
}

impl Mutator {
    pub fn new(seed: u64, seeds: &[Vec<u8>]) -> Mutator {
        let mut words = BTreeSet::new();
        for seed in seeds {
            for line in String::from_utf8_lossy(seed).lines() {
                if let Ok(value) = serde_json::from_str::<Value>(line) {
                    harvest(&value, &mut words);
                }
            }
        }
        Mutator {
            rng: fastrand::Rng::with_seed(seed),
            dictionary: words.into_iter().collect(),
        }
    }

    pub fn rng(&mut self) -> &mut fastrand::Rng {
        &mut self.rng
    }

    /// A mutant of `input`; `others` are inputs to splice from.
    pub fn mutate(&mut self, input: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
        let mut data = input.to_vec();
        for _ in 0..1 + self.rng.usize(..4) {
            match self.rng.u8(..16) {
                0 => self.flip_bit(&mut data),
                1 => self.set_byte(&mut data),
                2 => self.insert_token(&mut data),
                3 => self.delete_range(&mut data),
                4 => self.repeat_range(&mut data),
                5 => self.splice(&mut data, others),
                6..=8 => self.mutate_lines(&mut data, others),
                _ => self.mutate_json_line(&mut data),
            }
        }
        data.truncate(MAX_INPUT_BYTES);
        data
    }

    fn position(&mut self, data: &[u8]) -> usize {
        self.rng.usize(..=data.len())
    }

    fn flip_bit(&mut self, data: &mut [u8]) {
        if !data.is_empty() {
            let i = self.rng.usize(..data.len());
            data[i] ^= 1 << self.rng.u8(..8);
        }
    }

    fn set_byte(&mut self, data: &mut [u8]) {
        if !data.is_empty() {
            let i = self.rng.usize(..data.len());
            data[i] = self.rng.u8(..);
        }
    }

    fn insert_token(&mut self, data: &mut Vec<u8>) {
        let at = self.position(data);
        let token: Vec<u8> = if self.rng.bool() || self.dictionary.is_empty() {
            TOKENS[self.rng.usize(..TOKENS.len())].to_vec()
        } else {
            let word = &self.dictionary[self.rng.usize(..self.dictionary.len())];
            serde_json::to_vec(word).unwrap_or_default()
        };
        data.splice(at..at, token);
    }

    fn delete_range(&mut self, data: &mut Vec<u8>) {
        if data.is_empty() {
            return;
        }
        let from = self.rng.usize(..data.len());
        let to = (from + 1 + self.rng.usize(..64)).min(data.len());
        data.drain(from..to);
    }

    fn repeat_range(&mut self, data: &mut Vec<u8>) {
        if data.is_empty() {
            return;
        }
        let from = self.rng.usize(..data.len());
        let to = (from + 1 + self.rng.usize(..256)).min(data.len());
        let copy = data[from..to].to_vec();
        let at = self.position(data);
        data.splice(at..at, copy);
    }

    fn splice(&mut self, data: &mut Vec<u8>, others: &[Vec<u8>]) {
        if others.is_empty() {
            return;
        }
        let other = &others[self.rng.usize(..others.len())];
        let cut = self.position(data);
        let from = self.rng.usize(..=other.len());
        data.truncate(cut);
        data.extend_from_slice(&other[from..]);
    }

    /// Drops, repeats, swaps or transplants whole lines (records, requests, answers).
    fn mutate_lines(&mut self, data: &mut Vec<u8>, others: &[Vec<u8>]) {
        let mut lines: Vec<Vec<u8>> = data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        let n = lines.len();
        match self.rng.u8(..6) {
            0 => {
                lines.remove(self.rng.usize(..n));
            }
            1 => {
                let i = self.rng.usize(..n);
                let copy = lines[i].clone();
                lines.insert(self.rng.usize(..=n), copy);
            }
            2 => {
                let (i, j) = (self.rng.usize(..n), self.rng.usize(..n));
                lines.swap(i, j);
            }
            3 => {
                // A whole batch again: the same lines, later.
                let from = self.rng.usize(..n);
                let to = (from + 1 + self.rng.usize(..32)).min(n);
                let copy = lines[from..to].to_vec();
                lines.extend(copy);
            }
            4 if !others.is_empty() => {
                let other = &others[self.rng.usize(..others.len())];
                let other: Vec<&[u8]> = other.split(|&b| b == b'\n').collect();
                let line = other[self.rng.usize(..other.len())].to_vec();
                lines.insert(self.rng.usize(..=n), line);
            }
            _ => lines.truncate(self.rng.usize(..=n)),
        }
        *data = lines.join(&b'\n');
    }

    /// Parses one line as JSON, changes one value in it, and writes it back.
    fn mutate_json_line(&mut self, data: &mut Vec<u8>) {
        let mut lines: Vec<Vec<u8>> = data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        let i = self.rng.usize(..lines.len());
        let Ok(mut value) = serde_json::from_slice::<Value>(&lines[i]) else {
            return self.insert_token(data);
        };
        let nodes = count_nodes(&value);
        let target = self.rng.usize(..nodes.max(1));
        let mut seen = 0;
        self.mutate_node(&mut value, target, &mut seen);
        let mut text = serde_json::to_vec(&value).unwrap_or_default();
        if self.rng.u8(..8) == 0 {
            // A key named twice: serde_json::Value cannot hold that, so write it into the text.
            if let Some(key) = first_key(&value) {
                let repeated = format!(
                    "{{{}:null,",
                    serde_json::to_string(&key).unwrap_or_default()
                );
                if text.first() == Some(&b'{') && text.len() > 2 {
                    text.splice(0..1, repeated.into_bytes());
                }
            }
        }
        lines[i] = text;
        *data = lines.join(&b'\n');
    }

    fn mutate_node(&mut self, value: &mut Value, target: usize, seen: &mut usize) -> bool {
        if *seen == target {
            self.change(value);
            return true;
        }
        *seen += 1;
        match value {
            Value::Array(items) => items.iter_mut().any(|v| self.mutate_node(v, target, seen)),
            Value::Object(map) => map.values_mut().any(|v| self.mutate_node(v, target, seen)),
            _ => false,
        }
    }

    fn word(&mut self) -> String {
        if self.dictionary.is_empty() {
            return String::new();
        }
        self.dictionary[self.rng.usize(..self.dictionary.len())].clone()
    }

    fn change(&mut self, value: &mut Value) {
        match self.rng.u8(..14) {
            0 => *value = Value::Null,
            1 => *value = Value::Bool(self.rng.bool()),
            2 => *value = Value::from(u64::MAX),
            3 => *value = Value::from(i64::MIN),
            4 => *value = Value::from(self.rng.u64(..1000)),
            5 => *value = serde_json::json!(1e300),
            6 => *value = Value::String(self.word()),
            7 => *value = Value::String("x".repeat(self.rng.usize(..4096))),
            8 => *value = serde_json::json!([]),
            9 => *value = serde_json::json!({}),
            10 => {
                // Deep nesting (serde_json refuses past 128 levels).
                let mut nested = Value::Null;
                for _ in 0..self.rng.usize(..200) {
                    nested = Value::Array(vec![nested]);
                }
                *value = nested;
            }
            11 => match value {
                Value::Object(map) if !map.is_empty() => {
                    let key = map.keys().nth(self.rng.usize(..map.len())).cloned();
                    if let Some(key) = key {
                        map.remove(&key);
                    }
                }
                Value::Array(items) if !items.is_empty() => {
                    items.remove(self.rng.usize(..items.len()));
                }
                _ => *value = Value::Null,
            },
            12 => match value {
                Value::Object(map) => {
                    let word = self.word();
                    let filler = Value::String(self.word());
                    map.insert(word, filler);
                }
                Value::Array(items) if !items.is_empty() => {
                    let copy = items[self.rng.usize(..items.len())].clone();
                    items.push(copy);
                }
                _ => *value = Value::String(self.word()),
            },
            _ => {
                if let Value::Number(n) = value {
                    let shifted = n.as_i64().unwrap_or(0).wrapping_add(self.rng.i64(-2..=2));
                    *value = Value::from(shifted);
                } else {
                    *value = Value::String(self.word());
                }
            }
        }
    }
}

fn harvest(value: &Value, words: &mut BTreeSet<String>) {
    match value {
        Value::String(s) if s.len() <= 64 => {
            words.insert(s.clone());
        }
        Value::Array(items) => items.iter().for_each(|v| harvest(v, words)),
        Value::Object(map) => {
            for (k, v) in map {
                words.insert(k.clone());
                harvest(v, words);
            }
        }
        _ => {}
    }
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

fn first_key(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) => map.keys().next().cloned(),
        _ => None,
    }
}
