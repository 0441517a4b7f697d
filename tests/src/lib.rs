//! The system suite's harness (README, *Reliability*): the deployed topology from the real
//! binaries ([`topology`]), the load every scenario runs under ([`load`]), the faults
//! ([`faults`]) and the loss accounting ([`account`]). The scenarios are `system.rs`.

pub mod account;
pub mod faults;
pub mod load;
pub mod process;
pub mod topology;

use std::time::Duration;

use account::Report;
use load::Load;
use topology::Topology;

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
    let mut top = Topology::start().await;
    let load = Load::start(&top.lb(), &top.receiver.url(""), CLIENTS_PER_BINDING);
    let (before, after) = load_around();
    tokio::time::sleep(before).await;
    fault(&mut top).await;
    tokio::time::sleep(after).await;
    let ledger = load.stop().await;
    let report = account::account(name, &top, &ledger).await;
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
    report
}
