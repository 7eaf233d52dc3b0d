//! Regression tests, each named after the bug it pins (the issue in a comment).

use openphone_protocol::Rule;
use serde_json::json;

use super::support::Docs;

/// Issue 11 (found by the `manifest_load` fuzz target): an alias with surrounding whitespace
/// passed every load-time rule, but `resolve` trims what it looks up, so the alias could
/// never be resolved (and a padded name shadowed nothing it seemed to).
#[test]
fn padded_alias_that_never_resolves_is_rejected() {
    let mut docs = Docs::shipped();
    docs.command("openphone.calendar.delete")
        .insert("aliases".into(), json!([" calendar.delete"]));
    let errors = docs.load().expect_err("a padded alias loaded");
    assert!(
        errors.has(
            Rule::CommandRequiredFields,
            Some("openphone.calendar.delete")
        ),
        "{errors}"
    );

    let mut docs = Docs::shipped();
    docs.command("openphone.ui.tap")
        .insert("name".into(), json!("openphone.ui.tap "));
    let errors = docs.load().expect_err("a padded name loaded");
    assert!(
        errors.has(Rule::CommandRequiredFields, Some("openphone.ui.tap ")),
        "{errors}"
    );
}
