//! The system suite's harness (README, *Reliability*): the deployed topology from the real
//! binaries ([`topology`]), the load every scenario runs under ([`load`]), the faults
//! ([`faults`]) and the loss accounting ([`account`]). The scenarios are `system.rs`.

pub mod account;
pub mod faults;
pub mod load;
pub mod process;
pub mod proxy;
pub mod tenants;
pub mod topology;
pub mod upstream;
pub mod usage;
pub mod webhook;

use std::time::Duration;

use account::Report;
use load::{Load, Op};
use topology::{Options, Topology};

/// `A2A_SYSTEM_LONG=1`: the soak mode (longer load around every fault, and the soak test).
pub fn long_mode() -> bool {
    std::env::var("A2A_SYSTEM_LONG").is_ok_and(|v| v == "1")
}

/// Load before the fault and after it, in seconds.
fn load_around() -> (Duration, Duration) {
    if long_mode() {
        (Duration::from_secs(20), Duration::from_secs(40))
    } else {
        (Duration::from_secs(3), Duration::from_secs(4))
    }
}

/// Clients per binding.
pub const CLIENTS_PER_BINDING: usize = 2;

/// Starts the topology, runs the load, applies `fault` during it, stops the load, counts what
/// was lost, prints the row, and fails on any loss or wrong answer.
pub async fn run_scenario(name: &str, fault: impl AsyncFnOnce(&mut Topology)) -> Report {
    run_scenario_with(
        name,
        Options::default(),
        &[(&load::CYCLE, CLIENTS_PER_BINDING)],
        fault,
    )
    .await
}

/// [`run_scenario`] on a topology started with `options`, under the clients of `mix` (each
/// `(cycle, clients per binding)`).
pub async fn run_scenario_with(
    name: &str,
    options: Options,
    mix: &[(&'static [Op], usize)],
    fault: impl AsyncFnOnce(&mut Topology),
) -> Report {
    let mut top = Topology::start_with(options).await;
    let load = Load::start_mix(&top.lb(), &top.receiver.url(""), mix);
    let (before, after) = load_around();
    tokio::time::sleep(before).await;
    fault(&mut top).await;
    tokio::time::sleep(after).await;
    let ledger = load.stop().await;
    let report = account::account(name, &top, &ledger).await;
    check(name, &top, &report);
    report
}

/// Prints the row; fails on any loss or wrong answer, or when the load did nothing.
pub fn check(name: &str, top: &Topology, report: &Report) {
    println!("{}\n{}", Report::header(), report.line());
    assert!(
        report.lost.is_empty(),
        "{name}: {} lost or wrong:\n{}\n\nprocess logs:\n{}",
        report.lost.len(),
        report.lost.join("\n"),
        top.logs()
    );
    assert!(
        report.tasks > 0 && report.streams > 0,
        "{name}: the load did nothing"
    );
}

/// The soak: the load alone for `A2A_SYSTEM_SOAK_SECS` (default 300 in the long mode, else 60),
/// sampling every replica's RSS and open file descriptors; after a warm-up third, they must stay
/// flat (RSS within 50% + 32 MiB of the first sample after warm-up, descriptors within 64), and
/// nothing may be lost.
pub async fn soak() -> Report {
    let secs = std::env::var("A2A_SYSTEM_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if long_mode() { 300 } else { 60 });
    let top = Topology::start().await;
    let load = Load::start(&top.lb(), &top.receiver.url(""), CLIENTS_PER_BINDING);
    let pids = top.replica_pids();
    let period = Duration::from_secs(5);
    let samples = (secs / period.as_secs()).max(3);
    let mut series: Vec<Vec<(u64, usize)>> = vec![Vec::new(); pids.len()];
    for _ in 0..samples {
        tokio::time::sleep(period).await;
        for (i, pid) in pids.iter().enumerate() {
            series[i].push((rss_kib(*pid), open_fds(*pid)));
        }
    }
    let ledger = load.stop().await;
    let report = account::account("soak", &top, &ledger).await;
    println!("{}\n{}", Report::header(), report.line());
    for (i, s) in series.iter().enumerate() {
        let base = s[s.len() / 3];
        let last = *s.last().expect("samples");
        println!(
            "replica {}: RSS {} -> {} KiB, fds {} -> {} (samples every {period:?}: {s:?})",
            i + 1,
            base.0,
            last.0,
            base.1,
            last.1
        );
        assert!(
            last.0 <= base.0 + base.0 / 2 + 32 * 1024,
            "replica {}: RSS grew from {} to {} KiB: {s:?}",
            i + 1,
            base.0,
            last.0
        );
        assert!(
            last.1 <= base.1 + 64,
            "replica {}: open descriptors grew from {} to {}: {s:?}",
            i + 1,
            base.1,
            last.1
        );
    }
    assert!(
        report.lost.is_empty(),
        "soak: {} lost or wrong:\n{}",
        report.lost.len(),
        report.lost.join("\n")
    );
    report
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or_else(|| panic!("no RSS for pid {pid}: the replica died?"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("no descriptors for pid {pid}: {e}"))
        .count()
}
