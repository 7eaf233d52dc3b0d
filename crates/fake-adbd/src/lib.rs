//! `openphone-fake-adbd`: a fake Android device that speaks the ADB *device* protocol over TCP
//! (CNXN/AUTH/OPEN/OKAY/WRTE/CLSE), so that the real `adb` client reaches it with
//! `adb connect 127.0.0.1:PORT`, and answers the shell commands the ADB backend uses with
//! Android's own output formats (uiautomator XML, `dumpsys` text, `content query` rows, PNG
//! from `screencap`), backed by the simulated phone (`SimPhone`) and driven only through its
//! manifest commands.
//!
//! Start it in-process with [`FakeAdbd::start`] or run the binary (see the crate's README).

pub mod conn;
pub mod phone;
pub mod shell;
pub mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use openphone_clock::SystemClock;
use openphone_device::{SimPhone, SimState};
use tokio::net::TcpListener;

use crate::phone::Phone;
use crate::shell::Shell;

/// How the fake device behaves (the binary's flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// `--log FILE`: every input command received, one per line.
    pub log: Option<PathBuf>,
    /// `--scenario FILE`: the simulated phone's scenario (default: the built-in demo).
    pub scenario: Option<PathBuf>,
    /// `--unauthorized`: answer CNXN with AUTH and never accept (adb lists `unauthorized`).
    pub unauthorized: bool,
    /// `--sdk N`: the Android API level reported and obeyed (default 34).
    pub sdk: u32,
    /// `--hang-on PREFIX`: a shell command starting with PREFIX never answers.
    pub hang_on: Option<String>,
    /// Whether the ADB Keyboard IME is installed (`--no-adbkeyboard` clears it).
    pub adb_keyboard: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            log: None,
            scenario: None,
            unauthorized: false,
            sdk: 34,
            hang_on: None,
            adb_keyboard: true,
        }
    }
}

/// A running fake device; dropping it stops the listener and every connection.
#[derive(Debug)]
pub struct FakeAdbd {
    addr: SocketAddr,
    shell: Arc<Shell>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl FakeAdbd {
    /// Builds the simulated phone, binds `listen` and serves in the background (on the current
    /// tokio runtime).
    pub async fn start(listen: SocketAddr, options: Options) -> Result<Self, String> {
        let clock = Arc::new(SystemClock);
        let sim = match &options.scenario {
            None => SimPhone::with_default_scenario(clock),
            Some(path) => SimState::from_file(path).and_then(|state| SimPhone::new(state, clock)),
        }
        .map_err(|e| format!("the simulated phone did not start: {e}"))?;
        let sim = Arc::new(sim);
        let shell = Arc::new(Shell::new(Phone::new(Arc::clone(&sim))?, options)?);
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("cannot read the listening address: {e}"))?;
        let timeline = tokio::spawn(async move { sim.run_timeline(std::future::pending()).await });
        let server = tokio::spawn(serve(listener, Arc::clone(&shell)));
        Ok(Self {
            addr,
            shell,
            tasks: vec![timeline, server],
        })
    }

    /// The address it listens on (`adb connect` this).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening and closes every connection (an unplugged phone); resolves once the
    /// port is free, so a new device can take it at once.
    pub async fn stop(mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }

    /// The simulated phone behind it (to inspect its state in tests).
    pub fn sim(&self) -> &Arc<SimPhone> {
        self.shell.phone().sim()
    }
}

impl Drop for FakeAdbd {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn serve(listener: TcpListener, shell: Arc<Shell>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((socket, _)) => {
                let _ = socket.set_nodelay(true);
                connections.spawn(conn::run(socket, Arc::clone(&shell)));
            }
            Err(e) => {
                eprintln!("openphone-fake-adbd: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
}
