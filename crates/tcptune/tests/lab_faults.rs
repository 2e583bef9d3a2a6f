//! Privileged fault injection on the lab: `kill -9` of `lab up` (at each stage of its setup),
//! of the emulator, of a CPU hog and of `lab run` (in a trial's setup, during a workload,
//! right after a trial was recorded). After each, the CPU hogs exit by themselves, a running
//! emulator whose owner died removes its lab, the next command of that lab leaves no
//! namespace, `/etc/netns` entry, `/run` state, process or global sysctl behind, and the
//! experiment resumes to the same results as an uninterrupted run. Also: lab commands refuse
//! non-root users in one sentence; `lab down --all` removes leftovers only.
//!
//! Every wait is on an observable state (a process stopped at a stage, a state file saying
//! ready, a line in trials.jsonl, a process gone), never a sleep. The tests of this file run
//! one at a time (they change a global sysctl and kill lab processes).

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::TempDir;
use tcptune_testkit::{is_root, privileged, signal, wait_for, Signal};

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .expect("run tcptune")
}

fn ok(args: &[&str]) -> String {
    let out = tcptune(args);
    assert!(
        out.status.success(),
        "tcptune {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn processes(lab: &str, role: &str) -> Vec<u32> {
    tcptune_lab::os::lab_processes()
        .into_iter()
        .filter(|p| p.lab == lab && p.role == role)
        .map(|p| p.pid)
        .collect()
}

fn allowed_ccs() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap()
}

/// Nothing named after `lab` is left: namespaces, /etc/netns, /run state, processes; and the
/// global allowed congestion controls hold cubic only if they did before.
fn assert_gone(lab: &str, cubic_allowed_before: bool, when: &str) {
    for h in ["client", "server"] {
        let ns = format!("tcptune-{lab}-{h}");
        assert!(
            !Path::new("/run/netns").join(&ns).exists(),
            "{when}: {ns} left"
        );
        assert!(
            !Path::new("/etc/netns").join(&ns).exists(),
            "{when}: /etc/netns/{ns} left"
        );
    }
    assert!(
        !Path::new("/run/tcptune").join(lab).exists(),
        "{when}: /run/tcptune/{lab} left"
    );
    let half_made = std::fs::read_dir("/run/tcptune")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!(".{lab}."))
                })
                .count()
        })
        .unwrap_or(0);
    assert_eq!(half_made, 0, "{when}: a half-made state directory is left");
    let procs: Vec<_> = tcptune_lab::os::lab_processes()
        .into_iter()
        .filter(|p| p.lab == lab)
        .collect();
    assert!(procs.is_empty(), "{when}: processes left: {procs:?}");
    let cubic_now = allowed_ccs().split_whitespace().any(|c| c == "cubic");
    assert_eq!(
        cubic_now, cubic_allowed_before,
        "{when}: the global tcp_allowed_congestion_control was not restored"
    );
}

/// Whether `pid` is stopped (state T).
fn stopped(pid: u32) -> bool {
    tcptune_lab::os::process_state(pid) == Some('T')
}

/// `pid` has exited: no such process, or a zombie nobody has reaped yet (the hog's parent
/// exited long ago, so it is reaped by whatever adopted it).
fn gone(pid: u32) -> bool {
    matches!(tcptune_lab::os::process_state(pid), None | Some('Z' | 'X'))
}

/// SIGKILL to a process this test started (or one of its lab's processes).
fn kill9(pid: u32) {
    signal(pid, Signal::Kill);
}

/// Starts `args` with `TCPTUNE_LAB_STOP_AT=stage` and waits until it has stopped there.
fn start_stopped_at(args: &[&str], stage: &str) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .env("TCPTUNE_LAB_STOP_AT", stage)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for(
        &format!("{args:?} to stop at {stage}"),
        Duration::from_secs(60),
        || {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{args:?} ended ({status}) before stopping at {stage}");
            }
            stopped(pid)
        },
    );
    child
}

/// `kill -9` of a child, reaped.
fn kill_child(mut child: Child) {
    kill9(child.id());
    child.wait().unwrap();
}

/// The CPU hogs of `lab` exit by themselves once their lab is no longer alive.
fn hogs_exit_by_themselves(lab: &str, when: &str) {
    wait_for(
        &format!("{when}: the CPU hog of {lab} to exit by itself"),
        Duration::from_secs(10),
        || processes(lab, "_hog").is_empty(),
    );
}

/// The emulator of `lab` removes the lab by itself (its owner died): no state, no processes.
fn removed_by_its_emulator(lab: &str, when: &str) {
    wait_for(
        &format!("{when}: the emulator of {lab} to remove it"),
        Duration::from_secs(20),
        || {
            tcptune_lab::os::lab_processes()
                .iter()
                .all(|p| p.lab != lab)
                && !Path::new("/run/tcptune").join(lab).exists()
        },
    );
}

