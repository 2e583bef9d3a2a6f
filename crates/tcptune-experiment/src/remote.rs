//! Commands on a real host over the system's OpenSSH client (or on this machine for a `local`
//! end). Every ssh runs with BatchMode (never a password prompt in the middle of a run),
//! multiplexed over one master connection per host (ControlMaster/ControlPersist: a trial's
//! dozen commands do not each redo the handshake), and with ServerAliveInterval so that a dead
//! link fails a command within seconds instead of hanging the run.
//!
//! A command that must not outlive the run is started "tied" ([`Host::spawn_tied`]): the
//! remote shell runs it in the background and ends it when its standard input closes, which
//! happens when this process closes the pipe, exits or is killed, or when the ssh connection
//! drops. The remote side cleans up by itself; nothing depends on this process surviving.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::hosts::{Endpoint, HostsSpec};

/// ssh's exit status when the connection (not the remote command) failed.
const SSH_FAILED: i32 = 255;

/// Whether an ssh that ended with `status` lost its connection: ssh's own failure, or the ssh
/// process itself killed (the connection went with it); then why, in a few words.
fn lost(remote: bool, status: std::process::ExitStatus, last: &str) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    if !remote {
        return None;
    }
    match (status.code(), status.signal()) {
        (Some(SSH_FAILED), _) => Some(last.to_string()),
        (None, Some(sig)) => Some(format!("its ssh was ended by signal {sig}")),
        _ => None,
    }
}

pub use tcptune_host::tune_report::shell_word;

/// One end of the experiment: how to run commands there.
#[derive(Debug, Clone)]
pub struct Host {
    /// "client" or "server".
    pub role: &'static str,
    /// Where it runs: here or over ssh.
    pub endpoint: Endpoint,
    /// The tcptune program there (this executable for a local end).
    pub tcptune: String,
    ssh_args: Vec<String>,
}

/// The directory of the ssh control sockets of this process's run (short: a socket path
/// must fit in 108 bytes).
pub fn control_dir() -> PathBuf {
    std::env::temp_dir().join(format!("tcptune-ssh-{}", std::process::id()))
}

