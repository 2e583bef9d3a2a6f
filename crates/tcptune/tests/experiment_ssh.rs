//! Privileged: an experiment on two "real" hosts over OpenSSH. The test makes a client and a
//! server namespace joined by a 10 ms delay line (this kernel has no netem), each running its
//! own `sshd` (Debian's openssh-server) with a host key and an authorized key made here, and a
//! third namespace for the runner, which reaches the two over management links as a
//! controller reaches its hosts. The quickstart's window-limited points run through `ssh://`
//! to both: the settings are applied there and rolled back (the namespaces' sysctls say so),
//! and the results agree with the same points on the lab; a link impairment is refused in one
//! sentence where the sender has no sch_netem. Killing the runner and its ssh connections
//! mid-trial leaves both hosts restored: the remote tcptune rolls back by itself. Killing only
//! the connections fails that trial with the cause, and the run goes on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{Kill, Netns, Signal, TempDir};

const TCPTUNE: &str = env!("CARGO_BIN_EXE_tcptune");
const SSHD: &str = "/usr/sbin/sshd";

/// The quickstart's points whose goodput the receiver's window decides (the lab's rate does not
/// enter, so the lab and a delay line of the same RTT must agree), with a setting on each host.
/// (Not the quickstart's `cc = "cubic"`: a namespace may only choose a congestion control of
/// the host's allowed list, which the lab widens for its namespaces and this test must not.)
const COMMON: &str = r#"
seed = 1
repetitions = 3
warmup = false
order = "random"
[client]
sysctl."net.ipv4.tcp_slow_start_after_idle" = 0
[workload]
kind = "iperf3"
direction = "upload"
"#;

/// Dropped in this order: the sshd first, then the line, the namespaces, the files.
struct Hosts {
    _sshd: Vec<Kill>,
    _line: tcptune_testkit::DelayLine,
    runner: Netns,
    client: Netns,
    server: Netns,
    dir: TempDir,
    /// Where the client reaches the server over the delay line.
    server_data: String,
    /// Where the runner reaches the client and the server over ssh.
    client_ssh: String,
    server_ssh: String,
}

fn sh(cmd: &mut Command) -> Output {
    tcptune_testkit::run(cmd)
}

/// Starts sshd in `ns` listening on `addr` only, with its own host key; returns it and the
/// line for known_hosts.
fn sshd(dir: &Path, ns: &Netns, addr: &str, tag: &str) -> (Kill, String) {
    let key = dir.join(format!("host-{tag}"));
    sh(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key));
    let config = dir.join(format!("sshd-{tag}.conf"));
    std::fs::write(
        &config,
        format!(
            "ListenAddress {addr}:22\nHostKey {}\nAuthorizedKeysFile {}\nPermitRootLogin prohibit-password\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n\
             PidFile none\nLogLevel INFO\n",
            key.display(),
            dir.join("authorized_keys").display()
        ),
    )
    .unwrap();
    // Privilege separation needs its directory (the package's service would make it).
    std::fs::create_dir_all("/run/sshd").unwrap();
    let mut child = ns
        .command(&[SSHD, "-D", "-e", "-f", config.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = tcptune_testkit::line_channel(child.stderr.take().unwrap());
    let child = Kill(child);
    if let Err(e) = tcptune_testkit::wait_for_line(&rx, Duration::from_secs(20), |l| {
        l.contains("Server listening")
    }) {
        panic!("sshd in {} did not start: {e:?}", ns.name());
    }
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (child, format!("{addr} {}", public.trim()))
}

fn hosts(tag: &str) -> Hosts {
    // A directory per test: the tests of this file run at once in one process.
    let dir = TempDir::new(tag);
    let (runner, client, server) = (
        Netns::new("sshrun"),
        Netns::new("sshcli"),
        Netns::new("sshsrv"),
    );
    let (line, _client_data, server_data) =
        tcptune_testkit::DelayLine::new(&client, &server, 61, Duration::from_millis(10));
    let (_, client_ssh) = tcptune_testkit::veth_pair(&runner, &client, 62);
    let (_, server_ssh) = tcptune_testkit::veth_pair(&runner, &server, 63);
    let id = dir.join("id");
    sh(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&id));
    std::fs::copy(id.with_extension("pub"), dir.join("authorized_keys")).unwrap();
    let (a, ka) = sshd(&dir, &client, &client_ssh, "client");
    let (b, kb) = sshd(&dir, &server, &server_ssh, "server");
    std::fs::write(dir.join("known_hosts"), format!("{ka}\n{kb}\n")).unwrap();
    std::fs::write(
        dir.join("ssh_config"),
        format!(
            "Host *\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  StrictHostKeyChecking yes\n  \
             UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n",
            id.display(),
            dir.join("known_hosts").display()
        ),
    )
    .unwrap();
    Hosts {
        dir,
        runner,
        client,
        server,
        _line: line,
        _sshd: vec![a, b],
        server_data,
        client_ssh,
        server_ssh,
    }
}

