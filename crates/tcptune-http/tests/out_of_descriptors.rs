//! A server that runs out of file descriptors while accepting stays available: tiny_http's
//! accepting thread ends at that error, and serving starts a new one over the same socket once
//! descriptors are free again. Its own test binary (one test): it lowers this process's
//! open-file limit and uses up the descriptors.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tcptune_http::tiny_http::Request;
use tcptune_http::{bind, serve, text, Options, WebConfig};
use tcptune_testkit::wait_for;

fn get(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET /ok HTTP/1.0\r\nHost: t\r\n\r\n").unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp
}

fn fetch(addr: SocketAddr) -> String {
    get(&mut TcpStream::connect(addr).unwrap())
}

#[test]
fn a_server_out_of_descriptors_accepts_again_once_they_are_free() {
    let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let handler = |_: &Request| text(200, "ok\n".to_string());
    let opts = Options {
        threads: 2,
        realm: "t".into(),
    };
    let s = serve(l, WebConfig::default(), handler, opts).unwrap();
    assert!(fetch(s.addr).ends_with("ok\n"));

    // Use up every descriptor. Two connections then each take one freed: the server's
    // accept(2) fails with EMFILE, or tiny_http accepts one and panics duplicating it; either
    // way its accepting thread is gone and the second connection waits in the accept queue.
    tcptune_os::process::set_open_file_limit(256).unwrap();
    let mut hold = Vec::new();
    while let Ok(f) = File::open("/dev/null") {
        hold.push(f);
    }
    assert!(hold.len() > 10, "only {} descriptors were free", hold.len());
    hold.pop();
    let _first = TcpStream::connect(s.addr).unwrap();
    hold.pop();
    let mut waiting = TcpStream::connect(s.addr).unwrap();
    wait_for("the failure to be seen", Duration::from_secs(20), || {
        s.accept_failures() >= 1
    });
    // Free the descriptors: a new server starts over the same socket and accepts it.
    drop(hold);
    let start = Instant::now();
    let resp = get(&mut waiting);
    assert!(
        resp.ends_with("ok\n"),
        "after {:?}: {resp:?}",
        start.elapsed()
    );
    assert!(s.restarts() >= 1);
    assert!(fetch(s.addr).ends_with("ok\n"));
    s.stop();
}
