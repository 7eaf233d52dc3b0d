use openphone_openclaw::{DeviceIdentity, SignedConnect};

fn seed() -> [u8; 32] {
    let hex = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[test]
fn appendix_c_vector_public_key_device_id_payload_and_signature() {
    let id = DeviceIdentity::from_seed(seed());
    assert_eq!(
        id.public_key(),
        "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    );
    assert_eq!(
        id.device_id(),
        "21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9"
    );
    let signed = SignedConnect {
        client_id: "openclaw-android",
        client_mode: "node",
        role: "node",
        scopes: &[],
        signed_at_ms: 1_795_317_836_985,
        token: "peer-test-token",
        nonce: "90e1b86d-a998-40b5-9c0a-d62de0df2910",
        platform: Some(" Android "),
        device_family: None,
    };
    assert_eq!(
        id.payload(&signed),
        "v3|21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9|openclaw-android|node|node||1795317836985|peer-test-token|90e1b86d-a998-40b5-9c0a-d62de0df2910|android|"
    );
    assert_eq!(
        id.sign(&signed),
        "Xh2XCJG2txoGO7tgNYKcoBTm-4ktRyooCW517VLVmwSd4AinuL4VuDU028R93RLfJ4oql1nLaT-1i0MiT6jxCQ"
    );
}

#[test]
fn the_key_is_created_once_with_mode_0600_and_then_reused() {
    let dir = tempfile::tempdir().unwrap();
    let first = DeviceIdentity::load_or_create(dir.path()).unwrap();
    let again = DeviceIdentity::load_or_create(dir.path()).unwrap();
    assert_eq!(first.device_id(), again.device_id());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(DeviceIdentity::path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let other = tempfile::tempdir().unwrap();
    assert_ne!(
        DeviceIdentity::load_or_create(other.path())
            .unwrap()
            .device_id(),
        first.device_id()
    );
}

#[test]
fn a_damaged_key_file_is_an_error_never_silently_replaced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(DeviceIdentity::path(dir.path()), "not a key").unwrap();
    let err = DeviceIdentity::load_or_create(dir.path()).unwrap_err();
    assert!(err.to_string().contains("not a 64-character hex"), "{err}");
    assert_eq!(
        std::fs::read_to_string(DeviceIdentity::path(dir.path())).unwrap(),
        "not a key"
    );
}
