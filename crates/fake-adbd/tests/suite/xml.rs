//! A strict little reader for the uiautomator XML: checks the document is well formed (every
//! `<node>` closed, attributes quoted, only the five entities and numeric references) and
//! returns each node's attributes in document order, with its depth.

use std::collections::BTreeMap;

#[derive(Debug)]
pub struct XmlNode {
    pub depth: usize,
    pub attrs: BTreeMap<String, String>,
}

impl XmlNode {
    pub fn attr(&self, key: &str) -> &str {
        self.attrs.get(key).map_or("", String::as_str)
    }

    /// `[l,t][r,b]` as numbers.
    pub fn bounds(&self) -> (i64, i64, i64, i64) {
        let nums: Vec<i64> = self
            .attr("bounds")
            .split(|c: char| !c.is_ascii_digit() && c != '-')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("a number"))
            .collect();
        assert_eq!(nums.len(), 4, "bounds {:?}", self.attr("bounds"));
        (nums[0], nums[1], nums[2], nums[3])
    }

    pub fn center(&self) -> (i64, i64) {
        let (l, t, r, b) = self.bounds();
        ((l + r) / 2, (t + b) / 2)
    }
}

fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = rest[i..].find(';').ok_or("an unterminated entity")? + i;
        let entity = &rest[i + 1..end];
        match entity {
            "amp" => out.push('&'),
            "lt" => out.push('<'),
            "gt" => out.push('>'),
            "quot" => out.push('"'),
            "apos" => out.push('\''),
            e if e.starts_with('#') => {
                let code: u32 = e[1..].parse().map_err(|_| format!("bad reference &{e};"))?;
                out.push(char::from_u32(code).ok_or("bad code point")?);
            }
            e => return Err(format!("unknown entity &{e};")),
        }
        rest = &rest[end + 1..];
    }
    if rest.contains('<') {
        return Err("a raw `<` in an attribute".into());
    }
    out.push_str(rest);
    Ok(out)
}

/// Parses `<?xml …?><hierarchy rotation="0">…</hierarchy>`.
pub fn parse(xml: &str) -> Result<Vec<XmlNode>, String> {
    let body = xml
        .strip_prefix("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>")
        .ok_or("no XML declaration")?;
    let body = body
        .strip_prefix("<hierarchy rotation=\"0\">")
        .ok_or("no <hierarchy>")?;
    let body = body.strip_suffix("</hierarchy>").ok_or("no </hierarchy>")?;
    let mut nodes = Vec::new();
    let mut depth = 0usize;
    let mut rest = body;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("</node>") {
            depth = depth.checked_sub(1).ok_or("an unopened </node>")?;
            rest = after;
            continue;
        }
        let after = rest
            .strip_prefix("<node")
            .ok_or_else(|| format!("unexpected text at {:.40}", rest))?;
        let mut attrs = BTreeMap::new();
        let mut tail = after;
        loop {
            tail = tail.trim_start();
            if let Some(t) = tail.strip_prefix("/>") {
                nodes.push(XmlNode { depth, attrs });
                tail = t;
                break;
            }
            if let Some(t) = tail.strip_prefix('>') {
                nodes.push(XmlNode { depth, attrs });
                depth += 1;
                tail = t;
                break;
            }
            let eq = tail.find("=\"").ok_or("an attribute without =\"")?;
            let key = tail[..eq].to_owned();
            let value_end = tail[eq + 2..]
                .find('"')
                .ok_or("an unterminated attribute")?
                + eq
                + 2;
            let value = unescape(&tail[eq + 2..value_end])?;
            if attrs.insert(key.clone(), value).is_some() {
                return Err(format!("attribute {key} twice"));
            }
            tail = &tail[value_end + 1..];
        }
        rest = tail;
    }
    if depth != 0 {
        return Err(format!("{depth} unclosed <node>"));
    }
    Ok(nodes)
}
