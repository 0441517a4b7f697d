//! The Redis Streams bus (`A2A_REDIS_URL`): any replica serves any task's stream.
//!
//! Key names and their Redis Cluster slots are in [`keys`].
//!
//! `publish` appends the committed event to the task's stream (approximate
//! MAXLEN, expiry refreshed on every write, and shortened to [`TERMINAL_TASK_TTL_SECS`] by the
//! task's terminal event) and to the worker stream ([`events_key`]), which the push worker reads
//! through a consumer group (and no gateway reads), except the commit that created the task,
//! which only the worker gets (see [`creates_task`]). Every key is thus bounded: a task stream by its MAXLEN and its
//! expiry (so the task streams together hold the events of the tasks active in the last hour,
//! and of the tasks that ended in the last minute), the worker and control streams by their
//! MAXLEN. Each entry carries the task id (`t`), the sequence
//! number (`s`), the kind of event (`k`: `task`, `message`, `status`, `artifact`, or `end` for
//! the event that ends the task; absent when the publisher did not read the event), the
//! StreamResponse (`e`: a version byte, then its protobuf encoding) when it is at most the
//! bus's inline limit ([`DEFAULT_INLINE_MAX`], `A2A_REDIS_INLINE_MAX_BYTES`) and, when the
//! request that caused it had one, its W3C trace context (`tp`: a `traceparent` value). An
//! entry without `e` is a reference: its readers (followers, the push worker) read the event
//! from the store's log, so Redis holds at most the inline limit per entry however large the
//! tasks and artifacts are (review H6), and the streams' MAXLEN bounds their bytes.
//!
//! A replica reads the events of the tasks its own clients follow, and nothing else. The
//! followed tasks are spread over [`READERS`] readers by their group ([`keys::group_of`] their
//! id, one slot of a cluster); a reader
//! with tasks to read holds one connection and issues one `XREAD BLOCK` at a time over its
//! wake-up stream and the streams of its tasks (at most
//! [`MAX_FOLLOWED_PER_READER`]), and hands each entry to the local subscribers of its task through
//! bounded channels; one more reader follows the control stream. An idle replica thus costs one
//! XREAD a second whatever the others do, and
//! Redis sends each event only to the replicas that follow its task. The first subscription to
//! a task reads the stream's last entry id (one command) as its position and, when the reader is
//! blocked in an XREAD without that task's key, adds an entry to the wake-up stream so the
//! next XREAD includes it; a further subscription to a task already read starts where the
//! reader has read to, without a Redis command. The reader reads each stream from its earliest
//! subscriber's position, so nothing published after a subscription is missed and a reconnect
//! loses nothing Redis still holds. Events published by this process reach its own subscribers
//! of their task as soon as Redis has taken them (with their entry ids, so the reader skips
//! them there): a blocking send, whose follower is on the replica that runs its turn, waits for
//! no XREAD. A subscriber that falls behind, or any subscriber while Redis is unreachable, gets
//! [`BusItem::Lagged`] and re-reads the event log; the reader reconnects with backoff. So does a
//! subscriber given a reference entry.
//!
//! A publish that Redis does not take is reported, nothing more: the events are in the store's
//! outbox, which the gateway relays until Redis acknowledged them (by this replica, or by any
//! other once this one is gone).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_types::state::{event_state, is_terminal};
use a2a_types::v1::StreamResponse;
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use prost::Message;
use redis::Client;
use redis::streams::StreamReadReply;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::ReceiverStream;

use crate::{BusError, BusEvent, BusItem, Control, EventBus};

pub mod keys;
pub mod target;
pub use keys::events_key;
use keys::{control_key, task_key};
use target::{Conn, Patience, RedisTarget, SharedConn};

