//! The gateway's configuration file (`--config`, TOML) as the loader parses and checks it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = a2a_gateway::fuzzing::FileConfig::parse(text);
    }
});
