//! Privileged: applying a plan inside a network namespace changes the namespace's values and
//! nothing on the host; rollback restores them byte for byte; a write the kernel rejects midway
//! restores what was already written.

use tcptune_host::audit::Action;
use tcptune_host::tune::{self, ApplyError, HostIo, LiveHost, Plan, PlannedChange};
use tcptune_testkit::{privileged, Netns};

fn change(key: &str, value: &str) -> PlannedChange {
    PlannedChange {
        action: Action::Sysctl {
            key: key.into(),
            value: value.into(),
            global: false,
        },
        current: String::new(),
        why: String::new(),
    }
}

fn read_in(ns: &Netns, key: &str) -> String {
    String::from_utf8(
        ns.exec(&["cat", &format!("/proc/sys/{}", key.replace('.', "/"))])
            .stdout,
    )
    .unwrap()
}

#[test]
fn apply_and_rollback_inside_a_namespace() {
    if !privileged("apply_and_rollback_inside_a_namespace") {
        return;
    }
    let ns = Netns::new("tune");
    ns.exec(&[
        "sysctl",
        "-q",
        "-w",
        "net.ipv4.tcp_sack=0",
        "net.ipv4.tcp_rmem=4096 65536 65536",
    ]);
    let before_sack = read_in(&ns, "net.ipv4.tcp_sack");
    let before_rmem = read_in(&ns, "net.ipv4.tcp_rmem");
    let host_sack = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_sack").unwrap();
    let host_rmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();

    let dir = std::env::temp_dir().join(format!("tt-tune-{}", std::process::id()));
    let snap = dir.join("snap.json");
    let plan = Plan {
        netns: Some(ns.name().into()),
        changes: vec![
            change("net.ipv4.tcp_sack", "1"),
            change("net.ipv4.tcp_rmem", "4096 131072 25165824"),
        ],
        host_only: vec![],
        dropin: String::new(),
        ip_commands: vec![],
    };
    let mut io = LiveHost {
        netns: Some(ns.name().into()),
    };
    tune::apply(&plan, &mut io, &snap).unwrap();
    assert_eq!(read_in(&ns, "net.ipv4.tcp_sack"), "1\n");
    assert_eq!(
        read_in(&ns, "net.ipv4.tcp_rmem"),
        "4096\t131072\t25165824\n"
    );
    // The host's own namespace is untouched.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_sack").unwrap(),
        host_sack
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap(),
        host_rmem
    );

    tune::rollback(&mut io, &snap).unwrap();
    assert_eq!(read_in(&ns, "net.ipv4.tcp_sack"), before_sack);
    assert_eq!(read_in(&ns, "net.ipv4.tcp_rmem"), before_rmem);
    assert!(!snap.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_write_the_kernel_rejects_midway_rolls_back_the_earlier_ones() {
    if !privileged("a_write_the_kernel_rejects_midway") {
        return;
    }
    let ns = Netns::new("tunefail");
    ns.exec(&[
        "sysctl",
        "-q",
        "-w",
        "net.ipv4.tcp_sack=0",
        "net.ipv4.tcp_timestamps=0",
    ]);
    let before: Vec<String> = [
        "net.ipv4.tcp_sack",
        "net.ipv4.tcp_timestamps",
        "net.ipv4.tcp_congestion_control",
    ]
    .iter()
    .map(|k| read_in(&ns, k))
    .collect();
    let dir = std::env::temp_dir().join(format!("tt-tunefail-{}", std::process::id()));
    let snap = dir.join("snap.json");
    // "vegas" passes validation (a well-formed name) but this kernel has no such module.
    let plan = Plan {
        netns: Some(ns.name().into()),
        changes: vec![
            change("net.ipv4.tcp_sack", "1"),
            change("net.ipv4.tcp_timestamps", "1"),
            change("net.ipv4.tcp_congestion_control", "vegas"),
        ],
        host_only: vec![],
        dropin: String::new(),
        ip_commands: vec![],
    };
    let mut io = LiveHost {
        netns: Some(ns.name().into()),
    };
    let avail = io
        .read_sysctl("net.ipv4.tcp_available_congestion_control")
        .unwrap();
    assert!(
        !avail.contains("vegas"),
        "this test needs a kernel without vegas: {avail}"
    );
    let e = tune::apply(&plan, &mut io, &snap).unwrap_err();
    assert!(matches!(e, ApplyError::Midway { restored: 2, .. }), "{e}");
    let after: Vec<String> = [
        "net.ipv4.tcp_sack",
        "net.ipv4.tcp_timestamps",
        "net.ipv4.tcp_congestion_control",
    ]
    .iter()
    .map(|k| read_in(&ns, k))
    .collect();
    assert_eq!(after, before);
    assert!(
        !snap.exists(),
        "a fully restored apply leaves no snapshot behind"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn reading_a_namespace_sees_its_own_values() {
    if !privileged("reading_a_namespace_sees_its_own_values") {
        return;
    }
    let ns = Netns::new("tuneread");
    ns.exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_window_scaling=0"]);
    ns.exec(&[
        "ip", "link", "add", "ttdummy0", "type", "veth", "peer", "name", "ttdummy1",
    ]);
    ns.exec(&[
        "ip",
        "link",
        "set",
        "ttdummy0",
        "mtu",
        "9000",
        "txqueuelen",
        "5000",
        "up",
    ]);
    let s = tcptune_host::read::read_host(Some(ns.name())).unwrap();
    assert_eq!(s.sysctl("net.ipv4.tcp_window_scaling"), Some("0"));
    assert_eq!(s.netns.as_deref(), Some(ns.name()));
    let d = s.interfaces.iter().find(|i| i.name == "ttdummy0").unwrap();
    assert_eq!((d.mtu, d.txqueuelen), (9000, 5000));
    assert!(s.interfaces.iter().any(|i| i.name == "lo"));
}
