//! Tool profiles: named tool surfaces, defined once as data (`tool-profiles.json`, embedded at
//! build time) and selected per tool list with `profile = "…"`.
//!
//! A profile is the base surface of a [`ToolList`](crate::ToolList): the list's `allow`
//! entries add to it and its `deny` entries take away from it (deny always wins). Without a
//! profile a list keeps its older meaning: no allow list admits everything, a present one
//! admits only its entries. In short, per list:
//!
//! ```text
//! surface = (profile ? profile ∪ allow : (allow ?? everything)) − deny
//! ```
//!
//! The global list and the runtime's list are both applied (layer 2 of the policy stack).
//!
//! Each profile names what it includes with the selectors of a tool list (`group:<category>`,
//! a command's canonical name, `*`) and may keep only the reads among them (`reads_only`).
//! [`Profiles::embedded`] refuses a file whose selectors do not name a category or command of
//! the embedded manifest, whose names repeat or are not snake_case, or whose profile would be
//! empty.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use openphone_protocol::{Command, Registry};
use serde::{Deserialize, Serialize};

use crate::class::is_mutating;
use crate::error::PolicyError;
use crate::selector::ToolSelector;

/// The profile file shipped with the crate.
const EMBEDDED: &str = include_str!("../tool-profiles.json");

/// One named tool surface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The name a configuration selects it by (snake_case, unique).
    pub name: String,
    /// What the profile is for, in a sentence.
    pub description: String,
    /// The commands it includes: `group:<category>`, canonical command names, `*`.
    pub include: Vec<ToolSelector>,
    /// Keep only the commands of `include` that change nothing (see [`is_mutating`]).
    #[serde(default)]
    pub reads_only: bool,
}

impl Profile {
    /// Whether the profile's surface holds the command.
    pub fn admits(&self, command: &Command) -> bool {
        self.include.iter().any(|s| s.matches(command))
            && !(self.reads_only && is_mutating(command))
    }

    /// The commands of the registry the profile holds, in registry order.
    pub fn commands<'r>(&self, registry: &'r Registry) -> Vec<&'r Command> {
        registry.commands().filter(|c| self.admits(c)).collect()
    }

    /// Whether the profile holds every command (the same surface as no profile at all).
    pub fn is_unfiltered(&self) -> bool {
        !self.reads_only && self.include.contains(&ToolSelector::All)
    }
}

/// The file's top-level shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    profiles: Vec<Profile>,
}

/// A checked set of profiles, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profiles {
    list: Vec<Profile>,
}

impl Profiles {
    /// Parses a profile file and checks what needs no manifest: names unique and snake_case,
    /// a description, at least one selector each.
    pub fn parse(text: &str) -> Result<Profiles, PolicyError> {
        let file: ProfileFile = serde_json::from_str(text)
            .map_err(|e| PolicyError::ProfileFile(format!("not a valid profile file: {e}")))?;
        let mut seen = BTreeSet::new();
        for p in &file.profiles {
            if !is_snake_case(&p.name) {
                return Err(PolicyError::ProfileFile(format!(
                    "profile name {:?} is not snake_case (a lowercase letter, then lowercase \
                     letters, digits and single underscores)",
                    p.name
                )));
            }
            if !seen.insert(p.name.as_str()) {
                return Err(PolicyError::ProfileFile(format!(
                    "profile `{}` is defined twice",
                    p.name
                )));
            }
            if p.description.trim().is_empty() {
                return Err(PolicyError::ProfileFile(format!(
                    "profile `{}` has no description",
                    p.name
                )));
            }
            if p.include.is_empty() {
                return Err(PolicyError::ProfileFile(format!(
                    "profile `{}` includes nothing",
                    p.name
                )));
            }
        }
        if file.profiles.is_empty() {
            return Err(PolicyError::ProfileFile(
                "the file defines no profile".into(),
            ));
        }
        Ok(Profiles {
            list: file.profiles,
        })
    }