fn lab_up_args(lab: &str) -> Vec<&str> {
    vec![
        "lab",
        "up",
        "--backend",
        "emu",
        "--name",
        lab,
        "--delay",
        "1ms",
        "--host",
        "client.cc=cubic",
        "--host",
        "server.cpu_hog=true",
    ]
}

fn state(lab: &str) -> Option<Value> {
    let text = std::fs::read_to_string(Path::new("/run/tcptune").join(lab).join("state.json"));
    serde_json::from_str(&text.ok()?).ok()
}

fn trials(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("trials.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Takes the named labs down when dropped, so a failing test leaves none behind.
struct Labs(&'static [&'static str]);

impl Drop for Labs {
    fn drop(&mut self) {
        for lab in self.0 {
            let _ = tcptune(&["lab", "down", "--name", lab]);
        }
    }
}

/// Window-limited trials (the server's receive buffer caps the window): their goodput is
/// window/RTT, stable from run to run, so an interrupted and resumed run can be compared with
/// an uninterrupted one. The client's cubic is added to the global allowed list for each trial.
const SPEC: &str = r#"name = "faults"
repetitions = 2
warmup = false
order = "sequential"
[link]
rate = "50mbit"
delay = "10ms"
[client]
cc = "cubic"
[workload]
kind = "iperf3"
duration = "2s"
[sweep]
"server.sysctl.net.ipv4.tcp_rmem" = ["4096 16384 16384", "4096 32768 32768"]
"#;

fn run_args<'a>(spec: &'a str, out: &'a str, lab: &'a str) -> Vec<&'a str> {
    vec!["lab", "run", spec, "--out", out, "--name", lab]
}