/// First byte of every encoded event, so the format can change without misreading old entries.
const FORMAT_V1: u8 = 1;
/// Entries kept per task stream; a follower further behind than this re-reads the event log.
const TASK_MAXLEN: usize = 1000;
/// Entries kept in the worker stream (approximate); bounds Redis memory if the worker is down.
const EVENTS_MAXLEN: usize = 100_000;
/// A task stream outlives its last write by this long, then Redis drops it.
const TASK_TTL_SECS: u64 = 3600;
/// A task stream outlives its task's terminal event by this long: nothing more comes, so
/// keeping it an hour would only make Redis hold every task that ended in that hour (at a few
/// thousand tasks a second, millions of keys).
const TERMINAL_TASK_TTL_SECS: u64 = 60;
/// How long one XREAD waits before it is issued again (it returns at once when entries arrive).
const BLOCK_MS: u64 = 1000;
/// Entries taken per XREAD.
const READ_COUNT: usize = 512;
/// Entries buffered per subscriber. One slot is kept free for the Lagged notice.
const SUBSCRIBER_CAPACITY: usize = 64;
/// Control messages kept; they are acted on within a block of being sent.
const CONTROL_MAXLEN: usize = 1000;
/// The reader starts reading control messages this far back (on this process's clock), so a
/// clock skew with the Redis server does not lose the first ones; replaying a cancel for a turn
/// that does not run here does nothing.
const CONTROL_SLACK_MS: u64 = 5000;
/// Readers per process, each with its own connection (opened when it first has a task to read)
/// and one group of the followed tasks ([`keys::group_of`] their id; the group's keys share one
/// slot of a Redis Cluster): an XREAD names at most [`MAX_FOLLOWED_PER_READER`] streams, so what
/// a reader sends per read stays small however many tasks the process follows.
const READERS: usize = keys::GROUPS;
/// Tasks one reader follows at once: a subscription to one more is refused as if Redis were
/// unreachable (`a2a_bus_follow_refused_total`). Above [`MAX_FOLLOWED_TASKS`] / [`READERS`] so
/// the hash's unevenness does not refuse before the process's limit.
const MAX_FOLLOWED_PER_READER: usize = 512;
/// Tasks one process follows at once; a subscription to one more is refused likewise.
const MAX_FOLLOWED_TASKS: usize = 10_000;
/// The reader's wake-up stream outlives its last wake-up by this long.
const WAKE_TTL_SECS: u64 = 60;
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Events whose encoding is at most this many bytes travel inside their entry; larger ones are
/// references (their readers read the store's log). Bounds what one entry costs Redis.
pub const DEFAULT_INLINE_MAX: usize = 16 * 1024;

/// A Redis stream id, `ms-seq`, compared numerically.
type StreamId = (u64, u64);

