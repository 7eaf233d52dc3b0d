//! Exposed tool names (`mcp.md` §4.2) and derived titles (§4.3).

/// The longest exposed name strict hosts accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// The exposed MCP name of a manifest command: every `.` becomes `_`
/// (`openphone.ui.tap` → `openphone_ui_tap`).
///
/// The rule alone is not invertible (`openphone.ui.tap_element` and a hypothetical
/// `openphone.ui.tap.element` derive the same string), so names are mapped back only through
/// the table of [`crate::ToolTable`], never by string replacement.
pub fn tool_name(canonical: &str) -> String {
    canonical.replace('.', "_")
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`, the pattern hosts and model APIs accept.
pub fn is_portable_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Words written in capitals in derived titles.
const ACRONYMS: &[&str] = &["UI", "URL"];

/// The title derived from a canonical name: `openphone.` dropped, split on `.`, `_` and `-`,
/// each word capitalised, acronyms in capitals (`openphone.ui.tap_element` → "UI Tap Element").
pub fn derived_title(canonical: &str) -> String {
    let rest = canonical.strip_prefix("openphone.").unwrap_or(canonical);
    rest.split(['.', '_', '-'])
        .filter(|w| !w.is_empty())
        .map(capitalise)
        .collect::<Vec<_>>()
        .join(" ")
}

fn capitalise(word: &str) -> String {
    if let Some(acronym) = ACRONYMS.iter().find(|a| a.eq_ignore_ascii_case(word)) {
        return (*acronym).to_owned();
    }
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
