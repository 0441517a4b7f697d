//! The bounded, prioritised dispatch queue of one upstream agent: at most `limit` turns run at
//! once; the next ones wait, highest priority first (then first come, first served, by the time
//! they arrived), and when `capacity` of them wait already, a new one is refused with a
//! retryable error. A turn taken over from a replica that died comes back with its priority and
//! its original arrival time ([`DispatchQueue::readmit`]): it was admitted once, so it is never
//! refused, and it goes before newer work of its priority.
//!
//! It lives with the [`Agent`](super::Agent) trait, which hands it out, so the task runner and
//! takeover admit turns through it without depending on the upstream agents that build it.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

use a2a_types::A2aError;
use a2a_types::wkt::{Struct, value::Kind};
use tokio::sync::oneshot;

/// Dispatch priority, from the `priority` key of the message's (or the request's) metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
    Critical,
}

impl Priority {
    /// The metadata key that carries a priority.
    pub const METADATA_KEY: &'static str = "priority";

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "LOW" => Some(Self::Low),
            "NORMAL" => Some(Self::Normal),
            "HIGH" => Some(Self::High),
            "CRITICAL" => Some(Self::Critical),
            _ => None,
        }
    }

    /// The first metadata (message first, then request) naming a valid priority; else NORMAL.
    pub fn from_metadata<'a>(metadata: impl IntoIterator<Item = Option<&'a Struct>>) -> Self {
        metadata
            .into_iter()
            .flatten()
            .filter_map(|m| match m.fields.get(Self::METADATA_KEY)?.kind.as_ref()? {
                Kind::StringValue(s) => Self::parse(s),
                _ => None,
            })
            .next()
            .unwrap_or_default()
    }

    /// The number stored with a queued task (0 = LOW .. 3 = CRITICAL).
    pub fn rank(self) -> i16 {
        self as i16
    }

    /// The priority of a stored rank; NORMAL for one this build does not know.
    pub fn from_rank(rank: i16) -> Self {
        match rank {
            0 => Self::Low,
            2 => Self::High,
            3 => Self::Critical,
            _ => Self::Normal,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "LOW",
            Self::Normal => "NORMAL",
            Self::High => "HIGH",
            Self::Critical => "CRITICAL",
        }
    }
}

/// One agent's queue. Shared (`Arc`) by the agent and the permits it hands out.
pub struct DispatchQueue {
    agent: String,
    limit: usize,
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: usize,
    waiting: BinaryHeap<Waiter>,
    /// Arrival counter: ties in priority and arrival millisecond go first come, first served.
    arrivals: u64,
    /// The latest arrival millisecond given out (arrival times never go back with the clock).
    last_ms: i64,
}

/// When a turn arrived: Unix milliseconds, then the order of arrival here.
type Arrival = (i64, u64);

struct Waiter {
    priority: Priority,
    arrival: Arrival,
    tx: oneshot::Sender<Permit>,
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Waiter {}
impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiter {
    /// The heap's maximum goes first: higher priority, then earlier arrival.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.arrival.cmp(&self.arrival))
    }
}

/// A running slot; dropping it hands the slot to the next waiter.
pub struct Permit {
    /// `None` once disarmed (a permit that came back from a waiter that left).
    queue: Option<Arc<DispatchQueue>>,
}

/// What [`DispatchQueue::admit`] decided.
pub enum Admission {
    /// A slot was free.
    Now(Permit),
    /// Wait for a slot (dropping the receiver gives up the place).
    Queued(oneshot::Receiver<Permit>),
}

