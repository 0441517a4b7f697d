//! Fair shares of the delivery slots (review H4): an attempt holds, while its HTTP request
//! runs and only then (never while it waits to retry), one permit of its destination (the
//! webhook's host and port), one of its task's owner and one of the process. A destination
//! that hangs therefore holds at most its own share, and an owner's webhooks at most theirs;
//! the rest go on. Permits are taken in that order (destination, owner, process), so a waiter
//! never holds a scarcer permit while it waits for a more plentiful one.
//!
//! The keyed semaphores live in maps while someone holds or waits for them: a map entry is
//! removed by the last user, so the maps are bounded by the attempts in progress.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bounds of the delivery pipeline (worker settings `A2A_WORKER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Attempts in flight at once, all destinations.
    pub concurrency: usize,
    /// Attempts in flight at once to one destination (host:port).
    pub per_destination: usize,
    /// Attempts in flight at once for the tasks of one owner.
    pub per_owner: usize,
    /// Tasks of one owner in delivery at once; more are left to the sweep.
    pub owner_tasks: usize,
    /// Events queued in memory, and tasks in delivery, all owners.
    pub queue: usize,
}

impl Limits {
    /// Bounds derived from one concurrency figure (the embedded gateway's `[push]`).
    pub fn from_concurrency(concurrency: usize) -> Self {
        let concurrency = concurrency.max(1);
        Self {
            concurrency,
            per_destination: 16.min(concurrency),
            per_owner: 64.min(concurrency),
            owner_tasks: 1024,
            queue: (concurrency * 64).max(4096),
        }
    }
}

#[derive(Default)]
struct Keyed {
    map: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Keyed {
    fn get(&self, key: &str, permits: usize) -> Arc<Semaphore> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(permits)))
            .clone()
    }

    /// Forgets `key`'s semaphore if `sem` is its last user besides the map.
    fn release(&self, key: &str, sem: Arc<Semaphore>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        // Under the lock nobody clones from the map: two references are the map's and ours.
        if Arc::strong_count(&sem) == 2 {
            map.remove(key);
        }
    }

    fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The three semaphores every attempt goes through.
pub struct Gates {
    limits: Limits,
    global: Arc<Semaphore>,
    destinations: Keyed,
    owners: Keyed,
    waiting: AtomicUsize,
}

/// What an attempt holds while it runs; dropping it frees the slots.
pub struct Pass<'a> {
    gates: &'a Gates,
    destination: String,
    owner: String,
    held: Option<(
        OwnedSemaphorePermit,
        OwnedSemaphorePermit,
        OwnedSemaphorePermit,
    )>,
    sems: Option<(Arc<Semaphore>, Arc<Semaphore>)>,
    /// Counted in `Gates::waiting` (an attempt dropped while it waits is uncounted here).
    waiting: bool,
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        if self.waiting {
            self.gates.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        drop(self.held.take());
        if let Some((dest, owner)) = self.sems.take() {
            self.gates.destinations.release(&self.destination, dest);
            self.gates.owners.release(&self.owner, owner);
        }
        crate::metrics::gates(self.gates.destinations.len(), self.gates.waiting());
    }
}

impl Gates {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            global: Arc::new(Semaphore::new(limits.concurrency.max(1))),
            destinations: Keyed::default(),
            owners: Keyed::default(),
            waiting: AtomicUsize::new(0),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Attempts waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Waits for a slot of `destination`, of `owner` and of the process.
    pub async fn enter(&self, destination: &str, owner: &str) -> Pass<'_> {
        let dest = self
            .destinations
            .get(destination, self.limits.per_destination.max(1));
        let own = self.owners.get(owner, self.limits.per_owner.max(1));
        let mut pass = Pass {
            gates: self,
            destination: destination.to_owned(),
            owner: owner.to_owned(),
            held: None,
            sems: Some((dest.clone(), own.clone())),
            waiting: true,
        };
        self.waiting.fetch_add(1, Ordering::Relaxed);
        crate::metrics::gates(self.destinations.len(), self.waiting());
        // The semaphores are never closed, so acquiring cannot fail; were it to, the attempt
        // goes ahead without that slot rather than never.
        let d = dest.acquire_owned().await;
        let o = own.acquire_owned().await;
        let g = self.global.clone().acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        pass.waiting = false;
        if let (Ok(d), Ok(o), Ok(g)) = (d, o, g) {
            pass.held = Some((d, o, g));
        }
        pass
    }
}

/// The destination of a webhook URL: its host and port (the config's URL itself when it does
/// not parse; the attempt refuses it anyway).
pub fn destination(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}:{}",
            u.host_str().unwrap_or_default(),
            u.port_or_known_default().unwrap_or(0)
        ),
        Err(_) => url.chars().take(256).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A destination whose slots are all taken does not hold up another one, and the maps
    /// forget a key once nobody uses it.
    #[tokio::test]
    async fn a_full_destination_does_not_block_another() {
        let gates = Gates::new(Limits {
            concurrency: 8,
            per_destination: 2,
            per_owner: 8,
            owner_tasks: 8,
            queue: 8,
        });
        let a1 = gates.enter("slow:443", "alice").await;
        let a2 = gates.enter("slow:443", "alice").await;
        let third = tokio::time::timeout(Duration::from_millis(50), gates.enter("slow:443", "bob"));
        assert!(third.await.is_err(), "the slow destination is full");
        let other = tokio::time::timeout(Duration::from_millis(50), gates.enter("ok:443", "bob"));
        let other = other.await.expect("another destination goes ahead");
        drop((a1, a2, other));
        assert_eq!(gates.destinations.len(), 0);
        assert_eq!(gates.owners.len(), 0);
        assert_eq!(gates.waiting(), 0);
    }

    #[test]
    fn destinations_are_host_and_port() {
        assert_eq!(destination("https://h.example/x?y"), "h.example:443");
        assert_eq!(destination("http://127.0.0.1:81/"), "127.0.0.1:81");
    }
}
