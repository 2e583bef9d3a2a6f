//! What the lab does to the machine, behind one trait: `ip` and `tc` commands, sysctls, the
//! emulator's control socket, the lab's processes and its files. [`Live`] does it; the tests'
//! fake records it, so the lab's logic (the order of a setup, its undoing, `set` on each
//! backend) is tested without root.

use std::io::{BufRead, BufReader};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tcptune_emu::sys::{self, EmuStatus, Request};
use tcptune_os::sysctl;

use crate::names::{lab_dir, RUN_DIR};
use crate::os;
use crate::LabError;

/// The lab's effects on the machine.
pub trait Effects {
    /// `ip ARGS…`; the error names the command and quotes its stderr.
    fn ip(&mut self, args: &[&str]) -> Result<String, LabError>;
    /// `tc -n NS ARGS…`, or `ip netns exec NS ethtool ARGS…` for an `["-K", …]` list.
    fn tc(&mut self, ns: &str, args: &[String]) -> Result<String, LabError>;
    /// A sysctl in `ns` (None: this process's namespace), as the kernel prints it.
    fn read_sysctl(&mut self, ns: Option<&str>, key: &str) -> std::io::Result<String>;
    /// Sets a sysctl in `ns` (None: this process's namespace); the error names key and value.
    fn write_sysctl(&mut self, ns: Option<&str>, key: &str, value: &str) -> Result<(), LabError>;
    /// Whether `key` is the namespace's own (writable inside it), a global or missing.
    fn sysctl_scope(&mut self, ns: &str, key: &str) -> Result<sysctl::Scope, LabError>;
    /// A request to the lab's emulator.
    fn control(&mut self, lab: &str, req: &Request) -> Result<Option<EmuStatus>, LabError>;
    /// Starts the lab's emulator; its PID once it said "ready".
    fn spawn_emulator(&mut self, lab: &str) -> Result<u32, LabError>;
    /// Stops `host`'s CPU hogs and, with `cpu`, starts one pinned there.
    fn restart_hog(&mut self, lab: &str, host: &str, cpu: Option<u32>) -> Result<(), LabError>;
    /// Replaces the lab's `state.json` with `text`.
    fn write_state(&mut self, lab: &str, text: &str) -> Result<(), LabError>;
    /// The lab's `state.json`, if there is one.
    fn read_state(&mut self, lab: &str) -> Option<String>;
    /// Writes `/etc/netns/NS/hosts`.
    fn write_hosts_file(&mut self, ns: &str, text: &str) -> Result<(), LabError>;
    /// Every process of every lab.
    fn lab_processes(&mut self) -> Vec<os::LabProcess>;
    /// SIGTERM, `grace` to exit, then SIGKILL.
    fn stop_process(&mut self, pid: u32, grace: Duration);
    /// Whether a file or directory exists.
    fn exists(&mut self, path: &Path) -> bool;
    /// Removes a directory tree; whether it did.
    fn remove_dir(&mut self, path: &Path) -> bool;
    /// Whether `p` still runs (a start time of 0, from states written before it was
    /// recorded, matches whatever process has the PID).
    fn alive(&mut self, p: os::ProcessRef) -> bool;
    /// This process.
    fn me(&mut self) -> os::ProcessRef;
    /// Whether this process may build labs (CAP_NET_ADMIN and CAP_SYS_ADMIN).
    fn can_admin(&mut self) -> bool;
    /// The names in the labs' run directory ([`RUN_DIR`]): labs, and `.LAB.PID` directories
    /// that a `lab up` was making.
    fn run_dir_entries(&mut self) -> Vec<String>;
    /// Makes the lab's state directory holding `state` as `state.json`, atomically: made aside
    /// as `.LAB.PID`, then renamed without replacing, so no process ever sees a lab directory
    /// without its owner. [`LabError::NameInUse`] if the lab's directory exists.
    fn create_lab_dir(&mut self, lab: &str, state: &str) -> Result<(), LabError>;
    /// Runs `argv` (pinned to `cpu`) and waits for it; its exit code.
    fn run(&mut self, argv: &[String], cpu: Option<u32>) -> Result<i32, LabError>;
}

/// The machine itself.
pub struct Live;

