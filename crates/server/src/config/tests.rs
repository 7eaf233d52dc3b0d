//! Tests of the configuration: the documented example parses, and every bad setting is
//! refused naming the key.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use openphone_policy::Autonomy;

use super::*;

#[test]
fn the_documented_example_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openphone.example.toml");
    let cfg = Config::load(&path).unwrap();
    assert_eq!(cfg.runtimes.len(), 3);
    assert_eq!(cfg.limits, Limits::default());
    assert_eq!(cfg.mcp, McpConfig::default());
    assert_eq!(cfg.endpoint, EndpointConfig::default());
    assert_eq!(cfg.log, LogConfig::default());
    assert_eq!(cfg.store, StoreConfig::default());
    cfg.check_mcp().unwrap();
    cfg.check_endpoint().unwrap();
    cfg.check_store().unwrap();
    assert_eq!(cfg.routing.get("chat").map(String::as_str), Some("hermes"));
    assert_eq!(
        cfg.tool_policy
            .for_runtime("hermes")
            .unwrap()
            .profile
            .as_deref(),
        Some("messaging")
    );
}

#[test]
fn store_retention_settings_become_the_stores_policy() {
    let cfg = Config::parse(
        "[store]\nresult_retention_days = 2\nresult_retention_mb = 3\n",
        "x.toml",
    )
    .unwrap();
    cfg.check_store().unwrap();
    let r = cfg.store.retention();
    assert_eq!(r.max_age_ms, 2 * 86_400_000);
    assert_eq!(r.max_bytes, 3 * 1024 * 1024);
    for text in [
        "[store]\nresult_retention_days = 0\n",
        "[store]\nresult_retention_mb = 0\n",
    ] {
        let err = Config::parse(text, "x.toml")
            .and_then(|c| c.check_store().map(|()| c))
            .unwrap_err();
        assert!(err.to_string().contains("at least 1"), "{text}: {err}");
    }
    let err = Config::parse("[store]\nkeep = 1\n", "x.toml").unwrap_err();
    assert!(err.to_string().contains("keep"), "{err}");
}

#[test]
fn bad_mcp_settings_are_named() {
    for (text, needle) in [
        (
            "[mcp]\nconfirmation_timeout_ms = 700000\n",
            "confirmation_timeout_ms",
        ),
        (
            "[mcp.http]\nextra_allowed_origins = [\"app.example\"]\n",
            "scheme",
        ),
        ("[mcp]\nwait = 3\n", "wait"),
        ("[mcp.http]\nextra_allowed_origins = [\"null\"]\n", "scheme"),
    ] {
        let err = Config::parse(text, "x.toml")
            .and_then(|c| c.check_mcp().map(|()| c))
            .unwrap_err();
        assert!(err.to_string().contains(needle), "{text}: {err}");
    }
}

#[test]
fn bad_front_door_settings_are_named() {
    for (text, needle) in [
        ("[limits]\nmax_connections = 0\n", "max_connections"),
        ("[limits]\nmax_unauthenticated = 0\n", "max_unauthenticated"),
        (
            "[limits]\nmax_connections_per_principal = 0\n",
            "max_connections_per_principal",
        ),
        ("[limits]\nhello_timeout_ms = 5\n", "hello_timeout_ms"),
        (
            "[limits]\nheader_read_timeout_ms = 900000\n",
            "header_read_timeout_ms",
        ),
        ("[endpoint]\nextra_allowed_origins = [\"null\"]\n", "scheme"),
        ("[endpoint]\norigins = []\n", "origins"),
    ] {
        let err = Config::parse(text, "x.toml")
            .and_then(|c| c.check_endpoint().map(|()| c))
            .unwrap_err();
        assert!(err.to_string().contains(needle), "{text}: {err}");
    }
}

#[test]
fn weak_runtime_tokens_are_refused_naming_the_key() {
    for (token, needle) in [
        ("abc", "3 characters"),
        ("", "empty"),
        ("                    ", "empty"),
        ("0123456789 abcdef0123", "whitespace"),
    ] {
        let text = format!("[[runtimes]]\nid = \"a\"\ntoken = \"{token}\"\n");
        let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(err.contains("x.toml") && err.contains("`token`"), "{err}");
        assert!(err.contains(needle), "{token:?}: {err}");
    }
}

#[test]
fn a_runtime_named_operator_is_refused_as_it_would_act_as_the_user() {
    for id in ["operator", " Operator "] {
        let text =
            format!("[[runtimes]]\nid = \"{id}\"\ntoken = \"0123456789abcdef0123456789abcdef\"\n");
        let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(err.contains("reserved"), "{id:?}: {err}");
    }
    let text = "[[runtimes]]\nid = \"operators\"\ntoken = \"0123456789abcdef0123456789abcdef\"\n";
    assert!(Config::parse(text, "x.toml").is_ok());
}

