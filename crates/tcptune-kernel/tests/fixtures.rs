//! Golden tests: decode the kernel's recorded answers (fixtures/kernel/6.18, made by the
//! `capture_fixtures` example) and compare them with what the capture program did; then cut
//! the recorded `tcp_info` to the lengths older kernels send.

use tcptune_kernel::{diag, tcp_info::opt, DiagSocket, TailLayout, TcpInfo};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/kernel/6.18/");

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap()
}

fn facts() -> serde_json::Value {
    serde_json::from_slice(&read("facts.json")).unwrap()
}

fn sockets(name: &str) -> Vec<DiagSocket> {
    let b = read(name);
    let mut out = vec![];
    let mut done = false;
    for m in diag::messages(&b) {
        let m = m.unwrap();
        match m.kind {
            diag::SOCK_DIAG_BY_FAMILY => {
                out.push(DiagSocket::decode(m.payload, TailLayout::Linux6_18).unwrap())
            }
            diag::NLMSG_DONE => done = true,
            k => panic!("unexpected message type {k}"),
        }
    }
    if name.starts_with("dump") {
        assert!(done, "a dump ends with NLMSG_DONE");
    }
    out
}

fn ends(socks: &[DiagSocket]) -> (&DiagSocket, &DiagSocket) {
    let port = facts()["server_port"].as_u64().unwrap() as u16;
    let server = socks
        .iter()
        .find(|s| s.src.port() == port && s.dst.port() != 0)
        .unwrap();
    let client = socks.iter().find(|s| s.dst.port() == port).unwrap();
    (server, client)
}

#[test]
fn dump_decodes_to_what_the_capture_did() {
    let f = facts();
    let n = f["bytes_server_to_client"].as_u64().unwrap();
    let socks = sockets("dump-loopback.nl");
    assert_eq!(socks.len(), 2);
    let (server, client) = ends(&socks);
    let (si, ci) = (server.info.as_ref().unwrap(), client.info.as_ref().unwrap());
    assert_eq!((server.state, si.state), (1, Some(1)));
    assert_eq!(si.len, 280);
    // Everything the server sent was acknowledged and received.
    assert_eq!(si.bytes_acked, Some(n));
    assert_eq!(si.bytes_sent, Some(n));
    assert_eq!(si.unacked, Some(0));
    assert_eq!(ci.bytes_received, Some(n));
    assert_eq!(si.data_segs_out, ci.data_segs_in);
    // Window scale nibbles: the client's tiny SO_RCVBUF gives it scale 0, the server's is not
    // 0; each end's snd_wscale is the other's rcv_wscale.
    assert_eq!(ci.rcv_wscale, Some(0));
    assert_ne!(si.rcv_wscale, Some(0));
    assert_eq!(ci.snd_wscale, si.rcv_wscale);
    assert_eq!(si.snd_wscale, ci.rcv_wscale);
    // The client's window, as the server sees it, is bounded by its SO_RCVBUF.
    let rcvbuf = f["client_so_rcvbuf"].as_u64().unwrap() as u32;
    assert!(si.snd_wnd.unwrap() <= rcvbuf);
    assert_eq!(
        client.skmem.unwrap().rcvbuf,
        2 * rcvbuf,
        "the kernel doubles SO_RCVBUF"
    );
    // That window limited the sender: all of its busy time was receiver-window limited.
    assert!(si.busy_time_us.unwrap() > 0);
    assert_eq!(si.rwnd_limited_us, si.busy_time_us);
    for i in [si, ci] {
        let o = i.options.unwrap();
        assert_eq!(o & (opt::SACK | opt::TIMESTAMPS | opt::WSCALE), 7);
        assert_eq!(
            (i.sack(), i.timestamps(), i.wscale()),
            (Some(true), Some(true), Some(true))
        );
    }
    assert!(server.congestion.is_some());
    assert_eq!(server.uid, 0);
    assert_ne!(server.inode, 0);
    assert_ne!(server.cookie, client.cookie);
}

