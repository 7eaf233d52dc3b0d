//! A fake device (the real binary, on a free port) and a private adb server (its own port, so
//! the default 5037 server is never touched), killed when the test ends.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use openphone_clock::Stopwatch;

/// How long one adb invocation may take before the test fails.
const ADB_DEADLINE: Duration = Duration::from_secs(60);

/// The adb client: `$ADB` or `adb` on PATH. Panics with the install hint when absent: these
/// tests never pass without the real client.
pub fn adb_binary() -> String {
    let adb = std::env::var("ADB").unwrap_or_else(|_| "adb".to_owned());
    match Command::new(&adb).arg("version").output() {
        Ok(out) if out.status.success() => adb,
        Ok(out) => panic!(
            "`{adb} version` failed ({}): the fake-adbd tests need the real adb client; install Debian's adb (`apt-get install adb`) or point $ADB at platform-tools/adb",
            out.status
        ),
        Err(e) => panic!(
            "the fake-adbd tests need the real adb client and `{adb}` did not run ({e}); install Debian's adb (`apt-get install adb`) or point $ADB at platform-tools/adb"
        ),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts the binary on `listen`; answers the child and the address it printed.
fn launch(listen: &str, log: &std::path::Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_openphone-fake-adbd"))
        .args(["--listen", listen, "--log"])
        .arg(log)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the fake device starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the first line");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, addr)
}

/// What one adb run printed.
#[derive(Debug)]
pub struct Ran {
    pub ok: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Ran {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// A running fake device and its private adb server.
pub struct Device {
    child: Child,
    pub serial: String,
    adb: String,
    adb_port: u16,
    _dir: tempfile::TempDir,
    pub log: PathBuf,
}

impl Device {
    /// The fake device with `args` (besides `--listen` and `--log`), not yet connected.
    pub fn spawn(args: &[&str]) -> Self {
        let adb = adb_binary();
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("input.log");
        let (child, serial) = launch("127.0.0.1:0", &log, args);
        Self {
            child,
            serial,
            adb,
            adb_port: free_port(),
            _dir: dir,
            log,
        }
    }

    /// Stops the fake device (an unplugged phone); its adb server keeps running.
    pub fn unplug(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the fake device again on the same address (a fresh simulated phone).
    pub fn plug_back(&mut self, args: &[&str]) {
        let (child, serial) = launch(&self.serial, &self.log, args);
        assert_eq!(serial, self.serial);
        self.child = child;
    }

    /// The fake device, connected with `adb connect` and listed as `device`.
    pub fn start(args: &[&str]) -> Self {
        let device = Self::spawn(args);
        device.connect();
        device
    }

    /// `adb connect`, then waits until the device is listed (any state).
    pub fn connect(&self) -> Ran {
        let ran = self.adb(&["connect", &self.serial]);
        let waited = Stopwatch::start();
        while waited.elapsed() < Duration::from_secs(20) {
            if self.state().is_some_and(|s| s != "offline") {
                return ran;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{} never came online: {} {}",
            self.serial,
            ran.text(),
            ran.stderr
        );
    }

    /// The device's state in `adb devices` (`device`, `unauthorized`, …), if listed.
    pub fn state(&self) -> Option<String> {
        let listed = self.adb(&["devices"]).text();
        listed.lines().find_map(|l| {
            let mut cols = l.split_whitespace();
            (cols.next() == Some(self.serial.as_str()))
                .then(|| cols.next().unwrap_or("").to_owned())
        })
    }

    /// Starts the adb client against the private server without waiting for it.
    pub fn spawn_adb(&self, args: &[&str]) -> Child {
        self.adb_command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("adb runs")
    }

    fn adb_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.adb);
        command
            .arg("-P")
            .arg(self.adb_port.to_string())
            .args(args)
            .env("ANDROID_ADB_SERVER_PORT", self.adb_port.to_string())
            .env_remove("ANDROID_SERIAL")
            .stdin(Stdio::null());
        command
    }

    /// Runs the adb client against the private server.
    pub fn adb(&self, args: &[&str]) -> Ran {
        let mut child = self
            .adb_command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("adb runs");
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = out.read_to_end(&mut bytes);
            bytes
        });
        let err_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        let waited = Stopwatch::start();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if waited.elapsed() > ADB_DEADLINE {
                let _ = child.kill();
                panic!("adb {args:?} did not finish in {ADB_DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Ran {
            ok: status.success(),
            stdout: reader.join().expect("stdout reader"),
            stderr: err_reader.join().expect("stderr reader"),
        }
    }

    /// `adb -s SERIAL shell CMD` (one string, as the backend sends it), stdout as text.
    pub fn shell(&self, command: &str) -> String {
        let ran = self.adb(&["-s", &self.serial, "shell", command]);
        assert!(ran.ok, "adb shell {command:?} failed: {ran:?}");
        ran.text()
    }

    /// `adb -s SERIAL exec-out CMD`: the raw bytes.
    pub fn exec_out(&self, command: &str) -> Vec<u8> {
        let ran = self.adb(&["-s", &self.serial, "exec-out", command]);
        assert!(ran.ok, "adb exec-out {command:?} failed: {ran:?}");
        ran.stdout
    }

    /// `uiautomator dump /dev/tty`, parsed (panics when the XML or the tail line is wrong).
    pub fn dump(&self) -> Vec<super::xml::XmlNode> {
        let out = self.shell("uiautomator dump /dev/tty");
        let xml = out
            .strip_suffix("UI hierchary dumped to: /dev/tty\n")
            .unwrap_or_else(|| panic!("no uiautomator tail line: {out:.300}"));
        super::xml::parse(xml).unwrap_or_else(|e| panic!("the XML does not parse: {e}\n{xml:.400}"))
    }

    /// The node whose resource-id ends in `:id/<id>`, if on screen.
    pub fn find(&self, id: &str) -> Option<super::xml::XmlNode> {
        let tail = format!(":id/{id}");
        self.dump()
            .into_iter()
            .find(|n| n.attr("resource-id").ends_with(&tail))
    }

    /// The package of the screen's root node.
    pub fn foreground(&self) -> String {
        self.dump()
            .first()
            .map(|n| n.attr("package").to_owned())
            .unwrap_or_default()
    }

    /// Waits until the input log has `lines` lines (a command sent by a process still running).
    pub fn wait_logged(&self, lines: usize) {
        let waited = Stopwatch::start();
        while self.logged().len() < lines {
            assert!(
                waited.elapsed() < Duration::from_secs(20),
                "the log never reached {lines} lines: {:?}",
                self.logged()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The lines of the input log so far.
    pub fn logged(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = Command::new(&self.adb)
            .args(["-P", &self.adb_port.to_string(), "kill-server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