impl Effects for Live {
    fn ip(&mut self, args: &[&str]) -> Result<String, LabError> {
        os::ip(args)
    }

    fn tc(&mut self, ns: &str, args: &[String]) -> Result<String, LabError> {
        let mut c = if args.first().is_some_and(|a| a == "-K") {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "ethtool"]);
            c
        } else {
            let mut c = Command::new("tc");
            c.args(["-n", ns]);
            c
        };
        os::run(c.args(args))
    }

    fn read_sysctl(&mut self, ns: Option<&str>, key: &str) -> std::io::Result<String> {
        os::read_sysctl(ns, key)
    }

    fn write_sysctl(&mut self, ns: Option<&str>, key: &str, value: &str) -> Result<(), LabError> {
        os::write_sysctl(ns, key, value)
    }

    fn sysctl_scope(&mut self, ns: &str, key: &str) -> Result<sysctl::Scope, LabError> {
        os::sysctl_scope(ns, key)
            .map_err(|e| LabError::Environment(format!("cannot enter namespace {ns}: {e}")))
    }

    fn control(&mut self, lab: &str, req: &Request) -> Result<Option<EmuStatus>, LabError> {
        let sock = lab_dir(lab).join("control.sock");
        let reply = sys::request(&sock, req).map_err(|e| {
            LabError::Environment(format!(
                "the emulator of lab '{lab}' does not answer ({e}); remove the lab with \
                 `tcptune lab down --name {lab}`"
            ))
        })?;
        if reply.ok {
            Ok(reply.status)
        } else {
            Err(LabError::Input(
                reply.error.unwrap_or_else(|| "the emulator refused".into()),
            ))
        }
    }

    fn spawn_emulator(&mut self, lab: &str) -> Result<u32, LabError> {
        spawn_emulator(lab)
    }

    fn restart_hog(&mut self, lab: &str, host: &str, cpu: Option<u32>) -> Result<(), LabError> {
        for p in os::lab_processes() {
            if p.lab == lab && p.role == "_hog" && hog_host(p.pid).as_deref() == Some(host) {
                os::stop_process(p.pid, Duration::from_secs(2));
            }
        }
        match cpu {
            Some(cpu) => spawn_hog(lab, host, cpu),
            None => Ok(()),
        }
    }

    fn write_state(&mut self, lab: &str, text: &str) -> Result<(), LabError> {
        let dir = lab_dir(lab);
        let tmp = dir.join("state.json.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, dir.join("state.json")))
            .map_err(|e| {
                LabError::Environment(format!("cannot write lab state in {}: {e}", dir.display()))
            })
    }

    fn read_state(&mut self, lab: &str) -> Option<String> {
        /// The largest state file read (a state is a few kilobytes).
        const STATE_LIMIT: u64 = 1 << 20;
        tcptune_kernel::file::read_text_limited(
            &lab_dir(lab).join("state.json"),
            STATE_LIMIT,
            "lab state",
        )
        .ok()
    }

    fn write_hosts_file(&mut self, ns: &str, text: &str) -> Result<(), LabError> {
        let etc = Path::new("/etc/netns").join(ns);
        std::fs::create_dir_all(&etc)
            .and_then(|()| std::fs::write(etc.join("hosts"), text))
            .map_err(|e| LabError::Environment(format!("cannot write {}: {e}", etc.display())))
    }

    fn lab_processes(&mut self) -> Vec<os::LabProcess> {
        os::lab_processes()
    }

    fn stop_process(&mut self, pid: u32, grace: Duration) {
        os::stop_process(pid, grace)
    }

    fn exists(&mut self, path: &Path) -> bool {
        path.exists()
    }

    fn remove_dir(&mut self, path: &Path) -> bool {
        path.exists() && std::fs::remove_dir_all(path).is_ok()
    }

    fn alive(&mut self, p: os::ProcessRef) -> bool {
        if p.start == 0 {
            os::alive(p.pid)
        } else {
            p.alive()
        }
    }

    fn me(&mut self) -> os::ProcessRef {
        os::ProcessRef::me()
    }

    fn can_admin(&mut self) -> bool {
        os::can_admin_network()
    }

    fn run_dir_entries(&mut self) -> Vec<String> {
        std::fs::read_dir(RUN_DIR)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn create_lab_dir(&mut self, lab: &str, state: &str) -> Result<(), LabError> {
        create_lab_dir(lab, state)
    }

    fn run(&mut self, argv: &[String], cpu: Option<u32>) -> Result<i32, LabError> {
        let Some((prog, args)) = argv.split_first() else {
            return Err(LabError::Input("no command to run".into()));
        };
        let mut c = Command::new(prog);
        c.args(args);
        if let Some(cpu) = cpu {
            // The CPU set is built here; the child between fork and exec only applies it.
            tcptune_os::process::pin_child_to_cpu(&mut c, cpu)
                .map_err(|e| LabError::Input(format!("cannot pin to CPU {cpu}: {e}")))?;
        }
        let status = c
            .status()
            .map_err(|e| LabError::Environment(format!("cannot run {prog}: {e}")))?;
        Ok(status.code().unwrap_or(128))
    }
}

fn create_lab_dir(lab: &str, state: &str) -> Result<(), LabError> {
    let env =
        |what: String, e: &dyn std::fmt::Display| LabError::Environment(format!("{what}: {e}"));
    std::fs::create_dir_all(RUN_DIR).map_err(|e| env(format!("cannot create {RUN_DIR}"), &e))?;
    let dir = lab_dir(lab);
    let tmp = Path::new(RUN_DIR).join(format!(".{lab}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp).map_err(|e| env(format!("cannot create {}", tmp.display()), &e))?;
    if let Err(e) = std::fs::write(tmp.join("state.json"), state) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(env(
            format!("cannot write lab state in {}", tmp.display()),
            &e,
        ));
    }
    // Fails with EEXIST, never replacing, if `dir` exists.
    if let Err(e) = tcptune_os::fs::rename_noreplace(&tmp, &dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(if e.raw_os_error() == Some(libc::EEXIST) {
            // Another `lab up` of the same name got there first.
            LabError::NameInUse(lab.into())
        } else {
            env(format!("cannot create {}", dir.display()), &e)
        });
    }
    Ok(())
}

/// The sysctls of this process's namespace through `fx`, for [`sysctl::Snapshot`].
pub struct Globals<'a>(pub &'a mut dyn Effects);

impl sysctl::Access for Globals<'_> {
    fn read(&mut self, key: &str) -> std::io::Result<String> {
        self.0.read_sysctl(None, key)
    }
    fn write(&mut self, key: &str, value: &str) -> std::io::Result<()> {
        self.0
            .write_sysctl(None, key, value)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }
}

