//! The lab's lifecycle: `up` builds the namespaces, starts the emulator process (or, on the
//! netem backend, joins them with a veth pair and puts tc qdiscs on its ends) and applies the
//! host settings (undoing everything if any step fails or a signal arrives); `down` removes
//! everything named after the lab and restores global sysctls; `status`, `set` and `exec` work
//! on a running lab; [`run_emulator`] is the background process itself.
//!
//! A lab is *alive* when its setup is complete, its link works (its emulator runs, or its veth
//! ends exist) and the process it is tied to, if any, still runs (`lab run` ties each trial's
//! lab to itself), or while the `lab up` that creates it is still running. Processes are named
//! by PID and start time, so a reused PID does not keep a lab alive. Anything else named after
//! a lab is a leftover (of a `kill -9`), removed by the next `lab up` or `lab run` of any lab,
//! or by `lab down --all`. A running emulator removes its lab as soon as an owner dies, and a
//! lab's CPU hogs exit when it is no longer alive.

use std::fmt;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_emu::sys::{self, EmuStatus, Request, Side};
use tcptune_emu::LinkSpec;

use crate::backend;
pub use crate::backend::QdiscStatus;
use crate::effects::{Effects, Globals, Live};
pub use crate::names::{addresses, check_name, netns_name, DEV, NS_PREFIX, RUN_DIR};
use crate::names::{hosts_file, lab_dir, peer, HOSTS};
use crate::os;
use crate::spec::{Backend, HostSettings, LabSpec};
use crate::LabError;
use tcptune_os::sysctl;

/// A global sysctl the lab changed, to restore at `down`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GlobalChange {
    pub key: String,
    pub original: String,
    pub value: String,
}

/// What `/run/tcptune/<lab>/state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    name: String,
    /// The `lab up` process while it builds the lab.
    owner_pid: u32,
    /// Its start time (0 in states written before it was recorded).
    #[serde(default)]
    owner_start: u64,
    /// The process the lab lives with, if any (`lab run`): when it is gone, the lab is a
    /// leftover even though its emulator still runs.
    #[serde(default)]
    tied_to: Option<os::ProcessRef>,
    ready: bool,
    emulator_pid: Option<u32>,
    spec: LabSpec,
    /// Written before each change, so a kill between recording and changing restores a value
    /// equal to the current one (harmless).
    globals: Vec<GlobalChange>,
}

fn read_state(lab: &str) -> Option<State> {
    read_state_in(&mut Live, lab)
}

fn read_state_in(fx: &mut dyn Effects, lab: &str) -> Option<State> {
    serde_json::from_str(&fx.read_state(lab)?).ok()
}

impl State {
    /// The `lab up` that builds it still runs.
    fn owner_alive(&self) -> bool {
        if self.owner_start == 0 {
            os::alive(self.owner_pid)
        } else {
            os::ProcessRef {
                pid: self.owner_pid,
                start: self.owner_start,
            }
            .alive()
        }
    }

    /// The process the lab is tied to (if any) still runs.
    fn tie_holds(&self) -> bool {
        self.tied_to.is_none_or(|p| p.alive())
    }
}

fn write_state(fx: &mut dyn Effects, st: &State) -> Result<(), LabError> {
    let text =
        serde_json::to_string_pretty(st).map_err(|e| LabError::Environment(e.to_string()))?;
    fx.write_state(&st.name, &text)
}

/// Every lab name that has something on this machine: state, namespaces or processes.
fn known_labs() -> Vec<String> {
    let mut names = std::collections::BTreeSet::new();
    if let Ok(d) = std::fs::read_dir(RUN_DIR) {
        names.extend(d.flatten().filter_map(|e| e.file_name().into_string().ok()));
    }
    if let Ok(out) = os::ip(&["netns", "list"]) {
        for line in out.lines() {
            let ns = line.split_whitespace().next().unwrap_or("");
            if let Some(rest) = ns.strip_prefix(NS_PREFIX) {
                for h in HOSTS {
                    if let Some(lab) = rest.strip_suffix(&format!("-{h}")) {
                        names.insert(lab.to_string());
                    }
                }
            }
        }
    }
    names.extend(os::lab_processes().into_iter().map(|p| p.lab));
    names
        .into_iter()
        .filter(|n| check_name(n).is_ok())
        .collect()
}

fn emulator_pid(lab: &str) -> Option<u32> {
    os::lab_processes()
        .into_iter()
        .find(|p| p.lab == lab && p.role == "_emulator")
        .map(|p| p.pid)
}

/// Alive: set up and emulating, or being set up by a live `lab up`.
fn is_alive(lab: &str) -> bool {
    match read_state(lab) {
        Some(st) if st.ready => st.tie_holds() && link_up(lab, &st),
        Some(st) => st.owner_alive() && st.owner_pid != std::process::id() && st.tie_holds(),
        None => false,
    }
}

/// Whether a set-up lab's link still works: its emulator runs (emu), or both namespaces still
/// hold their end of the veth (netem).
fn link_up(lab: &str, st: &State) -> bool {
    backend::of(st.spec.backend).link_up(&mut Live, lab)
}

/// Removes everything named after `lab`: its processes (except this one), processes left in
/// its namespaces, the namespaces, their /etc/netns directories, global sysctl changes and the
/// state directory. Idempotent; returns what it removed.
pub fn teardown(lab: &str) -> Vec<String> {
    teardown_with(&mut Live, lab)
}

