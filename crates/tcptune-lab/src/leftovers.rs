//! Which labs are alive and which are leftovers, and removing a lab: a lab is *alive* when its
//! setup is complete, its link works (its emulator runs, or its veth ends exist) and the
//! process it is tied to, if any, still runs, or while the `lab up` that creates it is still
//! running. Anything else named after a lab is a leftover (of a `kill -9`), removed by the next
//! `lab up` or `lab run` of any lab, or by `lab down --all`. Everything goes through
//! [`Effects`], so these rules are tested on the fake.

use std::path::Path;
use std::time::Duration;

use crate::backend;
use crate::effects::{Effects, Globals};
use crate::names::{check_name, lab_dir, netns_name, HOSTS, NS_PREFIX, RUN_DIR};
use crate::state::{read_state, State};
use tcptune_os::sysctl;

/// Every lab name that has something on this machine: state, namespaces or processes.
pub(crate) fn known_labs(fx: &mut dyn Effects) -> Vec<String> {
    let mut names: std::collections::BTreeSet<String> = fx.run_dir_entries().into_iter().collect();
    if let Ok(out) = fx.ip(&["netns", "list"]) {
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
    names.extend(fx.lab_processes().into_iter().map(|p| p.lab));
    names
        .into_iter()
        .filter(|n| check_name(n).is_ok())
        .collect()
}

pub(crate) fn emulator_pid(fx: &mut dyn Effects, lab: &str) -> Option<u32> {
    fx.lab_processes()
        .into_iter()
        .find(|p| p.lab == lab && p.role == "_emulator")
        .map(|p| p.pid)
}

/// Alive: set up and emulating, or being set up by a live `lab up` (other than this process).
pub(crate) fn is_alive(fx: &mut dyn Effects, lab: &str) -> bool {
    match read_state(fx, lab) {
        Some(st) if st.ready => st.tie_holds(fx) && link_up(fx, lab, &st),
        Some(st) => {
            st.owner_alive(fx) && st.owner_pid != fx.me().pid && st.tie_holds(fx)
        }
        None => false,
    }
}

/// Whether a set-up lab's link still works: its emulator runs (emu), or both namespaces still
/// hold their end of the veth (netem).
pub(crate) fn link_up(fx: &mut dyn Effects, lab: &str, st: &State) -> bool {
    backend::of(st.spec.backend).link_up(fx, lab)
}

/// Removes everything named after `lab`: its processes (except this one), processes left in
/// its namespaces, the namespaces, their /etc/netns directories, global sysctl changes and the
/// state directory. Idempotent; returns what it removed.
pub(crate) fn teardown(fx: &mut dyn Effects, lab: &str) -> Vec<String> {
    let mut removed = Vec::new();
    let me = fx.me().pid;
    let state = read_state(fx, lab);
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
        let globals = st.globals_snapshot();
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

/// Removes the leftovers of every lab that is not alive, and the half-made state directories
/// of `lab up`s killed while making them (`.LAB.PID`, see [`Effects::create_lab_dir`]).
pub(crate) fn remove_dead(fx: &mut dyn Effects) -> Vec<String> {
    let mut removed = Vec::new();
    for lab in known_labs(fx) {
        if !is_alive(fx, &lab) {
            removed.extend(teardown(fx, &lab));
        }
    }
    for name in fx.run_dir_entries() {
        let pid = name
            .strip_prefix('.')
            .and_then(|n| n.rsplit_once('.'))
            .and_then(|(_, p)| p.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        let path = Path::new(RUN_DIR).join(&name);
        if !fx.alive(crate::os::ProcessRef { pid, start: 0 }) && fx.remove_dir(&path) {
            removed.push(path.display().to_string());
        }
    }
    removed
}
