//! Text from a peer (a client's name, a request id, an MCP host's `clientInfo`), made safe for
//! one value of one log line.
//!
//! A value must not be able to start a line of its own (a newline and a forged timestamp), to
//! pass for another field (`client=x runtime=operator`), to drive the terminal that shows the
//! log (ESC sequences), to reorder what the reader sees (bidi overrides, zero-width
//! characters), or to fill the disk (a 900 KB name logged at every `hello`). [`log_value`]
//! escapes and cuts it:
//!
//! - `\` → `\\`; newline, carriage return and tab → `\n`, `\r`, `\t`;
//! - every other control character, every invisible formatting character (bidi controls,
//!   zero-width characters, the byte-order mark, …) and every whitespace but the plain space →
//!   `\u{…}` with its hexadecimal code point;
//! - a space → `_` (`runtime-protocol.md` §15: values are one word);
//! - at most [`LOG_VALUE_CHARS`] characters of output, the last one `…` when the value was cut.
//!
//! The result is only for reading: it is not reversible (`_` may have been a space). The
//! invisible set is the one [`display_text`](crate::display_text) escapes for people.

use std::fmt::{self, Write};

use crate::display::is_invisible;
use crate::limits::LOG_VALUE_CHARS;

/// `value` as one safe log value; its `Display` writes the escaped, cut text without
/// allocating. Use it for every peer-supplied string a log line carries:
/// `tracing::info!(client = %log_value(&name), "hello")`.
pub fn log_value(value: &str) -> LogValue<'_> {
    LogValue(value)
}

/// A peer-supplied string displayed as a safe log value (see [`log_value`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogValue<'a>(&'a str);

/// What one input character becomes.
enum Piece {
    Plain(char),
    Escape(&'static str),
    CodePoint(u32),
}

impl Piece {
    fn of(c: char) -> Piece {
        match c {
            ' ' => Piece::Plain('_'),
            '\\' => Piece::Escape("\\\\"),
            '\n' => Piece::Escape("\\n"),
            '\r' => Piece::Escape("\\r"),
            '\t' => Piece::Escape("\\t"),
            c if c.is_control() || c.is_whitespace() || is_invisible(c) => {
                Piece::CodePoint(c.into())
            }
            c => Piece::Plain(c),
        }
    }

    /// Characters this piece writes.
    fn width(&self) -> usize {
        match self {
            Piece::Plain(_) => 1,
            Piece::Escape(s) => s.len(),
            // `\u{` + hex digits + `}`.
            Piece::CodePoint(n) => 4 + hex_digits(*n),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Piece::Plain(c) => f.write_char(*c),
            Piece::Escape(s) => f.write_str(s),
            Piece::CodePoint(n) => write!(f, "\\u{{{n:x}}}"),
        }
    }
}

fn hex_digits(n: u32) -> usize {
    let mut digits = 1;
    let mut rest = n >> 4;
    while rest > 0 {
        digits += 1;
        rest >>= 4;
    }
    digits
}

impl fmt::Display for LogValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The whole value when it fits; else as much as fits before the `…`.
        let mut total = 0;
        let fits = self.0.chars().all(|c| {
            total += Piece::of(c).width();
            total <= LOG_VALUE_CHARS
        });
        let room = if fits {
            LOG_VALUE_CHARS
        } else {
            LOG_VALUE_CHARS - 1
        };
        let mut used = 0;
        for c in self.0.chars() {
            let piece = Piece::of(c);
            used += piece.width();
            if used > room {
                break;
            }
            piece.write(f)?;
        }
        if fits { Ok(()) } else { f.write_char('…') }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(s: &str) -> String {
        log_value(s).to_string()
    }

    #[test]
    fn plain_words_pass_and_spaces_become_underscores() {
        assert_eq!(shown("hermes-adapter"), "hermes-adapter");
        assert_eq!(shown("Claude Desktop"), "Claude_Desktop");
        assert_eq!(shown("x runtime=operator"), "x_runtime=operator");
        assert_eq!(shown("Zoë 电话"), "Zoë_电话");
        assert_eq!(shown(""), "");
    }

    #[test]
    fn line_breaks_escapes_and_invisible_characters_are_escaped() {
        assert_eq!(
            shown("evil\n2099-01-01 INFO forged\r\t\\"),
            r"evil\n2099-01-01_INFO_forged\r\t\\"
        );
        assert_eq!(shown("\x1b[31mred\x1b[0m"), r"\u{1b}[31mred\u{1b}[0m");
        assert_eq!(shown("a\u{7f}\u{85}\u{9b}b"), r"a\u{7f}\u{85}\u{9b}b");
        assert_eq!(
            shown("abc\u{202e}fed\u{200b}\u{feff}\u{2066}"),
            r"abc\u{202e}fed\u{200b}\u{feff}\u{2066}"
        );
        assert_eq!(shown("a\u{2028}b\u{a0}c"), r"a\u{2028}b\u{a0}c");
        assert_eq!(shown("\0"), r"\u{0}");
    }

    #[test]
    fn long_values_are_cut_with_an_ellipsis() {
        let exact = "n".repeat(LOG_VALUE_CHARS);
        assert_eq!(shown(&exact), exact);
        let cut = shown(&"n".repeat(900_000));
        assert_eq!(cut.chars().count(), LOG_VALUE_CHARS);
        assert!(cut.ends_with("n…"));
        // Escapes count as what they write, and are never split.
        let cut = shown(&"\n".repeat(LOG_VALUE_CHARS));
        assert_eq!(cut, format!("{}…", r"\n".repeat((LOG_VALUE_CHARS - 1) / 2)));
        assert!(cut.chars().count() <= LOG_VALUE_CHARS);
    }
}
