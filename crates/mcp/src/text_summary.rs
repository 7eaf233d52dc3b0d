//! The summary of a tool result read off its JSON text, for a result the direct path answers
//! as text (`TextAnswer`): the same summary `result.rs` makes of the result's tree, without
//! building the tree. The text is walked once: a member's scalar is read as it is, an array's or
//! object's members are counted by their commas at its own depth (strings skipped whole), never
//! kept.
//!
//! The text is one a `Map` was written to (`ObjectText`: serde_json's compact form), so it is
//! valid JSON without whitespace and no object in it has a key twice; a text that does not read
//! as such an object has no summary here (`None`), and the caller reads the tree.

use serde_json::Number;

use crate::result::{
    REPLAYED, SUMMARY_MAX_CHARS, shown_fields, shown_items, shown_string, summarized,
};

/// The summary of the result whose JSON text is `text`, as `result.rs` would make it of the
/// parsed object; `None` when `text` is not a compact JSON object.
pub(crate) fn summary_of_text(text: &str, replayed: bool) -> Option<String> {
    // A small result is its own best summary: the JSON, whole.
    if text.len() <= SUMMARY_MAX_CHARS {
        return Some(if replayed {
            format!("{REPLAYED} {text}")
        } else {
            text.to_owned()
        });
    }
    // In the text's order, which is the `Map`'s it was written from: key order, or the order
    // of insertion where serde_json's `preserve_order` is on; the tree's summary reads it so.
    let members = members(text.as_bytes())?;
    Some(summarized(members.into_iter(), replayed))
}

/// The members of the object `text`, each key with its value as a summary shows it.
fn members(text: &[u8]) -> Option<Vec<(&str, String)>> {
    let mut at = expect(text, 0, b'{')?;
    let mut members = Vec::new();
    if text.get(at) == Some(&b'}') {
        return (at + 1 == text.len()).then_some(members);
    }
    loop {
        let key_end = string_end(text, at)?;
        let key = std::str::from_utf8(&text[at + 1..key_end - 1]).ok()?;
        if key.contains('\\') {
            // An escaped key: rare enough to leave to the tree.
            return None;
        }
        at = expect(text, key_end, b':')?;
        let (value_end, shown) = value(text, at)?;
        members.push((key, shown));
        match text.get(value_end) {
            Some(b',') => at = value_end + 1,
            Some(b'}') if value_end + 1 == text.len() => return Some(members),
            _ => return None,
        }
    }
}

/// The index after `byte` at `at`.
fn expect(text: &[u8], at: usize, byte: u8) -> Option<usize> {
    (text.get(at) == Some(&byte)).then_some(at + 1)
}

/// The index after the string that starts (with its `"`) at `at`.
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    if text.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', text.get(i..)?)?;
        if text[i] == b'"' {
            return Some(i + 1);
        }
        i += 2;
    }
}

/// The value that starts at `at`: the index after it, and how a summary shows it (`result.rs`,
/// `shown`).
fn value(text: &[u8], at: usize) -> Option<(usize, String)> {
    match text.get(at)? {
        b'"' => {
            let end = string_end(text, at)?;
            let string: String = serde_json::from_slice(&text[at..end]).ok()?;
            Some((end, shown_string(&string)))
        }
        open @ (b'{' | b'[') => {
            let (end, count) = container(text, at)?;
            let shown = if *open == b'{' {
                shown_fields(count)
            } else {
                shown_items(count)
            };
            Some((end, shown))
        }
        _ => {
            let end = at
                + text[at..]
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']'))?;
            let scalar = &text[at..end];
            let shown = match scalar {
                b"null" | b"true" | b"false" => std::str::from_utf8(scalar).ok()?.to_owned(),
                _ => serde_json::from_slice::<Number>(scalar).ok()?.to_string(),
            };
            Some((end, shown))
        }
    }
}

/// The array or object that starts at `at`: the index after it, and its members — its commas
/// at its own depth, plus one unless it is empty. Strings are skipped whole.
fn container(text: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut commas = 0usize;
    let mut i = at;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i = string_end(text, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    let empty = i == at + 1;
                    return Some((i + 1, if empty { 0 } else { commas + 1 }));
                }
            }
            b',' if depth == 1 => commas += 1,
            // A byte, not an enum: every other byte (digits, letters of a literal, whitespace,
            // a comma of a nested member) says nothing about this container's shape.
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::summary_of_text;
    use crate::result::summary_text;

    /// The summary read off the text is the tree's, for results of every kind of member, small
    /// and large, replayed or not.
    #[test]
    fn the_summary_of_a_text_is_the_summary_of_its_tree() {
        let long = "y".repeat(300);
        let cases = [
            json!({}),
            json!({"a": 1}),
            json!({
                "device": {"battery": 81, "model": "sim", "nested": {"x": [1, 2, 3]}},
                "events": [1, {"a": 2}, [3], "four", null],
                "note": "z".repeat(200),
                "accent": "é".repeat(90),
                "escaped": "a \"quoted\" \\ line\nbreak",
                "float": 1.5e300,
                "whole_float": 2.0,
                "negative": -17,
                "huge": 18_446_744_073_709_551_615u64,
                "flag": true,
                "nothing": null,
                "empty": {},
                "none": [],
                "pad1": long, "pad2": long, "pad3": long,
            }),
        ];
        for case in cases {
            let map: Map<String, serde_json::Value> = serde_json::from_value(case).unwrap();
            let text = serde_json::to_string(&map).unwrap();
            for replayed in [false, true] {
                assert_eq!(
                    summary_of_text(&text, replayed).as_deref(),
                    Some(summary_text(&map, replayed).as_str()),
                    "{text}"
                );
            }
        }
    }

    /// Strings holding brackets, commas, quotes and backslashes do not move a count.
    #[test]
    fn tricky_strings_read_as_the_tree_reads_them() {
        let pad = "p".repeat(700);
        let text = format!(
            r#"{{"a":[1,"[",{{"x":[2,3]}}],"b":{{"j":"\\\"","k":"],}}[{{,","l":[]}},"m":"{pad}","z":1}}"#
        );
        let map: Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            text,
            "a Map's own text"
        );
        let summary = summary_text(&map, false);
        assert_eq!(summary_of_text(&text, false).unwrap(), summary);
        assert!(
            summary.contains("a: [3 items]") && summary.contains("b: {3 fields}"),
            "{summary}"
        );
    }

    /// Text that is not an object has no summary (the caller reads the tree instead).
    #[test]
    fn text_that_is_not_an_object_has_no_summary() {
        let pad = "q".repeat(700);
        for text in [
            format!(r#"["{pad}"]"#),
            format!(r#"{{"a":"{pad}""#),
            format!(r#"{{"a":"{pad}"}}x"#),
            format!(r#"{{"a" :"{pad}"}}"#),
            format!(r#"{{"a":"{pad}",}}"#),
            format!(r#"{{"a":nul,"b":"{pad}"}}"#),
        ] {
            assert_eq!(summary_of_text(&text, false), None, "{text}");
        }
    }
}
