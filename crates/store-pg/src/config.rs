//! How to reach the PostgreSQL server: [`PgConfig`], checked and turned into a driver
//! configuration plus a TLS decision by [`PgConfig::resolve`].
//!
//! The password never sits in the URL (refused: URLs end up in config files, process lists and
//! logs); it comes from a file or an environment variable ([`PasswordSource`]) and is left out of
//! `Debug` output and every error message.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use openphone_store::{Result, StoreError};
use postgres::config::{Host, SslMode};

use crate::tls;

/// When the connection to the server is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// TLS required unless every host is loopback (`localhost`, 127.0.0.0/8, `::1`) or a Unix
    /// socket; also required when the URL asks for `sslmode=require`.
    #[default]
    Auto,
    /// TLS required for every TCP host (a Unix socket never carries TLS in PostgreSQL).
    Require,
    /// No TLS. Refused for hosts that are not loopback or a Unix socket.
    Disable,
}

impl TlsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Auto => "auto",
            TlsMode::Require => "require",
            TlsMode::Disable => "disable",
        }
    }
}

impl FromStr for TlsMode {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(TlsMode::Auto),
            "require" => Ok(TlsMode::Require),
            "disable" => Ok(TlsMode::Disable),
            other => Err(StoreError::Invalid {
                what: "PostgreSQL tls mode",
                detail: format!("{other:?}: expected \"auto\", \"require\" or \"disable\""),
            }),
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the database password comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// A file holding the password (one trailing newline is ignored).
    File(PathBuf),
    /// An environment variable holding the password.
    Env(String),
}

impl PasswordSource {
    /// Reads the password. Errors name the file or the variable, never the password.
    pub fn read(&self) -> Result<String> {
        let invalid = |detail: String| StoreError::Invalid {
            what: "PostgreSQL password",
            detail,
        };
        let password = match self {
            PasswordSource::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    invalid(format!("cannot read password file {}: {e}", path.display()))
                })?;
                let text = text.strip_suffix('\n').unwrap_or(&text);
                let text = text.strip_suffix('\r').unwrap_or(text);
                if text.is_empty() {
                    return Err(invalid(format!(
                        "password file {} is empty",
                        path.display()
                    )));
                }
                if text.contains('\n') {
                    return Err(invalid(format!(
                        "password file {} holds more than one line (the password is the whole file, one trailing newline allowed)",
                        path.display()
                    )));
                }
                text.to_owned()
            }
            PasswordSource::Env(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => v,
                Ok(_) => return Err(invalid(format!("environment variable {var} is empty"))),
                Err(std::env::VarError::NotPresent) => {
                    return Err(invalid(format!("environment variable {var} is not set")));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(invalid(format!("environment variable {var} is not UTF-8")));
                }
            },
        };
        Ok(password)
    }
}

