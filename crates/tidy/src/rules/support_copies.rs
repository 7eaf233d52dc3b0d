//! Rule `support-copy`: support code shared by several crates' tests lives once, in
//! `crates/test-support`. A test file elsewhere that defines a function of the shared support
//! ([`SHARED`]) again — rather than importing it — is a violation.

use crate::{Tree, Violation};

pub const RULE: &str = "support-copy";

/// The shared support crate.
pub const HOME: &str = "crates/test-support/";

/// Signatures of the shared functions, as written (whitespace aside).
pub const SHARED: &[&str] = &["fn registry() -> &'static Registry"];

pub fn check(tree: &Tree) -> Vec<Violation> {
    let shared: Vec<String> = SHARED.iter().map(|s| squeeze(s)).collect();
    let mut out = Vec::new();
    for file in tree.rust() {
        if !file.path.starts_with("crates/") || file.path.starts_with(HOME) {
            continue;
        }
        for line in file.lines() {
            if !(file.is_test_file() || line.in_test) {
                continue;
            }
            let code = squeeze(&line.bare);
            if let Some(sig) = shared.iter().find(|s| code.contains(s.as_str())) {
                out.push(Violation {
                    rule: RULE,
                    path: file.path.clone(),
                    line: line.no,
                    message: format!(
                        "a copy of the shared test support (`{sig}`): use openphone_test_support instead"
                    ),
                });
            }
        }
    }
    out
}

fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}