fn teardown_with(fx: &mut dyn Effects, lab: &str) -> Vec<String> {
    let mut removed = Vec::new();
    let me = std::process::id();
    let state = read_state_in(fx, lab);
    // The emulator first: it holds the TUN devices (and with them the namespaces).
    let mut procs = fx.lab_processes();
    procs.sort_by_key(|p| p.role != "_emulator");
    for p in procs.into_iter().filter(|p| p.lab == lab && p.pid != me) {
        fx.stop_process(p.pid, Duration::from_secs(5));
        removed.push(format!(
            "process {} ({})",
            p.pid,
            p.role.trim_start_matches('_')
        ));
    }
    for h in HOSTS {
        let ns = netns_name(lab, h);
        if fx.exists(&Path::new("/run/netns").join(&ns)) {
            // Commands started with `lab exec` would keep the namespace alive unseen.
            if let Ok(pids) = fx.ip(&["netns", "pids", &ns]) {
                for pid in pids
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                {
                    if pid != me {
                        fx.stop_process(pid, Duration::from_secs(2));
                    }
                }
            }
            if fx.ip(&["netns", "del", &ns]).is_ok() {
                removed.push(format!("namespace {ns}"));
            }
        }
        let etc = Path::new("/etc/netns").join(&ns);
        if fx.remove_dir(&etc) {
            removed.push(etc.display().to_string());
        }
    }
    if let Some(st) = &state {
        // Restore only what still has our value: someone else may have changed it since.
        let globals = globals_snapshot(&st.globals);
        for g in globals.restore(&mut Globals(fx), sysctl::Restore::IfUnchanged) {
            removed.push(format!("restored {}={}", g.key, g.original));
        }
    }
    let dir = lab_dir(lab);
    if fx.remove_dir(&dir) {
        removed.push(dir.display().to_string());
    }
    removed
}

fn globals_snapshot(globals: &[GlobalChange]) -> sysctl::Snapshot {
    sysctl::Snapshot {
        changes: globals
            .iter()
            .map(|g| sysctl::Change {
                key: g.key.clone(),
                original: g.original.clone(),
                value: g.value.clone(),
            })
            .collect(),
    }
}

/// Removes the leftovers of every lab that is not alive, and the half-made state directories
/// of `lab up`s killed while making them.
pub fn remove_dead() -> Vec<String> {
    let mut removed: Vec<String> = known_labs()
        .into_iter()
        .filter(|l| !is_alive(l))
        .flat_map(|l| teardown(&l))
        .collect();
    if let Ok(d) = std::fs::read_dir(RUN_DIR) {
        for e in d.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // ".LAB.PID", see create_lab_dir.
            let pid = name
                .strip_prefix('.')
                .and_then(|n| n.rsplit_once('.'))
                .and_then(|(_, p)| p.parse::<u32>().ok());
            if pid.is_some_and(|p| !os::alive(p)) && std::fs::remove_dir_all(e.path()).is_ok() {
                removed.push(e.path().display().to_string());
            }
        }
    }
    removed
}

/// Removes a lab set up by this process if setup fails (dropped without `disarm`).
struct UndoGuard<'a> {
    lab: &'a str,
    armed: bool,
}
impl Drop for UndoGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            teardown(self.lab);
        }
    }
}

