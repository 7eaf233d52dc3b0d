//! Each rule failing on a planted violation: a small tree written to a temporary directory,
//! loaded as the real one is, and the rule naming the planted file and line. Beside each, the
//! same tree without the violation passes.

use std::path::Path;

use openphone_tidy::rules::{
    cli_reads, command_lists, device, exhaustive, layers, long_files, store_calls, support_copies,
};
use openphone_tidy::{Package, Tree, Violation, lex};
use serde_json::json;

/// Writes `files` under a temporary directory and loads it as a tree.
fn plant(files: &[(&str, &str)]) -> Tree {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).expect("directories");
        std::fs::write(&path, text).expect("a planted file");
    }
    Tree::load(dir.path()).expect("the planted tree reads")
}

fn at(found: &[Violation]) -> Vec<(String, usize)> {
    found.iter().map(|v| (v.path.clone(), v.line)).collect()
}

fn one(path: &str, line: usize) -> Vec<(String, usize)> {
    vec![(path.to_owned(), line)]
}

#[test]
fn device_held_outside_core() {
    let bad =
        "use std::sync::Arc;\n\npub struct Notifier {\n    device: Arc<dyn PhoneDevice>,\n}\n";
    let tree = plant(&[("crates/server/src/background.rs", bad)]);
    assert_eq!(
        at(&device::check(&tree)),
        one("crates/server/src/background.rs", 4)
    );
    let glob = plant(&[("crates/jobs/src/run.rs", "use openphone_device::*;\n")]);
    assert_eq!(at(&device::check(&glob)), one("crates/jobs/src/run.rs", 1));
    // The holders, a comment, a data type and test code are fine.
    let fine = plant(&[
        ("crates/core/src/bridge/mod.rs", bad),
        ("crates/server/src/daemon.rs", bad),
        ("crates/device/src/lib.rs", bad),
        (
            "crates/server/src/world.rs",
            "// not a PhoneDevice\nuse openphone_device::DeviceEvent;\n#[cfg(test)]\nmod tests {\n    use openphone_device::SimPhone;\n}\n",
        ),
        ("crates/server/tests/suite/support.rs", bad),
    ]);
    assert_eq!(device::check(&fine), vec![]);
}

#[test]
fn cli_reading_a_response_field() {
    let bad = "fn show(goal: &Value) {\n    let n = goal.get(\"actions\");\n    let d = goal[\"deadline_at\"].as_i64();\n}\n";
    let tree = plant(&[("crates/cli/src/goals_cmd.rs", bad)]);
    assert_eq!(
        at(&cli_reads::check(&tree)),
        vec![
            ("crates/cli/src/goals_cmd.rs".to_owned(), 2),
            ("crates/cli/src/goals_cmd.rs".to_owned(), 3)
        ]
    );
    // Array literals, typed fields, listed inputs, other crates and test modules are fine.
    let fine = plant(&[
        (
            "crates/cli/src/client_cmd.rs",
            "fn f(params: &Value, r: Reply) {\n    let a = vec![\"x\"];\n    let b = &[\"y\"];\n    let c = r.actions;\n    if params.get(\"reason\").is_some() {}\n}\n#[cfg(test)]\nmod tests {\n    fn t(v: Value) { assert_eq!(v[\"valid\"], false); }\n}\n",
        ),
        ("crates/server/src/goals.rs", bad),
    ]);
    assert_eq!(cli_reads::check(&fine), vec![]);
}

fn manifest() -> (&'static str, String) {
    let commands = json!({"commands": [
        {"name": "openphone.ui.tap", "aliases": ["openphone.tap"]},
        {"name": "openphone.app.open", "aliases": []},
        {"name": "openphone.memory.save"},
    ]});
    (command_lists::MANIFEST, commands.to_string())
}