/// The host a CPU hog serves (its `--host` argument).
fn hog_host(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let i = args.iter().position(|a| a == "--host")?;
    args.get(i + 1).cloned()
}

fn exe() -> Result<PathBuf, LabError> {
    std::env::current_exe()
        .map_err(|e| LabError::Environment(format!("cannot find the tcptune binary: {e}")))
}

/// Starts a detached process (own session, so the terminal's Ctrl-C does not reach it).
///
/// It executes `/proc/self/exe`, the binary this process runs, rather than the path
/// `current_exe` gives: when that file is replaced during a long `lab run` (a rebuild, an
/// upgrade), the path names a file that is gone ("… (deleted)") and every later trial failed
/// at `lab up` with ENOENT. argv[0] stays the binary's path, by which `os::lab_processes`
/// recognises the lab's processes.
fn detached(args: &[&str]) -> Result<Command, LabError> {
    let mut c = Command::new("/proc/self/exe");
    c.arg0(exe()?);
    c.args(args).stdin(Stdio::null());
    tcptune_os::process::new_session_for_child(&mut c);
    Ok(c)
}

fn spawn_hog(lab: &str, host: &str, cpu: u32) -> Result<(), LabError> {
    let cpu = cpu.to_string();
    detached(&["lab", "_hog", "--name", lab, "--host", host, "--cpu", &cpu])?
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LabError::Environment(format!("cannot start the CPU hog: {e}")))?;
    Ok(())
}

