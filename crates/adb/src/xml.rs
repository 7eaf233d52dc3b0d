//! A small reader for the XML `uiautomator dump` prints: elements with double- or
//! single-quoted attributes, the five named entities and numeric character references, an XML
//! declaration and comments. Nothing else of XML occurs in that output; anything unexpected is
//! an error naming the offset, never a panic.

/// One element: its name, its attributes in order, its children.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
}

impl Element {
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses the first root element of `text` (text before it, such as a shell's warning, and
/// after it, such as `UI hierchary dumped to: /dev/tty`, is ignored).
pub(crate) fn parse(text: &str) -> Result<Element, String> {
    let mut p = Parser { s: text, i: 0 };
    loop {
        p.skip_to('<')?;
        if p.rest().starts_with("<?") {
            p.skip_past("?>")?;
        } else if p.rest().starts_with("<!--") {
            p.skip_past("-->")?;
        } else if p.rest().starts_with("<!") {
            p.skip_past(">")?;
        } else {
            return p.element();
        }
    }
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        self.s.get(self.i..).unwrap_or("")
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("bad UI dump XML at byte {}: {what}", self.i))
    }

    fn skip_to(&mut self, c: char) -> Result<(), String> {
        match self.rest().find(c) {
            Some(at) => {
                self.i += at;
                Ok(())
            }
            None => self.fail("no element"),
        }
    }

    fn skip_past(&mut self, end: &str) -> Result<(), String> {
        match self.rest().find(end) {
            Some(at) => {
                self.i += at + end.len();
                Ok(())
            }
            None => self.fail(&format!("unterminated, expected `{end}`")),
        }
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.i += rest.len() - rest.trim_start().len();
    }

    fn name(&mut self) -> Result<String, String> {
        let rest = self.rest();
        let len = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '/' | '>' | '='))
            .unwrap_or(rest.len());
        if len == 0 {
            return self.fail("expected a name");
        }
        self.i += len;
        Ok(rest[..len].to_owned())
    }

    /// An element starting at `<`.
    fn element(&mut self) -> Result<Element, String> {
        self.i += 1;
        let mut el = Element {
            name: self.name()?,
            ..Element::default()
        };
        loop {
            self.skip_ws();
            let rest = self.rest();
            if rest.starts_with("/>") {
                self.i += 2;
                return Ok(el);
            }
            if rest.starts_with('>') {
                self.i += 1;
                break;
            }
            if rest.is_empty() {
                return self.fail("unterminated start tag");
            }
            let key = self.name()?;
            self.skip_ws();
            if !self.rest().starts_with('=') {
                return self.fail(&format!("attribute `{key}` without a value"));
            }
            self.i += 1;
            self.skip_ws();
            let quote = match self.rest().chars().next() {
                Some(q @ ('"' | '\'')) => q,
                _ => return self.fail("expected a quoted attribute value"),
            };
            self.i += 1;
            let Some(end) = self.rest().find(quote) else {
                return self.fail("unterminated attribute value");
            };
            let raw = &self.rest()[..end];
            self.i += end + 1;
            el.attrs.push((key, unescape(raw)));
        }
        // Content: child elements; text between them (none in a UI dump) is skipped.
        loop {
            self.skip_to('<')?;
            let rest = self.rest();
            if rest.starts_with("</") {
                self.i += 2;
                let name = self.name()?;
                if name != el.name {
                    return self.fail(&format!("`</{name}>` closes `<{}>`", el.name));
                }
                self.skip_past(">")?;
                return Ok(el);
            }
            if rest.starts_with("<!--") {
                self.skip_past("-->")?;
                continue;
            }
            el.children.push(self.element()?);
        }
    }
}

/// Replaces entity and character references; an unknown reference is kept as written.
pub(crate) fn unescape(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find(';').filter(|&e| e <= 12) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_with_its_trailer_parses() {
        let text = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">\
                    <node index=\"0\" text=\"Tom &amp; Jerry &#233;&#x1F600;\" bounds=\"[0,0][10,10]\">\
                    <node index=\"0\" text='a &lt;b&gt;' /></node></hierarchy>UI hierchary dumped to: /dev/tty";
        let root = parse(text).unwrap();
        assert_eq!(root.name, "hierarchy");
        assert_eq!(root.attr("rotation"), Some("0"));
        let node = &root.children[0];
        assert_eq!(node.attr("text"), Some("Tom & Jerry é😀"));
        assert_eq!(node.children[0].attr("text"), Some("a <b>"));
    }

    #[test]
    fn broken_xml_is_an_error_not_a_panic() {
        for bad in [
            "",
            "no xml here",
            "<hierarchy",
            "<hierarchy><node text=\"x\"></hierarchy>",
            "<a b></a>",
            "<a b=\"x></a>",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(unescape("&bogus; & &#xZZ;"), "&bogus; & &#xZZ;");
    }
}