impl Hosts {
    fn spec(&self, name: &str, duration: &str, rmem: &[&str]) -> PathBuf {
        let values: Vec<String> = rmem.iter().map(|v| format!("\"{v}\"")).collect();
        let text = format!(
            "name = \"{name}\"\n{COMMON}duration = \"{duration}\"\n[sweep]\n\"server.sysctl.net.ipv4.tcp_rmem\" = [{}]\n\
             [hosts]\nclient = \"ssh://root@{}\"\nserver = \"ssh://root@{}\"\nssh_config = \"{}\"\n\
             tcptune = \"{TCPTUNE}\"\nserver_address = \"{}\"\n",
            values.join(", "),
            self.client_ssh,
            self.server_ssh,
            self.dir.join("ssh_config").display(),
            self.server_data
        );
        let path = self.dir.join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `tcptune lab run SPEC --out OUT` in the runner's namespace.
    fn lab_run(&self, spec: &Path, out: &Path) -> Command {
        self.runner.command(&[
            TCPTUNE,
            "lab",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    }

    /// Each host's tcp_rmem and tcp_slow_start_after_idle, read inside its namespace (cheap
    /// enough to poll: no process per read).
    fn sysctls(&self) -> [(String, String); 2] {
        let read = |ns: &Netns| {
            let path = PathBuf::from(format!("/run/netns/{}", ns.name()));
            tcptune_os::netns::in_netns(&path, || {
                let r = |k: &str| {
                    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{k}"))
                        .unwrap_or_default()
                        .trim()
                        .to_string()
                };
                (r("tcp_rmem"), r("tcp_slow_start_after_idle"))
            })
            .unwrap_or_else(|e| panic!("entering {}: {e:?}", ns.name()))
        };
        [read(&self.client), read(&self.server)]
    }
}

/// Removes, when dropped, the snapshot files a run of spec `name` keeps on its hosts (the
/// lock files stay after every apply, as tune keeps them).
struct Snapshots(&'static str);

impl Drop for Snapshots {
    fn drop(&mut self) {
        for role in ["client", "server"] {
            for ext in ["json", "json.lock"] {
                let _ = std::fs::remove_file(format!(
                    "/var/lib/tcptune/experiment-{}-{role}.{ext}",
                    self.0
                ));
            }
        }
    }
}

fn trials(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("trials.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Processes whose command line holds `needle` (the ssh connections of one run).
fn processes_with(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) && pid != std::process::id() {
            pids.push(pid);
        }
    }
    pids
}

fn skip_without_sshd(test: &str) -> bool {
    if Path::new(SSHD).exists() {
        return false;
    }
    tcptune_testkit::skip_without_tool(
        test,
        "sshd is not installed (openssh-server; scripts/deps)",
    );
    true
}

#[test]
fn a_spec_runs_over_ssh_applies_and_rolls_back_and_agrees_with_the_lab() {
    let test = "a_spec_runs_over_ssh_applies_and_rolls_back_and_agrees_with_the_lab";
    if !tcptune_testkit::privileged(test) || skip_without_sshd(test) {
        return;
    }
    let h = hosts("ssh-run");
    let before = h.sysctls();
    let rmem = ["4096 16384 16384", "4096 65536 65536"];
    let _snapshots = Snapshots("tt-h4-ssh");
    let spec = h.spec("tt-h4-ssh", "2s", &rmem);
    let out = h.dir.join("ssh");
    let o = h.lab_run(&spec, &out).output().unwrap();
    assert!(
        o.status.success(),
        "lab run over ssh failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Rolled back on both hosts.
    assert_eq!(h.sysctls(), before);
    assert!(!Path::new("/var/lib/tcptune/experiment-tt-h4-ssh-server.json").exists());
    // Each host's environment was recorded there.
    let env: Value =
        serde_json::from_slice(&std::fs::read(out.join("environment.json")).unwrap()).unwrap();
    assert_eq!(env["backend"], "real hosts over ssh");
    for host in ["client", "server"] {
        assert!(
            env[host]["kernel"].as_str().is_some_and(|k| !k.is_empty()),
            "{env}"
        );
        assert!(
            env[host]["cpus"]
                .as_str()
                .is_some_and(|c| c.parse::<u32>().is_ok()),
            "{env}"
        );
        assert_eq!(
            env[host]["sysctl.net.ipv4.tcp_rmem"],
            before[usize::from(host == "server")].0.replace('\t', " ")
        );
    }
    assert!(
        env["client"]["dev"]
            .as_str()
            .is_some_and(|d| d.starts_with("tda")),
        "{env}"
    );
    // The server's setting held during its trials: the window over the 20 ms RTT.
    let t = trials(&out);
    assert_eq!(t.len(), 6);
    for r in &t {
        assert!(r["error"].is_null(), "{r}");
        let rtt = r["result"]["rtt_min_s"].as_f64().unwrap();
        assert!((0.019..0.030).contains(&rtt), "{r}");
    }
    // The same points on the lab (its emulated 10 ms each way in place of the delay line).
    let lab_spec = h.dir.join("lab.toml");
    std::fs::write(
        &lab_spec,
        format!(
            "name = \"tt-h4-ssh\"\n{COMMON}duration = \"2s\"\n[link]\nrate = \"100mbit\"\ndelay = \"10ms\"\n[sweep]\n\"server.sysctl.net.ipv4.tcp_rmem\" = [\"{}\", \"{}\"]\n",
            rmem[0], rmem[1]
        ),
    )
    .unwrap();
    let lab_out = h.dir.join("lab");
    let o = Command::new(TCPTUNE)
        .args([
            "lab",
            "run",
            lab_spec.to_str().unwrap(),
            "--out",
            lab_out.to_str().unwrap(),
            "--name",
            "tt-h4-ssh",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "lab run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Within each other's CIs, or 10% apart at most: the delay line wakes on a 1 ms timer, so
    // its RTT can be a millisecond longer than the lab's.
    let o = Command::new(TCPTUNE)
        .args([
            "report",
            out.to_str().unwrap(),
            "--against",
            lab_out.to_str().unwrap(),
            "--tolerance",
            "10%",
        ])
        .output()
        .unwrap();
    // Link impairments on real hosts go through netem on the sender: where it has none (this
    // kernel), the spec is refused in one sentence before anything is applied.
    let netem_here = Path::new("/sys/module/sch_netem").exists()
        || Command::new("modinfo")
            .arg("sch_netem")
            .output()
            .is_ok_and(|o| o.status.success());
    if !netem_here {
        let impaired = h.spec("tt-h4-sshnetem", "2s", &rmem);
        let text = std::fs::read_to_string(&impaired).unwrap();
        std::fs::write(&impaired, format!("{text}[link]\ndelay = \"10ms\"\n")).unwrap();
        let o = h.lab_run(&impaired, &h.dir.join("netem")).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("has no sch_netem") && err.contains("remove [link]"),
            "{err}"
        );
        assert_eq!(h.sysctls(), before);
    }
    // For the log: each point's mean and CI on both.
    eprintln!("{}", String::from_utf8_lossy(&o.stdout));
    assert!(
        o.status.success(),
        "over ssh and on the lab differ:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Hosts {
    /// Starts a run of `spec` into `out` and waits until both hosts hold its point's settings
    /// (the server's tcp_rmem, the client's own setting): the moment the kill tests strike.
    fn run_until_applied(&self, spec: &Path, out: &Path, stderr: Stdio) -> Kill {
        let runner = Kill(
            self.lab_run(spec, out)
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .unwrap(),
        );
        tcptune_testkit::wait_for(
            "both hosts' settings applied",
            Duration::from_secs(60),
            || {
                let [c, s] = self.sysctls();
                s.0 == "4096\t16384\t16384" && c.1 == "0"
            },
        );
        runner
    }
}

#[test]
fn a_killed_runner_and_its_connections_leave_both_hosts_restored() {
    let test = "a_killed_runner_and_its_connections_leave_both_hosts_restored";
    if !tcptune_testkit::privileged(test) || skip_without_sshd(test) {
        return;
    }
    let h = hosts("ssh-kill");
    let before = h.sysctls();
    let _snapshots = Snapshots("tt-h4-sshkill");
    let spec = h.spec("tt-h4-sshkill", "30s", &["4096 16384 16384"]);
    let out = h.dir.join("kill");
    let runner = h.run_until_applied(&spec, &out, Stdio::null());
    // Kill the runner and every ssh of its run (the master connections and their sessions):
    // nothing on this side is left to roll back.
    let pid = runner.0.id();
    let ssh = processes_with(&format!("tcptune-ssh-{pid}/"));
    assert!(!ssh.is_empty(), "the run's ssh master connections");
    tcptune_testkit::signal(pid, Signal::Kill);
    for p in ssh {
        tcptune_testkit::signal(p, Signal::Kill);
    }
    tcptune_testkit::wait_for("both hosts restored", Duration::from_secs(30), || {
        h.sysctls() == before
    });
    tcptune_testkit::wait_for("the snapshot removed", Duration::from_secs(10), || {
        !Path::new("/var/lib/tcptune/experiment-tt-h4-sshkill-server.json").exists()
    });
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("tcptune-ssh-{pid}")));
}

#[test]
fn a_lost_connection_fails_its_trial_with_the_cause_and_the_run_goes_on() {
    let test = "a_lost_connection_fails_its_trial_with_the_cause_and_the_run_goes_on";
    if !tcptune_testkit::privileged(test) || skip_without_sshd(test) {
        return;
    }
    let h = hosts("ssh-lost");
    let before = h.sysctls();
    let _snapshots = Snapshots("tt-h4-sshlost");
    let spec = h.spec("tt-h4-sshlost", "6s", &["4096 16384 16384"]);
    std::fs::write(
        &spec,
        std::fs::read_to_string(&spec)
            .unwrap()
            .replace("repetitions = 3", "repetitions = 2"),
    )
    .unwrap();
    let out = h.dir.join("lost");
    let mut runner = h.run_until_applied(&spec, &out, Stdio::piped());
    // Every ssh of the run dies (its connections drop); the runner lives on.
    let pid = runner.0.id();
    let ssh = processes_with(&format!("tcptune-ssh-{pid}/"));
    assert!(!ssh.is_empty(), "the run's ssh connections");
    for p in ssh {
        tcptune_testkit::signal(p, Signal::Kill);
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(runner.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let status = runner.0.wait().unwrap();
    assert_eq!(status.code(), Some(1), "a failed trial: exit 1\n{stderr}");
    let t = trials(&out);
    assert_eq!(t.len(), 2, "{stderr}");
    let failed: Vec<&Value> = t.iter().filter(|r| !r["error"].is_null()).collect();
    assert_eq!(failed.len(), 1, "{stderr}");
    let cause = failed[0]["error"].as_str().unwrap();
    assert!(cause.contains("failed or was lost"), "{cause}");
    assert!(
        t.iter()
            .any(|r| r["result"]["goodput_bps"].as_f64().is_some_and(|g| g > 0.0)),
        "the next trial ran on a new connection: {stderr}"
    );
    assert_eq!(h.sysctls(), before);
}