    /// Checks every selector against a registry: a group names a category some command has,
    /// a name is a command's canonical name; and each profile holds at least one command.
    pub fn check(&self, registry: &Registry) -> Result<(), PolicyError> {
        for p in &self.list {
            for selector in &p.include {
                let real = match selector {
                    ToolSelector::All => true,
                    ToolSelector::Group(category) => {
                        registry.commands().any(|c| c.category == *category)
                    }
                    ToolSelector::Name(name) => {
                        registry.resolve(name).is_some_and(|c| c.name == *name)
                    }
                };
                if !real {
                    return Err(PolicyError::UnknownProfileSelector {
                        profile: p.name.clone(),
                        selector: selector.to_string(),
                    });
                }
            }
            if p.commands(registry).is_empty() {
                return Err(PolicyError::ProfileFile(format!(
                    "profile `{}` holds no command of the manifest",
                    p.name
                )));
            }
        }
        Ok(())
    }

    /// The shipped profiles, parsed once and checked against the embedded manifest.
    pub fn embedded() -> Result<&'static Profiles, PolicyError> {
        static LOADED: OnceLock<Result<Profiles, PolicyError>> = OnceLock::new();
        LOADED
            .get_or_init(|| {
                let profiles = Profiles::parse(EMBEDDED)?;
                let registry = Registry::embedded().map_err(|e| {
                    PolicyError::ProfileFile(format!("the embedded manifest does not load: {e}"))
                })?;
                profiles.check(registry)?;
                Ok(profiles)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Every profile, in file order.
    pub fn all(&self) -> &[Profile] {
        &self.list
    }

    /// A profile by name (exact).
    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.list.iter().find(|p| p.name == name)
    }

    /// A profile by name, or [`PolicyError::UnknownProfile`].
    pub fn resolve(&self, name: &str) -> Result<&Profile, PolicyError> {
        self.get(name).ok_or_else(|| PolicyError::UnknownProfile {
            name: name.to_owned(),
            known: known_profile_names(),
        })
    }

    /// The names, in file order.
    pub fn names(&self) -> Vec<&str> {
        self.list.iter().map(|p| p.name.as_str()).collect()
    }
}

/// The shipped profiles. Empty if the embedded file failed to load (which a test rules out);
/// every profile name is then unknown, so a list naming one denies everything (fail closed) and
/// a configuration naming one is refused.
pub fn profiles() -> &'static [Profile] {
    match Profiles::embedded() {
        Ok(p) => p.all(),
        Err(_) => &[],
    }
}

/// A shipped profile by name.
pub fn profile(name: &str) -> Option<&'static Profile> {
    profiles().iter().find(|p| p.name == name)
}

/// A shipped profile by name, or [`PolicyError::UnknownProfile`] (whose message lists the
/// known names).
pub fn resolve_profile(name: &str) -> Result<&'static Profile, PolicyError> {
    profile(name).ok_or_else(|| PolicyError::UnknownProfile {
        name: name.to_owned(),
        known: known_profile_names(),
    })
}

/// The shipped profile names, comma-separated (for error messages).
pub fn known_profile_names() -> String {
    let names: Vec<&str> = profiles().iter().map(|p| p.name.as_str()).collect();
    if names.is_empty() {
        "none: the embedded profile file did not load".to_owned()
    } else {
        names.join(", ")
    }
}