#[test]
fn a_second_command_list() {
    let (path, text) = manifest();
    let array = "pub const UNTARGETED: &[&str] = &[\n    \"openphone.ui.tap\",\n    \"openphone.app.open\",\n];\n";
    let pattern = "fn serves(name: &str) -> bool {\n    matches!(name, \"openphone.memory.save\" | \"openphone.tap\")\n}\n";
    let tuples = "const T: &[(&str, &[&str])] = &[\n    (\"openphone.app.open\", &[\"label\"]),\n    (\n        \"openphone.ui.tap\",\n        &[\"x\"],\n    ),\n];\n";
    let tree = plant(&[
        (path, text.as_str()),
        ("crates/policy/src/grants.rs", array),
        ("crates/core/src/services.rs", pattern),
        ("crates/goals/src/targets.rs", tuples),
    ]);
    let mut found = at(&command_lists::check(&tree));
    found.sort();
    assert_eq!(
        found,
        vec![
            ("crates/core/src/services.rs".to_owned(), 2),
            ("crates/goals/src/targets.rs".to_owned(), 2),
            ("crates/policy/src/grants.rs".to_owned(), 2),
        ]
    );
    // One constant per command, a match arm per command, the protocol crate and tests are fine.
    let fine = plant(&[
        (path, text.as_str()),
        (
            "crates/jobs/src/service.rs",
            "pub const CREATE: &str = \"openphone.ui.tap\";\npub const LIST: &str = \"openphone.app.open\";\nfn f(n: &str) {\n    match n {\n        \"openphone.ui.tap\" => {}\n        \"openphone.app.open\" => {}\n        _ => {}\n    }\n}\n",
        ),
        ("crates/protocol/src/registry.rs", array),
        ("crates/policy/tests/suite/grants.rs", array),
    ]);
    assert_eq!(command_lists::check(&fine), vec![]);
}

#[test]
fn a_long_file_without_a_reason() {
    let body = "fn f() {}\n".repeat(long_files::MAX_LINES);
    let long = format!("//! A module.\n{body}");
    let reasoned = format!("//! A module.\n//! Long: one table of cases in their order.\n{body}");
    let short = "//! A module.\nfn f() {}\n";
    let tree = plant(&[
        ("crates/goals/src/engine.rs", long.as_str()),
        ("crates/goals/src/table.rs", reasoned.as_str()),
        ("crates/goals/src/ok.rs", short),
    ]);
    assert_eq!(
        at(&long_files::check(&tree)),
        one("crates/goals/src/engine.rs", long_files::MAX_LINES + 1)
    );
}

#[test]
fn store_called_as_a_path_outside_core() {
    let bad = "fn f(bridge: &ToolBridge) {\n    let store = ToolBridge::store(bridge);\n}\n";
    let tree = plant(&[
        ("crates/watchers/src/engine/fire.rs", bad),
        ("crates/core/src/authority.rs", bad),
    ]);
    assert_eq!(
        at(&store_calls::check(&tree)),
        vec![("crates/watchers/src/engine/fire.rs".to_owned(), 2)]
    );
}

#[test]
fn store_called_outside_core() {
    let bad = "fn f(bridge: &ToolBridge) {\n    // bridge.store() in a comment is fine\n    let s = \".store()\";\n    bridge.store().get_job(1);\n}\n";
    let tree = plant(&[
        ("crates/server/src/goals.rs", bad),
        ("crates/openclaw/tests/suite/outbox.rs", bad),
        ("crates/core/src/bridge/mod.rs", bad),
        ("crates/server/src/daemon.rs", bad),
        ("crates/store/src/lib.rs", bad),
    ]);
    let mut found = at(&store_calls::check(&tree));
    found.sort();
    assert_eq!(
        found,
        vec![
            ("crates/openclaw/tests/suite/outbox.rs".to_owned(), 4),
            ("crates/server/src/goals.rs".to_owned(), 4),
        ]
    );
}

fn routers(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut files: Vec<(&str, &str)> = exhaustive::MODULES
        .iter()
        .map(|m| (*m, "#![warn(clippy::wildcard_enum_match_arm)]\n"))
        .collect();
    files.extend_from_slice(extra);
    files
}

#[test]
fn a_catch_all_in_a_router() {
    let bad = "fn route(kind: &ActionKind) {\n    match kind {\n        ActionKind::Tool { .. } => run(),\n        _ => {}\n    }\n}\n";
    let tree = plant(&routers(&[("crates/goals/src/engine/router.rs", bad)]));
    assert_eq!(
        at(&exhaustive::check(&tree)),
        one("crates/goals/src/engine/router.rs", 4)
    );
    // Outside the zones, and in test code, a catch-all is not this rule's business.
    let fine = plant(&routers(&[
        ("crates/model/src/answer.rs", bad),
        (
            "crates/goals/src/spec.rs",
            "#[cfg(test)]\nmod tests {\n    fn t() { match 1 { 1 => {} _ => {} } }\n}\n",
        ),
    ]));
    assert_eq!(exhaustive::check(&fine), vec![]);
}

