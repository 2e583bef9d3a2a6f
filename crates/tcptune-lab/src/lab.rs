//! The lab's lifecycle: `up` builds the namespaces, starts the emulator process (or, on the
//! netem backend, joins them with a veth pair and puts tc qdiscs on its ends) and applies the
//! host settings (undoing everything if any step fails or a signal arrives); `down` removes
//! everything named after the lab and restores global sysctls; `status`, `set` and `exec` work
//! on a running lab. Each command is a thin public function over one that takes the machine as
//! [`Effects`], which the tests replace by a fake.
//!
//! Which labs are alive and which are leftovers is in [`crate::leftovers`]: processes are
//! named by PID and start time, so a reused PID does not keep a lab alive. A running emulator
//! removes its lab as soon as an owner dies, and a lab's CPU hogs exit when it is no longer
//! alive ([`crate::background`]).

use std::path::Path;

use tcptune_emu::sys::{Request, Side};

use crate::backend;
pub use crate::backend::QdiscStatus;
pub use crate::background::{run_emulator, run_hog};
use crate::effects::{Effects, Globals, Live};
use crate::leftovers::{emulator_pid, is_alive, known_labs, link_up, remove_dead, teardown};
pub use crate::names::{addresses, check_name, netns_name, DEV, NS_PREFIX, RUN_DIR};
use crate::names::{hosts_file, peer, HOSTS};
use crate::os;
use crate::spec::{HostSettings, LabSpec};
pub use crate::state::GlobalChange;
use crate::state::{read_state, write_state, State};
use crate::status::{list, status_of};
pub use crate::status::{HostStatus, LabList, LabStatus, Removed};
use crate::LabError;
use tcptune_os::sysctl;

/// Removes a lab set up by this process if setup panics (dropped while armed).
struct UndoGuard<'a> {
    lab: &'a str,
    armed: bool,
}
impl Drop for UndoGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            teardown(&mut Live, self.lab);
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
    let mut globals = st.globals_snapshot();
    let changes = globals.record(&mut Globals(fx), key, value).map_err(|e| {
        LabError::Input(format!("sysctl {key} does not exist in this kernel ({e})"))
    })?;
    if !changes {
        return Ok(());
    }
    st.set_globals(globals);
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
    admin(&mut Live, command)
}