fn check_interrupt() -> Result<(), LabError> {
    if os::interrupted() {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// Refuses a congestion control the kernel lacks.
fn check_cc(fx: &mut dyn Effects, cc: &str) -> Result<(), LabError> {
    let available = fx
        .read_sysctl(None, "net.ipv4.tcp_available_congestion_control")
        .unwrap_or_default();
    if available.split_whitespace().any(|a| a == cc) {
        Ok(())
    } else {
        Err(LabError::NoSuchCongestionControl {
            cc: cc.to_string(),
            available,
        })
    }
}

/// Changes a global sysctl, recording the original first (in the lab's state, so a kill
/// between recording and changing restores a value equal to the current one: harmless).
fn set_global(
    fx: &mut dyn Effects,
    st: &mut State,
    key: &str,
    value: &str,
) -> Result<(), LabError> {
    let mut globals = globals_snapshot(&st.globals);
    let changes = globals.record(&mut Globals(fx), key, value).map_err(|e| {
        LabError::Input(format!("sysctl {key} does not exist in this kernel ({e})"))
    })?;
    if !changes {
        return Ok(());
    }
    st.globals = globals
        .changes
        .into_iter()
        .map(|c| GlobalChange {
            key: c.key,
            original: c.original,
            value: c.value,
        })
        .collect();
    write_state(fx, st)?;
    fx.write_sysctl(None, key, value)
}

/// Inside a namespace only congestion controls in the global allowed list can be chosen; add
/// `cc` there (restored at down).
fn allow_cc(fx: &mut dyn Effects, st: &mut State, cc: &str) -> Result<(), LabError> {
    check_cc(fx, cc)?;
    let key = "net.ipv4.tcp_allowed_congestion_control";
    let allowed = fx.read_sysctl(None, key).unwrap_or_default();
    if allowed.split_whitespace().any(|a| a == cc) {
        return Ok(());
    }
    set_global(fx, st, key, &format!("{allowed} {cc}"))
}

fn apply_sysctl(
    fx: &mut dyn Effects,
    st: &mut State,
    ns: &str,
    key: &str,
    value: &str,
) -> Result<(), LabError> {
    if key == "net.ipv4.tcp_congestion_control" {
        allow_cc(fx, st, value)?;
    }
    match fx.sysctl_scope(ns, key)? {
        sysctl::Scope::Writable => fx.write_sysctl(Some(ns), key, value),
        sysctl::Scope::ReadOnly => set_global(fx, st, key, value),
        sysctl::Scope::Missing => Err(LabError::Input(format!(
            "sysctl {key} does not exist in this kernel; check the name with `sysctl -a`"
        ))),
    }
}

/// Applies `want` to `host`, changing only what differs from `had` (everything on `up`).
fn configure_host(
    fx: &mut dyn Effects,
    st: &mut State,
    lab: &str,
    host: &str,
    want: &HostSettings,
    had: Option<&HostSettings>,
) -> Result<(), LabError> {
    let ns = netns_name(lab, host);
    let (v4, v6) = addresses(host);
    let (p4, p6) = addresses(peer(host));
    let fresh = had.is_none();
    let def = HostSettings::default();
    let had = had.unwrap_or(&def);
    if let Some(q) = want
        .txqueuelen
        .filter(|_| want.txqueuelen != had.txqueuelen)
    {
        fx.ip(&["-n", &ns, "link", "set", DEV, "txqueuelen", &q.to_string()])?;
    }
    if fresh {
        // Up first: bringing a device up after its IPv6 addresses were added can drop the
        // peer route. IPv6 gets a /64 (a NOARP device needs no neighbour discovery).
        fx.ip(&["-n", &ns, "link", "set", DEV, "up"])?;
        fx.ip(&["-n", &ns, "addr", "add", v4, "peer", p4, "dev", DEV])?;
        fx.ip(&[
            "-n",
            &ns,
            "-6",
            "addr",
            "add",
            &format!("{v6}/64"),
            "dev",
            DEV,
            "nodad",
        ])?;
    }
    // The MTU after the addresses: IPv6 refuses an address on a device below 1280 bytes, and
    // a smaller MTU set later only turns IPv6 off on it (IPv4 keeps working, as on a real host).
    if let Some(mtu) = want.mtu.filter(|_| want.mtu != had.mtu) {
        fx.ip(&["-n", &ns, "link", "set", DEV, "mtu", &mtu.to_string()])?;
    }
    for (k, v) in &want.sysctls {
        if had.sysctls.get(k) != Some(v) {
            check_interrupt()?;
            apply_sysctl(fx, st, &ns, k, v)?;
        }
    }
    if want.route != had.route && !want.route.is_empty() {
        if let Some(cc) = &want.route.congctl {
            allow_cc(fx, st, cc)?;
        }
        let mut metrics: Vec<String> = Vec::new();
        let r = &want.route;
        for (name, v) in [
            ("initcwnd", r.initcwnd),
            ("initrwnd", r.initrwnd),
            ("ssthresh", r.ssthresh),
        ] {
            if let Some(v) = v {
                metrics.extend([name.to_string(), v.to_string()]);
            }
        }
        if let Some(cc) = &r.congctl {
            metrics.extend(["congctl".to_string(), cc.clone()]);
        }
        let m: Vec<&str> = metrics.iter().map(String::as_str).collect();
        let mut a = vec![
            "-n", &ns, "route", "replace", p4, "dev", DEV, "proto", "kernel", "scope", "link",
            "src", v4,
        ];
        a.extend(&m);
        fx.ip(&a)?;
        // A device below IPv6's minimum MTU (1280) has no IPv6, so no IPv6 route either.
        if want.mtu.is_none_or(|m| m >= 1280) {
            let p6_128 = format!("{p6}/128");
            let mut a = vec![
                "-n", &ns, "-6", "route", "replace", &p6_128, "dev", DEV, "proto", "kernel",
                "metric", "256",
            ];
            a.extend(&m);
            fx.ip(&a)?;
        }
    }
    if want.line_rate_bps != had.line_rate_bps && !fresh {
        let side = if host == "client" {
            Side::Client
        } else {
            Side::Server
        };
        fx.control(
            lab,
            &Request::SetLineRate {
                side,
                rate_bps: want.line_rate_bps,
            },
        )?;
    }
    if want.cpu_hog != had.cpu_hog || (want.cpu_hog && want.cpu != had.cpu) {
        let cpu = want.cpu_hog.then(|| host_cpu(host, want).unwrap_or(0));
        fx.restart_hog(lab, host, cpu)?;
    }
    Ok(())
}

/// The CPU a host runs on: its `cpu` setting, or with a hog a default per host.
fn host_cpu(host: &str, s: &HostSettings) -> Option<u32> {
    s.cpu.or_else(|| {
        s.cpu_hog
            .then(|| if host == "client" { 0 } else { 1 % os::cpus() })
    })
}

/// The CPU hog process: spins on one CPU until killed, or until its lab is no longer alive
/// (its emulator, the `lab up` building it or the process it is tied to died, even by
/// `kill -9`), which it checks five times a second: a hog never outlives its lab.
pub fn run_hog(lab: &str, cpu: u32) -> Result<(), LabError> {
    os::pin_to_cpu(cpu).map_err(|e| LabError::Input(format!("cannot pin to CPU {cpu}: {e}")))?;
    let mut x: u64 = 0;
    let mut next_check = Instant::now();
    loop {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        if Instant::now() >= next_check {
            if !is_alive(lab) {
                return Ok(());
            }
            next_check = Instant::now() + Duration::from_millis(200);
        }
    }
}

/// `tcptune lab up`: a lab that stays after this process exits.
pub fn up(lab: &str, spec: LabSpec) -> Result<LabStatus, LabError> {
    up_inner(lab, spec, None)
}

/// A lab that lives only as long as this process: once it exits, even by `kill -9`, the lab is
/// a leftover that the next lab command removes (`lab run` makes its trials' labs so).
pub fn up_tied(lab: &str, spec: LabSpec) -> Result<LabStatus, LabError> {
    up_inner(lab, spec, Some(os::ProcessRef::me()))
}

/// Refuses users who cannot make namespaces, before anything else is looked at.
pub fn require_admin(command: &str) -> Result<(), LabError> {
    if os::can_admin_network() {
        Ok(())
    } else {
        Err(LabError::NeedsRoot(command.into()))
    }
}

fn up_inner(
    lab: &str,
    spec: LabSpec,
    tied_to: Option<os::ProcessRef>,
) -> Result<LabStatus, LabError> {
    require_admin("lab up")?;
    check_name(lab)?;
    spec.validate()?;
    let link = backend::of(spec.backend);
    link.check(&spec)?;
    for h in [&spec.client, &spec.server] {
        for cc in h.congestion_controls() {
            check_cc(&mut Live, cc)?;
        }
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err(LabError::Environment(
            "/dev/net/tun is missing; load the tun module (modprobe tun)".into(),
        ));
    }
    os::catch_stop_signals();
    remove_dead();
    if is_alive(lab) || emulator_pid(lab).is_some() {
        return Err(LabError::NameInUse(lab.into()));
    }
    std::fs::create_dir_all(RUN_DIR)
        .map_err(|e| LabError::Environment(format!("cannot create {RUN_DIR}: {e}")))?;
    let me = os::ProcessRef::me();
    let mut st = State {
        name: lab.into(),
        owner_pid: me.pid,
        owner_start: me.start,
        tied_to,
        ready: false,
        emulator_pid: None,
        spec: spec.clone(),
        globals: Vec::new(),
    };
    // The directory appears with its state inside (made aside, then renamed without
    // replacing), so no other process ever sees a lab directory without an owner and removes
    // it as a leftover.
    create_lab_dir(&st)?;
    let mut guard = UndoGuard { lab, armed: true };
    stop_point("state");
    let built = build(&mut Live, &mut st, link);
    // A failed build has removed what it made; the guard stays for a panic.
    guard.armed = false;
    drop(guard);
    built?;
    status_of(lab)
}

/// Builds the lab of `st` (whose state directory exists): the namespaces, the link, the hosts'
/// settings, then marks it ready. On failure, or on a stop signal between steps, everything
/// made is removed again ([`teardown`]) before the error is returned.
fn build(
    fx: &mut dyn Effects,
    st: &mut State,
    link: &dyn backend::LinkBackend,
) -> Result<(), LabError> {
    let r = build_steps(fx, st, link);
    if r.is_err() {
        teardown_with(fx, &st.name);
    }
    r
}

fn build_steps(
    fx: &mut dyn Effects,
    st: &mut State,
    link: &dyn backend::LinkBackend,
) -> Result<(), LabError> {
    let lab = st.name.clone();
    let lab = lab.as_str();
    for h in HOSTS {
        check_interrupt()?;
        let ns = netns_name(lab, h);
        fx.ip(&["netns", "add", &ns])?;
        fx.ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        fx.write_hosts_file(&ns, &hosts_file())?;
    }
    stop_point("namespaces");
    check_interrupt()?;
    if let Some(pid) = link.create(fx, lab)? {
        st.emulator_pid = Some(pid);
        write_state(fx, st)?;
    }
    stop_point("emulator");
    let spec = st.spec.clone();
    for h in HOSTS {
        check_interrupt()?;
        configure_host(fx, st, lab, h, spec.host(h)?, None)?;
    }
    link.finish(fx, lab, &spec.link)?;
    stop_point("hosts");
    check_interrupt()?;
    st.ready = true;
    write_state(fx, st)
}

/// Fault injection for the tests: with `TCPTUNE_LAB_STOP_AT=STAGE` in its environment, `lab up`
/// (and so each trial of `lab run`) stops itself with SIGSTOP at STAGE (state, namespaces,
/// emulator, hosts), so a test can `kill -9` it at exactly that point.
fn stop_point(stage: &str) {
    if std::env::var_os("TCPTUNE_LAB_STOP_AT").is_some_and(|s| s == stage) {
        // SIGSTOP suspends this process until SIGCONT or SIGKILL.
        tcptune_os::process::raise(tcptune_os::process::Signal::Stop);
    }
}

fn create_lab_dir(st: &State) -> Result<(), LabError> {
    let dir = lab_dir(&st.name);
    let tmp = Path::new(RUN_DIR).join(format!(".{}.{}", st.name, std::process::id()));
    let env = |what: &str, e: &dyn fmt::Display| LabError::Environment(format!("{what}: {e}"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp).map_err(|e| env(&format!("cannot create {}", tmp.display()), &e))?;
    let text =
        serde_json::to_string_pretty(st).map_err(|e| LabError::Environment(e.to_string()))?;
    if let Err(e) = std::fs::write(tmp.join("state.json"), text) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(env(
            &format!("cannot write lab state in {}", tmp.display()),
            &e,
        ));
    }
    // Fails with EEXIST, never replacing, if `dir` exists.
    if let Err(e) = tcptune_os::fs::rename_noreplace(&tmp, &dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(if e.raw_os_error() == Some(libc::EEXIST) {
            // Another `lab up` of the same name got there first.
            LabError::NameInUse(lab_name_of(&dir))
        } else {
            env(&format!("cannot create {}", dir.display()), &e)
        });
    }
    Ok(())
}

fn lab_name_of(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `tcptune lab down --name LAB`.
pub fn down(lab: &str) -> Result<Vec<String>, LabError> {
    require_admin("lab down")?;
    check_name(lab)?;
    if !known_labs().iter().any(|l| l == lab) {
        return Err(LabError::NoSuchLab(lab.into()));
    }
    Ok(teardown(lab))
}

/// `tcptune lab down --all`: the leftovers of every lab (labs whose owner is gone), or with
/// `force` every lab on the machine, running ones (other users' too) included.
pub fn down_all(force: bool) -> Result<Vec<String>, LabError> {
    require_admin("lab down")?;
    if !force {
        return Ok(remove_dead());
    }
    Ok(known_labs()
        .into_iter()
        .flat_map(|l| teardown(&l))
        .collect())
}

/// One host of a lab, as `lab status` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HostStatus {
    pub name: String,
    pub netns: String,
    pub device: String,
    pub ipv4: String,
    pub ipv6: String,
    pub settings: HostSettings,
    /// Packets the host's own device queue (txqueuelen) dropped: the NIC queue overflowed.
    pub nic_tx_dropped: Option<u64>,
}

/// The kernel's transmit-drop count of the host's device (its queue overflowing).
fn nic_tx_dropped(ns: &str) -> Option<u64> {
    let out = os::ip(&["-n", ns, "-j", "-s", "link", "show", DEV]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v[0]["stats64"]["tx"]["dropped"].as_u64()
}

/// `lab status` of one lab.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LabStatus {
    pub name: String,
    /// "running", "starting", or "broken" (a leftover: `lab down` removes it).
    pub state: String,
    pub backend: Backend,
    pub emulator_pid: Option<u32>,
    pub hosts: Vec<HostStatus>,
    pub link: LinkSpec,
    /// Global sysctls changed for this lab (restored at down).
    pub global_changes: Vec<GlobalChange>,
    /// Live counters from the emulator (absent when it does not run).
    pub emulator: Option<EmuStatus>,
    /// The netem backend's qdiscs with their counters (empty on the emu backend).
    pub qdiscs: Vec<QdiscStatus>,
}

/// `lab status`: every lab, or the one named.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LabList {
    pub labs: Vec<LabStatus>,
}

fn status_of(lab: &str) -> Result<LabStatus, LabError> {
    let st = read_state(lab);
    let pid = emulator_pid(lab);
    let spec = st.as_ref().map(|s| s.spec.clone()).unwrap_or_default();
    let state = match &st {
        Some(s) if s.ready && s.tie_holds() && link_up(lab, s) => "running",
        Some(s) if !s.ready && s.owner_alive() && s.tie_holds() => "starting",
        _ => "broken",
    };
    let (emulator, qdiscs) = if state == "running" {
        backend::of(spec.backend).counters(&mut Live, lab)?
    } else {
        (None, Vec::new())
    };
    let hosts = HOSTS
        .iter()
        .map(|&h| {
            let (v4, v6) = addresses(h);
            HostStatus {
                name: h.into(),
                netns: netns_name(lab, h),
                device: DEV.into(),
                ipv4: v4.into(),
                ipv6: v6.into(),
                settings: spec.host(h).cloned().unwrap_or_default(),
                nic_tx_dropped: nic_tx_dropped(&netns_name(lab, h)),
            }
        })
        .collect();
    Ok(LabStatus {
        name: lab.into(),
        state: state.into(),
        backend: spec.backend,
        emulator_pid: pid,
        hosts,
        link: spec.link,
        global_changes: st.map(|s| s.globals).unwrap_or_default(),
        emulator,
        qdiscs,
    })
}

/// `tcptune lab status [--name LAB]`.
pub fn status(lab: Option<&str>) -> Result<LabList, LabError> {
    require_admin("lab status")?;
    let labs = match lab {
        Some(l) => {
            check_name(l)?;
            if !known_labs().iter().any(|k| k == l) {
                return Err(LabError::NoSuchLab(l.into()));
            }
            vec![status_of(l)?]
        }
        None => known_labs()
            .iter()
            .map(|l| status_of(l))
            .collect::<Result<_, _>>()?,
    };
    Ok(LabList { labs })
}

fn running_state(lab: &str) -> Result<State, LabError> {
    check_name(lab)?;
    match read_state(lab) {
        Some(st) if st.ready && st.tie_holds() && link_up(lab, &st) => Ok(st),
        Some(_) => Err(LabError::Environment(format!(
            "lab '{lab}' is not running (its link is gone); remove it with \
             `tcptune lab down --name {lab}` and start it again"
        ))),
        None => Err(LabError::NoSuchLab(lab.into())),
    }
}

/// `tcptune lab set`: new link and host settings for a running lab.
pub fn set(lab: &str, new: LabSpec) -> Result<LabStatus, LabError> {
    require_admin("lab set")?;
    let mut st = running_state(lab)?;
    if new.backend != st.spec.backend {
        return Err(LabError::Input(format!(
            "lab '{lab}' runs on the {:?} backend, which `lab set` cannot change; take it down \
             and start it again with --backend",
            st.spec.backend
        )));
    }
    new.validate()?;
    set_with(&mut Live, &mut st, new)?;
    status_of(lab)
}

/// Gives the running lab of `st` the settings of `new` (same backend), changing only what
/// differs, and records each change in its state as it is made.
fn set_with(fx: &mut dyn Effects, st: &mut State, new: LabSpec) -> Result<(), LabError> {
    let link = backend::of(st.spec.backend);
    link.check(&new)?;
    for h in [&new.client, &new.server] {
        for cc in h.congestion_controls() {
            check_cc(fx, cc)?;
        }
    }
    let lab = st.name.clone();
    let lab = lab.as_str();
    if new.link != st.spec.link {
        link.set_link(fx, lab, &new.link)?;
        st.spec.link = new.link.clone();
        write_state(fx, st)?;
    }
    for h in HOSTS {
        let had = st.spec.host(h)?.clone();
        let want = new.host(h)?.clone();
        if want != had {
            let r = configure_host(fx, st, lab, h, &want, Some(&had));
            // Record what was applied even if a later setting failed.
            if r.is_ok() {
                match h {
                    "client" => st.spec.client = want,
                    _ => st.spec.server = want,
                }
            }
            write_state(fx, st)?;
            r?;
        }
    }
    Ok(())
}

/// The current spec of a running lab (for `lab set` to start from).
pub fn current_spec(lab: &str) -> Result<LabSpec, LabError> {
    Ok(running_state(lab)?.spec)
}

/// `tcptune lab exec LAB HOST -- CMD…`: runs CMD in the host (names resolve through the lab's
/// hosts file), pinned to the host's CPU if it has one, and returns its exit code.
pub fn exec(lab: &str, host: &str, argv: &[String]) -> Result<i32, LabError> {
    require_admin("lab exec")?;
    check_name(lab)?;
    if !HOSTS.contains(&host) {
        return Err(LabError::UnknownHost(host.into()));
    }
    let st = read_state(lab).ok_or_else(|| LabError::NoSuchLab(lab.into()))?;
    if argv.is_empty() {
        return Err(LabError::Input(
            "lab exec needs a command after --, e.g. `tcptune lab exec demo client -- ping server`"
                .into(),
        ));
    }
    let cpu = host_cpu(host, st.spec.host(host)?);
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &netns_name(lab, host)]).args(argv);
    if let Some(cpu) = cpu {
        // The CPU set is built here; the child between fork and exec only applies it.
        tcptune_os::process::pin_child_to_cpu(&mut c, cpu)
            .map_err(|e| LabError::Input(format!("cannot pin to CPU {cpu}: {e}")))?;
    }
    let status = c
        .status()
        .map_err(|e| LabError::Environment(format!("cannot run ip netns exec: {e}")))?;
    Ok(status.code().unwrap_or(128))
}