impl DispatchQueue {
    pub fn new(agent: &str, limit: usize, capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            agent: agent.to_owned(),
            limit: limit.max(1),
            capacity,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot now, a place in the queue, or a retryable refusal when the queue is full.
    pub fn admit(self: &Arc<Self>, priority: Priority) -> Result<Admission, A2aError> {
        self.enter(priority, None).ok_or_else(|| {
            let state = self.lock();
            A2aError::Unavailable(format!(
                "agent {} is saturated: {} turns running and {} queued (the queue is full); \
                 retry later",
                self.agent,
                state.running,
                state.waiting.len()
            ))
        })
    }

    /// Admits a turn taken over from another replica, which queued it at `since_ms` (Unix
    /// milliseconds): never refused (it was admitted once), and ahead of every turn of its
    /// priority that arrived later.
    pub fn readmit(self: &Arc<Self>, priority: Priority, since_ms: i64) -> Admission {
        let admission = self.enter(priority, Some(since_ms));
        admission.expect("a readmitted turn is never refused")
    }

    /// `None`: the queue is full (never for a readmitted turn, which has `since_ms`).
    fn enter(self: &Arc<Self>, priority: Priority, since_ms: Option<i64>) -> Option<Admission> {
        let mut state = self.lock();
        if state.running < self.limit && state.waiting.is_empty() {
            state.running += 1;
            return Some(Admission::Now(Permit {
                queue: Some(self.clone()),
            }));
        }
        if since_ms.is_none() && state.waiting.len() >= self.capacity {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        state.arrivals += 1;
        let arrival = match since_ms {
            // Before whatever arrived here in the same millisecond.
            Some(ms) => (ms, 0),
            None => {
                let now = a2a_types::wkt::Timestamp::now()
                    .as_millis()
                    .max(state.last_ms);
                state.last_ms = now;
                (now, state.arrivals)
            }
        };
        state.waiting.push(Waiter {
            priority,
            arrival,
            tx,
        });
        Some(Admission::Queued(rx))
    }

    /// Turns running plus turns waiting, over the running limit (0 = idle, 1 = every slot busy).
    pub fn load(&self) -> f64 {
        let state = self.lock();
        (state.running + state.waiting.len()) as f64 / self.limit as f64
    }

    /// Turns waiting for a slot.
    pub fn queued(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Gives a released slot to the best waiter still waiting, else frees it.
    fn release(self: &Arc<Self>) {
        let mut state = self.lock();
        while let Some(waiter) = state.waiting.pop() {
            let permit = Permit {
                queue: Some(self.clone()),
            };
            match waiter.tx.send(permit) {
                Ok(()) => return,
                // The waiter gave up; the permit came back and must not release again.
                Err(mut permit) => drop(permit.queue.take()),
            }
        }
        state.running = state.running.saturating_sub(1);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.take() {
            queue.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now(a: Result<Admission, A2aError>) -> Permit {
        match a {
            Ok(Admission::Now(p)) => p,
            _ => panic!("expected a free slot"),
        }
    }

    fn queued(a: Result<Admission, A2aError>) -> oneshot::Receiver<Permit> {
        match a {
            Ok(Admission::Queued(rx)) => rx,
            _ => panic!("expected a place in the queue"),
        }
    }

    #[tokio::test]
    async fn higher_priority_goes_first_and_a_full_queue_refuses() {
        let q = DispatchQueue::new("a", 1, 3);
        let running = now(q.admit(Priority::Normal));
        let mut low = queued(q.admit(Priority::Low));
        let mut normal = queued(q.admit(Priority::Normal));
        let mut critical = queued(q.admit(Priority::Critical));
        let err = q
            .admit(Priority::Critical)
            .err()
            .expect("the queue is full");
        assert!(matches!(err, A2aError::Unavailable(ref m) if m.contains("queue is full")));

        drop(running);
        let p = critical.try_recv().expect("critical first");
        assert!(normal.try_recv().is_err() && low.try_recv().is_err());
        drop(p);
        let p = normal.try_recv().expect("then normal");
        drop(p);
        let p = low.try_recv().expect("then low");
        drop(p);
        assert_eq!(q.load(), 0.0, "every slot is free again");
    }

    #[tokio::test]
    async fn a_waiter_that_gave_up_is_skipped() {
        let q = DispatchQueue::new("a", 1, 8);
        let running = now(q.admit(Priority::Normal));
        let gone = queued(q.admit(Priority::High));
        let mut next = queued(q.admit(Priority::Low));
        drop(gone);
        drop(running);
        let p = next
            .try_recv()
            .expect("the slot skips the waiter that left");
        drop(p);
        assert!(matches!(q.admit(Priority::Low), Ok(Admission::Now(_))));
    }

    #[tokio::test]
    async fn a_readmitted_turn_keeps_its_place_and_is_never_refused() {
        let q = DispatchQueue::new("a", 1, 1);
        let running = now(q.admit(Priority::Normal));
        let mut newer = queued(q.admit(Priority::Normal));
        assert!(q.admit(Priority::Normal).is_err(), "the queue is full");
        let earlier_ms = a2a_types::wkt::Timestamp::now().as_millis() - 60_000;
        let Admission::Queued(mut older) = q.readmit(Priority::Normal, earlier_ms) else {
            panic!("expected a place in the queue");
        };
        let Admission::Queued(mut low) = q.readmit(Priority::Low, earlier_ms - 1) else {
            panic!("expected a place in the queue");
        };
        drop(running);
        let p = older
            .try_recv()
            .expect("the older turn goes before newer work");
        assert!(newer.try_recv().is_err());
        drop(p);
        let p = newer.try_recv().expect("then the newer one");
        drop(p);
        let p = low.try_recv().expect("priority still comes first");
        drop(p);
        assert_eq!(q.load(), 0.0);
    }

    #[test]
    fn priority_ranks_round_trip() {
        for p in [
            Priority::Low,
            Priority::Normal,
            Priority::High,
            Priority::Critical,
        ] {
            assert_eq!(Priority::from_rank(p.rank()), p);
        }
        assert_eq!(Priority::from_rank(99), Priority::Normal);
    }

    #[test]
    fn priority_from_metadata() {
        let m: Struct = serde_json::from_value(serde_json::json!({"priority": "high"})).unwrap();
        let bad: Struct =
            serde_json::from_value(serde_json::json!({"priority": "urgent"})).unwrap();
        assert_eq!(Priority::from_metadata([Some(&m)]), Priority::High);
        assert_eq!(
            Priority::from_metadata([Some(&bad), Some(&m)]),
            Priority::High
        );
        assert_eq!(Priority::from_metadata([None]), Priority::Normal);
    }
}