#[test]
fn the_access_log_is_off_unless_asked_for() {
    assert!(!Config::parse("", "x.toml").unwrap().log.access);
    assert!(
        Config::parse("[log]\naccess = true\n", "x.toml")
            .unwrap()
            .log
            .access
    );
    let err = Config::parse("[log]\nlevel = \"debug\"\n", "x.toml").unwrap_err();
    assert!(err.to_string().contains("level"), "{err}");
}

#[test]
fn unknown_keys_are_named() {
    let err = Config::parse("[limits]\nmax_frame = 3\n", "x.toml").unwrap_err();
    assert!(err.to_string().contains("max_frame"), "{err}");
    let err = Config::parse("[[runtimes]]\nid = \"a\"\ntokn = \"x\"\n", "x.toml").unwrap_err();
    assert!(err.to_string().contains("tokn"), "{err}");
}

#[test]
fn runtimes_resolve_with_grants_and_policy() {
    let cfg = Config::parse(
        r#"
[[runtimes]]
id = "hermes"
token = "0123456789abcdef0123"
grants = ["safe_read", "dangerous"]
max_autonomy = "trusted_actions"

[tool_policy.global]
deny = ["group:calls"]

[limits]
rate_burst = 5.0
"#,
        "x.toml",
    )
    .unwrap();
    let creds = cfg.credentials().unwrap();
    assert_eq!(creds[0].id, "hermes");
    assert!(creds[0].grants.dangerous && !creds[0].grants.private_read);
    assert_eq!(creds[0].max_autonomy, Autonomy::TrustedActions);
    assert_eq!(cfg.limits.rate_burst, 5.0);
    assert_eq!(cfg.limits.max_in_flight, 16);
    assert_eq!(cfg.tool_policy.global.deny.len(), 1);
    assert!(!format!("{:?}", creds[0]).contains("0123456789"));
}

const TOKEN: &str = "0123456789abcdef0123";

#[test]
fn tool_profiles_are_read_from_both_tables_and_the_runtime_shorthand() {
    let cfg = Config::parse(
        &format!(
            r#"
[[runtimes]]
id = "hermes"
token = "{TOKEN}"
profile = "messaging"

[[runtimes]]
id = "claw"
token = "{TOKEN}x"
profile = "read"

[tool_policy.global]
profile = "phone_control"
deny = ["group:calls"]

[tool_policy.runtimes.hermes]
allow = ["openphone.ui.tap"]

[tool_policy.runtimes.claw]
profile = "read"
"#
        ),
        "x.toml",
    )
    .unwrap();
    let tp = &cfg.tool_policy;
    assert_eq!(tp.global.profile.as_deref(), Some("phone_control"));
    let hermes = tp.for_runtime("hermes").unwrap();
    assert_eq!(hermes.profile.as_deref(), Some("messaging"));
    assert_eq!(hermes.allow.as_ref().map(Vec::len), Some(1));
    assert_eq!(
        tp.for_runtime("claw").unwrap().profile.as_deref(),
        Some("read")
    );
    // a shorthand with no tool-policy table creates one
    let cfg = Config::parse(
        &format!("[[runtimes]]\nid = \"a\"\ntoken = \"{TOKEN}\"\nprofile = \"minimal\"\n"),
        "x.toml",
    )
    .unwrap();
    assert_eq!(
        cfg.tool_policy.for_runtime("a").unwrap().profile.as_deref(),
        Some("minimal")
    );
    assert!(
        Config::parse("", "x.toml")
            .unwrap()
            .tool_policy
            .global
            .profile
            .is_none()
    );
}

/// Review of issue 14: a misspelt runtime id under `[tool_policy.runtimes]` restricted
/// nothing and left the real runtime on the global surface.
#[test]
fn a_tool_policy_for_a_runtime_that_does_not_exist_is_refused() {
    let text = format!(
        "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\n\
         [tool_policy.runtimes.hermez]\nprofile = \"read\"\n"
    );
    let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
    assert!(
        err.contains("[tool_policy.runtimes.hermez] names no runtime"),
        "{err}"
    );
    assert!(err.contains("configured: hermes, mcp, builtin"), "{err}");
    for id in ["hermes", "mcp", "builtin"] {
        let ok = format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\n\
             [tool_policy.runtimes.{id}]\nprofile = \"read\"\n"
        );
        assert!(Config::parse(&ok, "x.toml").is_ok(), "{id}");
    }
}

