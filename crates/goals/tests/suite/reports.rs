//! Delta report renderers: Telegram MarkdownV2 escapes every reserved character, keeps every
//! message within 4096 characters, splits on line boundaries and never inside an escape.

use openphone_goals::model::GoalState;
use openphone_goals::report::{
    DeltaReport, ReportReason, ReportedBlocker, TELEGRAM_MAX_CHARS, TELEGRAM_RESERVED,
    escape_markdown_v2, render_markdown, render_plain, split_messages, telegram_messages,
};
use proptest::prelude::*;

/// Removes MarkdownV2 escapes (a backslash before any character).
fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every reserved character in `text` is escaped (outside the `*` of bold headings).
fn all_escaped(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' {
            if i + 1 >= chars.len() {
                return false;
            }
            i += 2;
            continue;
        }
        if TELEGRAM_RESERVED.contains(&chars[i]) && chars[i] != '*' {
            return false;
        }
        i += 1;
    }
    true
}

fn report(objective: String, items: Vec<String>) -> DeltaReport {
    DeltaReport {
        goal_id: "goal_X".to_owned(),
        objective,
        reason: ReportReason::Progress,
        state: GoalState::Active,
        at: 0,
        done: items.clone(),
        new_blockers: items
            .iter()
            .map(|i| ReportedBlocker {
                action: i.clone(),
                kind: "approval".to_owned(),
                reason: i.clone(),
                how_to_resolve: "openphone confirmations approve runtime-confirm-1".to_owned(),
            })
            .collect(),
        approvals_waiting: vec![],
        deadline: "deadline in 5 min".to_owned(),
        checkpoints: vec![],
        next: items,
        evidence: vec![],
        progress: (1, 3),
    }
}

#[test]
fn a_report_renders_in_every_format() {
    let r = report(
        "move the dentist (Fri.) & tell Alice!".to_owned(),
        vec!["a_b [c]".to_owned()],
    );
    let plain = render_plain(&r);
    assert!(plain.starts_with(
        "Goal active — move the dentist (Fri.) & tell Alice! (1/3 done), deadline in 5 min\n"
    ));
    assert!(plain.contains("New blockers:\n- a_b [c] (approval): a_b [c] → openphone confirmations approve runtime-confirm-1\n"));
    assert!(render_markdown(&r).contains("**New blockers**"));
    let telegram = telegram_messages(&r);
    assert_eq!(telegram.len(), 1);
    assert!(telegram[0].starts_with("*Goal active — move the dentist \\(Fri\\.\\) & tell Alice\\! \\(1/3 done\\), deadline in 5 min*\n"), "{}", telegram[0]);
    assert!(telegram[0].contains("• a\\_b \\[c\\]"));
    assert_eq!(escape_markdown_v2("a\\b"), "a\\\\b");
}

#[test]
fn a_long_report_is_split_on_line_boundaries() {
    let items: Vec<String> = (0..400)
        .map(|i| format!("step {i}: call (+49) 151-2345."))
        .collect();
    let messages = telegram_messages(&report("x".to_owned(), items));
    assert!(messages.len() >= 3);
    for m in &messages {
        assert!(m.chars().count() <= TELEGRAM_MAX_CHARS);
        assert!(!m.starts_with('\n') && !m.ends_with('\n'));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn telegram_messages_keep_every_rule(
        objective in "\\PC{0,300}",
        items in proptest::collection::vec("[\\PC\\\\_*\\[\\]()~`>#+=|{}.!-]{0,400}", 0..40),
        long in "[a-z\\\\.!_]{0,9000}",
    ) {
        let mut items = items;
        items.push(long);
        let r = report(objective, items);
        let messages = telegram_messages(&r);
        for m in &messages {
            prop_assert!(m.chars().count() <= TELEGRAM_MAX_CHARS);
            prop_assert!(all_escaped(m), "unescaped reserved character in {m:?}");
            let trailing = m.chars().rev().take_while(|c| *c == '\\').count();
            prop_assert!(trailing % 2 == 0, "a message ends inside an escape");
        }
        // Nothing is lost: the messages, unescaped and joined, are the lines unescaped.
        let lines = openphone_goals::report::render_telegram_lines(&r);
        let joined: String = split_messages(&lines).iter().map(|m| unescape(m)).collect::<Vec<_>>().concat();
        let expected: String = lines.iter().map(|l| unescape(l)).collect::<Vec<_>>().join("\n");
        prop_assert_eq!(joined.replace(['\n', '*'], ""), expected.replace(['\n', '*'], ""));
    }
}
