//! Fuzz target: any bytes as a capture file, through reading, decoding, analysis, the report's
//! text and the graphs. Nothing may panic; damage must come back as an error or a partial result.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tcptune_analyze::fuzz_one(data);
});
