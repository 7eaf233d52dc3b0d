//! The one escape for text a person reads: confirmation summaries (foreground and background
//! reviews), the phone notifications a job posts, `openphone jobs show`, goal approvals and
//! watcher template fills.
//!
//! What a person approves or is told must read exactly as what it holds. A bidi override
//! (`+1555\u{202E}6660\u{202C}` reads as `+15550666`), a zero-width character (two look-alike
//! numbers that differ), a terminal escape sequence or a line separator can make a text read
//! differently from its bytes. [`display_text`] shows each such character as `\u{XXXX}` (its
//! code point in upper-case hexadecimal, at least four digits) and leaves everything else —
//! letters of every script, emoji, plain spaces, newlines and tabs — as it is:
//!
//! - every invisible formatting character ([`is_invisible`]: bidi controls and marks,
//!   zero-width characters, the byte-order mark, variation selectors, …);
//! - every control character but newline and tab (`ESC`, `CR`, `NUL`, `DEL`, the C1 set);
//! - the line and paragraph separators U+2028 and U+2029.
//!
//! Log lines use [`log_value`](crate::log_value), which escapes the same invisible set (plus
//! every whitespace, since a log value is one word) and cuts the value.

use std::borrow::Cow;

/// Formatting characters that render as nothing but change what the reader sees: bidi
/// controls and marks (which can make `evil.example/moc.knab` read as `bank.com`), zero-width
/// characters (which hide differences between look-alike values), invisible operators, the
/// byte-order mark, variation selectors, interlinear annotation marks and the like. The one
/// set log lines, confirmation summaries, reviews and notifications show escaped.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Whether [`display_text`] shows `c` as `\u{XXXX}` rather than as itself.
pub fn is_escaped_for_display(c: char) -> bool {
    is_invisible(c)
        || (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Appends `c` to `out` as a person should see it: itself, or `\u{XXXX}` when
/// [`is_escaped_for_display`]. For callers that escape more (a summary's separators) and want
/// this escape for everything else.
pub fn push_display_char(out: &mut String, c: char) {
    if is_escaped_for_display(c) {
        out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
    } else {
        out.push(c);
    }
}

/// `text` as a person should read it: every invisible formatting character, every control
/// character but newline and tab, and U+2028/U+2029 shown as `\u{XXXX}` (see the module
/// documentation). Borrowed when nothing needed escaping. Not reversible (a literal `\u{202E}`
/// in the text reads the same): it is for reading only, never for storing or comparing.
pub fn display_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_escaped_for_display) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        push_display_char(&mut out, c);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_of_every_script_is_left_alone() {
        for s in ["", "Zoë 电话 🚗", "line one\nline two\tend", "+15550001"] {
            assert!(matches!(display_text(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn bidi_zero_width_control_and_separators_are_shown_escaped() {
        assert_eq!(
            display_text("+1555\u{202e}6660\u{202c}"),
            r"+1555\u{202E}6660\u{202C}"
        );
        assert_eq!(display_text("a\u{200b}b\u{feff}"), r"a\u{200B}b\u{FEFF}");
        assert_eq!(display_text("\x1b[31mred\r"), r"\u{001B}[31mred\u{000D}");
        assert_eq!(display_text("a\u{2028}b\u{85}"), r"a\u{2028}b\u{0085}");
        assert_eq!(display_text("tag\u{E0041}"), r"tag\u{E0041}");
    }
}