/// The emulator process (`tcptune lab _emulator --name LAB`): opens the two TUN devices in the
/// hosts' namespaces, says "ready" on stdout, forwards until a stop signal, then removes the
/// lab (so SIGTERM or SIGINT to the emulator takes the whole lab down cleanly).
pub fn run_emulator(lab: &str) -> Result<(), LabError> {
    let env = |what: &str, e: &dyn fmt::Display| LabError::Environment(format!("{what}: {e}"));
    let signals = sys::stop_signals().map_err(|e| env("cannot block signals", &e))?;
    // Packets wait on this process's wakeups. The emulator is the network: a packet due now
    // must not wait behind a host's CPU hog, a busy receiver or a build, so it runs at a low
    // real-time priority (SCHED_FIFO 10), which wakes it at once. Measured with bench/lab at
    // 80% of 1 Gbit/s, TCP's delay-error p99 fell from 47–404 µs (nice −10) to ~45 µs. It
    // sleeps in ppoll whenever nothing is due, and the kernel's RT throttling
    // (sched_rt_runtime_us) leaves other tasks 5% of a CPU even under a flood. Where
    // real-time priority is not allowed, nice −10.
    tcptune_os::process::prefer_realtime(10);
    let st = read_state(lab).ok_or_else(|| LabError::NoSuchLab(lab.into()))?;
    let open = |h: &str| {
        sys::tun::Tun::create_in(&Path::new("/run/netns").join(netns_name(lab, h)), DEV)
            .map_err(|e| env(&format!("cannot create the {h}'s TUN device"), &e))
    };
    let (ct, stn) = (open("client")?, open("server")?);
    let sock = lab_dir(lab).join("control.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = std::os::unix::net::UnixListener::bind(&sock)
        .map_err(|e| env(&format!("cannot listen on {}", sock.display()), &e))?;
    let mut emu = sys::Emulator::new(
        sys::Port::new(ct, st.spec.client.line_rate_bps),
        sys::Port::new(stn, st.spec.server.line_rate_bps),
        st.spec.link.clone(),
    )
    .map_err(|e| LabError::Input(e.to_string()))?;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready").and_then(|()| out.flush());
    }
    // Nobody reads stdout any more; point it at /dev/null so a stray write cannot fail.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = tcptune_os::process::redirect_stdout(null.as_fd());
    }
    let started = Instant::now();
    // The loop stops when its stop descriptor is readable: an epoll set of the signals and
    // of the processes whose end ends the lab (the process it is tied to; the `lab up`
    // building it, until the lab is ready), so a `kill -9` of either removes the lab at once.
    let mut stop = StopSet::new(signals.as_fd())
        .map_err(|e| env("cannot watch for the end of the lab's owners", &e))?;
    let tied = st.tied_to.and_then(|p| stop.watch(p));
    let mut owner = (st.owner_start != 0)
        .then(|| {
            stop.watch(os::ProcessRef {
                pid: st.owner_pid,
                start: st.owner_start,
            })
        })
        .flatten();
    let result = loop {
        let r = emu.run(Some(&listener), stop.epoll.as_fd());
        if !matches!(r, Ok(sys::Exit::Signal)) || os::readable(signals.as_fd()) {
            break r;
        }
        if tied.as_ref().is_some_and(|t| os::readable(t.as_fd())) {
            eprintln!("the process lab '{lab}' was tied to has ended");
            break r;
        }
        match owner.take() {
            // `lab up` ended: normally once the lab is ready, which leaves it running.
            Some(o) if os::readable(o.as_fd()) => {
                if !read_state(lab).is_some_and(|s| s.ready) {
                    eprintln!("`lab up` of lab '{lab}' ended before the lab was ready");
                    break r;
                }
                stop.unwatch(&o);
            }
            o => owner = o,
        }
    };
    drop(emu); // closes the TUN devices, releasing the namespaces
    drop(listener);
    eprintln!(
        "emulator of lab '{lab}' stopping after {:.1} s: {result:?}",
        started.elapsed().as_secs_f64()
    );
    teardown(lab);
    result
        .map(|_| ())
        .map_err(|e| env("emulator loop failed", &e))
}

