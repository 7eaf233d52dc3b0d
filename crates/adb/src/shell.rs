//! Building the shell command lines the backend sends (`shell:` runs them with the device's
//! `sh -c`), with every argument quoted so that no text reaches the shell as syntax.

use base64::Engine as _;

/// `text` as one single-quoted shell word (`'` written as `'\''`).
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// A command line from a program and its arguments, each argument quoted.
pub(crate) fn line(program: &str, args: &[&str]) -> String {
    let mut out = program.to_owned();
    for arg in args {
        out.push(' ');
        out.push_str(&quote(arg));
    }
    out
}

/// Whether `input text` can type `text`: printable ASCII only (it injects key events from the
/// device's key map, which has no other characters) and no `%s`, which it reads as a space.
pub(crate) fn input_text_can_type(text: &str) -> bool {
    text.chars().all(|c| (' '..='~').contains(&c)) && !text.contains("%s")
}

/// `input text <arg>`: spaces as `%s` (what `input text` turns back into spaces), the whole
/// argument single-quoted against the shell.
pub(crate) fn input_text(text: &str) -> String {
    format!("input text {}", quote(&text.replace(' ', "%s")))
}

/// The ADB Keyboard's broadcast that types `text` (any Unicode), base64 of its UTF-8.
pub(crate) fn adb_keyboard_text(text: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    format!("am broadcast -a ADB_INPUT_B64 --es msg {b64}")
}

/// Whether a shell command only reads (dumps, properties, provider queries, package lists,
/// screenshots): such a command may be run again after a broken connection. Anything else
/// counts as state-changing.
pub(crate) fn is_read_only(command: &str) -> bool {
    const READS: &[&str] = &[
        "uiautomator dump",
        "getprop",
        "wm size",
        "dumpsys ",
        "ime list",
        "pm list ",
        "screencap",
        "content 'query' ",
        "content query ",
    ];
    READS.iter().any(|r| command.starts_with(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_no_shell_syntax() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's $(rm -rf /)"), "'it'\\''s $(rm -rf /)'");
        assert_eq!(line("am", &["start", "-d", "x;y"]), "am 'start' '-d' 'x;y'");
        assert_eq!(input_text("hi there; ls"), "input text 'hi%sthere;%sls'");
        assert!(input_text_can_type("Hello, world!"));
        assert!(!input_text_can_type("Grüße"));
        assert!(!input_text_can_type("tab\there"));
        assert!(!input_text_can_type("100%s"));
        assert_eq!(
            adb_keyboard_text("Grüße 👋"),
            "am broadcast -a ADB_INPUT_B64 --es msg R3LDvMOfZSDwn5GL"
        );
    }
}