#[test]
fn kills_at_every_stage_leave_nothing_behind_and_resume_gives_the_same_results() {
    if !privileged("kills_at_every_stage_leave_nothing_behind") {
        return;
    }
    let _one = tcptune_testkit::one_at_a_time();
    // `lab run --name N` gives each trial its own lab, N-0001, N-0002, … (counted per run).
    let _labs = Labs(&[
        "t-fault",
        "t-fref-0001",
        "t-fref-0002",
        "t-fref-0003",
        "t-fref-0004",
        "t-frun-0001",
        "t-frun-0002",
        "t-frun-0003",
        "t-frun-0004",
    ]);
    let cubic_before = allowed_ccs().split_whitespace().any(|c| c == "cubic");
    let mut kills = 0;
    let mut checks = 0;

    // 1. `lab up` killed at each stage of its setup. Before the emulator starts, the next
    //    command (`lab down --name`, `lab down --all`) removes what is left; once it runs, the
    //    emulator notices that `lab up` died before the lab was ready and removes the lab
    //    itself, and the next `lab up` of the name works.
    let lab = "t-fault";
    for stage in ["state", "namespaces", "emulator", "hosts"] {
        let when = format!("lab up killed at {stage}");
        let child = start_stopped_at(&lab_up_args(lab), stage);
        let hog_running = !processes(lab, "_hog").is_empty();
        assert_eq!(hog_running, stage == "hosts", "{stage}: hog started");
        kill_child(child);
        kills += 1;
        hogs_exit_by_themselves(lab, &when);
        match stage {
            "state" => {
                // Another lab's `lab up` on this machine may have removed the leftover first.
                let out = tcptune(&["lab", "down", "--name", lab]);
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success() || err.contains(&format!("no lab named '{lab}'")),
                    "{err}"
                );
            }
            "namespaces" => {
                ok(&["lab", "down", "--all"]);
            }
            _ => {
                removed_by_its_emulator(lab, &when);
                assert_gone(lab, cubic_before, &when);
                ok(&lab_up_args(lab));
                let st = state(lab).unwrap();
                assert_eq!(st["ready"], true, "the new lab is complete");
                ok(&["lab", "down", "--name", lab]);
            }
        }
        assert_gone(lab, cubic_before, &when);
        checks += 1;
    }

    // 2. The emulator killed: its hog exits; the next `lab up` clears the rest and works.
    ok(&lab_up_args(lab));
    let emu = processes(lab, "_emulator");
    assert_eq!(emu.len(), 1);
    assert_eq!(processes(lab, "_hog").len(), 1);
    kill9(emu[0]);
    kills += 1;
    hogs_exit_by_themselves(lab, "emulator killed");
    ok(&lab_up_args(lab));
    let out = tcptune(&[
        "lab", "exec", lab, "client", "--", "ping", "-c", "1", "server",
    ]);
    assert!(out.status.success(), "the lab made after the kill works");
    ok(&["lab", "down", "--name", lab]);
    assert_gone(lab, cubic_before, "emulator killed");
    checks += 1;

    // 3. The CPU hog killed: the lab still runs; `lab down` removes everything.
    ok(&lab_up_args(lab));
    let hog = processes(lab, "_hog");
    assert_eq!(hog.len(), 1);
    kill9(hog[0]);
    kills += 1;
    wait_for("the hog to die", Duration::from_secs(5), || gone(hog[0]));
    let v: Value = serde_json::from_str(&ok(&["lab", "status", "--name", lab, "--json"])).unwrap();
    assert_eq!(v["result"]["labs"][0]["state"], "running");
    ok(&["lab", "down", "--name", lab]);
    assert_gone(lab, cubic_before, "hog killed");
    checks += 1;

    // 4. `lab run`: an uninterrupted reference run, then the same spec killed three times
    //    (during a trial's lab setup, during a workload, right after a trial was recorded)
    //    and resumed each time by the same command.
    let dir = TempDir::new("faults-run");
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let spec_s = spec.to_str().unwrap();
    let reference = dir.join("reference");
    let out = tcptune(&run_args(spec_s, reference.to_str().unwrap(), "t-fref"));
    assert!(
        out.status.success(),
        "reference run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in 1..=4 {
        assert_gone(&format!("t-fref-{n:04}"), cubic_before, "reference run");
    }
    let resumed = dir.join("resumed");
    let resumed_s = resumed.to_str().unwrap().to_string();
    let run_lab = "t-frun";
    let args = run_args(spec_s, &resumed_s, run_lab);
    // The lab of the first trial a run makes (a resumed run counts from 1 again).
    let lab = "t-frun-0001";

    // 4a. In the first trial's lab setup (stopped once the hosts are configured): the
    //     emulator sees the run end and removes the lab, global sysctl included.
    kill_child(start_stopped_at(&args, "hosts"));
    kills += 1;
    removed_by_its_emulator(lab, "lab run killed in a trial's setup");
    assert_gone(lab, cubic_before, "lab run killed in a trial's setup");
    checks += 1;
    assert!(trials(&resumed).is_empty(), "nothing was recorded yet");

    // 4b. During a workload: the rerun's lab is ready and the trial runs.
    let child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("a trial's lab to be ready", Duration::from_secs(60), || {
        state(lab).is_some_and(|s| s["ready"] == true)
    });
    kill_child(child);
    kills += 1;
    // The lab was tied to the run: its emulator removes it (and the workload's processes).
    removed_by_its_emulator(lab, "lab run killed during a workload");
    assert_gone(lab, cubic_before, "lab run killed during a workload");
    checks += 1;

    // 4c. Right after the next trial was recorded.
    let recorded = trials(&resumed).len();
    let child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("a trial to be recorded", Duration::from_secs(90), || {
        trials(&resumed).len() > recorded
    });
    kill_child(child);
    kills += 1;

    // The same command finishes the experiment.
    let out = tcptune(&args);
    assert!(
        out.status.success(),
        "resume: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in 1..=4 {
        assert_gone(
            &format!("{run_lab}-{n:04}"),
            cubic_before,
            "lab run killed and resumed",
        );
    }
    checks += 1;
    let done = trials(&resumed);
    assert!(
        done.iter().all(|t| t["error"].is_null()),
        "no trial failed: {done:?}"
    );
    // The same trials with the same seeds (so the same link decisions), each measured once,
    // and goodput (window/RTT: the server's tcp_rmem caps the window) that agrees with the
    // uninterrupted run's. The comparison is loose and the verdicts are only printed: while
    // other builds load this shared 2-core machine, a busy moment costs a trial up to a third
    // of its goodput and can tip its verdict.
    type Outcome = (u64, String, f64);
    let outcome = |records: &[Value]| -> std::collections::BTreeMap<String, Outcome> {
        records
            .iter()
            .map(|t| {
                let verdict = t["result"]["verdict"].as_str().unwrap_or("");
                (
                    t["id"].as_str().unwrap().to_string(),
                    (
                        t["seed"].as_u64().unwrap(),
                        verdict.split(':').next().unwrap_or("").to_string(),
                        t["result"]["goodput_bps"].as_f64().unwrap(),
                    ),
                )
            })
            .collect()
    };
    let (got, want) = (outcome(&done), outcome(&trials(&reference)));
    assert_eq!(done.len(), 4, "each trial recorded once: {done:?}");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (id, (seed, verdict, w)) in &want {
        let (g_seed, g_verdict, g) = &got[id];
        assert_eq!(g_seed, seed, "{id}");
        assert!(
            (g - w).abs() <= 0.5 * w.max(*g),
            "{id}: resumed {g:.0} bit/s ({g_verdict}), uninterrupted {w:.0} bit/s ({verdict})"
        );
        eprintln!(
            "{id}: seed {seed}, resumed {g:.0} bit/s ({g_verdict}), uninterrupted {w:.0} bit/s \
             ({verdict})"
        );
    }
    checks += 1;
    eprintln!(
        "fault injection: {kills} kills (lab up at 4 stages, emulator, CPU hog, lab run at 3 \
         points), {checks} clean-up and resume checks passed"
    );
}