fn parse_id(id: &str) -> StreamId {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// What a subscriber's channel holds: the event shared by every local subscriber of its task,
/// so a slot is two words. The channel allocates its slots in blocks of 32 as soon as it is
/// made; with a whole [`BusItem`] per slot that block was 2 KiB for every open subscription,
/// idle or not.
enum Queued {
    Event(Arc<BusEvent>),
    Lagged,
}

impl From<Queued> for BusItem {
    fn from(q: Queued) -> Self {
        match q {
            Queued::Event(ev) => BusItem::Event(Arc::unwrap_or_clone(ev)),
            Queued::Lagged => BusItem::Lagged,
        }
    }
}

struct Subscriber {
    tx: mpsc::Sender<Queued>,
    /// The last entry of the task's stream this subscriber has seen (or the stream's end when
    /// it subscribed): entries up to it were published before the subscription and are skipped.
    last: StreamId,
}

impl Subscriber {
    /// Whether entry `id` is new to this subscriber, which then counts it as seen. An event
    /// without an entry (its task's creating commit, see [`creates_task`]) is always new and
    /// moves no position.
    fn passes(&mut self, id: Option<StreamId>) -> bool {
        match id {
            Some(id) if id <= self.last => false,
            Some(id) => {
                self.last = id;
                true
            }
            None => true,
        }
    }
}

/// Whether `events` are the commit that created their task (its first event is sequence number
/// 1, the task as created). Such a commit is not added to the task's stream: nobody elsewhere can
/// follow a task before the answer that names it, which comes after this commit, and whoever
/// follows it later starts from the store's snapshot, which has it. Its followers are in this
/// process (a streaming send's), and get it from [`RedisEventBus::deliver_here`]. An echo send
/// thus costs Redis nothing unless its task has push configs (issue 27: the persisted send rate).
fn creates_task(events: &[BusEvent]) -> bool {
    events.first().is_some_and(|e| e.seq == 1)
}

/// The local subscribers of one task, whose stream the reader reads.
#[derive(Default)]
struct Followed {
    subs: HashMap<u64, Subscriber>,
    /// The last entry of the task's stream that has been handed to every current subscriber
    /// (read by the reader, or the stream's end when the task was first followed): a
    /// subscription registered now gets every entry after it, which includes everything
    /// published from now on, so it needs no Redis command. `None` while unknown (the reader
    /// lost Redis).
    read_to: Option<StreamId>,
}

impl Followed {
    /// Where the reader reads this task's stream from: the earliest subscriber's position.
    fn position(&self) -> Option<StreamId> {
        self.subs.values().map(|s| s.last).min()
    }
}

#[derive(Default)]
struct Registry {
    /// Followed tasks by id (at most [`MAX_FOLLOWED_PER_READER`]).
    tasks: HashMap<String, Followed>,
    /// The reader has sent an XREAD over the tasks followed when it was sent: a task followed
    /// since must wake it (see [`RedisEventBus::wake_reader`]).
    reading: bool,
    /// A wake-up has been sent for the XREAD in flight.
    woken: bool,
}

/// One reader's share of the followed tasks.
struct Shard {
    registry: Mutex<Registry>,
    /// This reader's wake-up stream, in every XREAD it sends: an entry added to it ends the
    /// XREAD in flight so the next one includes a task followed since.
    wake_key: String,
    /// Wakes the reader when its first task is followed: it sends nothing while it has none.
    notify: tokio::sync::Notify,
}

struct Shared {
    prefix: String,
    shards: Box<[Shard]>,
    next_sub: AtomicU64,
    /// Control messages read from `{prefix}control`, for this process's listeners.
    control: broadcast::Sender<Control>,
    /// Tasks followed in this process (`a2a_bus_followed_tasks`).
    followed_tasks: std::sync::atomic::AtomicI64,
    /// Entries of task streams the reader has read (for tests; `a2a_bus_entries_read_total`).
    entries_read: AtomicU64,
}

#[derive(Clone)]
pub struct RedisEventBus {
    target: RedisTarget,
    /// Opened on first use, so a Redis that is down at startup degrades streams to polling the
    /// event log instead of stopping the gateway; retried on every call until it opens.
    conn: Arc<SharedConn>,
    shared: Arc<Shared>,
    reader: Arc<ReaderHandle>,
    /// Events encoded larger than this are published as references ([`DEFAULT_INLINE_MAX`]).
    inline_max: usize,
    /// Partitions of the push worker's input ([`keys::partition_of`] a task's id); the
    /// workers' `A2A_REDIS_PARTITIONS` must be the same.
    partitions: usize,
}

impl Shared {
    /// Counts tasks newly followed (`a2a_bus_followed_tasks`).
    fn followed(&self, n: i64) {
        let now = self.followed_tasks.fetch_add(n, Ordering::Relaxed) + n;
        metrics::gauge!("a2a_bus_followed_tasks").set(now as f64);
    }

    fn unfollowed(&self) {
        self.followed(-1);
    }

    fn shard(&self, task_id: &str) -> &Shard {
        &self.shards[keys::group_of(task_id)]
    }
}

/// Stops the reader tasks when the last clone of the bus is dropped.
struct ReaderHandle(Vec<tokio::task::JoinHandle<()>>);

impl Drop for ReaderHandle {
    fn drop(&mut self) {
        for reader in &self.0 {
            reader.abort();
        }
    }
}

impl RedisEventBus {
    /// A bus on the Redis at `url`; every key it touches starts with `prefix` (e.g. `a2a:`).
    /// Connects in the background; must run inside a tokio runtime.
    pub fn connect_lazy(url: &str, prefix: &str) -> Result<Self, BusError> {
        let client = Client::open(url).map_err(unavailable)?;
        Self::new(RedisTarget::Single(client), prefix)
    }

    /// A bus on `target` (one Redis or a Redis Cluster); every key it touches starts with
    /// `prefix`. Connects in the background; must run inside a tokio runtime.
    pub fn new(target: RedisTarget, prefix: &str) -> Result<Self, BusError> {
        keys::check_prefix(prefix).map_err(BusError::Unavailable)?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let shared = Arc::new(Shared {
            prefix: prefix.to_owned(),
            shards: (0..READERS)
                .map(|i| Shard {
                    registry: Mutex::default(),
                    wake_key: keys::wake_key(prefix, i, &id),
                    notify: tokio::sync::Notify::new(),
                })
                .collect(),
            next_sub: AtomicU64::new(1),
            control: broadcast::channel(crate::CONTROL_CAPACITY).0,
            entries_read: AtomicU64::new(0),
            followed_tasks: Default::default(),
        });
        let mut readers = vec![tokio::spawn(control_loop(target.clone(), shared.clone()))];
        for index in 0..READERS {
            readers.push(tokio::spawn(read_loop(
                target.clone(),
                shared.clone(),
                index,
            )));
        }
        Ok(Self {
            partitions: keys::DEFAULT_PARTITIONS,
            target: target.clone(),
            // One quick retry: a call made while Redis is down fails fast (the caller degrades
            // to the event log) instead of stalling a task runner through a long backoff.
            conn: Arc::new(SharedConn::new(
                target,
                Patience {
                    connect: Duration::from_secs(2),
                    response: Duration::from_secs(2),
                    retries: 1,
                },
            )),
            shared,
            reader: Arc::new(ReaderHandle(readers)),
            inline_max: DEFAULT_INLINE_MAX,
        })
    }

    /// Events whose encoding is larger than `bytes` are published as references.
    pub fn with_inline_max(mut self, bytes: usize) -> Self {
        self.inline_max = bytes;
        self
    }

    /// Publishes the push worker's input over `partitions` streams (at least 1).
    pub fn with_partitions(mut self, partitions: usize) -> Self {
        self.partitions = partitions.max(1);
        self
    }

    /// The shared, self-reconnecting connection for publishing and positioning subscriptions.
    async fn conn(&self) -> Result<Conn, BusError> {
        self.conn.get().await.map_err(unavailable)
    }

    /// A command failed: the error for the caller, and on a cluster a fresh topology next time.
    async fn failed(&self, e: redis::RedisError) -> BusError {
        self.conn.failed(&e).await;
        unavailable(e)
    }

    fn task_key(&self, task_id: &str) -> String {
        task_key(&self.shared.prefix, task_id)
    }

    /// Appends `events` (one task's, in order) to the task's stream and, those of a task with
    /// push configs, to `{prefix}events`, in one pipeline: one round trip whatever their number,
    /// and one expiry refresh (the last event's, which a terminal event shortens).
    /// Returns the ids of the task stream's entries, in order: none for the commit that created
    /// the task ([`creates_task`]), which is not added to the task's stream; with nothing for the
    /// worker either, there is no round trip at all.
    async fn append(&self, events: &[BusEvent]) -> Result<Vec<StreamId>, BusError> {
        let Some(last) = events.last() else {
            return Ok(Vec::new());
        };
        let to_stream = !creates_task(events);
        let to_worker = events.iter().any(|e| e.push);
        if !to_stream && !to_worker {
            return Ok(Vec::new());
        }
        let key = self.task_key(&last.task_id);
        let all = events_key(
            &self.shared.prefix,
            keys::partition_of(&last.task_id, self.partitions),
        );
        // The task stream and the worker partition are on two slots: on a cluster, one pipeline
        // each (a pipeline goes to one node), sent at once; on one Redis, one pipeline.
        let mut pipe = redis::pipe();
        let mut worker_pipe = redis::pipe();
        let cluster = self.target.is_cluster();
        for event in events {
            let seq = event.seq.to_string();
            let mut fields: Vec<(&str, &[u8])> =
                vec![("t", event.task_id.as_bytes()), ("s", seq.as_bytes())];
            if let Some(kind) = kind(&event.event) {
                fields.push(("k", kind.as_bytes()));
            }
            // The size is known before encoding: a large event costs no copy here.
            let body = (!event.is_announcement()
                // One format byte, then the protobuf.
                && event.event.encoded_len() < self.inline_max)
                .then(|| encode(&event.event));
            if let Some(body) = &body {
                fields.push(("e", body));
            }
            if let Some(tp) = &event.trace {
                fields.push(("tp", tp.as_bytes()));
            }
            if to_stream {
                pipe.cmd("XADD")
                    .arg(&key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(TASK_MAXLEN)
                    .arg("*")
                    .arg(&fields[..]);
            }
            // Only events of tasks with push configs go to the worker (see `BusEvent::push`).
            if !event.push {
                continue;
            }
            let worker = if cluster { &mut worker_pipe } else { &mut pipe };
            worker
                .cmd("XADD")
                .arg(&all)
                .arg("MAXLEN")
                .arg("~")
                .arg(EVENTS_MAXLEN)
                .arg("*")
                .arg(&fields[..])
                .ignore();
        }
        let ttl = match event_state(&last.event).is_some_and(is_terminal) {
            true => TERMINAL_TASK_TTL_SECS,
            false => TASK_TTL_SECS,
        };
        if to_stream {
            pipe.cmd("EXPIRE").arg(&key).arg(ttl).ignore();
        }
        let conn = self.conn().await?;
        // On a cluster an empty pipeline is an error ("empty command"): each half is sent only
        // when it has commands (a task without push configs has nothing for the worker, a
        // creating commit nothing for its stream).
        let ids: Vec<String> = if cluster {
            let (mut a, mut b) = (conn.clone(), conn);
            let stream = async {
                match to_stream {
                    true => pipe.query_async::<Vec<String>>(&mut a).await,
                    false => Ok(Vec::new()),
                }
            };
            let worker = async {
                match to_worker {
                    true => worker_pipe.query_async::<()>(&mut b).await,
                    false => Ok(()),
                }
            };
            match futures::try_join!(stream, worker) {
                Ok((ids, ())) => ids,
                Err(e) => return Err(self.failed(e).await),
            }
        } else {
            match pipe.query_async(&mut conn.clone()).await {
                Ok(ids) => ids,
                Err(e) => return Err(self.failed(e).await),
            }
        };
        Ok(ids.iter().map(|id| parse_id(id)).collect())
    }

    /// Hands published events to this process's subscribers of their task at once, with the
    /// entry ids Redis gave them: the reader, reaching those entries later, skips them for these
    /// subscribers (ids up to their `last`), and a terminal event ends their subscriptions here.
    /// A follower on the replica that runs the turn (every blocking send) thus waits for no
    /// XREAD, and the reader decodes nothing for it.
    fn deliver_here(&self, events: &[BusEvent], ids: &[StreamId]) {
        let Some(task_id) = events.first().map(|e| e.task_id.as_str()) else {
            return;
        };
        let mut registry = self
            .shared
            .shard(task_id)
            .registry
            .lock()
            .expect("bus lock");
        let Some(followed) = registry.tasks.get_mut(task_id) else {
            return;
        };
        // A commit that created its task has no entry ids (it is not in the task's stream):
        // its events go to every local subscriber, whose positions it leaves as they are.
        let ids = ids.iter().copied().map(Some).chain(std::iter::repeat(None));
        for (event, id) in events.iter().zip(ids) {
            if event.is_announcement() {
                deliver_reference(&mut followed.subs, id, false);
            } else {
                deliver(&mut followed.subs, id, &Arc::new(event.clone()));
            }
        }
        if followed.subs.is_empty() {
            registry.tasks.remove(task_id);
            self.shared.unfollowed();
        }
    }

    /// Ends the reader's XREAD in flight, whose keys lack a task followed since: an entry in
    /// this process's wake-up stream, which every XREAD of the reader includes. Should it fail,
    /// the reader includes the task in its next XREAD, within [`BLOCK_MS`].
    async fn wake_reader(&self, wake_key: &str) {
        let Ok(mut conn) = self.conn().await else {
            return;
        };
        let woke: redis::RedisResult<()> = redis::pipe()
            .cmd("XADD")
            .arg(wake_key)
            .arg("MAXLEN")
            .arg(1)
            .arg("*")
            .arg("w")
            .arg(1)
            .ignore()
            .cmd("EXPIRE")
            .arg(wake_key)
            .arg(WAKE_TTL_SECS)
            .ignore()
            .query_async(&mut conn)
            .await;
        if let Err(e) = woke {
            tracing::debug!(error = %e, "redis bus: cannot wake the reader");
            self.conn.failed(&e).await;
        }
    }

    /// The stream of a registered subscription, which removes it when dropped.
    fn subscription(
        &self,
        task_id: &str,
        sub_id: u64,
        rx: mpsc::Receiver<Queued>,
    ) -> BoxStream<'static, BusItem> {
        let guard = Unsubscribe {
            shared: self.shared.clone(),
            task_id: task_id.to_owned(),
            sub_id,
        };
        ReceiverStream::new(rx)
            .map(move |item| {
                let _keep = &guard;
                BusItem::from(item)
            })
            .boxed()
    }

    /// Number of tasks with local subscribers (for tests and metrics).
    pub fn open_channels(&self) -> usize {
        let _ = &self.reader;
        self.shared
            .shards
            .iter()
            .map(|shard| shard.registry.lock().map(|r| r.tasks.len()).unwrap_or(0))
            .sum()
    }
}

/// Decodes an entry of a task stream or of the worker stream ([`events_key`]); `None` for an
/// entry this build cannot read.
pub fn decode_entry(entry: &redis::streams::StreamId) -> Option<BusEvent> {
    decode(entry)
}

/// The id of the last entry of `key` (`0-0` when it is empty or missing).
async fn last_id(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
) -> redis::RedisResult<StreamId> {
    let last: Vec<(String, HashMap<String, redis::Value>)> = redis::cmd("XREVRANGE")
        .arg(key)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(conn)
        .await?;
    Ok(last.first().map(|(id, _)| parse_id(id)).unwrap_or((0, 0)))
}

fn unavailable(e: impl std::fmt::Display) -> BusError {
    BusError::Unavailable(e.to_string())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The `k` field of an event's entry; `None` for an announcement (not read by its publisher).
fn kind(event: &StreamResponse) -> Option<&'static str> {
    use a2a_types::v1::stream_response::Payload;
    if event_state(event).is_some_and(is_terminal) {
        return Some("end");
    }
    Some(match event.payload.as_ref()? {
        Payload::Task(_) => "task",
        Payload::Message(_) => "message",
        Payload::StatusUpdate(_) => "status",
        Payload::ArtifactUpdate(_) => "artifact",
    })
}

/// An entry that names its event without carrying it (no `e`): read it from the log.
fn is_reference(entry: &redis::streams::StreamId) -> bool {
    !entry.map.contains_key("e") && entry.map.contains_key("t") && entry.map.contains_key("s")
}

fn encode(event: &StreamResponse) -> Vec<u8> {
    let mut buf = Vec::with_capacity(1 + event.encoded_len());
    buf.push(FORMAT_V1);
    event.encode(&mut buf).expect("Vec grows as needed");
    buf
}

fn decode(entry: &redis::streams::StreamId) -> Option<BusEvent> {
    let task_id: String = entry.get("t")?;
    let seq: u64 = entry.get("s")?;
    let bytes: Vec<u8> = entry.get("e")?;
    let (&version, body) = bytes.split_first()?;
    if version != FORMAT_V1 {
        return None;
    }
    let event = StreamResponse::decode(body).ok()?;
    Some(BusEvent {
        task_id,
        seq,
        event: Arc::new(event),
        trace: entry.get("tp"),
        // Entries carry no mark: those of the worker's stream are all of tasks with configs.
        push: true,
    })
}

#[async_trait]
impl EventBus for RedisEventBus {
    /// Publishes a committed event: see [`publish_all`](Self::publish_all).
    async fn publish(&self, event: BusEvent) -> Result<(), BusError> {
        self.publish_all(vec![event]).await
    }

    /// The events of one commit in one round trip (see [`RedisEventBus::append`]). A failure is
    /// only reported: the store's outbox keeps the commit until a publish of it succeeds.
    async fn publish_all(&self, events: Vec<BusEvent>) -> Result<(), BusError> {
        let ids = self.append(&events).await?;
        self.deliver_here(&events, &ids);
        Ok(())
    }

    async fn subscribe(&self, task_id: &str) -> Result<BoxStream<'static, BusItem>, BusError> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY + 1);
        let sub_id = self.shared.next_sub.fetch_add(1, Ordering::Relaxed);
        let shard = self.shared.shard(task_id);
        // A task already followed here: "from now on" is where the reader has read its stream
        // to: anything published after this call returns has a larger id, and the reader reaches
        // it after this subscription is registered (entries published a moment before it may
        // come too: followers skip sequence numbers they have). One lock, no round trip.
        {
            let mut registry = shard.registry.lock().map_err(unavailable_lock)?;
            if let Some(followed) = registry.tasks.get_mut(task_id)
                && let Some(last) = followed.read_to
            {
                followed.subs.insert(sub_id, Subscriber { tx, last });
                return Ok(self.subscription(task_id, sub_id, rx));
            }
            if !registry.tasks.contains_key(task_id)
                && (registry.tasks.len() >= MAX_FOLLOWED_PER_READER
                    || self.shared.followed_tasks.load(Ordering::Relaxed)
                        >= MAX_FOLLOWED_TASKS as i64)
            {
                metrics::counter!("a2a_bus_follow_refused_total").increment(1);
                return Err(BusError::Unavailable(
                    "this process follows too many tasks".into(),
                ));
            }
        }
        // A task newly followed (or the reader is reconnecting): "from now on" is the task
        // stream's current last entry, which the reader reads from once it has the task's key.
        let key = self.task_key(task_id);
        let last = match self.conn().await {
            Ok(mut conn) => match last_id(&mut conn, &key).await {
                Ok(last) => Ok(last),
                Err(e) => Err(self.failed(e).await),
            },
            Err(e) => Err(e),
        };
        let (last, known) = match last {
            Ok(last) => (last, true),
            Err(e) => {
                // Redis is down: the follower polls the log until it is back. Start from the
                // clock (ids are server milliseconds); an older entry read later is a sequence
                // number the follower already has and skips.
                tracing::debug!(task_id, error = %e, "redis bus: subscribing while unreachable");
                let _ = tx.try_send(Queued::Lagged);
                ((now_ms(), 0), false)
            }
        };
        let wake = {
            let mut registry = shard.registry.lock().map_err(unavailable_lock)?;
            let new = !registry.tasks.contains_key(task_id);
            if new
                && (registry.tasks.len() >= MAX_FOLLOWED_PER_READER
                    || self.shared.followed_tasks.load(Ordering::Relaxed)
                        >= MAX_FOLLOWED_TASKS as i64)
            {
                metrics::counter!("a2a_bus_follow_refused_total").increment(1);
                return Err(BusError::Unavailable(
                    "this process follows too many tasks".into(),
                ));
            }
            if new {
                self.shared.followed(1);
            }
            let followed = registry.tasks.entry(task_id.to_owned()).or_default();
            followed.subs.insert(sub_id, Subscriber { tx, last });
            if new && known {
                // The only subscriber has seen everything up to the stream's end.
                followed.read_to = Some(last);
            }
            let wake = new && registry.reading && !registry.woken;
            registry.woken |= wake;
            if new {
                // Its reader may be waiting for a first task.
                shard.notify.notify_one();
            }
            wake
        };
        if wake {
            // Not awaited: the subscription's position is already fixed (`last`), so the
            // reader reads from there whenever its next XREAD starts; the subscriber need not
            // wait a round trip for the wake-up to reach Redis (`registry.woken` keeps it to
            // one wake-up in flight per reader).
            let bus = self.clone();
            let wake_key = shard.wake_key.clone();
            tokio::spawn(async move { bus.wake_reader(&wake_key).await });
        }
        Ok(self.subscription(task_id, sub_id, rx))
    }

    fn is_remote(&self) -> bool {
        true
    }

    async fn send_control(&self, control: Control) -> Result<(), BusError> {
        let Control::Cancel { task_id } = control;
        let mut conn = self.conn().await?;
        match redis::cmd("XADD")
            .arg(control_key(&self.shared.prefix))
            .arg("MAXLEN")
            .arg("~")
            .arg(CONTROL_MAXLEN)
            .arg("*")
            .arg("cancel")
            .arg(task_id)
            .query_async::<()>(&mut conn)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed(e).await),
        }
    }

    fn control(&self) -> BoxStream<'static, Control> {
        BroadcastStream::new(self.shared.control.subscribe())
            .filter_map(|item| async move { item.ok() })
            .boxed()
    }
}

