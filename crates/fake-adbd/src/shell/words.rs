//! Splitting a `shell:` command line into words the way Android's `/system/bin/sh` would for a
//! simple command: blanks separate words, single quotes keep everything literally, double
//! quotes keep everything but `\"`, `\\`, `\$` and `` \` `` escapes, a backslash outside quotes
//! escapes the next character. Operators (`;`, `|`, `&`, redirections, `$`, backquotes,
//! parentheses) outside quotes are refused with a clear message: the fake device runs one
//! simple command per stream.

/// Splits `line` into words, or says which construct is not supported.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch @ ('"' | '\\' | '$' | '`')) => word.push(ch),
                            Some('\n') => {}
                            Some(ch) => {
                                word.push('\\');
                                word.push(ch);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some(ch @ ('$' | '`')) => {
                            return Err(format!(
                                "`{ch}` inside double quotes (expansion) is not supported by the fake device; single-quote it"
                            ));
                        }
                        Some(ch) => word.push(ch),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(ch) => {
                    in_word = true;
                    word.push(ch);
                }
                None => {
                    in_word = true;
                    word.push('\\');
                }
            },
            ';' | '|' | '&' | '<' | '>' | '(' | ')' | '$' | '`' => {
                return Err(format!(
                    "the shell operator `{c}` is not supported by the fake device (one simple command per stream); quote it to pass it literally"
                ));
            }
            ch => {
                in_word = true;
                word.push(ch);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::split;

    fn ok(line: &str) -> Vec<String> {
        split(line).expect("splits")
    }

    #[test]
    fn blanks_separate_words() {
        assert_eq!(ok("  input  tap 10 20 "), ["input", "tap", "10", "20"]);
    }

    #[test]
    fn quotes_keep_blanks_and_operators() {
        assert_eq!(ok("input text 'a b;c'"), ["input", "text", "a b;c"]);
        assert_eq!(ok(r#"echo "say \"hi\" \\o/""#), ["echo", r#"say "hi" \o/"#]);
        assert_eq!(ok(r"input text it\'s"), ["input", "text", "it's"]);
        assert_eq!(ok("a''b \"\""), ["ab", ""]);
        assert_eq!(ok(r"input text 'it'\''s'"), ["input", "text", "it's"]);
    }

    #[test]
    fn operators_and_open_quotes_are_refused() {
        assert!(split("input tap 1 2; reboot").is_err());
        assert!(split("echo $HOME").is_err());
        assert!(split("echo 'open").is_err());
        assert!(split("echo \"open").is_err());
    }
}
