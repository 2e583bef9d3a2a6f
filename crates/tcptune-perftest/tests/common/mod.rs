//! What the loopback tests share: our server on an ephemeral loopback port, run on a thread
//! with its log kept, and a client configuration pointed at it.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tcptune_iperf3::Params;
use tcptune_perftest::client::ClientConfig;
use tcptune_perftest::server::{Server, ServerConfig, ServerLog};

/// A running server: its address, its stop flag, its thread, and what it logged.
pub type Running = (
    SocketAddr,
    Arc<AtomicBool>,
    std::thread::JoinHandle<()>,
    Arc<Mutex<Vec<ServerLog>>>,
);

pub fn start_server(cfg: ServerConfig) -> Running {
    let srv = Server::bind(ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..cfg
    })
    .unwrap();
    let addr = srv.local_addr().unwrap();
    let stop = srv.stop_handle();
    let logs = Arc::new(Mutex::new(Vec::new()));
    let l2 = logs.clone();
    let h = std::thread::spawn(move || {
        srv.run(Arc::new(move |l| l2.lock().unwrap().push(l)))
            .unwrap();
    });
    (addr, stop, h, logs)
}

pub fn cfg(addr: SocketAddr, params: Params) -> ClientConfig {
    ClientConfig {
        latency: false,
        host: addr.ip().to_string(),
        port: addr.port(),
        params,
        interval: Some(Duration::from_millis(500)),
        sample_every: Duration::from_millis(50),
        path_rate: None,
        connect_timeout: Duration::from_secs(5),
        interrupt: None,
        host_settings: Default::default(),
        bind: None,
        cport: None,
        family: None,
        data_extra: Default::default(),
        control_extra: Default::default(),
        dont_fragment: false,
        rcv_timeout: None,
        diskfile: None,
    }
}