#[test]
fn an_unknown_profile_is_refused_listing_the_known_ones() {
    for (text, needle) in [
        (
            "[tool_policy.global]\nprofile = \"everything\"\n",
            "[tool_policy.global]",
        ),
        (
            "[tool_policy.runtimes.hermes]\nprofile = \"Messaging\"\n",
            "[tool_policy.runtimes.hermes]",
        ),
        (
            &format!("[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\nprofile = \"mini\"\n"),
            "runtime \"hermes\"",
        ),
    ] {
        let err = Config::parse(text, "x.toml").unwrap_err().to_string();
        assert!(err.contains(needle), "{text}: {err}");
        assert!(err.contains("unknown tool profile"), "{err}");
        assert!(
            err.contains("known: minimal, read, messaging, phone_control, full"),
            "{err}"
        );
    }
    let err = Config::parse("[tool_policy.global]\nprofiles = \"read\"\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("profiles"), "{err}");
}

#[test]
fn two_different_profiles_for_one_runtime_are_refused_naming_both() {
    let text = format!(
        "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\nprofile = \"messaging\"\n\n\
         [tool_policy.runtimes.hermes]\nprofile = \"read\"\n"
    );
    let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
    assert!(
        err.contains("hermes") && err.contains("\"messaging\"") && err.contains("\"read\""),
        "{err}"
    );
    assert!(err.contains("[tool_policy.runtimes.hermes]"), "{err}");
    // the same profile twice is fine
    let same = text.replace("\"read\"", "\"messaging\"");
    let cfg = Config::parse(&same, "x.toml").unwrap();
    assert_eq!(
        cfg.tool_policy
            .for_runtime("hermes")
            .unwrap()
            .profile
            .as_deref(),
        Some("messaging")
    );
}

#[test]
fn the_builtin_table_is_closed_and_checked() {
    let cfg = Config::parse(
        "[builtin]\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"llama3.2\"\n\
         max_turns = 8\n\n[builtin.background_model]\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
         model = \"small\"\n",
        "x.toml",
    )
    .unwrap();
    let builtin = cfg.builtin.unwrap();
    assert_eq!((builtin.model.as_str(), builtin.max_turns), ("llama3.2", 8));
    assert_eq!(builtin.background_model.unwrap().model, "small");
    assert!(Config::parse("", "x.toml").unwrap().builtin.is_none());
    // The commented `[builtin]` block of the example names every key, and parses once
    // uncommented (with one key source).
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openphone.example.toml"),
    )
    .unwrap();
    let block: String = example[example.find("# [builtin]").unwrap()..]
        .lines()
        .filter_map(|line| line.strip_prefix("# "))
        .filter(|line| line.starts_with('[') || line.contains(" = "))
        .filter(|line| !line.starts_with("api_key_file"))
        .map(|line| format!("{line}\n"))
        .collect();
    let documented = Config::parse(&block, "example").unwrap().builtin.unwrap();
    assert_eq!(documented.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(documented.confirmation_timeout_secs, 120);
    assert!(documented.background_model.is_some());
    for (text, needle) in [
        (
            "[builtin]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\nmodle = 1\n",
            "modle",
        ),
        (
            "[builtin]\nbase_url = \"http://h/v1\"\nmodel = \"\"\n",
            "model is empty",
        ),
        (
            "[builtin]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\nmax_turns = 0\n",
            "max_turns",
        ),
    ] {
        let err = Config::parse(text, "x.toml").unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn a_postgres_store_is_read_with_its_host_id_tls_and_password_file() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("pg.pass");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let text = format!(
        "[store]\nurl = \"postgres://openphone@db.example.org/openphone\"\nhost_id = \"rack-2\"\n\
         tls = \"require\"\npassword_file = \"{}\"\n",
        secret.display()
    );
    let cfg = Config::parse(&text, "x.toml").unwrap();
    cfg.check_store().unwrap();
    let pg = cfg.store.postgres(dir.path()).unwrap().unwrap();
    assert_eq!(pg.host_id, "rack-2");
    assert_eq!(pg.label, "rack-2");
    assert_eq!(pg.tls, openphone_store_pg::TlsMode::Require);
    assert_eq!(pg.password.as_deref(), Some("s3cret"));
    assert!(!format!("{pg:?}").contains("s3cret"), "{pg:?}");
    // Without `url` the store is SQLite in the data directory.
    let sqlite = Config::parse("", "x.toml").unwrap();
    assert!(sqlite.store.postgres(dir.path()).unwrap().is_none());
}

#[test]
fn bad_postgres_store_settings_are_refused_naming_the_key() {
    let refused = |text: &str| {
        let cfg = Config::parse(text, "x.toml").unwrap();
        cfg.check_store().unwrap_err().to_string()
    };
    let url = "url = \"postgres://openphone@127.0.0.1/openphone\"\n";
    let e = refused("[store]\nhost_id = \"a\"\n");
    assert!(e.contains("need `url`"), "{e}");
    let e = refused("[store]\nlabel = \"Lab\"\n");
    assert!(e.contains("need `url`"), "{e}");
    let e = refused(&format!("[store]\n{url}host_id = \"no spaces\"\n"));
    assert!(e.contains("host_id"), "{e}");
    let e = refused(&format!("[store]\n{url}host_id = \"a\"\ntls = \"maybe\"\n"));
    assert!(e.contains("tls"), "{e}");
    let e = refused(&format!(
        "[store]\n{url}host_id = \"a\"\npassword_file = \"/x\"\npassword_env = \"PGPASS\"\n"
    ));
    assert!(e.contains("not both"), "{e}");
    let e = refused(&format!(
        "[store]\n{url}host_id = \"a\"\npassword_file = \"/nonexistent/pg.pass\"\n"
    ));
    assert!(e.contains("/nonexistent/pg.pass"), "{e}");
}
