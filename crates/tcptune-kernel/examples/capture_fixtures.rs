//! Captures the kernel's real answers for the decoder's golden tests:
//! `cargo run -p tcptune-kernel --example capture_fixtures -- fixtures/kernel/$(uname -r)`.
//!
//! It makes one loopback connection whose facts it knows (the client's tiny SO_RCVBUF, so the
//! two window scales differ; exactly `BYTES` sent server → client), then records
//! (1) a sock_diag dump of the connection's port with tcptune's extensions, (2) both ends'
//! `getsockopt(TCP_INFO)` bytes, (3) the destroy events when both ends and the listener close,
//! and writes `facts.json` with what it did, which the tests compare the decoded values with.
//! Netlink messages are stored as the kernel framed them (16-byte header + payload), one after
//! another.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use tcptune_kernel::diag::{self, DumpRequest};
use tcptune_kernel::sys::{self, DestroyEvents, Diag};
use tcptune_kernel::Filter;

const BYTES: usize = 1_000_000;
const CLIENT_RCVBUF: i32 = 4096;

fn frame(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + payload.len() + 3);
    v.extend(((16 + payload.len()) as u32).to_ne_bytes());
    v.extend(kind.to_ne_bytes());
    v.extend(2u16.to_ne_bytes()); // NLM_F_MULTI, as in a dump
    v.extend(1u32.to_ne_bytes());
    v.extend(0u32.to_ne_bytes());
    v.extend(payload);
    while v.len() % 4 != 0 {
        v.push(0);
    }
    v
}

/// A connection with the client's small SO_RCVBUF set before the handshake, so the window
/// scale is chosen for it.
fn connect_with_rcvbuf(addr: std::net::SocketAddr) -> TcpStream {
    tcptune_testkit::sock::connect(
        addr,
        tcptune_testkit::sock::Before {
            rcvbuf: Some(CLIENT_RCVBUF),
            ..Default::default()
        },
    )
}

fn main() {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: capture_fixtures OUT_DIR"),
    );
    std::fs::create_dir_all(&dir).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut client = connect_with_rcvbuf(listener.local_addr().unwrap());
    let (mut server, _) = listener.accept().unwrap();
    let writer = std::thread::spawn(move || {
        server.write_all(&vec![0x5a; BYTES]).unwrap();
        server
    });
    let mut got = vec![0u8; BYTES];
    client.read_exact(&mut got).unwrap();
    let server = writer.join().unwrap();
    // Wait (with a deadline) until the server has its last ACK, so bytes_acked is final.
    let deadline = Instant::now() + Duration::from_secs(5);
    while sys::tcp_info_of(server.as_fd()).unwrap().unacked != Some(0) {
        assert!(Instant::now() < deadline, "server never got its last ACK");
        std::thread::yield_now();
    }

    let mut d = Diag::open().unwrap();
    let filter: Filter = format!("port {port}").parse().unwrap();
    let req = DumpRequest {
        family: diag::AF_INET,
        states: filter.states,
        ext: diag::ext::TCPTUNE,
        bytecode: filter.bytecode(),
    };
    let mut dump = Vec::new();
    d.dump_raw(&req, |p, _| {
        dump.extend(frame(diag::SOCK_DIAG_BY_FAMILY, p));
        Ok(())
    })
    .unwrap();
    dump.extend(frame(diag::NLMSG_DONE, &0i32.to_ne_bytes()));
    std::fs::write(dir.join("dump-loopback.nl"), &dump).unwrap();
    std::fs::write(
        dir.join("getsockopt-server.bin"),
        sys::tcp_info_raw(server.as_fd()).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("getsockopt-client.bin"),
        sys::tcp_info_raw(client.as_fd()).unwrap(),
    )
    .unwrap();

    let mut events = DestroyEvents::subscribe(None).unwrap();
    let (cfd, sfd) = (client.as_raw_fd(), server.as_raw_fd());
    drop(client);
    drop(server);
    drop(listener);
    let mut raw = Vec::new();
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen < 3 && Instant::now() < deadline {
        for dgram in events.next_raw(Duration::from_millis(200)).unwrap() {
            for m in diag::messages(&dgram) {
                let m = m.unwrap();
                if m.kind == diag::SOCK_DIAG_BY_FAMILY {
                    let s =
                        diag::DiagSocket::decode(m.payload, sys::running_tail_layout()).unwrap();
                    if s.src.port() == port || s.dst.port() == port {
                        raw.extend(frame(m.kind, m.payload));
                        seen += 1;
                    }
                }
            }
        }
    }
    std::fs::write(dir.join("destroy-events.nl"), &raw).unwrap();
    let release = sys::kernel_release().unwrap();
    let facts = format!(
        "{{\n  \"kernel\": \"{}\",\n  \"server_port\": {port},\n  \"bytes_server_to_client\": {BYTES},\n  \"client_so_rcvbuf\": {CLIENT_RCVBUF},\n  \"destroy_events\": {seen},\n  \"closed_fds\": [{cfd}, {sfd}]\n}}\n",
        release.trim()
    );
    std::fs::write(dir.join("facts.json"), facts).unwrap();
    eprintln!("wrote {}", dir.display());
}