/// An epoll set that is readable when a stop signal arrived or a watched process ended (it
/// stands in for the emulator loop's signal descriptor).
struct StopSet {
    epoll: tcptune_os::poll::Epoll,
}

impl StopSet {
    fn new(signals: BorrowedFd<'_>) -> std::io::Result<StopSet> {
        let set = StopSet {
            epoll: tcptune_os::poll::Epoll::new()?,
        };
        set.epoll.add(signals)?;
        Ok(set)
    }

    /// Watches `p`; None if it cannot be watched. A process already gone (or whose PID now
    /// belongs to another) is watched as a descriptor that is readable at once.
    fn watch(&mut self, p: os::ProcessRef) -> Option<std::os::fd::OwnedFd> {
        let fd = os::pidfd(p)?;
        self.epoll.add(fd.as_fd()).ok()?;
        Some(fd)
    }

    fn unwatch(&mut self, fd: &std::os::fd::OwnedFd) {
        let _ = self.epoll.remove(fd.as_fd());
    }
}

impl fmt::Display for LabStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backend = backend::of(self.backend).describe();
        writeln!(f, "lab {} ({}, {backend})", self.name, self.state)?;
        for h in &self.hosts {
            writeln!(
                f,
                "  {:<7} {} {} {} netns {}",
                h.name, h.device, h.ipv4, h.ipv6, h.netns
            )?;
            let s = &h.settings;
            let mut extra = Vec::new();
            if let Some(m) = s.mtu {
                extra.push(format!("mtu {m}"));
            }
            if let Some(q) = s.txqueuelen {
                extra.push(format!("txqueuelen {q}"));
            }
            if let Some(r) = s.line_rate_bps {
                extra.push(format!("line rate {r}"));
            }
            for (k, v) in &s.sysctls {
                extra.push(format!("{k}={v}"));
            }
            if !s.route.is_empty() {
                extra.push(format!("route {:?}", s.route));
            }
            if s.cpu_hog {
                extra.push("cpu hog".into());
            }
            if let Some(d) = h.nic_tx_dropped.filter(|&d| d > 0) {
                extra.push(format!("NIC queue dropped {d}"));
            }
            if !extra.is_empty() {
                writeln!(f, "          {}", extra.join(", "))?;
            }
        }
        for (dir, c) in [("up", &self.link.up), ("down", &self.link.down)] {
            writeln!(f, "  link {dir:<4} {}", crate::netem::describe(c))?;
        }
        writeln!(f, "  seed {}", self.link.seed)?;
        if let Some(e) = &self.emulator {
            // The PID is what `taskset`/`chrt` need to give the emulator a core of its own.
            if let Some(pid) = self.emulator_pid {
                write!(f, "  emulator pid {pid}, ")?;
            } else {
                write!(f, "  ")?;
            }
            writeln!(
                f,
                "offloads {}",
                if e.offloads {
                    "on (TSO)"
                } else {
                    "off (per packet)"
                }
            )?;
            let l = &e.lateness;
            if let (Some(p50), Some(p99), Some(max)) = (l.p50_us, l.p99_us, l.max_us) {
                writeln!(
                    f,
                    "  emulator lateness against the schedule: p50 {p50} µs, p99 {p99} µs, \
                     max {max} µs"
                )?;
            }
            for (dir, c) in [("up", &e.up), ("down", &e.down)] {
                writeln!(
                    f,
                    "  {dir:<4} in {} pkts {} B, out {} pkts {} B; dropped loss {} queue {} \
                     limit {}; dup {} corrupt {} reorder {}; queue {} pkts (max {})",
                    c.packets_in,
                    c.bytes_in,
                    c.packets_out,
                    c.bytes_out,
                    c.dropped_loss,
                    c.dropped_queue,
                    c.dropped_limit,
                    c.duplicated,
                    c.corrupted,
                    c.reordered,
                    c.queue_packets,
                    c.max_queue_packets
                )?;
            }
        }
        for q in &self.qdiscs {
            writeln!(
                f,
                "  {:<4} {} on the {}'s egress: {} pkts {} B, dropped {}, overlimits {}; queue \
                 {} pkts {} B",
                if q.host == "client" { "up" } else { "down" },
                q.kind,
                q.host,
                q.packets,
                q.bytes,
                q.drops,
                q.overlimits,
                q.backlog_packets,
                q.backlog_bytes
            )?;
        }
        for g in &self.global_changes {
            writeln!(f, "  global {}={} (was {})", g.key, g.value, g.original)?;
        }
        Ok(())
    }
}