#[test]
fn getsockopt_and_sock_diag_share_the_decoder() {
    let socks = sockets("dump-loopback.nl");
    let (server, client) = ends(&socks);
    let gs = TcpInfo::decode(&read("getsockopt-server.bin"), TailLayout::Linux6_18);
    let gc = TcpInfo::decode(&read("getsockopt-client.bin"), TailLayout::Linux6_18);
    let (si, ci) = (server.info.as_ref().unwrap(), client.info.as_ref().unwrap());
    assert_eq!(gs.len, 280);
    // Taken moments apart on an idle connection: the counters agree.
    for (a, b) in [(&gs, si), (&gc, ci)] {
        assert_eq!(a.bytes_acked, b.bytes_acked);
        assert_eq!(a.bytes_received, b.bytes_received);
        assert_eq!(a.snd_wscale, b.snd_wscale);
        assert_eq!(a.snd_mss, b.snd_mss);
    }
}

#[test]
fn destroy_events_carry_final_stats() {
    let f = facts();
    let n = f["bytes_server_to_client"].as_u64().unwrap();
    let events = sockets("destroy-events.nl");
    assert_eq!(events.len(), 3, "client, server and listener");
    let dump = sockets("dump-loopback.nl");
    let (server, client) = ends(&events);
    assert!(events.iter().all(|e| e.state == 7), "all in CLOSE");
    // The same sockets as in the dump (cookies are stable for a socket's life).
    assert_eq!(server.cookie, ends(&dump).0.cookie);
    assert_eq!(client.cookie, ends(&dump).1.cookie);
    // Final counters include the FIN (one sequence number) on top of the data.
    assert_eq!(server.info.as_ref().unwrap().bytes_acked, Some(n + 1));
    assert_eq!(client.info.as_ref().unwrap().bytes_received, Some(n + 1));
}

/// `tcp_info` sizes of kernels that still exist in the field, with a field each size adds and
/// the first field it lacks.
const OLDER: [(usize, &str, &str); 8] = [
    (104, "total_retrans", "pacing_rate_bytes_per_s"),
    (120, "max_pacing_rate_bytes_per_s", "bytes_acked"),
    (160, "data_segs_out", "delivery_rate_bytes_per_s"),
    (192, "sndbuf_limited_us", "delivered"),
    (224, "reord_seen", "rcv_ooopack"),
    (232, "snd_wnd", "rcv_wnd"),
    (240, "rehash", "total_rto"),
    (248, "total_rto_time_ms", "received_ce"),
];

/// Replaces the INFO attribute of a recorded dump message by its first `len` bytes, as an
/// older kernel would have sent it.
fn cut_info(msg: &[u8], len: usize) -> Vec<u8> {
    let mut out = msg[..72].to_vec();
    let mut rest = &msg[72..];
    while rest.len() >= 4 {
        let alen = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        let kind = u16::from_ne_bytes([rest[2], rest[3]]);
        let (hdr_and_val, keep) = if kind == diag::attr::INFO {
            (&rest[4..4 + len], 4 + len)
        } else {
            (&rest[4..alen], alen)
        };
        out.extend((keep as u16).to_ne_bytes());
        out.extend(kind.to_ne_bytes());
        out.extend(hdr_and_val);
        while out.len() % 4 != 0 {
            out.push(0);
        }
        rest = &rest[(alen + 3) & !3..];
    }
    out
}

#[test]
fn shorter_payloads_as_older_kernels_send() {
    let b = read("dump-loopback.nl");
    let first = diag::messages(&b).next().unwrap().unwrap();
    let full = DiagSocket::decode(first.payload, TailLayout::Linux6_18).unwrap();
    let full_json = serde_json::to_value(full.info.as_ref().unwrap()).unwrap();
    let mut last_keys = 0;
    for (len, present, absent) in OLDER {
        let s = DiagSocket::decode(&cut_info(first.payload, len), TailLayout::Linux6_18).unwrap();
        // The attributes after INFO still decode.
        assert_eq!(s.skmem, full.skmem);
        assert_eq!(s.congestion, full.congestion);
        let info = s.info.unwrap();
        assert_eq!(info.len as usize, len);
        let j = serde_json::to_value(&info).unwrap();
        let obj = j.as_object().unwrap();
        assert!(obj.contains_key(present), "{len}: {present} missing");
        assert!(!obj.contains_key(absent), "{len}: {absent} present");
        for (k, v) in obj {
            if k != "len" {
                assert_eq!(&full_json[k], v, "{len}: {k} differs from the full decode");
            }
        }
        assert!(
            obj.len() > last_keys,
            "{len}: longer payloads carry more fields"
        );
        last_keys = obj.len();
    }
}