#[test]
fn a_cpu_hog_exits_when_its_emulator_dies() {
    if !privileged("a_cpu_hog_exits_when_its_emulator_dies") {
        return;
    }
    let _one = tcptune_testkit::one_at_a_time();
    let lab = "t-hogdie";
    let _labs = Labs(&["t-hogdie"]);
    ok(&[
        "lab",
        "up",
        "--backend",
        "emu",
        "--name",
        lab,
        "--host",
        "server.cpu_hog=true",
    ]);
    let hog = processes(lab, "_hog");
    assert_eq!(hog.len(), 1);
    kill9(processes(lab, "_emulator")[0]);
    // Nothing else runs for this lab: the hog notices by itself.
    hogs_exit_by_themselves(lab, "emulator killed");
    // Its command line goes first as it exits; the process itself follows.
    wait_for("the hog to exit", Duration::from_secs(5), || gone(hog[0]));
    ok(&["lab", "down", "--name", lab]);
    assert!(!Path::new("/run/tcptune").join(lab).exists());
}

#[test]
fn down_all_removes_leftovers_only_and_force_needs_all() {
    if !privileged("down_all_removes_leftovers_only") {
        return;
    }
    let _one = tcptune_testkit::one_at_a_time();
    let _labs = Labs(&["t-keep", "t-left"]);
    ok(&["lab", "up", "--backend", "emu", "--name", "t-keep"]);
    ok(&["lab", "up", "--backend", "emu", "--name", "t-left"]);
    kill9(processes("t-left", "_emulator")[0]);
    wait_for("the killed emulator to go", Duration::from_secs(5), || {
        processes("t-left", "_emulator").is_empty()
    });
    let removed = ok(&["lab", "down", "--all"]);
    assert!(removed.contains("tcptune-t-left-client"), "{removed}");
    assert!(!removed.contains("t-keep"), "{removed}");
    assert!(!Path::new("/run/netns/tcptune-t-left-client").exists());
    let v: Value =
        serde_json::from_str(&ok(&["lab", "status", "--name", "t-keep", "--json"])).unwrap();
    assert_eq!(
        v["result"]["labs"][0]["state"], "running",
        "a running lab stays"
    );
    let out = tcptune(&["lab", "down", "--force", "--name", "t-keep"]);
    assert_eq!(out.status.code(), Some(2), "--force goes with --all only");
    ok(&["lab", "down", "--name", "t-keep"]);
    assert!(!Path::new("/run/netns/tcptune-t-keep-client").exists());
}

#[test]
fn lab_commands_tell_non_root_users_they_need_root() {
    let root = is_root();
    let dir = TempDir::new("faults-nonroot");
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = dir.join("out");
    let (spec_s, out_s) = (spec.to_str().unwrap(), out.to_str().unwrap());
    let cases: [&[&str]; 7] = [
        &["lab", "up", "--name", "t-nonroot"],
        &["lab", "status"],
        &["lab", "status", "--name", "t-nonroot"],
        &["lab", "down", "--all"],
        &["lab", "down", "--name", "t-nonroot"],
        &["lab", "exec", "t-nonroot", "client", "--", "true"],
        &["lab", "run", spec_s, "--out", out_s, "--name", "t-nonroot"],
    ];
    for args in cases {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tcptune"));
        c.args(args);
        if root {
            // Run as nobody.
            use std::os::unix::process::CommandExt;
            c.uid(65534).gid(65534);
        }
        let o = c.output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains("needs root (CAP_NET_ADMIN"), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
    assert!(!out.exists(), "lab run wrote nothing");
    assert!(!Path::new("/run/tcptune/t-nonroot").exists());
    // Checking a spec needs no privilege.
    let mut c = Command::new(env!("CARGO_BIN_EXE_tcptune"));
    c.args(["lab", "run", spec_s, "--out", out_s, "--check"]);
    if root {
        use std::os::unix::process::CommandExt;
        c.uid(65534).gid(65534);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("2 point(s)"));
}
