//! Fuzz target: any bytes as an experiment spec (TOML), through parsing, the plan and the checks
//! of its points. Nothing may panic; an error names a line of the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tcptune_experiment::fuzz_one(data);
});
