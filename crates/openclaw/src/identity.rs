//! The phone's OpenClaw device identity (`openclaw-node.md` §4): one Ed25519 key pair per
//! installation, kept in the data directory (mode 0600), and the v3 signature of a `connect`.
//!
//! `device.publicKey` is base64url (no padding) of the raw 32-byte public key, `device.id` the
//! lowercase hex SHA-256 of those bytes, and `device.signature` base64url of the signature over
//! the v3 payload `v3|deviceId|clientId|clientMode|role|scopes|signedAt|token|nonce|platform|deviceFamily`.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signer, SigningKey};
use sha2::{Digest, Sha256};

/// The key file in the data directory.
pub const KEY_FILE: &str = "openclaw-device.key";

/// Why the identity could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("reading the OpenClaw device key {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("writing the OpenClaw device key {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the OpenClaw device key {path} is not a 64-character hex Ed25519 seed; move it away \
         and run `openphone openclaw pair` to create a new identity (the phone must then be \
         approved again)"
    )]
    Malformed { path: String },
    #[error("no randomness for a new device key: {0}")]
    Random(String),
}

/// What the v3 signature covers, besides the device id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedConnect<'a> {
    pub client_id: &'a str,
    pub client_mode: &'a str,
    pub role: &'a str,
    pub scopes: &'a [String],
    /// The challenge `ts` (never the local clock).
    pub signed_at_ms: u64,
    /// The credential the gateway checks (`auth.token`, else `deviceToken`, else
    /// `bootstrapToken`, else empty).
    pub token: &'a str,
    pub nonce: &'a str,
    pub platform: Option<&'a str>,
    pub device_family: Option<&'a str>,
}

/// The device identity: the signing key and the values derived from it.
#[derive(Clone)]
pub struct DeviceIdentity {
    key: SigningKey,
}

impl std::fmt::Debug for DeviceIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceIdentity")
            .field("device_id", &self.device_id())
            .finish_non_exhaustive()
    }
}

/// `platform`/`deviceFamily` as signed: trimmed, ASCII upper case lowered, nothing else.
pub fn normalize_metadata(raw: Option<&str>) -> String {
    raw.map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

impl DeviceIdentity {
    /// The identity of a 32-byte Ed25519 seed.
    pub fn from_seed(seed: [u8; 32]) -> DeviceIdentity {
        DeviceIdentity {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// A fresh random identity.
    pub fn generate() -> Result<DeviceIdentity, IdentityError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| IdentityError::Random(e.to_string()))?;
        Ok(DeviceIdentity::from_seed(seed))
    }

    /// The key file's path in `data_dir`.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(KEY_FILE)
    }

    /// Loads the identity of `data_dir`, or creates it (mode 0600) on first use. An existing
    /// file that cannot be read is an error: a key is never replaced silently (a new key is a
    /// new device that must be approved again).
    pub fn load_or_create(data_dir: &Path) -> Result<DeviceIdentity, IdentityError> {
        let path = DeviceIdentity::path(data_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => DeviceIdentity::parse(text.trim()).ok_or(IdentityError::Malformed {
                path: path.display().to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let identity = DeviceIdentity::generate()?;
                identity.save(&path)?;
                Ok(identity)
            }
            Err(source) => Err(IdentityError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Loads the identity of `data_dir` if there is one.
    pub fn load(data_dir: &Path) -> Result<Option<DeviceIdentity>, IdentityError> {
        let path = DeviceIdentity::path(data_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                DeviceIdentity::parse(text.trim())
                    .map(Some)
                    .ok_or(IdentityError::Malformed {
                        path: path.display().to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(IdentityError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    fn parse(hex: &str) -> Option<DeviceIdentity> {
        if hex.len() != 64 {
            return None;
        }
        let mut seed = [0u8; 32];
        for (i, slot) in seed.iter_mut().enumerate() {
            *slot = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(DeviceIdentity::from_seed(seed))
    }

    fn save(&self, path: &Path) -> Result<(), IdentityError> {
        let err = |source| IdentityError::Write {
            path: path.display().to_string(),
            source,
        };
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(path).map_err(err)?;
        file.write_all(hex(&self.key.to_bytes()).as_bytes())
            .map_err(err)?;
        file.sync_all().map_err(err)
    }

    /// The raw 32-byte public key.
    pub fn public_key_bytes(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// `device.publicKey`: base64url without padding of the raw public key (43 characters).
    pub fn public_key(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.public_key_bytes())
    }

    /// `device.id`: lowercase hex SHA-256 of the raw public key (64 characters).
    pub fn device_id(&self) -> String {
        hex(&Sha256::digest(self.public_key_bytes()))
    }

    /// The v3 payload the signature covers.
    pub fn payload(&self, c: &SignedConnect<'_>) -> String {
        format!(
            "v3|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.device_id(),
            c.client_id,
            c.client_mode,
            c.role,
            c.scopes.join(","),
            c.signed_at_ms,
            c.token,
            c.nonce,
            normalize_metadata(c.platform),
            normalize_metadata(c.device_family),
        )
    }

    /// `device.signature`: base64url (no padding) of the Ed25519 signature of the v3 payload.
    pub fn sign(&self, c: &SignedConnect<'_>) -> String {
        let signature = self.key.sign(self.payload(c).as_bytes());
        URL_SAFE_NO_PAD.encode(signature.to_bytes())
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}
