//! Fuzz target: any bytes as one side's control connection of an iperf3 test, through our
//! server or client session, with the application answering as `tcptune serve`/`test` do, or
//! as UDP datagrams into the receiver's accounting (byte 0 picks which). Nothing may panic and
//! the invariants must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tcptune_iperf3::fuzz_one(data);
});