/// Starts the emulator and waits for its "ready" line (or its error) for up to 10 s.
fn spawn_emulator(lab: &str) -> Result<u32, LabError> {
    let log = std::fs::File::create(lab_dir(lab).join("emulator.log"))
        .map_err(|e| LabError::Environment(format!("cannot create the emulator log: {e}")))?;
    let mut child = detached(&["lab", "_emulator", "--name", lab])?
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| LabError::Environment(format!("cannot start the emulator: {e}")))?;
    let pid = child.id();
    let Some(out) = child.stdout.take() else {
        return Err(LabError::Environment("emulator has no stdout pipe".into()));
    };
    let ready = tcptune_os::poll::wait_readable(out.as_fd(), Duration::from_secs(10));
    let mut line = String::new();
    if ready.unwrap_or(false) {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    if line.trim() == "ready" {
        // Reap it later is impossible once we exit; the init process adopts it.
        std::mem::forget(child);
        return Ok(pid);
    }
    let log = std::fs::read_to_string(lab_dir(lab).join("emulator.log")).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    Err(LabError::Environment(format!(
        "the link emulator did not start: {}",
        log.lines()
            .last()
            .unwrap_or("no message (timed out after 10 s)")
    )))
}

/// A machine that only records: each effect as one line (`ip …`, `tc NS …`, `sysctl NS K=V`,
/// `control LAB …`, …) in order, with sysctls kept in a map, processes in a list, and the
/// first effect whose line contains `fail_on` failing.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Fake {
    pub log: Vec<String>,
    /// (namespace or "", key) → value.
    pub sysctls: std::collections::BTreeMap<(String, String), String>,
    /// Keys that are global (read-only inside a namespace).
    pub globals: Vec<String>,
    pub processes: Vec<os::LabProcess>,
    pub states: std::collections::BTreeMap<String, String>,
    pub paths: std::collections::BTreeSet<PathBuf>,
    pub fail_on: Option<String>,
    /// Processes that run besides this one ([`Fake::ME`]).
    pub running: Vec<os::ProcessRef>,
    /// This process lacks CAP_NET_ADMIN/CAP_SYS_ADMIN.
    pub not_admin: bool,
}

#[cfg(test)]
impl Fake {
    /// The process the fake says it is.
    pub const ME: os::ProcessRef = os::ProcessRef {
        pid: 4242,
        start: 77,
    };

    fn effect(&mut self, line: String) -> Result<String, LabError> {
        let fail = self
            .fail_on
            .as_ref()
            .is_some_and(|f| line.contains(f.as_str()));
        self.log.push(line.clone());
        if fail {
            self.fail_on = None;
            return Err(LabError::Environment(format!("`{line}` failed: injected")));
        }
        Ok(String::new())
    }

    /// The log lines that contain `needle`.
    pub fn lines(&self, needle: &str) -> Vec<&str> {
        self.log
            .iter()
            .filter(|l| l.contains(needle))
            .map(String::as_str)
            .collect()
    }

    fn netns_path(ns: &str) -> PathBuf {
        Path::new("/run/netns").join(ns)
    }
}