fn unavailable_lock<T>(_: T) -> BusError {
    BusError::Unavailable("bus lock poisoned".into())
}

/// Removes the subscription when its stream is dropped.
struct Unsubscribe {
    shared: Arc<Shared>,
    task_id: String,
    sub_id: u64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        if let Ok(mut registry) = self.shared.shard(&self.task_id).registry.lock()
            && let Some(followed) = registry.tasks.get_mut(&self.task_id)
        {
            followed.subs.remove(&self.sub_id);
            if followed.subs.is_empty() {
                registry.tasks.remove(&self.task_id);
                self.shared.unfollowed();
            }
        }
    }
}

/// Reads the control stream: one connection, one XREAD at a time. Best effort: after a break
/// it goes on from where it was (what Redis still holds).
async fn control_loop(target: RedisTarget, shared: Arc<Shared>) {
    let control = control_key(&shared.prefix);
    let mut backoff = Duration::from_millis(50);
    let mut control_id = (now_ms().saturating_sub(CONTROL_SLACK_MS), 0);
    loop {
        let read: redis::RedisResult<std::convert::Infallible> = async {
            let mut conn = target.blocking(Duration::from_millis(BLOCK_MS)).await?;
            loop {
                let reply: Option<StreamReadReply> = redis::cmd("XREAD")
                    .arg("COUNT")
                    .arg(READ_COUNT)
                    .arg("BLOCK")
                    .arg(BLOCK_MS)
                    .arg("STREAMS")
                    .arg(&control)
                    .arg(format!("{}-{}", control_id.0, control_id.1))
                    .query_async(&mut conn)
                    .await?;
                backoff = Duration::from_millis(50);
                for entry in reply.iter().flat_map(|r| &r.keys).flat_map(|k| &k.ids) {
                    control_id = parse_id(&entry.id);
                    if let Some(task_id) = entry.get::<String>("cancel") {
                        // No listener is fine: nothing runs here to act on it.
                        let _ = shared.control.send(Control::Cancel { task_id });
                    }
                }
            }
        }
        .await;
        let Err(e) = read;
        tracing::debug!(error = %e, "redis bus: control reader failed; reconnecting");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// The reader of shard `index`: once the shard has a followed task, one connection and one XREAD
/// at a time over its wake-up stream and the streams of its followed tasks.
async fn read_loop(target: RedisTarget, shared: Arc<Shared>, index: usize) {
    let shard = &shared.shards[index];
    let mut backoff = Duration::from_millis(50);
    let mut wake_id = (0, 0);
    // No connection until there is something to read.
    while shard.registry.lock().is_ok_and(|r| r.tasks.is_empty()) {
        shard.notify.notified().await;
    }
    loop {
        let mut conn = match target.blocking(Duration::from_millis(BLOCK_MS)).await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "redis bus: reader cannot connect; retrying");
                metrics::counter!("a2a_bus_redis_reconnects_total").increment(1);
                lag_everyone(shard);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        let read = read_until_error(&mut conn, &shared, shard, &mut wake_id).await;
        if let Err(e) = read {
            tracing::warn!(error = %e, "redis bus: read failed; reconnecting");
            metrics::counter!("a2a_bus_redis_reconnects_total").increment(1);
            // Entries may have been missed while the connection was down: every follower
            // re-reads the event log, which is the record.
            lag_everyone(shard);
            tokio::time::sleep(backoff).await;
        }
    }
}

async fn read_until_error(
    conn: &mut Conn,
    shared: &Shared,
    shard: &Shard,
    wake_id: &mut StreamId,
) -> redis::RedisResult<()> {
    let fmt = |(ms, seq): StreamId| format!("{ms}-{seq}");
    loop {
        // The followed tasks and where to read each from; a subscription made from now on to a
        // task not among them wakes this XREAD (the reader's positions are its subscribers',
        // so a break in the connection loses nothing that Redis still holds).
        let followed: HashMap<String, (String, StreamId)> = {
            let mut registry = shard.registry.lock().expect("bus lock");
            registry.reading = !registry.tasks.is_empty();
            registry.woken = false;
            registry
                .tasks
                .iter()
                .filter_map(|(task, f)| {
                    let at = f.position()?;
                    Some((task_key(&shared.prefix, task), (task.clone(), at)))
                })
                .collect()
        };
        if followed.is_empty() {
            // Nothing to read: wait for a first task (the connection stays open).
            shard.notify.notified().await;
            continue;
        }
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(BLOCK_MS)
            .arg("STREAMS")
            .arg(&shard.wake_key);
        for key in followed.keys() {
            cmd.arg(key);
        }
        cmd.arg(fmt(*wake_id));
        for (_, at) in followed.values() {
            cmd.arg(fmt(*at));
        }
        let reply: Option<StreamReadReply> = cmd.query_async(conn).await?;
        let mut registry = shard.registry.lock().expect("bus lock");
        registry.reading = false;
        let mut returned: HashMap<&str, StreamId> = HashMap::new();
        for stream in reply.map(|r| r.keys).unwrap_or_default() {
            if stream.key == shard.wake_key {
                if let Some(last) = stream.ids.last() {
                    *wake_id = parse_id(&last.id);
                }
            } else if let Some((key, (task, _))) = followed.get_key_value(&stream.key) {
                if let Some(last) = stream.ids.last() {
                    returned.insert(key.as_str(), parse_id(&last.id));
                }
                fan_out(shared, &mut registry, task, &stream.ids);
            }
        }
        // Every entry of a followed stream up to what this XREAD returned of it (or, if it
        // returned nothing of it, up to where it read from) has been handed over: a subscriber
        // registered from now on starts there.
        for (key, (task, at)) in &followed {
            let to = returned.get(key.as_str()).copied().unwrap_or(*at);
            if let Some(f) = registry.tasks.get_mut(task) {
                f.read_to = Some(f.read_to.map_or(to, |r| r.max(to)));
            }
        }
    }
}

/// Delivers entries of `task_id`'s stream to its local subscribers that have not seen them
/// yet; entries every subscriber has seen (delivered when they were published in this process)
/// are skipped without being decoded.
fn fan_out(
    shared: &Shared,
    registry: &mut Registry,
    task_id: &str,
    entries: &[redis::streams::StreamId],
) {
    shared
        .entries_read
        .fetch_add(entries.len() as u64, Ordering::Relaxed);
    metrics::counter!("a2a_bus_entries_read_total").increment(entries.len() as u64);
    let Some(followed) = registry.tasks.get_mut(task_id) else {
        return; // nobody follows it any more
    };
    for entry in entries {
        let id = parse_id(&entry.id);
        let subs = &mut followed.subs;
        if subs.values().all(|sub| id <= sub.last) {
            continue; // handed over by `deliver_here` when it was published in this process
        }
        if is_reference(entry) {
            // Too large to travel in the entry: the followers read it from the event log.
            let terminal = entry.get::<String>("k").is_some_and(|k| k == "end");
            deliver_reference(subs, Some(id), terminal);
            if subs.is_empty() {
                registry.tasks.remove(task_id);
                shared.unfollowed();
                return;
            }
            continue;
        }
        let Some(event) = decode(entry).filter(|ev| ev.task_id == task_id) else {
            // The followers re-read the event log, which has the event.
            tracing::warn!(id = %entry.id, "redis bus: skipping an entry it cannot decode");
            for sub in subs.values_mut() {
                sub.last = sub.last.max(id);
                let _ = sub.tx.try_send(Queued::Lagged);
            }
            continue;
        };
        // The entry id's milliseconds are the Redis server's clock at XADD: the lag includes
        // any skew between it and this host.
        let lag_ms = now_ms().saturating_sub(id.0);
        metrics::histogram!("a2a_bus_delivery_lag_seconds").record(lag_ms as f64 / 1000.0);
        deliver(subs, Some(id), &Arc::new(event));
        if subs.is_empty() {
            registry.tasks.remove(task_id);
            shared.unfollowed();
            return;
        }
    }
}

/// Gives the entry `id` of its task's stream (`event`) to the subscribers that have not seen it.
fn deliver(subs: &mut HashMap<u64, Subscriber>, id: Option<StreamId>, event: &Arc<BusEvent>) {
    let terminal = event_state(&event.event).is_some_and(is_terminal);
    subs.retain(|_, sub| {
        if !sub.passes(id) {
            return true;
        }
        if sub.tx.capacity() > 1 {
            let _ = sub.tx.try_send(Queued::Event(event.clone()));
        } else {
            // Full: drop the event and say so (the last slot is kept for this notice).
            let _ = sub.tx.try_send(Queued::Lagged);
        }
        // The terminal event ends the subscription: dropping the sender closes the stream.
        !terminal && !sub.tx.is_closed()
    });
}

/// Tells the subscribers that have not seen entry `id` to read the log (it is a reference, or
/// an announcement); a `terminal` one ends their subscriptions, as its event would.
fn deliver_reference(subs: &mut HashMap<u64, Subscriber>, id: Option<StreamId>, terminal: bool) {
    subs.retain(|_, sub| {
        if !sub.passes(id) {
            return true;
        }
        let _ = sub.tx.try_send(Queued::Lagged);
        !terminal && !sub.tx.is_closed()
    });
}

/// The reader lost its connection: every follower re-reads the log, and subscriptions made
/// until it reads again are positioned by Redis itself (or told to read the log).
fn lag_everyone(shard: &Shard) {
    if let Ok(mut registry) = shard.registry.lock() {
        registry.reading = false;
        for followed in registry.tasks.values_mut() {
            followed.read_to = None;
            for sub in followed.subs.values() {
                let _ = sub.tx.try_send(Queued::Lagged);
            }
        }
    }
}

#[cfg(test)]
mod bench;
#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod tests;