/// Everything needed to open a [`crate::PgStore`].
#[derive(Clone)]
pub struct PgConfig {
    /// `postgres://user@host:port/dbname?options` (no password: see `password`). A Unix socket is
    /// a host that is a directory: `postgres://user@%2Fvar%2Frun%2Fpostgresql/dbname`.
    pub url: String,
    /// The password, when the server asks for one. Never logged, never in `Debug` output.
    pub password: Option<String>,
    /// When to encrypt (see [`TlsMode`]).
    pub tls: TlsMode,
    /// Extra trusted CA certificates (PEM), for servers with a private CA.
    pub tls_ca_file: Option<PathBuf>,
    /// This daemon's id in the fleet: unique among live daemons, stable across restarts.
    pub host_id: String,
    /// A human label for this daemon (e.g. the machine's name), shown in fleet views.
    pub label: String,
    /// The daemon's data directory (files beside the database).
    pub data_dir: PathBuf,
    /// A schema of its own (tests: one per test). `None`: the server's default search path.
    pub schema: Option<String>,
    /// Reader connections (each on its own thread). Default 2.
    pub readers: usize,
    /// `lock_timeout` of every session: a statement waiting longer for a row lock fails.
    pub lock_timeout: Duration,
    /// `statement_timeout` of every session.
    pub statement_timeout: Duration,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConfig")
            .field("url", &self.url)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("host_id", &self.host_id)
            .field("label", &self.label)
            .field("data_dir", &self.data_dir)
            .field("schema", &self.schema)
            .field("readers", &self.readers)
            .field("lock_timeout", &self.lock_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// The longest `host_id` accepted.
pub const MAX_HOST_ID_CHARS: usize = 64;

impl PgConfig {
    /// A configuration with the defaults: TLS `auto`, 2 readers, lock timeout 5 s, statement
    /// timeout 60 s, connect timeout 10 s, no password, the label = `host_id`.
    pub fn new(
        url: impl Into<String>,
        host_id: impl Into<String>,
        data_dir: impl Into<PathBuf>,
    ) -> Self {
        let host_id = host_id.into();
        Self {
            url: url.into(),
            password: None,
            tls: TlsMode::Auto,
            tls_ca_file: None,
            label: host_id.clone(),
            host_id,
            data_dir: data_dir.into(),
            schema: None,
            readers: 2,
            lock_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// Sets the password from `source` (read now).
    pub fn with_password(mut self, source: &PasswordSource) -> Result<Self> {
        self.password = Some(source.read()?);
        Ok(self)
    }

    /// Checks the configuration and builds the driver's.
    pub(crate) fn resolve(&self) -> Result<Resolved> {
        check_host_id(&self.host_id)?;
        if let Some(schema) = &self.schema {
            check_schema(schema)?;
        }
        if self.readers == 0 || self.readers > 64 {
            return Err(invalid_url(format!(
                "readers = {}: expected 1 to 64",
                self.readers
            )));
        }
        if !is_postgres_url(&self.url) {
            // Never echoed: a `key=value` string may hold a password.
            return Err(invalid_url(
                "it is not a postgres:// or postgresql:// URL (key=value connection strings \
                 are not accepted); expected postgres://user@host:port/dbname, the password given \
                 as a password file or environment variable"
                    .into(),
            ));
        }
        let mut pg = postgres::Config::from_str(&self.url).map_err(|e| {
            invalid_url(format!(
                "cannot parse it ({e}); expected postgres://user@host:port/dbname"
            ))
        })?;
        if pg.get_password().is_some() {
            return Err(invalid_url(
                "it holds a password; remove it from the URL and give it as a password file \
                 or environment variable instead"
                    .into(),
            ));
        }
        if pg.get_hosts().is_empty() {
            return Err(invalid_url(
                "it names no host; expected postgres://user@host:port/dbname".into(),
            ));
        }
        if pg.get_user().is_none() {
            return Err(invalid_url(
                "it names no user; expected postgres://user@host:port/dbname".into(),
            ));
        }
        // The driver connects to a `hostaddr` when one is given (the host name then only names
        // the server for TLS): a non-loopback hostaddr is remote whatever the host says.
        let remote: Vec<String> = pg
            .get_hosts()
            .iter()
            .filter_map(remote_host)
            .chain(
                pg.get_hostaddrs()
                    .iter()
                    .filter(|ip| !ip.is_loopback())
                    .map(IpAddr::to_string),
            )
            .collect();
        let all_unix = pg.get_hostaddrs().is_empty()
            && pg.get_hosts().iter().all(|h| matches!(h, Host::Unix(_)));
        let url_requires = pg.get_ssl_mode() == SslMode::Require;
        let tls_on = match self.tls {
            TlsMode::Disable => {
                if let Some(host) = remote.first() {
                    return Err(StoreError::Invalid {
                        what: "PostgreSQL tls mode",
                        detail: format!(
                            "tls = \"disable\" is refused for host {host}, which is not loopback or \
                             a Unix socket: the password and every record would cross the network \
                             in clear. Use tls = \"auto\" or \"require\""
                        ),
                    });
                }
                false
            }
            TlsMode::Require => !all_unix,
            TlsMode::Auto => !remote.is_empty() || (url_requires && !all_unix),
        };
        let tls = if tls_on {
            pg.ssl_mode(SslMode::Require);
            Some(tls::client_config(self.tls_ca_file.as_deref())?)
        } else {
            pg.ssl_mode(SslMode::Disable);
            None
        };
        if let Some(password) = &self.password {
            pg.password(password.as_bytes());
        }
        pg.application_name(&format!("openphone:{}", self.host_id));
        pg.connect_timeout(self.connect_timeout);
        pg.keepalives(true);
        pg.keepalives_idle(Duration::from_secs(30));
        let target = describe_target(&pg);
        Ok(Resolved { pg, tls, target })
    }
}

/// A checked configuration: the driver's config (with the password) and the TLS settings.
#[derive(Clone)]
pub(crate) struct Resolved {
    pub(crate) pg: postgres::Config,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    /// `user@host:port/dbname`, for error messages (no password).
    pub(crate) target: String,
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved")
            .field("target", &self.target)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

fn invalid_url(detail: String) -> StoreError {
    StoreError::Invalid {
        what: "PostgreSQL url",
        detail,
    }
}

/// Whether `url` is a URL of scheme `postgres://` or `postgresql://` (any case), the only form
/// the configuration accepts.
pub(crate) fn is_postgres_url(url: &str) -> bool {
    let url = url.trim_start().as_bytes();
    [&b"postgres://"[..], &b"postgresql://"[..]]
        .iter()
        .any(|scheme| url.len() >= scheme.len() && url[..scheme.len()].eq_ignore_ascii_case(scheme))
}

/// `Some(name)` when `host` is a TCP host that is not loopback.
fn remote_host(host: &Host) -> Option<String> {
    match host {
        Host::Unix(_) => None,
        Host::Tcp(name) => {
            let bare = name.trim_start_matches('[').trim_end_matches(']');
            let loopback = bare.eq_ignore_ascii_case("localhost")
                || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
            (!loopback).then(|| name.clone())
        }
    }
}

fn describe_target(pg: &postgres::Config) -> String {
    let host = match pg.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}@{}:{}/{}",
        pg.get_user().unwrap_or(""),
        host,
        port,
        pg.get_dbname().unwrap_or("")
    )
}

/// A host id: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with `-` or `.`.
pub fn check_host_id(host_id: &str) -> Result<()> {
    let ok = !host_id.is_empty()
        && host_id.chars().count() <= MAX_HOST_ID_CHARS
        && !host_id.starts_with(['-', '.'])
        && host_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what: "host_id",
            detail: format!(
                "{host_id:?}: expected 1 to {MAX_HOST_ID_CHARS} of A-Z a-z 0-9 . _ - (not starting with - or .)"
            ),
        })
    }
}

