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