/// `^[a-z][a-z0-9]*(_[a-z0-9]+)*$`.
fn is_snake_case(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.split('_').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    use openphone_test_support::registry;

    fn names(p: &Profile) -> Vec<&'static str> {
        p.commands(registry())
            .into_iter()
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn the_embedded_file_loads_and_every_selector_is_real() {
        let loaded = Profiles::embedded().unwrap();
        loaded.check(registry()).unwrap();
        assert_eq!(
            loaded.names(),
            ["minimal", "read", "messaging", "phone_control", "full"]
        );
        assert_eq!(profiles().len(), 5);
        for p in profiles() {
            assert!(is_snake_case(&p.name), "{}", p.name);
            assert!(!p.description.trim().is_empty());
        }
    }

    #[test]
    fn minimal_only_looks() {
        assert_eq!(
            names(profile("minimal").unwrap()),
            [
                "openphone.device.status",
                "openphone.apps.search",
                "openphone.screen.get",
                "openphone.screen.understand_local",
            ]
        );
    }

    #[test]
    fn read_holds_exactly_the_non_mutating_commands() {
        let read = profile("read").unwrap();
        for c in registry().commands() {
            assert_eq!(read.admits(c), !is_mutating(c), "{}", c.name);
        }
        assert!(!read.is_unfiltered());
    }

    #[test]
    fn full_holds_everything() {
        let full = profile("full").unwrap();
        assert!(full.is_unfiltered());
        assert_eq!(full.commands(registry()).len(), registry().commands().len());
    }

    #[test]
    fn messaging_and_phone_control_extend_minimal() {
        let minimal = names(profile("minimal").unwrap());
        for name in ["messaging", "phone_control"] {
            let p = names(profile(name).unwrap());
            for m in &minimal {
                assert!(p.contains(m), "{name} lacks {m}");
            }
        }
        let messaging = names(profile("messaging").unwrap());
        for expected in [
            "openphone.messages.send",
            "openphone.contacts.search",
            "openphone.notifications.open",
            "openphone.calls.search",
            "openphone.calls.place",
            "openphone.share.text",
        ] {
            assert!(messaging.contains(&expected), "{expected}");
        }
        for absent in [
            "openphone.ui.tap",
            "openphone.calendar.add",
            "openphone.memory.save",
        ] {
            assert!(!messaging.contains(&absent), "{absent}");
        }
        let control = names(profile("phone_control").unwrap());
        for expected in [
            "openphone.ui.tap",
            "openphone.input.press_key",
            "openphone.app.open",
            "openphone.url.open",
            "openphone.clipboard.paste",
            "openphone.notifications.list",
        ] {
            assert!(control.contains(&expected), "{expected}");
        }
        for absent in ["openphone.messages.send", "openphone.share.text"] {
            assert!(!control.contains(&absent), "{absent}");
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        assert!(profile("everything").is_none());
        let err = resolve_profile("everything").unwrap_err().to_string();
        assert!(err.contains("`everything`"), "{err}");
        assert!(
            err.contains("minimal, read, messaging, phone_control, full"),
            "{err}"
        );
        assert_eq!(resolve_profile("read").unwrap().name, "read");
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let one = |name: &str, include: &str| {
            format!(
                r#"{{"profiles": [{{"name": "{name}", "description": "d", "include": {include}}}]}}"#
            )
        };
        for (text, needle) in [
            ("{", "not a valid profile file"),
            (r#"{"profiles": []}"#, "no profile"),
            (&one("Big", r#"["*"]"#), "snake_case"),
            (&one("a__b", r#"["*"]"#), "snake_case"),
            (&one("_a", r#"["*"]"#), "snake_case"),
            (&one("a", "[]"), "includes nothing"),
            (&one("a", r#"[""]"#), "empty tool entry"),
            (
                r#"{"profiles": [{"name": "a", "description": "d", "include": ["*"]},
                                 {"name": "a", "description": "e", "include": ["*"]}]}"#,
                "defined twice",
            ),
            (
                r#"{"profiles": [{"name": "a", "description": " ", "include": ["*"]}]}"#,
                "no description",
            ),
            (
                r#"{"profiles": [{"name": "a", "description": "d", "include": ["*"], "x": 1}]}"#,
                "unknown field",
            ),
        ] {
            let err = Profiles::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
        for (include, needle) in [
            (r#"["group:sms"]"#, "group:sms"),
            (r#"["openphone.ui.poke"]"#, "openphone.ui.poke"),
            // aliases and model-tool names work in a config list, but a profile spells the
            // canonical name
            (r#"["sms.send"]"#, "sms.send"),
        ] {
            let parsed = Profiles::parse(&one("a", include)).unwrap();
            let err = parsed.check(registry()).unwrap_err().to_string();
            assert!(
                err.contains(needle) && err.contains("`a`"),
                "{include}: {err}"
            );
        }
        let empty = Profiles::parse(
            r#"{"profiles": [{"name": "a", "description": "d", "include": ["group:ui"], "reads_only": true}]}"#,
        )
        .unwrap();
        let err = empty.check(registry()).unwrap_err().to_string();
        assert!(err.contains("holds no command"), "{err}");
    }
}