impl fmt::Display for LabList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.labs.is_empty() {
            return writeln!(f, "no labs");
        }
        for l in &self.labs {
            write!(f, "{l}")?;
        }
        Ok(())
    }
}

/// What `lab down` removed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Removed {
    pub removed: Vec<String>,
}

impl fmt::Display for Removed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.removed.is_empty() {
            return writeln!(f, "nothing to remove");
        }
        for r in &self.removed {
            writeln!(f, "removed {r}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::Fake;

    fn state(lab: &str, spec: LabSpec) -> State {
        State {
            name: lab.into(),
            owner_pid: std::process::id(),
            owner_start: 0,
            tied_to: None,
            ready: false,
            emulator_pid: None,
            spec,
            globals: Vec::new(),
        }
    }

    /// A kernel with the sysctls the tests touch; net.core.rmem_max is global.
    fn fake() -> Fake {
        let mut fx = Fake::default();
        for (ns, k, v) in [
            (
                "",
                "net.ipv4.tcp_available_congestion_control",
                "reno cubic bbr",
            ),
            ("", "net.ipv4.tcp_allowed_congestion_control", "reno cubic"),
            ("", "net.core.rmem_max", "212992"),
            (
                "tcptune-t-server",
                "net.ipv4.tcp_rmem",
                "4096 131072 6291456",
            ),
            (
                "tcptune-t-server",
                "net.ipv4.tcp_congestion_control",
                "cubic",
            ),
        ] {
            fx.sysctls.insert((ns.into(), k.into()), v.into());
        }
        fx.globals.push("net.core.rmem_max".into());
        fx.paths.insert(lab_dir("t"));
        fx
    }

    fn spec(backend: Backend, host: &[&str]) -> LabSpec {
        let mut s = LabSpec {
            backend,
            ..LabSpec::default()
        };
        for h in host {
            crate::spec::apply_host_setting(&mut s, h).unwrap();
        }
        s
    }

    /// The position of the first log line containing `needle`.
    fn at(fx: &Fake, needle: &str) -> usize {
        fx.log
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in {:#?}", fx.log))
    }

    #[test]
    fn up_then_down_on_the_emulator_makes_and_removes_everything_in_order() {
        let mut fx = fake();
        let mut st = state("t", spec(Backend::Emu, &["server.mtu=9000"]));
        build(&mut fx, &mut st, backend::of(Backend::Emu)).unwrap();
        assert!(st.ready && st.emulator_pid.is_some());
        // Namespaces, then the emulator (it makes the devices), then each host's device.
        let order = [
            "ip netns add tcptune-t-client",
            "ip -n tcptune-t-client link set lo up",
            "write /etc/netns/tcptune-t-client/hosts",
            "ip netns add tcptune-t-server",
            "spawn emulator t",
            "ip -n tcptune-t-client link set eth0 up",
            "ip -n tcptune-t-client addr add 198.18.0.1 peer 198.18.0.2 dev eth0",
            "ip -n tcptune-t-server addr add 198.18.0.2 peer 198.18.0.1 dev eth0",
            "ip -n tcptune-t-server link set eth0 mtu 9000",
        ];
        let pos: Vec<usize> = order.iter().map(|n| at(&fx, n)).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{:#?}", fx.log);
        assert!(
            fx.lines("tc ").is_empty(),
            "no qdiscs on the emulator backend"
        );
        let saved: State = serde_json::from_str(&fx.states["t"]).unwrap();
        assert!(saved.ready);

        fx.log.clear();
        let removed = teardown_with(&mut fx, "t");
        // The emulator first (it holds the devices), then the namespaces and files.
        assert!(fx.log[0].starts_with("stop "), "{:#?}", fx.log);
        at(&fx, "ip netns del tcptune-t-client");
        at(&fx, "ip netns del tcptune-t-server");
        assert!(removed.contains(&"namespace tcptune-t-server".to_string()));
        assert!(
            removed.contains(&"/run/tcptune/t".to_string()),
            "{removed:?}"
        );
        assert!(fx.processes.is_empty() && fx.paths.is_empty());
    }

    #[test]
    fn a_failed_step_removes_what_was_made() {
        let mut fx = fake();
        fx.fail_on = Some("addr add 198.18.0.2".into());
        let mut st = state("t", spec(Backend::Emu, &[]));
        let e = build(&mut fx, &mut st, backend::of(Backend::Emu)).unwrap_err();
        assert!(e.to_string().contains("injected"), "{e}");
        let failed = at(&fx, "addr add 198.18.0.2");
        assert!(failed > at(&fx, "spawn emulator"));
        // After the failure: the emulator stopped, both namespaces and their files removed.
        let after = &fx.log[failed + 1..];
        for want in [
            "stop ",
            "ip netns del tcptune-t-client",
            "ip netns del tcptune-t-server",
            "rm /etc/netns/tcptune-t-client",
        ] {
            assert!(after.iter().any(|l| l.contains(want)), "{want}: {after:#?}");
        }
        assert!(
            fx.processes.is_empty() && fx.paths.is_empty(),
            "{:?}",
            fx.paths
        );
        assert!(!st.ready);
    }

    #[test]
    fn the_netem_backend_joins_the_hosts_with_a_veth_and_qdiscs_after_the_hosts() {
        let mut fx = fake();
        let mut s = spec(Backend::Netem, &[]);
        let mut rate = crate::spec::LinkChanges::default();
        rate.set("rate", "10mbit").unwrap();
        rate.apply(&mut s.link).unwrap();
        let mut st = state("t", s);
        build(&mut fx, &mut st, backend::of(Backend::Netem)).unwrap();
        assert_eq!(st.emulator_pid, None);
        assert!(fx.lines("spawn emulator").is_empty());
        let veth = at(&fx, "ip link add eth0 netns tcptune-t-client type veth");
        assert!(veth > at(&fx, "ip netns add tcptune-t-server"));
        assert!(at(&fx, "tc tcptune-t-client qdisc replace") > at(&fx, "addr add 198.18.0.2"));
    }

    #[test]
    fn set_changes_only_what_differs_on_each_backend() {
        for b in [Backend::Emu, Backend::Netem] {
            let mut fx = fake();
            let mut st = state("t", spec(b, &[]));
            st.ready = true;
            let mut new = spec(b, &["client.mtu=1400"]);
            // A rate alone: tbf on the netem backend, which every kernel has.
            let mut rate = crate::spec::LinkChanges::default();
            rate.set("rate", "50mbit").unwrap();
            rate.apply(&mut new.link).unwrap();
            set_with(&mut fx, &mut st, new.clone()).unwrap();
            match b {
                Backend::Emu => assert_eq!(fx.lines("control t set-link").len(), 1),
                Backend::Netem => assert_eq!(fx.lines("qdisc replace").len(), 2, "{:?}", fx.log),
            }
            assert_eq!(fx.lines("mtu 1400").len(), 1);
            assert!(
                fx.lines("addr add").is_empty(),
                "a running host keeps its addresses"
            );
            assert!(
                fx.lines("ip -n tcptune-t-server").is_empty(),
                "the server's settings did not change"
            );
            assert_eq!(st.spec, new);
            // The same settings again change nothing.
            fx.log.clear();
            set_with(&mut fx, &mut st, new).unwrap();
            assert!(fx.log.is_empty(), "{:?}", fx.log);
        }
    }

    #[test]
    fn globals_and_allowed_ccs_are_recorded_and_restored_unless_changed_since() {
        let mut fx = fake();
        let mut st = state(
            "t",
            spec(
                Backend::Emu,
                &["server.sysctl.net.core.rmem_max=4194304", "server.cc=bbr"],
            ),
        );
        build(&mut fx, &mut st, backend::of(Backend::Emu)).unwrap();
        let keys: Vec<&str> = st.globals.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "net.core.rmem_max",
                "net.ipv4.tcp_allowed_congestion_control"
            ]
        );
        assert_eq!(st.globals[1].value, "reno cubic bbr");
        at(
            &fx,
            "sysctl tcptune-t-server net.ipv4.tcp_congestion_control=bbr",
        );
        // Someone else changes rmem_max after us: theirs is kept at down.
        fx.sysctls
            .insert(("".into(), "net.core.rmem_max".into()), "1".into());
        let removed = teardown_with(&mut fx, "t");
        assert!(removed
            .contains(&"restored net.ipv4.tcp_allowed_congestion_control=reno cubic".to_string()));
        assert!(
            !removed.iter().any(|r| r.contains("rmem_max")),
            "{removed:?}"
        );
        assert_eq!(fx.sysctls[&("".into(), "net.core.rmem_max".into())], "1");
    }

    #[test]
    fn a_congestion_control_the_kernel_lacks_is_refused_before_anything_changes() {
        let mut fx = fake();
        let mut st = state("t", spec(Backend::Emu, &[]));
        st.ready = true;
        let e = set_with(&mut fx, &mut st, spec(Backend::Emu, &["client.cc=vegas"])).unwrap_err();
        assert!(matches!(e, LabError::NoSuchCongestionControl { .. }), "{e}");
        assert!(fx.log.is_empty(), "{:?}", fx.log);
    }
}
