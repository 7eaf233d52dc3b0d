//! The question an OS dialog asks, in the simulator's words where the screen shows the same
//! dialog (the fake device renders the simulator's dialogs; a real phone's permission prompt
//! has the same `permission_message`), so the user is asked the same thing whichever backend
//! drew it: `Allow Camera to take pictures and record video?`, `Share "…" with Messages?`,
//! `Open https://… with Browser?`, `Pay €4.50 to Café?`. `None` for a dialog of another shape
//! (the caller falls back to its title or text).

use crate::screen::Screen;

/// How much of a shared text the question quotes (the simulator's cut).
const SHARE_QUOTE_CHARS: usize = 60;

/// At most `max` characters of `text` on one line, `…` marking a cut.
fn cut(text: &str, max: usize) -> String {
    let line = text.replace('\n', " ");
    if line.chars().count() <= max {
        return line;
    }
    let kept: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// The dialog's question, built from its parts on `screen`.
pub(super) fn question(screen: &Screen) -> Option<String> {
    let text_of = |id: &str| {
        screen
            .nodes
            .iter()
            .find(|n| n.id == id && !n.text.is_empty())
            .map(|n| n.text.as_str())
    };
    let first_with = |prefix: &str, pick: fn(&crate::screen::Node) -> bool| {
        screen
            .nodes
            .iter()
            .find(|n| n.id.starts_with(prefix) && !n.text.is_empty() && pick(n))
            .map(|n| n.text.as_str())
    };
    // A permission prompt's message is Android's own question.
    if let Some(message) = text_of("permission_message") {
        return Some(message.to_owned());
    }
    // The share chooser: what is shared, and the target accepting it picks (the first).
    if let Some(preview) = text_of("share_preview") {
        let target = first_with("share_target_", |n| n.clickable)?;
        return Some(format!(
            "Share \"{}\" with {target}?",
            cut(preview, SHARE_QUOTE_CHARS)
        ));
    }
    // "Open <url> with" and the choice that is checked.
    if let Some(title) = text_of("resolver_title") {
        let chosen = first_with("resolver_item_", |n| n.checked).unwrap_or_default();
        return Some(format!("{title} {chosen}?"));
    }
    // The payment sheet: "Pay <merchant>" and the amount.
    if let (Some(merchant), Some(amount)) = (text_of("payment_merchant"), text_of("payment_amount"))
    {
        let merchant = merchant.strip_prefix("Pay ").unwrap_or(merchant);
        return Some(format!("Pay {amount} to {merchant}?"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::question;
    use crate::screen::{Node, Screen};

    fn node(id: &str, text: &str) -> Node {
        Node {
            id: id.into(),
            text: text.into(),
            package: "android".into(),
            enabled: true,
            ..Node::default()
        }
    }

    fn screen(nodes: Vec<Node>) -> Screen {
        Screen { nodes, rotation: 0 }
    }

    #[test]
    fn a_share_chooser_asks_with_its_first_target_and_a_cut_quote() {
        let long = "x".repeat(70);
        let mut first = node("share_target_messages", "Messages");
        first.clickable = true;
        let mut second = node("share_target_notes", "Notes");
        second.clickable = true;
        let s = screen(vec![
            node("share_title", "Share"),
            node("share_preview", &long),
            first,
            second,
        ]);
        let asked = question(&s).unwrap();
        assert_eq!(
            asked,
            format!("Share \"{}…\" with Messages?", "x".repeat(59))
        );
    }

    #[test]
    fn open_with_names_the_checked_choice() {
        let mut chosen = node("resolver_item_1", "Browser");
        chosen.checked = true;
        let s = screen(vec![
            node("resolver_title", "Open https://example.com/ with"),
            node("resolver_item_0", "Notes"),
            chosen,
        ]);
        assert_eq!(
            question(&s).as_deref(),
            Some("Open https://example.com/ with Browser?")
        );
    }

    #[test]
    fn a_payment_sheet_and_a_permission_prompt() {
        let pay = screen(vec![
            node("payment_merchant", "Pay Café Luna"),
            node("payment_amount", "€4.50"),
        ]);
        assert_eq!(question(&pay).as_deref(), Some("Pay €4.50 to Café Luna?"));
        let ask = screen(vec![node(
            "permission_message",
            "Allow Camera to record audio?",
        )]);
        assert_eq!(
            question(&ask).as_deref(),
            Some("Allow Camera to record audio?")
        );
        assert_eq!(question(&screen(vec![node("alertTitle", "Hi")])), None);
    }
}
