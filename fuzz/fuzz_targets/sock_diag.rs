//! Fuzz target: any bytes as a sock_diag datagram (netlink messages with inet_diag answers and
//! their attributes) and as a getsockopt tcp_info, decoded with both tail layouts and matched
//! against filters. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tcptune_kernel::fuzz_one(data);
});