impl Host {
    /// The `role` end at `endpoint`, with the ssh options of `spec`.
    pub fn new(role: &'static str, endpoint: &Endpoint, spec: &HostsSpec) -> Host {
        let mut a: Vec<String> = Vec::new();
        let mut opt = |o: &str| {
            a.push("-o".into());
            a.push(o.into());
        };
        // ssh keeps the first value it is given for an option: the spec's own options come
        // first, so they override the defaults below.
        for o in &spec.ssh_options {
            opt(o);
        }
        opt("BatchMode=yes");
        opt("ControlMaster=auto");
        opt(&format!("ControlPath={}/%C", control_dir().display()));
        opt("ControlPersist=120");
        opt("ServerAliveInterval=5");
        opt("ServerAliveCountMax=3");
        if let Some(f) = &spec.ssh_config {
            a.extend(["-F".into(), f.display().to_string()]);
        }
        if let Some(i) = &spec.identity {
            a.extend(["-i".into(), i.display().to_string()]);
        }
        if let Endpoint::Ssh { port: Some(p), .. } = endpoint {
            a.extend(["-p".into(), p.to_string()]);
        }
        let tcptune = match endpoint {
            Endpoint::Local => std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "tcptune".into()),
            Endpoint::Ssh { .. } => spec.tcptune.clone(),
        };
        Host {
            role,
            endpoint: endpoint.clone(),
            tcptune,
            ssh_args: a,
        }
    }

    /// "the server (ssh://root@h)".
    pub fn name(&self) -> String {
        format!("the {} ({})", self.role, self.endpoint)
    }

    /// A command that runs `argv` on the host.
    pub fn command(&self, argv: &[String]) -> Command {
        match self.endpoint.destination() {
            None => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
            Some(dest) => {
                let _ = std::fs::create_dir_all(control_dir());
                let mut c = Command::new("ssh");
                c.arg("-T").args(&self.ssh_args).arg("--").arg(dest);
                c.arg(
                    argv.iter()
                        .map(|w| shell_word(w))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                c
            }
        }
    }

    /// Why a command failed, naming the host; ssh's own failure (exit 255) is the connection.
    fn failure(&self, what: &str, out: &Output) -> String {
        let err = String::from_utf8_lossy(&out.stderr);
        let mut last = err.trim().lines().last().unwrap_or("").trim().to_string();
        if last.is_empty() {
            // A `--json`/`-J` command says why in its document: {"error": …}.
            let doc: Option<serde_json::Value> = serde_json::from_slice(&out.stdout).ok();
            last = doc
                .as_ref()
                .and_then(|d| d.get("error").and_then(|e| e.as_str()))
                .map(str::to_string)
                .unwrap_or_else(|| {
                    let so = String::from_utf8_lossy(&out.stdout);
                    so.trim().lines().last().unwrap_or("").trim().to_string()
                });
        }
        if let Some(why) = lost(self.endpoint != Endpoint::Local, out.status, &last) {
            format!(
                "the connection to {} failed or was lost ({why})",
                self.name()
            )
        } else {
            format!("{what} on {} failed ({}): {last}", self.name(), out.status)
        }
    }

    /// Runs `argv` to its end within `limit`; `ok` are the exit codes that count as success.
    pub fn run(&self, argv: &[String], limit: Duration, ok: &[i32]) -> Result<Output, String> {
        let what = argv.first().cloned().unwrap_or_default();
        let mut cmd = self.command(argv);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {what} for {}: {e}", self.name()))?;
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(limit) {
            Ok(r) => r.map_err(|e| format!("{what} on {}: {e}", self.name()))?,
            Err(_) => {
                let _ = tcptune_os::process::kill(pid, tcptune_os::process::Signal::Kill);
                return Err(format!(
                    "{what} on {} did not finish within {limit:?}",
                    self.name()
                ));
            }
        };
        if out.status.code().is_some_and(|c| ok.contains(&c)) {
            Ok(out)
        } else {
            Err(self.failure(&what, &out))
        }
    }

    /// Runs a shell script on the host (`sh -c SCRIPT`).
    pub fn script(&self, script: &str, limit: Duration) -> Result<String, String> {
        let argv = ["sh", "-c", script].map(String::from);
        self.run(&argv, limit, &[0])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Starts `argv` tied to this session: it ends when [`Tied`] closes its standard input
    /// (dropped, or this process gone, or the connection lost).
    pub fn spawn_tied(&self, argv: &[String]) -> Result<Tied, String> {
        // The program's own stdin is /dev/null; the shell waits on its stdin, then ends the
        // program and reports the program's status.
        let script = r#""$@" </dev/null & p=$!; cat >/dev/null; kill $p 2>/dev/null; wait $p"#;
        let mut full = vec!["sh".to_string(), "-c".into(), script.into(), "sh".into()];
        full.extend(argv.iter().cloned());
        self.spawn_held(&full)
    }

    /// Starts `argv`, which itself waits for the end of its standard input (`tcptune tune
    /// --hold`), with its output read line by line.
    pub fn spawn_held(&self, argv: &[String]) -> Result<Tied, String> {
        let mut cmd = self.command(argv);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {} on {}: {e}", argv[0], self.name()))?;
        let stdin = child.stdin.take();
        let lines = child.stdout.take().map(|out| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines() {
                    let Ok(l) = l else { break };
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        Ok(Tied {
            host: self.name(),
            remote: self.endpoint != Endpoint::Local,
            child: Some(child),
            stdin,
            lines,
        })
    }

    /// Ends the master connection (`ssh -O exit`); nothing for a local end.
    pub fn close(&self) {
        if let Some(dest) = self.endpoint.destination() {
            let _ = Command::new("ssh")
                .args(&self.ssh_args)
                .args(["-O", "exit", "--", &dest])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A process on a host that lives until its standard input closes.
pub struct Tied {
    host: String,
    remote: bool,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Option<Receiver<String>>,
}

impl Tied {
    /// Waits for the next line of its standard output; on its end, the reason from its
    /// standard error.
    pub fn line(&mut self, limit: Duration) -> Result<String, String> {
        let got = self
            .lines
            .as_ref()
            .ok_or("its output is not read")?
            .recv_timeout(limit);
        match got {
            Ok(l) => Ok(l),
            Err(RecvTimeoutError::Timeout) => {
                Err(format!("{} said nothing within {limit:?}", self.host))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.ended()),
        }
    }

    /// Waits for a line containing `what`.
    pub fn wait_for(&mut self, what: &str, limit: Duration) -> Result<(), String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if self.line(left)?.contains(what) {
                return Ok(());
            }
        }
    }

    /// Why the process ended: its exit status and last words.
    fn ended(&mut self) -> String {
        let Some(mut c) = self.child.take() else {
            return format!("the process on {} is gone", self.host);
        };
        let status = c.wait();
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let last = err.trim().lines().last().unwrap_or("").trim().to_string();
        match status {
            Ok(s) => match lost(self.remote, s, &last) {
                Some(why) => format!("the connection to {} failed or was lost ({why})", self.host),
                None => format!("the command on {} ended ({s}): {last}", self.host),
            },
            Err(e) => format!("the command on {}: {e}", self.host),
        }
    }

    /// Closes its standard input and waits (at most `limit`) for it to end; returns what it
    /// printed after that, or why it failed.
    pub fn finish(mut self, limit: Duration) -> Result<Vec<String>, String> {
        drop(self.stdin.take());
        let end = Instant::now() + limit;
        let mut out = Vec::new();
        if let Some(rx) = self.lines.take() {
            loop {
                match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
                    Ok(l) => out.push(l),
                    Err(RecvTimeoutError::Disconnected) => break,
                    Err(RecvTimeoutError::Timeout) => {
                        return Err(format!("{} did not end within {limit:?}", self.host))
                    }
                }
            }
        }
        let Some(mut c) = self.child.take() else {
            return Ok(out);
        };
        let status = c.wait().map_err(|e| e.to_string())?;
        if status.success() {
            return Ok(out);
        }
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let last = err.trim().lines().last().unwrap_or("").trim().to_string();
        Err(match lost(self.remote, status, &last) {
            Some(why) => format!("the connection to {} failed or was lost ({why})", self.host),
            None => format!("the command on {} ended ({status}): {last}", self.host),
        })
    }
}

impl Drop for Tied {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Some(mut c) = self.child.take() {
            // Closing stdin ends it; a hung ssh is killed after a grace period.
            let end = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> HostsSpec {
        HostsSpec {
            client: Endpoint::Local,
            server: Endpoint::Ssh {
                user: Some("root".into()),
                host: "198.18.3.2".into(),
                port: Some(2222),
            },
            identity: Some("/k/id".into()),
            ssh_config: None,
            ssh_options: vec!["ServerAliveInterval=1".into()],
            tcptune: "/opt/tcptune".into(),
            server_address: None,
        }
    }

    #[test]
    fn ssh_command_lines_quote_the_remote_words_and_keep_the_spec_options_first() {
        let s = spec();
        let h = Host::new("server", &s.server, &s);
        let c = h.command(&["sh".into(), "-c".into(), "echo 'a b'; $X".into()]);
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(c.get_program(), "ssh");
        assert_eq!(args[..3], ["-T", "-o", "ServerAliveInterval=1"]);
        let alive = args
            .iter()
            .position(|a| a == "ServerAliveInterval=5")
            .unwrap();
        assert!(alive > 2, "the default comes after the spec's own");
        for want in ["BatchMode=yes", "ControlMaster=auto", "ControlPersist=120"] {
            assert!(args.iter().any(|a| a == want), "{want}: {args:?}");
        }
        let n = args.len();
        assert_eq!(args[n - 3..n - 1], ["--", "root@198.18.3.2"]);
        assert_eq!(args[n - 1], r#"sh -c 'echo '\''a b'\''; $X'"#);
        assert!(args.windows(2).any(|w| w == ["-p", "2222"]));
        assert!(args.windows(2).any(|w| w == ["-i", "/k/id"]));
        assert_eq!(h.tcptune, "/opt/tcptune");
        assert_eq!(h.name(), "the server (ssh://root@198.18.3.2:2222)");
    }

    #[test]
    fn a_local_end_runs_the_command_itself_and_a_tied_one_ends_with_its_input() {
        let s = spec();
        let h = Host::new("client", &s.client, &s);
        let out = h.script("echo hello", Duration::from_secs(10)).unwrap();
        assert_eq!(out, "hello\n");
        let e = h
            .run(&["false".into()], Duration::from_secs(10), &[0])
            .unwrap_err();
        assert!(e.contains("false on the client (local) failed"), "{e}");
        // A tied `sleep` would run for an hour; closing its input ends it at once.
        let mut t = h
            .spawn_tied(&["sh".into(), "-c".into(), "echo up; exec sleep 3600".into()])
            .unwrap();
        assert_eq!(t.line(Duration::from_secs(10)).unwrap(), "up");
        // Ended by the shell's kill (SIGTERM: 128 + 15), not by the time limit.
        let e = t.finish(Duration::from_secs(60)).unwrap_err();
        assert!(e.contains("exit status: 143"), "{e}");
    }
}
