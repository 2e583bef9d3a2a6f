//! The socket layer of `tcptune serve` and `tcptune test`: iperf3's control protocol (the
//! sans-IO sessions of `tcptune-perf`) driven over real sockets, data streams on the same port,
//! tcp_info sampled on every data socket, interval and final reports in iperf3's JSON shape,
//! and the end-of-test diagnosis (`tcptune_diagnose::throughput`).

pub mod data;
pub mod report;
pub mod sock;
