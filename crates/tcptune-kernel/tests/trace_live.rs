//! Privileged: the tracer on this host's loopback. Only the filtered port's sockets are seen,
//! a pure ACK and a data segment are both there, the receiving socket's cookie is the one
//! sock_diag reports, and after the tracer drops its instance is gone and the mount table is
//! as it was.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use tcptune_kernel::trace::{TraceEvent, TraceFilter, TraceKind, Tracer};
use tcptune_kernel::{Diag, Filter};
use tcptune_testkit::privileged;

/// The mount points of tracefs now.
fn tracefs_mounts() -> Vec<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    tcptune_os::tracefs::tracefs_mount_points(&mounts)
}

/// A loopback exchange: 20 writes of 1000 bytes, each answered; returns the server socket's
/// cookie (from sock_diag, while it is open).
fn exchange(listener: &TcpListener) -> u64 {
    let port = listener.local_addr().unwrap().port();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_nodelay(true).unwrap();
    let (mut s, _) = listener.accept().unwrap();
    let filter: Filter = format!("sport :{port} state established").parse().unwrap();
    let socks = Diag::open().unwrap().dump(&filter, 0).unwrap();
    assert_eq!(socks.len(), 1, "the server's socket");
    let mut buf = [0u8; 1000];
    for _ in 0..20 {
        c.write_all(&buf).unwrap();
        s.read_exact(&mut buf).unwrap();
        s.write_all(b"ok").unwrap();
        c.read_exact(&mut buf[..2]).unwrap();
    }
    socks[0].cookie
}

#[test]
fn traces_the_filtered_port_and_leaves_the_host_as_it_was() {
    if !privileged("traces_the_filtered_port_and_leaves_the_host_as_it_was") {
        return;
    }
    let traced = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = traced.local_addr().unwrap().port();
    let mut tracer = Tracer::open(&TraceFilter {
        ports: vec![port],
        cookies: vec![],
        max_events_per_conn_per_sec: 0,
    })
    .expect("tracing as root");
    let dir = tracer.instance_dir().to_path_buf();
    assert!(dir.is_dir());
    // The tracefs it uses: instances/NAME under the mount point.
    let root = dir.parent().and_then(|p| p.parent()).unwrap().to_path_buf();
    let ours = tracer.mounted_tracefs();
    assert!(tracefs_mounts().contains(&root));
    let cookie = exchange(&traced);
    exchange(&other);
    let mut events: Vec<TraceEvent> = Vec::new();
    // Everything was written before the reads: poll until the buffers are empty.
    while tracer.wait(Duration::from_millis(200)).unwrap() {
        tracer.read(&mut events).unwrap();
    }
    tracer.read(&mut events).unwrap();
    let st = tracer.stats();
    drop(tracer);

    assert!(!dir.exists(), "{} left behind", dir.display());
    // Only the mount it made is checked: other programs may mount tracefs meanwhile.
    if ours {
        assert!(
            !tracefs_mounts().contains(&root),
            "{} still mounted",
            root.display()
        );
        assert!(!root.exists(), "{} left behind", root.display());
    } else {
        assert!(tracefs_mounts().contains(&root), "a mount it found is kept");
    }
    assert_eq!(st.events, events.len() as u64);
    assert_eq!((st.lost_in_kernel, st.bad_pages), (0, 0));
    let acks: Vec<(u64, u16)> = events
        .iter()
        .filter_map(|e| match e.kind {
            TraceKind::Ack { data_len, .. } => Some((e.cookie, data_len)),
            _ => None,
        })
        .collect();
    let cookies: std::collections::BTreeSet<u64> = acks.iter().map(|a| a.0).collect();
    assert_eq!(
        cookies.len(),
        2,
        "the two ends of the traced connection only: {cookies:?}"
    );
    assert!(
        cookies.contains(&cookie),
        "the server's cookie {cookie} in {cookies:?}"
    );
    let server_data: u64 = acks
        .iter()
        .filter(|a| a.0 == cookie)
        .map(|a| u64::from(a.1))
        .sum();
    assert_eq!(server_data, 20_000, "the server received 20 × 1000 bytes");
    assert!(acks.iter().any(|a| a.1 == 0), "a pure ACK");
    assert!(
        events.windows(2).all(|w| w[0].t_ns <= w[1].t_ns),
        "in time order"
    );
}
