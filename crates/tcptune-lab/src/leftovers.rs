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
        Some(st) => st.owner_alive(fx) && st.owner_pid != fx.me().pid && st.tie_holds(fx),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::Fake;
    use crate::os::{LabProcess, ProcessRef};
    use crate::spec::LabSpec;

    /// Puts a lab on the fake machine: its state (`ready`, built by `owner`, tied to `tied`),
    /// its namespaces and state directory, and its emulator when `emulator`.
    fn lab(
        fx: &mut Fake,
        name: &str,
        ready: bool,
        owner: ProcessRef,
        tied: Option<ProcessRef>,
        emulator: bool,
    ) {
        let mut st = State::new(name, LabSpec::default(), owner, tied);
        st.ready = ready;
        fx.states.insert(name.into(), st.to_json().unwrap());
        fx.paths.insert(lab_dir(name));
        for h in HOSTS {
            fx.paths
                .insert(Path::new("/run/netns").join(netns_name(name, h)));
        }
        if emulator {
            let pid = 2000 + fx.processes.len() as u32;
            fx.processes.push(LabProcess {
                pid,
                role: "_emulator".into(),
                lab: name.into(),
            });
        }
    }

    const OTHER: ProcessRef = ProcessRef {
        pid: 3000,
        start: 5,
    };
    const GONE: ProcessRef = ProcessRef {
        pid: 3001,
        start: 5,
    };

    /// A machine with one lab of each kind, alive or not.
    fn machine() -> Fake {
        let mut fx = Fake {
            running: vec![OTHER],
            ..Fake::default()
        };
        lab(&mut fx, "running", true, GONE, None, true);
        lab(&mut fx, "tied", true, GONE, Some(OTHER), true);
        lab(&mut fx, "building", false, OTHER, None, false);
        lab(&mut fx, "mine", false, Fake::ME, None, false);
        lab(&mut fx, "noemu", true, GONE, None, false);
        lab(&mut fx, "tiedgone", true, GONE, Some(GONE), true);
        lab(&mut fx, "killedup", false, GONE, None, false);
        // A PID that is now another process's (its start time differs): the owner is gone.
        lab(
            &mut fx,
            "reused",
            false,
            ProcessRef {
                pid: OTHER.pid,
                start: 4,
            },
            None,
            false,
        );
        // A namespace with nothing else: a lab killed before it wrote anything we read.
        fx.paths
            .insert(Path::new("/run/netns").join("tcptune-orphan-client"));
        // Half-made state directories: of a dead `lab up`, and of one still making it.
        fx.paths
            .insert(Path::new(RUN_DIR).join(format!(".x.{}", GONE.pid)));
        fx.paths
            .insert(Path::new(RUN_DIR).join(format!(".y.{}", OTHER.pid)));
        fx
    }

    #[test]
    fn known_labs_are_found_by_state_namespace_and_process() {
        let mut fx = machine();
        fx.processes.push(LabProcess {
            pid: 9,
            role: "_hog".into(),
            lab: "hogonly".into(),
        });
        let labs = known_labs(&mut fx);
        for l in ["running", "orphan", "hogonly", "killedup"] {
            assert!(labs.iter().any(|k| k == l), "{l}: {labs:?}");
        }
        assert!(!labs.iter().any(|k| k.starts_with('.')), "{labs:?}");
    }

    #[test]
    fn a_lab_is_alive_only_while_its_link_owner_and_tie_hold() {
        let mut fx = machine();
        for (l, alive) in [
            ("running", true),
            ("tied", true),
            ("building", true),
            // This process's own half-built lab is not kept alive by it (a retry removes it).
            ("mine", false),
            ("noemu", false),
            ("tiedgone", false),
            ("killedup", false),
            ("reused", false),
            ("orphan", false),
        ] {
            assert_eq!(is_alive(&mut fx, l), alive, "{l}");
        }
    }

    #[test]
    fn the_sweep_removes_exactly_the_leftovers() {
        let mut fx = machine();
        let removed = remove_dead(&mut fx);
        for gone in ["mine", "noemu", "tiedgone", "killedup", "reused"] {
            assert!(!fx.paths.contains(&lab_dir(gone)), "{gone} kept");
            assert!(!fx.states.contains_key(gone), "{gone}'s state kept");
        }
        assert!(!fx
            .paths
            .contains(&Path::new("/run/netns").join("tcptune-orphan-client")));
        assert!(removed.contains(&"namespace tcptune-orphan-client".to_string()));
        // The emulator of a lab whose tie is gone is stopped; the others keep theirs.
        assert!(!fx.processes.iter().any(|p| p.lab == "tiedgone"));
        for kept in ["running", "tied", "building"] {
            assert!(
                fx.paths.contains(&lab_dir(kept)),
                "{kept} removed: {removed:#?}"
            );
            assert!(fx.lines(&format!("netns del tcptune-{kept}-")).is_empty());
        }
        assert_eq!(fx.processes.len(), 2, "{:?}", fx.processes);
        let dead = Path::new(RUN_DIR).join(format!(".x.{}", GONE.pid));
        assert!(!fx.paths.contains(&dead));
        assert!(removed.contains(&dead.display().to_string()));
        assert!(fx
            .paths
            .contains(&Path::new(RUN_DIR).join(format!(".y.{}", OTHER.pid))));
        // A second sweep finds nothing.
        assert_eq!(remove_dead(&mut fx), Vec::<String>::new());
    }
}
