//! Fuzz target: any bytes as one side's control connection of an iperf3 test, through our
//! server or client session (byte 0 picks which), with the application answering as
//! `tcptune serve`/`test` do. Nothing may panic and the sessions' invariants must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tcptune_perf::fuzz_one(data);
});
