//! Processes the suite starts: each one's output in a log file of the run's directory, stopped by
//! its PID when its guard is dropped (also when a test panics).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One child process; killed (SIGKILL, by PID) and reaped on drop unless already stopped.
pub struct Proc {
    pub name: String,
    log: PathBuf,
    child: Option<Child>,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr appended to `<dir>/<name>.log`.
    pub fn spawn(dir: &Path, name: &str, mut cmd: Command) -> Self {
        let log = dir.join(format!("{name}.log"));
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let err = out.try_clone().expect("the log file handle clones");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts ({:?}): {e}", cmd.get_program()));
        Self {
            name: name.to_owned(),
            log,
            child: Some(child),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The last lines of the process's log (for failure messages).
    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Sends `signal` (`-KILL`, `-TERM`, `-STOP`, `-CONT`) to this process only.
    pub fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .arg(signal)
                .arg(pid.to_string())
                .status();
        }
    }

    /// `kill -9`: no shutdown code runs.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for the exit; panics unless it exits 0 within `limit`.
    pub async fn terminate(&mut self, limit: Duration) {
        self.signal("-TERM");
        let Some(mut c) = self.child.take() else {
            return;
        };
        let deadline = Instant::now() + limit;
        loop {
            match c.try_wait() {
                Ok(Some(status)) => {
                    assert!(
                        status.success(),
                        "{} exited {status} after SIGTERM:\n{}",
                        self.name,
                        self.tail(30)
                    );
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    panic!(
                        "{} did not stop within {limit:?} of SIGTERM:\n{}",
                        self.name,
                        self.tail(30)
                    );
                }
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A stopped (SIGSTOP) process still dies of SIGKILL.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until `url` answers 200, or panics with `proc`'s log.
pub async fn wait_ready(proc: &mut Proc, url: &str, limit: Duration) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("an HTTP client");
    let deadline = Instant::now() + limit;
    loop {
        assert!(
            proc.running(),
            "{} exited while starting:\n{}",
            proc.name,
            proc.tail(40)
        );
        if let Ok(resp) = client.get(url).send().await
            && resp.status().is_success()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {url} not ready within {limit:?}:\n{}",
            proc.name,
            proc.tail(40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` distinct free ports on 127.0.0.1 (the processes are restarted on the same ports): all
/// are held until every one is chosen, so no two are the same.
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("a bound address").port())
        .collect()
}