fn admin(fx: &mut dyn Effects, command: &str) -> Result<(), LabError> {
    if fx.can_admin() {
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
    os::catch_stop_signals();
    let fx = &mut Live;
    let (mut st, link) = prepare(fx, lab, spec, tied_to)?;
    let mut guard = UndoGuard { lab, armed: true };
    stop_point("state");
    let built = build(fx, &mut st, link);
    // A failed build has removed what it made; the guard stays for a panic.
    guard.armed = false;
    drop(guard);
    built?;
    status_of(fx, lab)
}

/// `lab up` before it builds: refuses bad input and a machine that cannot host a lab before
/// anything changes, removes the leftovers of dead labs, refuses a name in use, and claims the
/// name by making the lab's state directory with the state inside.
fn prepare(
    fx: &mut dyn Effects,
    lab: &str,
    spec: LabSpec,
    tied_to: Option<os::ProcessRef>,
) -> Result<(State, &'static dyn backend::LinkBackend), LabError> {
    admin(fx, "lab up")?;
    check_name(lab)?;
    spec.validate()?;
    let link = backend::of(spec.backend);
    link.check(&spec)?;
    for h in [&spec.client, &spec.server] {
        for cc in h.congestion_controls() {
            check_cc(fx, cc)?;
        }
    }
    if !fx.exists(Path::new("/dev/net/tun")) {
        return Err(LabError::Environment(
            "/dev/net/tun is missing; load the tun module (modprobe tun)".into(),
        ));
    }
    remove_dead(fx);
    if is_alive(fx, lab) || emulator_pid(fx, lab).is_some() {
        return Err(LabError::NameInUse(lab.into()));
    }
    let me = fx.me();
    let st = State::new(lab, spec, me, tied_to);
    // The directory appears with its state inside (made aside, then renamed without
    // replacing), so no other process ever sees a lab directory without an owner and removes
    // it as a leftover.
    fx.create_lab_dir(lab, &st.to_json()?)?;
    Ok((st, link))
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
        teardown(fx, &st.name);
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

/// `tcptune lab down --name LAB`.
pub fn down(lab: &str) -> Result<Vec<String>, LabError> {
    require_admin("lab down")?;
    down_with(&mut Live, lab)
}

fn down_with(fx: &mut dyn Effects, lab: &str) -> Result<Vec<String>, LabError> {
    check_name(lab)?;
    if !known_labs(fx).iter().any(|l| l == lab) {
        return Err(LabError::NoSuchLab(lab.into()));
    }
    Ok(teardown(fx, lab))
}

/// `tcptune lab down --all`: the leftovers of every lab (labs whose owner is gone), or with
/// `force` every lab on the machine, running ones (other users' too) included.
pub fn down_all(force: bool) -> Result<Vec<String>, LabError> {
    require_admin("lab down")?;
    Ok(down_all_with(&mut Live, force))
}

fn down_all_with(fx: &mut dyn Effects, force: bool) -> Vec<String> {
    if !force {
        return remove_dead(fx);
    }
    let mut removed = Vec::new();
    for lab in known_labs(fx) {
        removed.extend(teardown(fx, &lab));
    }
    removed
}

/// `tcptune lab status [--name LAB]`: every lab, or the one named.
pub fn status(lab: Option<&str>) -> Result<LabList, LabError> {
    require_admin("lab status")?;
    list(&mut Live, lab)
}

fn running_state(fx: &mut dyn Effects, lab: &str) -> Result<State, LabError> {
    check_name(lab)?;
    match read_state(fx, lab) {
        Some(st) if st.ready && st.tie_holds(fx) && link_up(fx, lab, &st) => Ok(st),
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
    let fx = &mut Live;
    let mut st = running_state(fx, lab)?;
    if new.backend != st.spec.backend {
        return Err(LabError::Input(format!(
            "lab '{lab}' runs on the {:?} backend, which `lab set` cannot change; take it down \
             and start it again with --backend",
            st.spec.backend
        )));
    }
    new.validate()?;
    set_with(fx, &mut st, new)?;
    status_of(fx, lab)
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
    Ok(running_state(&mut Live, lab)?.spec)
}

/// `tcptune lab exec LAB HOST -- CMD…`: runs CMD in the host (names resolve through the lab's
/// hosts file), pinned to the host's CPU if it has one, and returns its exit code.
pub fn exec(lab: &str, host: &str, argv: &[String]) -> Result<i32, LabError> {
    require_admin("lab exec")?;
    exec_with(&mut Live, lab, host, argv)
}

fn exec_with(
    fx: &mut dyn Effects,
    lab: &str,
    host: &str,
    argv: &[String],
) -> Result<i32, LabError> {
    check_name(lab)?;
    if !HOSTS.contains(&host) {
        return Err(LabError::UnknownHost(host.into()));
    }
    let st = read_state(fx, lab).ok_or_else(|| LabError::NoSuchLab(lab.into()))?;
    if argv.is_empty() {
        return Err(LabError::Input(
            "lab exec needs a command after --, e.g. `tcptune lab exec demo client -- ping server`"
                .into(),
        ));
    }
    let cpu = host_cpu(host, st.spec.host(host)?);
    let mut cmd: Vec<String> = ["ip", "netns", "exec"].map(String::from).into();
    cmd.push(netns_name(lab, host));
    cmd.extend(argv.iter().cloned());
    fx.run(&cmd, cpu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::Fake;
    use crate::names::lab_dir;
    use crate::os::{LabProcess, ProcessRef};
    use crate::spec::Backend;

    fn state(lab: &str, spec: LabSpec) -> State {
        State::new(lab, spec, Fake::ME, None)
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
        let removed = teardown(&mut fx, "t");
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
        let removed = teardown(&mut fx, "t");
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

    /// A machine that can host a lab named "t" (none there yet).
    fn machine() -> Fake {
        let mut fx = fake();
        fx.paths.clear();
        fx.paths.insert("/dev/net/tun".into());
        fx
    }

    /// A lab already on `fx`: its state and directory, and its emulator when `emulator`.
    fn existing(fx: &mut Fake, lab: &str, ready: bool, owner: ProcessRef, emulator: bool) {
        let mut st = State::new(lab, LabSpec::default(), owner, None);
        st.ready = ready;
        fx.states.insert(lab.into(), st.to_json().unwrap());
        fx.paths.insert(lab_dir(lab));
        if emulator {
            fx.processes.push(LabProcess {
                pid: 2000 + fx.processes.len() as u32,
                role: "_emulator".into(),
                lab: lab.into(),
            });
        }
    }

    const GONE: ProcessRef = ProcessRef {
        pid: 3001,
        start: 5,
    };

    #[test]
    fn up_refuses_before_changing_anything() {
        let good = spec(Backend::Emu, &[]);
        let cases: Vec<(&str, Fake, LabSpec, &str)> = vec![
            (
                "not root",
                Fake {
                    not_admin: true,
                    ..machine()
                },
                good.clone(),
                "needs root",
            ),
            ("no tun", fake_without_tun(), good.clone(), "/dev/net/tun"),
            (
                "unknown cc",
                machine(),
                spec(Backend::Emu, &["client.cc=vegas"]),
                "vegas",
            ),
            ("bad name", machine(), good.clone(), "name"),
        ];
        for (what, mut fx, s, says) in cases {
            let name = if what == "bad name" { "no/slash" } else { "t" };
            let e = match prepare(&mut fx, name, s, None) {
                Ok(_) => panic!("{what}: accepted"),
                Err(e) => e,
            };
            assert!(e.to_string().contains(says), "{what}: {e}");
            assert!(fx.log.is_empty(), "{what}: {:?}", fx.log);
            assert!(fx.states.is_empty(), "{what}");
        }
    }

    fn fake_without_tun() -> Fake {
        let mut fx = machine();
        fx.paths.clear();
        fx
    }

    #[test]
    fn up_claims_the_name_with_its_owner_and_tie_after_removing_leftovers() {
        let mut fx = machine();
        // A leftover of the same name (its `lab up` was killed, its emulator's state is gone)
        // is removed, then claimed.
        existing(&mut fx, "t", false, GONE, false);
        fx.processes.push(LabProcess {
            pid: 2000,
            role: "_emulator".into(),
            lab: "t".into(),
        });
        let tie = ProcessRef { pid: 9, start: 1 };
        let (st, _) = prepare(&mut fx, "t", spec(Backend::Emu, &[]), Some(tie)).unwrap();
        assert!(at(&fx, "stop 2000") < at(&fx, "mkdir /run/tcptune/t"));
        assert!(at(&fx, "rm /run/tcptune/t") < at(&fx, "mkdir /run/tcptune/t"));
        let saved: State = serde_json::from_str(&fx.states["t"]).unwrap();
        assert_eq!(saved.owner(), Fake::ME);
        assert_eq!(saved.tied_to, Some(tie));
        assert!(!saved.ready && !st.ready);
    }

    #[test]
    fn up_refuses_a_name_in_use_and_leaves_that_lab_alone() {
        let builder = ProcessRef {
            pid: 3000,
            start: 5,
        };
        // Running; being built by another live `lab up`.
        for (what, ready, owner, emulator) in [
            ("running", true, GONE, true),
            ("building", false, builder, false),
        ] {
            let mut fx = machine();
            fx.running.push(builder);
            existing(&mut fx, "t", ready, owner, emulator);
            match prepare(&mut fx, "t", spec(Backend::Emu, &[]), None) {
                Err(LabError::NameInUse(_)) => {}
                Err(e) => panic!("{what}: {e}"),
                Ok(_) => panic!("{what}: accepted"),
            }
            assert!(fx.paths.contains(&lab_dir("t")), "{what}");
            assert!(fx.lines("mkdir").is_empty(), "{what}: {:?}", fx.log);
            assert_eq!(fx.processes.len(), usize::from(emulator), "{what}");
        }
    }

    #[test]
    fn down_all_removes_only_leftovers_unless_forced() {
        let mut fx = machine();
        existing(&mut fx, "alive", true, GONE, true);
        existing(&mut fx, "dead", true, GONE, false);
        down_all_with(&mut fx, false);
        assert!(fx.paths.contains(&lab_dir("alive")));
        assert!(!fx.paths.contains(&lab_dir("dead")));
        assert_eq!(fx.processes.len(), 1);
        down_all_with(&mut fx, true);
        assert!(!fx.paths.contains(&lab_dir("alive")));
        assert!(fx.processes.is_empty());
        assert!(matches!(
            down_with(&mut fx, "alive"),
            Err(LabError::NoSuchLab(_))
        ));
    }

    #[test]
    fn exec_runs_the_command_in_the_hosts_namespace_on_its_cpu() {
        let mut fx = machine();
        let mut st = state("t", spec(Backend::Emu, &["client.cpu=1"]));
        st.ready = true;
        fx.states.insert("t".into(), st.to_json().unwrap());
        let argv = ["ping".to_string(), "server".to_string()];
        assert_eq!(exec_with(&mut fx, "t", "client", &argv).unwrap(), 0);
        assert_eq!(exec_with(&mut fx, "t", "server", &argv).unwrap(), 0);
        assert_eq!(
            fx.lines("run "),
            [
                "run ip netns exec tcptune-t-client ping server on cpu Some(1)",
                "run ip netns exec tcptune-t-server ping server on cpu None",
            ]
        );
        fx.log.clear();
        for (lab, host, argv, want) in [
            ("t", "router", &argv[..], "no host 'router'"),
            ("t", "client", &[][..], "needs a command"),
            ("u", "client", &argv[..], "no lab named 'u'"),
        ] {
            let e = exec_with(&mut fx, lab, host, argv).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
        assert!(fx.log.is_empty(), "{:?}", fx.log);
    }

    #[test]
    fn status_says_running_starting_or_broken() {
        let mut fx = machine();
        fx.running.push(ProcessRef {
            pid: 3000,
            start: 5,
        });
        existing(&mut fx, "up", true, GONE, true);
        existing(
            &mut fx,
            "starting",
            false,
            ProcessRef {
                pid: 3000,
                start: 5,
            },
            false,
        );
        existing(&mut fx, "broken", true, GONE, false);
        let all = list(&mut fx, None).unwrap();
        let states: Vec<(&str, &str)> = all
            .labs
            .iter()
            .map(|l| (l.name.as_str(), l.state.as_str()))
            .collect();
        assert_eq!(
            states,
            [
                ("broken", "broken"),
                ("starting", "starting"),
                ("up", "running")
            ]
        );
        // Only a running lab's emulator is asked for its counters.
        assert_eq!(fx.lines("control "), ["control up Status"]);
        let text = all.labs[2].to_string();
        assert!(text.starts_with("lab up (running, "), "{text}");
        assert!(text.contains("netns tcptune-up-client"), "{text}");
        assert!(matches!(
            list(&mut fx, Some("nope")),
            Err(LabError::NoSuchLab(_))
        ));
    }
}
