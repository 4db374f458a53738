//! Writing a profile so that what did not change keeps its text (spec 01 §4: the keys a plugin
//! or runtime package owns are preserved by every writer; issue 26 item 9: byte for byte).
//!
//! A writer reads the file, edits the parsed document and writes it back. serde_json alone
//! would print every value anew: `1.0`, `1e3`, `-0`, an integer past `u64`, a `\u00e9` escape
//! or another tool's spacing would all change. [`render`] instead compares the new document
//! with the old text: a value equal to the one at the same place in the old text is written
//! as that old text, verbatim; an object or array that changed is rebuilt with the same rule
//! for its members (an array's unchanged elements are found wherever they moved). Only what
//! the edit changed is printed anew, as pretty JSON with a 2-space indent.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::fields::KNOWN_KEYS;

/// The document to write: old text where nothing changed, new values elsewhere.
enum Out<'a> {
    /// Unchanged: the old text, verbatim.
    Old(&'a RawValue),
    /// New or changed throughout: printed from the value.
    New(&'a Value),
    /// A changed object: its members in order.
    Object(Vec<(&'a str, Out<'a>)>),
    /// A changed array: its elements.
    Array(Vec<Out<'a>>),
}

impl Serialize for Out<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Out::Old(raw) => raw.serialize(s),
            Out::New(v) => v.serialize(s),
            Out::Object(members) => {
                let mut m = s.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Out::Array(items) => {
                let mut q = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    q.serialize_element(v)?;
                }
                q.end()
            }
        }
    }
}

/// An object's members as written: in file order, each value as its text. A key written twice
/// keeps its last value (as serde_json reads it) at its first place.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    match out.iter_mut().find(|(seen, _)| *seen == k) {
                        Some(slot) => slot.1 = v,
                        None => out.push((k, v)),
                    }
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl<'a> Members<'a> {
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// True when `old` is the text of exactly `new`.
fn same(old: &RawValue, new: &Value) -> bool {
    serde_json::from_str::<Value>(old.get()).is_ok_and(|v| v == *new)
}

/// `new`, kept as the text `old` where it did not change.
fn keep<'a>(old: Option<&'a RawValue>, new: &'a Value) -> Out<'a> {
    let Some(old) = old else {
        return Out::New(new);
    };
    if same(old, new) {
        return Out::Old(old);
    }
    match new {
        Value::Object(map) => match serde_json::from_str::<Members>(old.get()) {
            Ok(members) => Out::Object(object(&members, map)),
            Err(_) => Out::New(new),
        },
        Value::Array(items) => match serde_json::from_str::<Vec<&RawValue>>(old.get()) {
            Ok(olds) => Out::Array(array(&olds, items)),
            Err(_) => Out::New(new),
        },
        _ => Out::New(new),
    }
}

/// The members of `map` in the old order (then the new keys in `map`'s order), each kept.
fn object<'a>(members: &Members<'a>, map: &'a Map<String, Value>) -> Vec<(&'a str, Out<'a>)> {
    let mut out: Vec<(&'a str, Out<'a>)> = members
        .0
        .iter()
        .filter_map(|(k, raw)| {
            let (key, value) = map.get_key_value(k.as_str())?;
            Some((key.as_str(), keep(Some(raw), value)))
        })
        .collect();
    for (key, value) in map {
        if members.get(key).is_none() {
            out.push((key.as_str(), Out::New(value)));
        }
    }
    out
}

/// The elements of `items`: each equal to an old element not yet taken is that element's
/// text (wherever it was; the old elements are read once, and the search starts after the
/// last match, so the usual edits — append, remove, change in place — cost one pass); any
/// other is kept against the old element at its own index, when that one is not taken (an
/// element edited in place), else printed anew.
fn array<'a>(olds: &[&'a RawValue], items: &'a [Value]) -> Vec<Out<'a>> {
    let parsed: Vec<Option<Value>> = olds
        .iter()
        .map(|o| serde_json::from_str(o.get()).ok())
        .collect();
    let mut taken = vec![false; olds.len()];
    let mut next = 0;
    let mut out: Vec<Option<Out<'a>>> = items
        .iter()
        .map(|item| {
            let n = olds.len();
            let i = (0..n)
                .map(|k| (next + k) % n)
                .find(|&i| !taken[i] && parsed[i].as_ref() == Some(item))?;
            taken[i] = true;
            next = i + 1;
            Some(Out::Old(olds[i]))
        })
        .collect();
    for (i, slot) in out.iter_mut().enumerate() {
        if slot.is_none() {
            let old = olds.get(i).filter(|_| !taken[i]).copied();
            if old.is_some() {
                taken[i] = true;
            }
            *slot = Some(keep(old, &items[i]));
        }
    }
    out.into_iter().flatten().collect()
}