#[test]
fn a_router_without_the_lint() {
    let mut files = routers(&[]);
    let (path, _) = files[0];
    files[0] = (path, "//! A router.\nfn f() {}\n");
    let tree = plant(&files);
    assert_eq!(at(&exhaustive::check(&tree)), one(path, 1));
}

/// A planted package: its name and its dependencies with their kind (`None`: normal).
type Planted<'a> = (&'a str, &'a [(&'a str, Option<&'a str>)]);

/// `cargo metadata` output for a planted workspace.
fn metadata(packages: &[Planted<'_>]) -> serde_json::Value {
    json!({
        "workspace_root": "/w",
        "packages": packages.iter().map(|(name, deps)| json!({
            "name": name,
            "manifest_path": format!("/w/crates/{}/Cargo.toml", name.trim_start_matches("openphone-")),
            "dependencies": deps.iter().map(|(d, kind)| json!({"name": d, "kind": kind})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

#[test]
fn a_crate_depending_on_what_its_layer_may_not() {
    let meta = metadata(&[
        (
            "openphone-protocol",
            &[("serde", None), ("tokio", None), ("proptest", Some("dev"))],
        ),
        ("openphone-core", &[("openphone-protocol", None)]),
        (
            "openphone-store",
            &[("rusqlite", None), ("openphone-core", None)],
        ),
        (
            "openphone-server",
            &[
                ("rusqlite", None),
                ("openphone-core", None),
                ("openphone-test-support", None),
            ],
        ),
        (
            "openphone-mcp",
            &[("rmcp", None), ("rusqlite", Some("dev"))],
        ),
        ("openphone-cli", &[("rmcp", None)]),
        ("openphone-newcomer", &[]),
    ]);
    let packages = Package::from_metadata(&meta, "/w");
    assert_eq!(packages[0].manifest, "crates/protocol/Cargo.toml");
    let tree = plant(&[
        (
            "crates/protocol/Cargo.toml",
            "[package]\nname = \"openphone-protocol\"\n\n[dependencies]\nserde.workspace = true\ntokio = { workspace = true }\n",
        ),
        (
            "crates/store/Cargo.toml",
            "[dependencies]\nrusqlite.workspace = true\nopenphone-core.workspace = true\n",
        ),
        (
            "crates/server/Cargo.toml",
            "[dependencies]\nopenphone-core.workspace = true\nrusqlite.workspace = true\nopenphone-test-support.workspace = true\n",
        ),
        ("crates/cli/Cargo.toml", "[dependencies]\nrmcp = \"1\"\n"),
    ]);
    let mut found = at(&layers::check(&tree, &packages));
    found.sort();
    assert_eq!(
        found,
        vec![
            ("crates/cli/Cargo.toml".to_owned(), 2), // rmcp outside mcp
            ("crates/newcomer/Cargo.toml".to_owned(), 1), // no layer
            ("crates/protocol/Cargo.toml".to_owned(), 6), // tokio in a pure crate
            ("crates/server/Cargo.toml".to_owned(), 3), // rusqlite outside store
            ("crates/server/Cargo.toml".to_owned(), 4), // test support as a normal dependency
            ("crates/store/Cargo.toml".to_owned(), 3), // upward: store → core
        ]
    );
}

#[test]
fn a_copy_of_shared_test_support() {
    let copy = "use openphone_protocol::Registry;\n\npub fn registry() -> &'static Registry {\n    Registry::embedded().unwrap()\n}\n";
    let tree = plant(&[
        ("crates/goals/tests/suite/support.rs", copy),
        ("crates/test-support/src/lib.rs", copy),
        (
            "crates/core/tests/suite/support.rs",
            "pub use openphone_test_support::registry;\n",
        ),
    ]);
    assert_eq!(
        at(&support_copies::check(&tree)),
        one("crates/goals/tests/suite/support.rs", 3)
    );
}

#[test]
fn the_lexer_keeps_strings_and_drops_comments() {
    let lines = lex::lines(
        "let a = \"// not a comment\"; // a comment\nlet c = '{'; /* block\n still */ let r = r#\"x\"y\"#;\n",
    );
    assert_eq!(lines[0].code.trim_end(), "let a = \"// not a comment\";");
    assert_eq!(lines[0].strings[0].text, "// not a comment");
    assert!(!lines[1].bare.contains('{'));
    assert_eq!(lines[2].code.trim(), "let r = r#\"x\"y\"#;");
    assert_eq!(lines[2].strings[0].text, "x\"y");
}
