//! Privileged: an application that fixes a small SO_RCVBUF on a live connection is seen by
//! reading the host state (its receive buffer sits below tcp_rmem's default, where
//! autotuning never leaves a connection) and the audit warns about it for a path whose BDP
//! that buffer cannot carry (R5); an autotuned connection beside it is not reported.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;

use tcptune_host::audit::{audit, AuditInput, Role, Verdict};
use tcptune_host::read::read_host;
use tcptune_kernel::sys::in_netns;
use tcptune_testkit::{privileged, Netns};

fn set_rcvbuf(s: &TcpStream, bytes: i32) {
    tcptune_os::socket::set_int(s.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, bytes).unwrap();
}

#[test]
fn a_small_so_rcvbuf_is_found_and_warned_about() {
    if !privileged("a_small_so_rcvbuf_is_found_and_warned_about") {
        return;
    }
    let ns = Netns::new("locked");
    ns.exec(&["ip", "link", "set", "lo", "up"]);
    let socks = in_netns(ns.name(), || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let small_client = TcpStream::connect(addr).unwrap();
        let (small_server, _) = l.accept().unwrap();
        // 16 KiB asked: the kernel doubles it to 32 KiB, far below the default 128 KiB.
        set_rcvbuf(&small_server, 16 * 1024);
        let free_client = TcpStream::connect(addr).unwrap();
        let (free_server, _) = l.accept().unwrap();
        (l, small_client, small_server, free_client, free_server)
    })
    .unwrap();
    let small = socks.2.local_addr().unwrap().to_string();
    let small_peer = socks.2.peer_addr().unwrap().to_string();

    let state = read_host(Some(ns.name())).unwrap();
    let rcv: Vec<_> = state
        .locked_sockets
        .iter()
        .filter(|s| s.rcvbuf_locked.is_some())
        .collect();
    assert_eq!(rcv.len(), 1, "{:#?}", state.locked_sockets);
    assert_eq!(
        (rcv[0].local.as_str(), rcv[0].remote.as_str()),
        (small.as_str(), small_peer.as_str())
    );
    assert_eq!(rcv[0].rcvbuf_locked, Some(32 * 1024));
    assert!(
        rcv[0].process.as_deref().is_some_and(|p| p.contains("pid")),
        "{:?}",
        rcv[0].process
    );

    // 100 Mbit/s × 20 ms: a BDP of 250 kB, which a 32 KiB buffer cannot carry.
    let a = audit(
        &state,
        &AuditInput {
            rate_bps: "100mbit".parse().unwrap(),
            rtt_s: "20ms".parse().unwrap(),
            loss: None,
            flows: 1,
            memory_budget_bytes: None,
            role: Role::Both,
            fit: false,
        },
    );
    let r5: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.rule == "R5" && f.setting.starts_with("socket "))
        .collect();
    assert_eq!(r5.len(), 1, "{:#?}", a.findings);
    assert_eq!(r5[0].verdict, Verdict::Warning);
    assert!(r5[0].setting.contains(&small), "{}", r5[0].setting);
    assert!(r5[0].why.contains("SO_RCVBUF"), "{}", r5[0].why);
    drop(socks);
}