/// The file text of profile document `doc` (pretty JSON, a final newline) given `old`, the
/// file's text before the edit (`None` for a new file): the known keys first in the order of
/// spec 01 §4, then the other keys in their old order, then new ones (sorted); every value that
/// did not change is its old text, byte for byte (see the module doc).
///
/// Errors: none in practice (serde_json fails only on non-string map keys, which a
/// [`Value`] cannot hold); the caller reports one as a write error.
pub(super) fn render(old: Option<&str>, doc: &Map<String, Value>) -> serde_json::Result<String> {
    let members = old
        .and_then(|t| serde_json::from_str::<Members>(t).ok())
        .unwrap_or(Members(Vec::new()));
    let mut order: Vec<&str> = KNOWN_KEYS
        .iter()
        .copied()
        .filter(|k| doc.contains_key(*k))
        .collect();
    for (k, _) in &members.0 {
        if doc.contains_key(k.as_str()) && !order.contains(&k.as_str()) {
            order.push(k.as_str());
        }
    }
    for k in doc.keys() {
        if !order.contains(&k.as_str()) {
            order.push(k.as_str());
        }
    }
    let fields: Vec<(&str, Out)> = order
        .into_iter()
        .filter_map(|k| {
            let (key, value) = doc.get_key_value(k)?;
            Some((key.as_str(), keep(members.get(k), value)))
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&Out::Object(fields))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Map<String, Value> {
        match serde_json::from_str(text).unwrap() {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    /// Numbers serde_json would print differently, escapes and another tool's spacing stay
    /// exactly as written; known keys come first.
    #[test]
    fn unchanged_values_keep_their_text() {
        let old =
            "{\"z\": [1.0, 1e3, -0, 18446744073709551616, 0.1000000000000000055511151231257827],\
                   \"a\":{ \"s\" : \"caf\\u00e9\" },\"personality\":\"bob\"}";
        let text = render(Some(old), &doc(old)).unwrap();
        assert_eq!(
            text,
            "{\n  \"personality\": \"bob\",\n  \"z\": [1.0, 1e3, -0, 18446744073709551616, \
             0.1000000000000000055511151231257827],\n  \"a\": { \"s\" : \"caf\\u00e9\" }\n}\n"
        );
    }

    /// An edit deep inside keeps the untouched siblings' text: a changed entry of a list is
    /// rebuilt member by member, a removed entry goes, an added one is printed anew.
    #[test]
    fn an_edit_reprints_only_what_changed() {
        let old = r#"{"notifier":{"triggers":[{"id":"a","target":"bob","x":1.50},{"id":"b","y":1e2},{"id":"c"}],"other":2.0}}"#;
        let mut new = doc(old);
        let list = new["notifier"]["triggers"].as_array_mut().unwrap();
        list[0]["target"] = "carol".into();
        list.remove(1);
        list.push(serde_json::json!({"id": "d"}));
        let text = render(Some(old), &new).unwrap();
        let compact: String = text.split_whitespace().collect();
        assert_eq!(
            compact,
            r#"{"notifier":{"triggers":[{"id":"a","target":"carol","x":1.50},{"id":"c"},{"id":"d"}],"other":2.0}}"#
        );
    }

    /// A long list edited at both ends (the first entry removed, one appended) is matched in
    /// one pass: every kept entry keeps its text.
    #[test]
    fn a_long_list_is_matched_in_one_pass() {
        let items: Vec<String> = (0..20_000).map(|i| format!("{{\"n\":{i}.0}}")).collect();
        let old = format!("{{\"list\":[{}]}}", items.join(","));
        let mut new = doc(&old);
        let list = new["list"].as_array_mut().unwrap();
        list.remove(0);
        list.push(serde_json::json!({"n": 1}));
        let started = std::time::Instant::now();
        let text = render(Some(&old), &new).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        let compact: String = text.split_whitespace().collect();
        assert!(
            compact.starts_with(r#"{"list":[{"n":1.0},{"n":2.0},"#),
            "{}",
            &compact[..40]
        );
        assert!(compact.ends_with(r#"{"n":19999.0},{"n":1}]}"#));
    }

    /// Without an old text (a new file), or with an unreadable one, the document is printed
    /// as pretty JSON.
    #[test]
    fn a_new_file_is_pretty_json() {
        let new = doc(r#"{"x":1,"personality":"a"}"#);
        let want = "{\n  \"personality\": \"a\",\n  \"x\": 1\n}\n";
        assert_eq!(render(None, &new).unwrap(), want);
        assert_eq!(render(Some("not json"), &new).unwrap(), want);
    }
}
