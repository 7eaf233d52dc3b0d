//! Hermes' API server: the one the user runs (`api_url`, key in `API_SERVER_KEY`), or a
//! `hermes gateway run` the adapter starts with the API server on a free loopback port and a
//! random key (`API_SERVER_ENABLED`, `API_SERVER_HOST`, `API_SERVER_PORT`, `API_SERVER_KEY`:
//! Hermes' own settings), killed when the adapter stops. Its output goes to
//! `<data-dir>/hermes-gateway.log`.
//!
//! The gateway runs a model that reads untrusted text (SMS, screens), so it gets none of the
//! daemon's environment (`env_clear`, then [`gateway_env`]: `PATH`, `LANG`, `HOME` and
//! `HERMES_HOME` = its Hermes home, the API server's settings, `HERMES_MANAGED_DIR`), and a
//! Hermes managed-scope `config.yaml` ([`write_tool_lockdown`]) that Hermes merges over the
//! home's own and that turns off every toolset that reaches the shell or the filesystem, so
//! the model cannot read the operator token or run `openphone inbox approve` on its own
//! confirmations.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// Where Hermes' API server is and how to authenticate to it.
#[derive(Clone)]
pub struct ApiServer {
    /// `http://127.0.0.1:<port>` (no trailing slash).
    pub root: String,
    pub key: String,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("root", &self.root)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// A random hex token of 32 bytes.
pub fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The directory in the data dir holding the managed-scope `config.yaml` the gateway runs under.
pub const LOCKDOWN_DIR: &str = "hermes-lockdown";
/// Hermes' variable naming its managed-scope directory (values there win over the home's).
pub const MANAGED_DIR_ENV: &str = "HERMES_MANAGED_DIR";

/// Toolsets no Hermes platform of the adapter's gateway may use (`agent.disabled_toolsets`,
/// which Hermes applies last, on every platform: the API server, cron, subagents): the shell
/// and its processes, the filesystem, code execution, the browser (it reaches loopback) and
/// the ones that bundle them.
pub const DISABLED_TOOLSETS: &[&str] = &[
    "terminal",
    "file",
    "code_execution",
    "browser",
    "computer_use",
    "delegation",
    "debugging",
    "coding",
    "cronjob",
];

/// What the API server platform offers the model (`platform_toolsets.api_server`): the phone's
/// tools and Hermes' own planning and memory, nothing else.
pub const API_SERVER_TOOLSETS: &[&str] = &[
    crate::plugin::PLUGIN_NAME,
    "todo",
    "memory",
    "session_search",
];

/// Writes `<data_dir>/hermes-lockdown/config.yaml` (directory 0700) and returns the directory,
/// for `HERMES_MANAGED_DIR`. Rewritten at every start.
pub fn write_tool_lockdown(data_dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = data_dir.join(LOCKDOWN_DIR);
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|t| format!("    - {t}\n"))
            .collect::<String>()
    };
    let yaml = format!(
        "# Written by the OpenPhone daemon at every start; Hermes merges it over the home's\n\
         # config.yaml (managed scope). Edits are lost.\n\
         agent:\n  disabled_toolsets:\n{}platform_toolsets:\n  api_server:\n{}",
        list(DISABLED_TOOLSETS),
        list(API_SERVER_TOOLSETS)
    );
    let path = dir.join("config.yaml");
    let tmp = dir.join(".config.yaml.tmp");
    std::fs::write(&tmp, yaml)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, &path)?;
    Ok(dir)
}

/// The whole environment a Hermes process the adapter starts gets: `PATH` and `LANG` from the
/// daemon (when set), `HOME` and `HERMES_HOME` = `home`, `HERMES_MANAGED_DIR` = `lockdown`.
/// Nothing else of the daemon's (no tokens, no `OPENPHONE_*`, no provider keys: those go in
/// the Hermes home's `.env`).
pub fn gateway_env(home: &Path, lockdown: &Path) -> Vec<(String, std::ffi::OsString)> {
    let mut env: Vec<(String, std::ffi::OsString)> = ["PATH", "LANG"]
        .into_iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (k.to_owned(), v)))
        .collect();
    env.push(("HOME".to_owned(), home.as_os_str().to_owned()));
    env.push((
        crate::config::HERMES_HOME_ENV.to_owned(),
        home.as_os_str().to_owned(),
    ));
    env.push((MANAGED_DIR_ENV.to_owned(), lockdown.as_os_str().to_owned()));
    env
}

/// A free loopback port (bound, read, released; [`listener_belongs_to`] checks after start that
/// the gateway, not someone quicker, holds it).
fn free_port() -> std::io::Result<u16> {
    let socket = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(socket.local_addr()?.port())
}