/// A schema name: 1 to 63 of `a-z 0-9 _`, starting with a letter or `_` (no quoting needed).
pub(crate) fn check_schema(schema: &str) -> Result<()> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what: "PostgreSQL schema",
            detail: format!(
                "{schema:?}: expected 1 to 63 of a-z 0-9 _, starting with a letter or _"
            ),
        })
    }
}

/// The `host_id` for a daemon that was given none: the machine's host name when it is a valid id.
pub fn default_host_id() -> Option<String> {
    let name = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .or_else(|| std::env::var("HOSTNAME").ok())?;
    check_host_id(&name).ok().map(|()| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, tls: TlsMode) -> PgConfig {
        let mut c = PgConfig::new(url, "host-1", "/tmp/openphone-test");
        c.tls = tls;
        c
    }

    fn tls_on(url: &str, tls: TlsMode) -> bool {
        config(url, tls).resolve().unwrap().tls.is_some()
    }

    #[test]
    fn a_key_value_connection_string_is_refused_without_repeating_it() {
        for url in [
            "host=db user=op password=hunter2 dbname=x",
            "mysql://op:hunter2@db/x",
            "  host=localhost user=op password=hunter2",
        ] {
            let err = config(url, TlsMode::Auto)
                .resolve()
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("not a postgres:// or postgresql:// URL"),
                "{err}"
            );
            assert!(!err.contains("hunter2"), "{err}");
        }
        assert!(is_postgres_url("PostgreSQL://op@localhost/x"));
        assert!(!tls_on("postgresql://op@localhost/x", TlsMode::Auto));
    }

    #[test]
    fn a_loopback_host_name_with_a_remote_hostaddr_is_not_sent_in_clear() {
        // The driver connects to the hostaddr, not to "localhost".
        let url = "postgres://op@localhost/openphone?hostaddr=10.0.0.5";
        assert!(tls_on(url, TlsMode::Auto));
        let err = config(url, TlsMode::Disable)
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("10.0.0.5"), "{err}");
        assert!(err.contains("disable"), "{err}");
        // A loopback hostaddr stays loopback.
        let url = "postgres://op@localhost/openphone?hostaddr=127.0.0.1";
        assert!(!tls_on(url, TlsMode::Auto));
        assert!(!tls_on(url, TlsMode::Disable));
    }

    #[test]
    fn tls_disable_is_refused_for_a_non_loopback_host() {
        let err = config(
            "postgres://op@db.example.com:5432/openphone",
            TlsMode::Disable,
        )
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(err.contains("db.example.com"), "{err}");
        assert!(err.contains("disable"), "{err}");
        let err = crate::PgStore::open(&config(
            "postgres://op@10.0.0.5/openphone",
            TlsMode::Disable,
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("10.0.0.5"), "{err}");
    }

    #[test]
    fn tls_auto_is_on_for_remote_hosts_and_off_for_loopback_and_sockets() {
        assert!(tls_on("postgres://op@db.example.com/x", TlsMode::Auto));
        assert!(tls_on("postgres://op@192.168.1.10:5433/x", TlsMode::Auto));
        assert!(!tls_on("postgres://op@127.0.0.1:55432/x", TlsMode::Auto));
        assert!(!tls_on("postgres://op@localhost/x", TlsMode::Auto));
        assert!(!tls_on("postgres://op@[::1]:5432/x", TlsMode::Auto));
        assert!(!tls_on(
            "postgres://op@%2Fvar%2Frun%2Fpostgresql/x",
            TlsMode::Auto
        ));
        assert!(tls_on(
            "postgres://op@127.0.0.1/x?sslmode=require",
            TlsMode::Auto
        ));
        assert!(tls_on("postgres://op@127.0.0.1/x", TlsMode::Require));
        assert!(!tls_on("postgres://op@%2Ftmp/x", TlsMode::Require));
        assert!(!tls_on("postgres://op@localhost/x", TlsMode::Disable));
    }

    #[test]
    fn a_password_in_the_url_is_refused_without_repeating_it() {
        let err = config("postgres://op:hunter22@127.0.0.1/x", TlsMode::Auto)
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds a password"), "{err}");
        assert!(!err.contains("hunter22"), "{err}");
    }

    #[test]
    fn a_url_without_host_or_user_or_unparsable_is_refused_clearly() {
        for (url, says) in [
            ("postgres://op@/x", "no host"),
            ("postgres://127.0.0.1/x", "no user"),
            (
                "mysql://op@127.0.0.1/x",
                "not a postgres:// or postgresql:// URL",
            ),
            ("postgres://op@127.0.0.1:notaport/x", "cannot parse"),
        ] {
            let err = config(url, TlsMode::Auto)
                .resolve()
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
    }

    #[test]
    fn tls_modes_parse_and_a_bad_one_lists_the_choices() {
        assert_eq!("auto".parse::<TlsMode>().unwrap(), TlsMode::Auto);
        assert_eq!("require".parse::<TlsMode>().unwrap(), TlsMode::Require);
        assert_eq!("disable".parse::<TlsMode>().unwrap(), TlsMode::Disable);
        let err = "verify-full".parse::<TlsMode>().unwrap_err().to_string();
        assert!(
            err.contains("\"auto\", \"require\" or \"disable\""),
            "{err}"
        );
    }

    #[test]
    fn host_ids_and_schemas_are_checked() {
        for good in ["a", "shelf-3", "host_1.lab", &"x".repeat(64)] {
            check_host_id(good).unwrap();
        }
        for bad in ["", "-x", ".x", "a b", "ä", "a/b", &"x".repeat(65)] {
            assert!(check_host_id(bad).is_err(), "{bad:?}");
        }
        check_schema("t123_4").unwrap();
        for bad in ["", "T1", "1t", "a-b", "a\"b", &"x".repeat(64)] {
            assert!(check_schema(bad).is_err(), "{bad:?}");
        }
        let mut c = config("postgres://op@127.0.0.1/x", TlsMode::Auto);
        c.host_id = "bad id".into();
        assert!(c.resolve().unwrap_err().to_string().contains("host_id"));
    }

    #[test]
    fn a_password_file_is_read_without_its_newline_and_errors_name_the_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret pass\n").unwrap();
        assert_eq!(
            PasswordSource::File(file.clone()).read().unwrap(),
            "s3cret pass"
        );
        std::fs::write(&file, "s3cret\r\n").unwrap();
        assert_eq!(PasswordSource::File(file.clone()).read().unwrap(), "s3cret");
        std::fs::write(&file, "\n").unwrap();
        let err = PasswordSource::File(file.clone())
            .read()
            .unwrap_err()
            .to_string();
        assert!(err.contains("is empty") && err.contains("pw"), "{err}");
        std::fs::write(&file, "line1-secret\nline2\n").unwrap();
        let err = PasswordSource::File(file.clone())
            .read()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("more than one line") && !err.contains("line1-secret"),
            "{err}"
        );
        let missing = dir.path().join("missing");
        let err = PasswordSource::File(missing)
            .read()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot read password file") && err.contains("missing"),
            "{err}"
        );
        let err = PasswordSource::Env("OPENPHONE_TEST_SURELY_UNSET_PW".into())
            .read()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("OPENPHONE_TEST_SURELY_UNSET_PW is not set"),
            "{err}"
        );
    }

    #[test]
    fn debug_output_never_shows_the_password() {
        let mut c = config("postgres://op@127.0.0.1/x", TlsMode::Auto);
        c.password = Some("hunter22".into());
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("hunter22") && debug.contains("<redacted>"),
            "{debug}"
        );
        let resolved = format!("{:?}", c.resolve().unwrap());
        assert!(!resolved.contains("hunter22"), "{resolved}");
    }
}
