//! The live kernel paths that need no privileges: getsockopt(TCP_INFO) on our own socket, an
//! exact sock_diag query of the same connection, and a filtered dump, all on loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use tcptune_kernel::diag::ext;
use tcptune_kernel::{sys, Diag, Filter};

#[test]
fn getsockopt_query_and_dump_agree_on_one_connection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut s, _) = l.accept().unwrap();
    const N: usize = 300_000;
    let w = std::thread::spawn(move || {
        c.write_all(&vec![1u8; N]).unwrap();
        c
    });
    let mut got = vec![0u8; N];
    s.read_exact(&mut got).unwrap();
    let c = w.join().unwrap();
    // Wait (with a deadline) for the last ACK, so the counters are final.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mine = loop {
        let i = sys::tcp_info_of(c.as_fd()).unwrap();
        if i.unacked == Some(0) {
            break i;
        }
        assert!(Instant::now() < deadline, "no final ACK");
        std::thread::yield_now();
    };
    // An active opener's bytes_acked counts its SYN too.
    assert_eq!(mine.bytes_acked, Some(N as u64 + 1));
    assert_eq!(mine.bytes_sent, Some(N as u64));
    assert_eq!(mine.state, Some(1));

    let mut d = Diag::open().unwrap();
    let q = d
        .query(
            c.local_addr().unwrap(),
            c.peer_addr().unwrap(),
            ext::TCPTUNE,
        )
        .unwrap()
        .expect("the connection exists");
    assert_eq!(q.src, c.local_addr().unwrap());
    assert_eq!(q.info.as_ref().unwrap().bytes_acked, mine.bytes_acked);
    assert!(q.congestion.is_some());
    // SO_MEMINFO on our socket gives the same buffer sizes as the dump's SKMEMINFO.
    let m = sys::skmem_of(c.as_fd()).unwrap();
    assert_eq!(m.sndbuf, q.skmem.unwrap().sndbuf);
    assert_eq!(m.rcvbuf, q.skmem.unwrap().rcvbuf);

    // A dump filtered in the kernel by the client's port finds exactly both ends.
    let port = c.local_addr().unwrap().port();
    let f: Filter = format!("port {port}").parse().unwrap();
    let socks = d.dump(&f, ext::INFO).unwrap();
    assert_eq!(socks.len(), 2, "{socks:?}");
    assert!(socks.iter().any(|x| x.cookie == q.cookie));

    // A query for a connection that does not exist is None, not an error.
    let gone = d
        .query(
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
            ext::INFO,
        )
        .unwrap();
    assert!(gone.is_none());
}

/// A dump of both families is one request the kernel answers from one walk of its tables;
/// sequential and pipelined decoding must both see the IPv4 and the IPv6 connection.
#[test]
fn both_families_in_one_dump_sequential_and_pipelined() {
    let l4 = TcpListener::bind("127.0.0.1:0").unwrap();
    let l6 = TcpListener::bind("[::1]:0").unwrap();
    let c4 = TcpStream::connect(l4.local_addr().unwrap()).unwrap();
    let c6 = TcpStream::connect(l6.local_addr().unwrap()).unwrap();
    let (_a4, _) = l4.accept().unwrap();
    let (_a6, _) = l6.accept().unwrap();
    let ours = [
        c4.local_addr().unwrap(),
        c6.local_addr().unwrap(),
        l4.local_addr().unwrap(),
        l6.local_addr().unwrap(),
    ];
    let mine = |s: &tcptune_kernel::DiagSocket| ours.contains(&s.src) || ours.contains(&s.dst);
    let mut d = Diag::open().unwrap();
    let all = Filter::default();
    assert!(all.ipv4 && all.ipv6);

    let mut seq: Vec<(std::net::SocketAddr, u64)> = d
        .dump(&all, ext::TCPTUNE)
        .unwrap()
        .into_iter()
        .filter(|s| mine(s))
        .map(|s| (s.src, s.cookie))
        .collect();
    let mut piped = Vec::new();
    let st = d
        .dump_each_parallel(&all, ext::TCPTUNE, |s| {
            if mine(&s) {
                assert!(s.info.is_some(), "tcp_info decoded on the second thread");
                piped.push((s.src, s.cookie));
            }
        })
        .unwrap();
    seq.sort();
    piped.sort();
    // Both ends of both connections (the default states leave the listeners out).
    assert_eq!(seq.len(), 4, "{seq:?}");
    assert_eq!(seq.iter().filter(|(a, _)| a.is_ipv6()).count(), 2);
    assert_eq!(seq, piped);
    assert!(st.sockets >= 4 && st.datagrams >= 1);

    // One family asked for: the other's sockets stay out.
    let v6: Filter = "ipv6".parse().unwrap();
    let only6: Vec<_> = d
        .dump(&v6, ext::INFO)
        .unwrap()
        .into_iter()
        .filter(|s| mine(s))
        .collect();
    assert_eq!(only6.len(), 2);
    assert!(only6.iter().all(|s| s.src.is_ipv6()));
}
