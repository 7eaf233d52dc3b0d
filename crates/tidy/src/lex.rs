//! A small Rust lexer, just enough for line-based rules: each line of a file with its comments
//! removed (`code`), the same with the contents of string and char literals blanked (`bare`),
//! the string literals it holds, and whether it lies in test code (`#[cfg(test)]` items).

/// One line of a source file, as the rules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    /// 1-based line number.
    pub no: usize,
    /// The line without comments; string literals kept as written.
    pub code: String,
    /// The line without comments, every string and char literal's contents replaced by spaces.
    pub bare: String,
    /// The string literals that start on this line.
    pub strings: Vec<Lit>,
    /// Inside an item marked `#[cfg(test)]`.
    pub in_test: bool,
}

/// A string literal: its contents as written (escapes not undone) and where it lies in the
/// `bare` text of the line it starts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lit {
    pub text: String,
    /// Byte offset of the opening quote (or `r`) in `bare`.
    pub start: usize,
    /// Byte offset just past the closing quote in `bare`, when it closes on the same line.
    pub end: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    LineComment,
    Block(usize),
    Str,
    Raw(usize),
}

/// Splits `text` into [`Line`]s.
pub fn lines(text: &str) -> Vec<Line> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = vec![Line {
        no: 1,
        ..Line::default()
    }];
    let mut state = State::Code;
    let mut literal = String::new();
    let mut opened = (0usize, 0usize);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            if state == State::LineComment {
                state = State::Code;
            }
            if matches!(state, State::Str | State::Raw(_)) {
                literal.push('\n');
            }
            let no = out.len() + 1;
            out.push(Line {
                no,
                ..Line::default()
            });
            i += 1;
            continue;
        }
        let Some(line) = out.last_mut() else { break };
        match state {
            State::LineComment => {}
            State::Block(depth) => {
                if c == '*' && next == Some('/') {
                    state = if depth == 1 {
                        State::Code
                    } else {
                        State::Block(depth - 1)
                    };
                    i += 1;
                } else if c == '/' && next == Some('*') {
                    state = State::Block(depth + 1);
                    i += 1;
                }
            }
            State::Str => {
                if c == '\\' {
                    line.code.push(c);
                    line.bare.push(' ');
                    literal.push(c);
                    match next {
                        Some(n) if n != '\n' => {
                            line.code.push(n);
                            line.bare.push(' ');
                            literal.push(n);
                            i += 2;
                        }
                        Some(_) | None => i += 1,
                    }
                    continue;
                } else if c == '"' {
                    line.code.push(c);
                    line.bare.push(c);
                    close_literal(&mut out, &mut literal, opened);
                    state = State::Code;
                    i += 1;
                    continue;
                } else {
                    literal.push(c);
                }
                line.code.push(c);
                line.bare.push(' ');
            }
            State::Raw(hashes) => {
                if c == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    line.code.push(c);
                    line.bare.push(c);
                    for _ in 0..hashes {
                        line.code.push('#');
                        line.bare.push('#');
                    }
                    close_literal(&mut out, &mut literal, opened);
                    state = State::Code;
                    i += 1 + hashes;
                    continue;
                }
                literal.push(c);
                line.code.push(c);
                line.bare.push(' ');
            }
            State::Code => {
                if c == '/' && next == Some('/') {
                    state = State::LineComment;
                } else if c == '/' && next == Some('*') {
                    state = State::Block(1);
                    i += 1;
                } else if c == '"' {
                    opened = (line.no, line.bare.len());
                    line.code.push(c);
                    line.bare.push(c);
                    state = State::Str;
                    literal.clear();
                } else if (c == 'r' || (c == 'b' && next == Some('r')))
                    && !prev_is_ident(&chars, i)
                    && let Some((hashes, len)) = raw_start(&chars, i)
                {
                    opened = (line.no, line.bare.len());
                    let opening: String = chars[i..i + len].iter().collect();
                    line.code.push_str(&opening);
                    line.bare.push_str(&opening);
                    state = State::Raw(hashes);
                    literal.clear();
                    i += len;
                    continue;
                } else if c == '\'' {
                    // A char literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`).
                    let end = if next == Some('\\') {
                        (i + 2..chars.len().min(i + 12)).find(|&k| chars[k] == '\'')
                    } else if chars.get(i + 2) == Some(&'\'') {
                        Some(i + 2)
                    } else {
                        None
                    };
                    if let Some(end) = end {
                        line.code.extend(&chars[i..=end]);
                        line.bare.push('\'');
                        line.bare.extend(std::iter::repeat_n(' ', end - i - 1));
                        line.bare.push('\'');
                        i = end + 1;
                        continue;
                    }
                    line.code.push(c);
                    line.bare.push(c);
                } else {
                    line.code.push(c);
                    line.bare.push(c);
                }
            }
        }
        i += 1;
    }
    mark_tests(&mut out);
    out
}

/// Files the literal just closed under the line it started on (`opened`: line number and
/// offset in `bare`).
fn close_literal(out: &mut [Line], literal: &mut String, opened: (usize, usize)) {
    let (no, start) = opened;
    let end = out.last().filter(|l| l.no == no).map(|l| l.bare.len());
    if let Some(line) = out.get_mut(no.saturating_sub(1)) {
        line.strings.push(Lit {
            text: std::mem::take(literal),
            start,
            end,
        });
    }
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `r"`, `r#"`, `br##"` …: the number of hashes and the length of the opening.
fn raw_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let mut k = i + if chars[i] == 'b' { 2 } else { 1 };
    let mut hashes = 0;
    while chars.get(k) == Some(&'#') {
        hashes += 1;
        k += 1;
    }
    (chars.get(k) == Some(&'"')).then_some((hashes, k + 1 - i))
}

/// Marks the lines of every item annotated `#[cfg(test)]` (or `#[cfg(all(test, …))]`): from the
/// attribute to the close of the item's first brace (or its `;`).
fn mark_tests(lines: &mut [Line]) {
    let mut i = 0;
    while i < lines.len() {
        let bare = lines[i].bare.replace(' ', "");
        if !(bare.contains("#[cfg(test)]") || bare.contains("#[cfg(all(test")) {
            i += 1;
            continue;
        }
        let mut depth = 0usize;
        let mut opened = false;
        let mut j = i;
        'item: while j < lines.len() {
            lines[j].in_test = true;
            let start = if j == i {
                lines[j].bare.find(']').map_or(0, |p| p + 1)
            } else {
                0
            };
            for c in lines[j].bare[start..].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth = depth.saturating_sub(1);
                        if opened && depth == 0 {
                            break 'item;
                        }
                    }
                    ';' if !opened => break 'item,
                    _ => {}
                }
            }
            j += 1;
        }
        i = j + 1;
    }
}