/// `hermes plugins enable openphone` in `home` (Hermes writes its own `config.yaml`).
pub async fn enable_plugin(command: &Path, home: &Path, lockdown: &Path) -> Result<(), String> {
    let out = Command::new(command)
        .args(["plugins", "enable", crate::plugin::PLUGIN_NAME])
        .env_clear()
        .envs(gateway_env(home, lockdown))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .map_err(|_| "`hermes plugins enable openphone` did not finish in 60 s".to_owned())?
        .map_err(|e| format!("running {}: {e}", command.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "`hermes plugins enable openphone` failed ({}): {}",
        out.status,
        stderr.trim().chars().take(500).collect::<String>()
    ))
}

/// Starts `hermes gateway run` with the API server on loopback; returns the child and where
/// its API server will be.
pub fn spawn_gateway(
    command: &Path,
    home: &Path,
    lockdown: &Path,
    log: &Path,
) -> Result<(Child, ApiServer), String> {
    let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
    let key = random_token()?;
    let log_file =
        std::fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let err_file = log_file
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let child = Command::new(command)
        .args(["gateway", "run"])
        .env_clear()
        .envs(gateway_env(home, lockdown))
        .env("API_SERVER_ENABLED", "true")
        .env("API_SERVER_HOST", "127.0.0.1")
        .env("API_SERVER_PORT", port.to_string())
        .env(crate::config::API_KEY_ENV, &key)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log_file))
        .stderr(Stdio::from(err_file))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {} gateway run: {e}", command.display()))?;
    Ok((
        child,
        ApiServer {
            root: format!("http://127.0.0.1:{port}"),
            key,
        },
    ))
}

/// Waits until `GET /health` answers 200 (every 250 ms, up to `limit`); `child`, when the
/// adapter started it, must still be running.
pub async fn wait_healthy(
    http: &reqwest::Client,
    api: &ApiServer,
    child: Option<&mut Child>,
    limit: Duration,
    log: Option<&Path>,
) -> Result<(), String> {
    let expired = tokio::time::sleep(limit);
    tokio::pin!(expired);
    let mut child = child;
    loop {
        let answered = http
            .get(format!("{}/health", api.root))
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        match answered {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => tracing::debug!(status = %r.status(), "Hermes API server not healthy yet"),
            Err(e) => tracing::debug!(error = %e, "Hermes API server not up yet"),
        }
        if let Some(c) = child.as_deref_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            return Err(format!(
                "hermes gateway exited ({status}) before its API server answered{}",
                log_hint(log)
            ));
        }
        if expired.is_elapsed() {
            return Err(format!(
                "Hermes' API server at {} did not answer /health within {} s{}",
                api.root,
                limit.as_secs(),
                log_hint(log)
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The last lines of the gateway log worth showing (the API server's own complaint, such as a
/// missing `aiohttp`).
fn log_hint(log: Option<&Path>) -> String {
    let Some(log) = log else {
        return String::new();
    };
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let notable: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARNING") || l.contains("ERROR") || l.contains("Error"))
        .collect();
    let tail = notable[notable.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        format!(" (log: {})", log.display())
    } else {
        format!(": {tail} (log: {})", log.display())
    }
}

/// Whether the loopback listener on `port` is a socket `pid` holds (`/proc/net/tcp` gives the
/// listening socket's inode, `/proc/<pid>/fd` the process's sockets): the port was free when
/// picked, but another process could have bound it before Hermes did.
pub fn listener_belongs_to(port: u16, pid: u32) -> Result<bool, String> {
    let table = std::fs::read_to_string("/proc/net/tcp")
        .map_err(|e| format!("reading /proc/net/tcp: {e}"))?;
    let local = format!("0100007F:{port:04X}");
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // local_address, state (0A = LISTEN), inode.
            (cols.get(1) == Some(&local.as_str()) && cols.get(3) == Some(&"0A"))
                .then(|| cols.get(9).map(|i| format!("socket:[{i}]")))
                .flatten()
        })
        .collect();
    if inodes.is_empty() {
        return Ok(false);
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map_err(|e| format!("reading /proc/{pid}/fd: {e}"))?;
    Ok(fds.filter_map(Result::ok).any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    }))
}

#[cfg(test)]
mod tests {
    use super::listener_belongs_to;

    /// Security review finding 4: the gateway's port is picked free, then released before
    /// Hermes binds it; a listener another process took in between is not the gateway's.
    #[test]
    fn a_port_another_process_took_is_not_the_gateways() {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listener_belongs_to(port, std::process::id()), Ok(true));
        let mut other = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert_eq!(listener_belongs_to(port, other.id()), Ok(false));
        let _ = other.kill();
        let _ = other.wait();
        drop(listener);
        assert_eq!(listener_belongs_to(port, std::process::id()), Ok(false));
    }
}
