//! Starting one of our binaries for a test and learning where it listens.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Spawns `cmd` with stdout piped, reads stdout until a line says `listening on http://ADDR`,
/// and returns the child and `ADDR`. Later stdout lines are drained (echoed to stderr when
/// `A2A_TEST_LOG` is set, prefixed with `name`), so the child never blocks on a full pipe.
pub fn spawn_listening(mut cmd: Command, name: &'static str) -> (Child, String) {
    const MARKER: &str = "listening on http://";
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{name} starts: {e}"));
    let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("{name} exited before saying where it listens"))
            .expect("stdout reads");
        if let Some(at) = line.find(MARKER) {
            let rest = &line[at + MARKER.len()..];
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
        }
    };
    let echo = std::env::var_os("A2A_TEST_LOG").is_some();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if echo {
                eprintln!("{name}: {line}");
            }
        }
    });
    (child, addr)
}
