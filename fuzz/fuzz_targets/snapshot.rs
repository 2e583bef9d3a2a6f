//! Fuzz target: any bytes as a `tune` snapshot file. Nothing may panic; a snapshot that is
//! accepted writes back to the same snapshot.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tcptune_host::tune::fuzz_one(data);
});
