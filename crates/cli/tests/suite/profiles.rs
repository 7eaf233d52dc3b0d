//! `openphone policy profiles` (offline): text, JSON, and the Markdown that `docs/profiles.md`
//! must equal, so the reference page is only ever written by the command.

use serde_json::Value;

use super::support::run;

fn repo_file(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

#[test]
fn docs_profiles_md_is_the_generated_markdown() {
    let (code, generated, err) = run(&["policy", "profiles", "--markdown"], "");
    assert_eq!(code, 0, "{err}");
    let on_disk = std::fs::read_to_string(repo_file("docs/profiles.md"))
        .unwrap_or_else(|e| panic!("docs/profiles.md: {e}"));
    assert!(
        on_disk == generated,
        "docs/profiles.md differs from the generated reference; regenerate it with\n    \
         cargo run -p openphone-cli -- policy profiles --markdown > docs/profiles.md"
    );
}

#[test]
fn json_lists_every_profile_with_its_commands() {
    let (code, out, err) = run(&["policy", "profiles", "--json"], "");
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let profiles = v["profiles"].as_array().unwrap();
    let names: Vec<&str> = profiles
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["minimal", "read", "messaging", "phone_control", "full"]
    );
    let by_name = |name: &str| profiles.iter().find(|p| p["name"] == name).unwrap();
    assert_eq!(
        by_name("minimal")["commands"],
        serde_json::json!([
            "openphone.device.status",
            "openphone.apps.search",
            "openphone.screen.get",
            "openphone.screen.understand_local"
        ])
    );
    assert_eq!(by_name("read")["reads_only"], true);
    assert_eq!(by_name("full")["unfiltered"], true);
    assert_eq!(by_name("full")["commands"].as_array().unwrap().len(), 42);
    let messaging = by_name("messaging")["commands"].as_array().unwrap();
    assert!(messaging.iter().any(|c| c == "openphone.messages.send"));
    assert!(!messaging.iter().any(|c| c == "openphone.ui.tap"));
    for p in profiles {
        assert!(!p["description"].as_str().unwrap().is_empty());
    }
}

#[test]
fn text_names_each_profile_and_its_commands() {
    let (code, out, err) = run(&["policy", "profiles"], "");
    assert_eq!(code, 0, "{err}");
    for needle in [
        "minimal: Look at the phone",
        "read: ",
        "include: * (reads only)",
        "phone_control: ",
        "    openphone.ui.tap\n",
        "commands (42):",
    ] {
        assert!(out.contains(needle), "{needle:?} in\n{out}");
    }
    let (code, _, err) = run(&["policy", "profiles", "--json", "--markdown"], "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}
