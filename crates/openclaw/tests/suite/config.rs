use openphone_openclaw::OpenclawConfig;
use openphone_policy::Autonomy;
use openphone_protocol::Exposure;

#[test]
fn a_public_ws_url_is_refused_before_any_connection() {
    let err = OpenclawConfig::new("ws://gateway.example.com:18789")
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("use wss://"), "{err}");
    let err = OpenclawConfig::new("ws://8.8.8.8:18789")
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("8.8.8.8"), "{err}");
    for ok in [
        "ws://127.0.0.1:18789",
        "ws://192.168.1.20:18789",
        "wss://gateway.example.com",
    ] {
        OpenclawConfig::new(ok).check().unwrap();
    }
}

#[test]
fn unknown_keys_are_refused_and_grants_are_parsed() {
    let err = serde_json::from_value::<OpenclawConfig>(serde_json::json!({
        "url": "ws://127.0.0.1:1", "tokne": "x"
    }))
    .unwrap_err();
    assert!(err.to_string().contains("tokne"), "{err}");
    let mut cfg = OpenclawConfig::new("ws://127.0.0.1:1");
    assert!(
        cfg.authorisation()
            .unwrap()
            .grants
            .contains(Exposure::SafeRead)
    );
    assert!(
        !cfg.authorisation()
            .unwrap()
            .grants
            .contains(Exposure::Dangerous)
    );
    cfg.grants = Some(vec!["dangerous".into()]);
    cfg.max_autonomy = Some("observe_only".into());
    let auth = cfg.authorisation().unwrap();
    assert!(auth.grants.contains(Exposure::Dangerous));
    assert_eq!(auth.max_autonomy, Autonomy::ObserveOnly);
    cfg.grants = Some(vec!["everything".into()]);
    assert!(cfg.check().unwrap_err().to_string().contains("everything"));
}

#[test]
fn a_token_env_that_is_not_set_is_named() {
    let mut cfg = OpenclawConfig::new("ws://127.0.0.1:1");
    cfg.token_env = Some("OPENPHONE_TEST_SURELY_UNSET_VAR".into());
    let err = cfg.credentials().unwrap_err();
    assert!(
        err.to_string().contains("OPENPHONE_TEST_SURELY_UNSET_VAR"),
        "{err}"
    );
}

fn setup_code(value: serde_json::Value) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

#[test]
fn a_setup_code_gives_its_bootstrap_token_and_expiry_for_its_own_gateway_only() {
    let code = setup_code(serde_json::json!({
        "url": "ws://127.0.0.1:18789", "bootstrapToken": "boot-1", "expiresAtMs": 1_900_000_000_000u64
    }));
    let mut cfg = OpenclawConfig::new("ws://127.0.0.1:18789/");
    cfg.setup_code = Some(format!(" {code}== "));
    cfg.check().unwrap();
    let creds = cfg.credentials().unwrap();
    assert_eq!(creds.bootstrap_token.as_deref(), Some("boot-1"));
    assert_eq!(creds.bootstrap_expires_at_ms, Some(1_900_000_000_000));
    // Never in the debug form: not the token, not the code it can be decoded from.
    assert!(!format!("{creds:?}").contains("boot-1"));
    cfg.token = Some("shared-secret-9".into());
    let shown = format!("{cfg:?}");
    assert!(
        !shown.contains(&code) && !shown.contains("shared-secret-9"),
        "{shown}"
    );
    assert!(shown.contains("ws://127.0.0.1:18789/"), "{shown}");
    cfg.token = None;
    let decoded = openphone_openclaw::SetupCode::decode(&code).unwrap();
    assert!(!format!("{decoded:?}").contains("boot-1"));

    // The same gateway written differently.
    cfg.url = "WS://127.0.0.1:18789".into();
    cfg.credentials().unwrap();
    let wss = setup_code(serde_json::json!({
        "url": "wss://gw.example.com/node", "bootstrapToken": "boot-2"
    }));
    let mut other = OpenclawConfig::new("wss://GW.example.com:443/node/");
    other.setup_code = Some(wss);
    assert_eq!(
        other.credentials().unwrap().bootstrap_token.as_deref(),
        Some("boot-2")
    );
    other.url = "wss://gw.example.com/other".into();
    other.credentials().unwrap_err();

    cfg.url = "ws://127.0.0.1:18790".into();
    let err = cfg.credentials().unwrap_err().to_string();
    assert!(
        err.contains("setup_code: the setup code is for ws://127.0.0.1:18789"),
        "{err}"
    );
    assert!(!err.contains("boot-1"), "{err}");
}

#[test]
fn a_bad_setup_code_is_named_without_its_secret() {
    let mut cfg = OpenclawConfig::new("ws://127.0.0.1:18789");
    for (code, expected) in [
        ("not base64 at all!".to_owned(), "not base64url"),
        (setup_code(serde_json::json!(["x"])), "no `url`"),
        (
            setup_code(serde_json::json!({"url": "ws://127.0.0.1:18789"})),
            "no `bootstrapToken`",
        ),
        (
            setup_code(serde_json::json!({
                "url": "ws://127.0.0.1:18789", "bootstrapToken": "secret-2", "expiresAtMs": "soon"
            })),
            "`expiresAtMs` is not a time",
        ),
    ] {
        cfg.setup_code = Some(code);
        let err = cfg.credentials().unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains("secret-2"), "{err}");
    }
    cfg.setup_code_env = Some("OPENPHONE_TEST_SURELY_UNSET_SETUP".into());
    let err = cfg.check().unwrap_err().to_string();
    assert!(err.contains("set one of"), "{err}");
    cfg.setup_code = None;
    let err = cfg.credentials().unwrap_err().to_string();
    assert!(err.contains("OPENPHONE_TEST_SURELY_UNSET_SETUP"), "{err}");
}