#[cfg(test)]
impl Effects for Fake {
    fn ip(&mut self, args: &[&str]) -> Result<String, LabError> {
        let out = self.effect(format!("ip {}", args.join(" ")))?;
        match args {
            ["netns", "add", ns] => {
                self.paths.insert(Self::netns_path(ns));
            }
            ["netns", "del", ns] => {
                self.paths.remove(&Self::netns_path(ns));
            }
            ["netns", "list"] => {
                let ns: Vec<String> = self
                    .paths
                    .iter()
                    .filter(|p| p.parent() == Some(Path::new("/run/netns")))
                    .filter_map(|p| Some(format!("{} (id: 0)", p.file_name()?.to_str()?)))
                    .collect();
                return Ok(ns.join("\n"));
            }
            _ => {}
        }
        Ok(out)
    }
    fn tc(&mut self, ns: &str, args: &[String]) -> Result<String, LabError> {
        self.effect(format!("tc {ns} {}", args.join(" ")))
    }
    fn read_sysctl(&mut self, ns: Option<&str>, key: &str) -> std::io::Result<String> {
        let ns = if self.globals.iter().any(|g| g == key) {
            ""
        } else {
            ns.unwrap_or("")
        };
        self.sysctls
            .get(&(ns.to_string(), key.to_string()))
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
    fn write_sysctl(&mut self, ns: Option<&str>, key: &str, value: &str) -> Result<(), LabError> {
        let ns = ns.unwrap_or("").to_string();
        self.effect(format!("sysctl {ns} {key}={value}"))?;
        self.sysctls
            .insert((ns, key.to_string()), value.to_string());
        Ok(())
    }
    fn sysctl_scope(&mut self, ns: &str, key: &str) -> Result<sysctl::Scope, LabError> {
        Ok(if self.globals.iter().any(|g| g == key) {
            sysctl::Scope::ReadOnly
        } else if self
            .sysctls
            .contains_key(&(ns.to_string(), key.to_string()))
        {
            sysctl::Scope::Writable
        } else {
            sysctl::Scope::Missing
        })
    }
    fn control(&mut self, lab: &str, req: &Request) -> Result<Option<EmuStatus>, LabError> {
        let what = match req {
            Request::SetLink { .. } => "set-link".to_string(),
            other => format!("{other:?}"),
        };
        self.effect(format!("control {lab} {what}")).map(|_| None)
    }
    fn spawn_emulator(&mut self, lab: &str) -> Result<u32, LabError> {
        self.effect(format!("spawn emulator {lab}"))?;
        let pid = 1000 + self.processes.len() as u32;
        self.processes.push(os::LabProcess {
            pid,
            role: "_emulator".into(),
            lab: lab.into(),
        });
        Ok(pid)
    }
    fn restart_hog(&mut self, lab: &str, host: &str, cpu: Option<u32>) -> Result<(), LabError> {
        self.effect(format!("hog {lab} {host} {cpu:?}")).map(drop)
    }
    fn write_state(&mut self, lab: &str, text: &str) -> Result<(), LabError> {
        self.states.insert(lab.into(), text.into());
        Ok(())
    }
    fn read_state(&mut self, lab: &str) -> Option<String> {
        self.states.get(lab).cloned()
    }
    fn write_hosts_file(&mut self, ns: &str, _text: &str) -> Result<(), LabError> {
        self.effect(format!("write /etc/netns/{ns}/hosts"))?;
        self.paths.insert(Path::new("/etc/netns").join(ns));
        Ok(())
    }
    fn lab_processes(&mut self) -> Vec<os::LabProcess> {
        self.processes.clone()
    }
    fn stop_process(&mut self, pid: u32, _grace: Duration) {
        let _ = self.effect(format!("stop {pid}"));
        self.processes.retain(|p| p.pid != pid);
    }
    fn exists(&mut self, path: &Path) -> bool {
        self.paths.contains(path)
    }
    fn remove_dir(&mut self, path: &Path) -> bool {
        let _ = self.effect(format!("rm {}", path.display()));
        if let Some(lab) = path
            .strip_prefix(RUN_DIR)
            .ok()
            .and_then(|l| l.to_str())
            .filter(|l| !l.contains('/'))
        {
            self.states.remove(lab);
        }
        self.paths.remove(path)
    }
    fn alive(&mut self, p: os::ProcessRef) -> bool {
        std::iter::once(Self::ME)
            .chain(self.running.iter().copied())
            .any(|r| r.pid == p.pid && (p.start == 0 || r.start == p.start))
    }
    fn me(&mut self) -> os::ProcessRef {
        Self::ME
    }
    fn can_admin(&mut self) -> bool {
        !self.not_admin
    }
    fn run_dir_entries(&mut self) -> Vec<String> {
        self.paths
            .iter()
            .filter(|p| p.parent() == Some(Path::new(RUN_DIR)))
            .filter_map(|p| Some(p.file_name()?.to_str()?.to_string()))
            .collect()
    }
    fn create_lab_dir(&mut self, lab: &str, state: &str) -> Result<(), LabError> {
        self.effect(format!("mkdir {}", lab_dir(lab).display()))?;
        if !self.paths.insert(lab_dir(lab)) {
            return Err(LabError::NameInUse(lab.into()));
        }
        self.states.insert(lab.into(), state.into());
        Ok(())
    }
    fn run(&mut self, argv: &[String], cpu: Option<u32>) -> Result<i32, LabError> {
        self.effect(format!("run {} on cpu {cpu:?}", argv.join(" ")))?;
        Ok(0)
    }
}
