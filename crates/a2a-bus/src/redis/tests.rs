//! The Redis bus against a real Redis: the conformance suite, lag, restarts.

use super::*;

/// The bus plus the test's Redis slice, kept alive (and cleaned up) with it.
struct TestBus(RedisEventBus, #[allow(dead_code)] a2a_testing::TestRedis);

#[async_trait]
impl EventBus for TestBus {
    async fn publish(&self, event: BusEvent) -> Result<(), BusError> {
        self.0.publish(event).await
    }
    async fn publish_all(&self, events: Vec<BusEvent>) -> Result<(), BusError> {
        self.0.publish_all(events).await
    }
    async fn subscribe(&self, task_id: &str) -> Result<BoxStream<'static, BusItem>, BusError> {
        self.0.subscribe(task_id).await
    }
    async fn send_control(&self, control: Control) -> Result<(), BusError> {
        self.0.send_control(control).await
    }
    fn control(&self) -> BoxStream<'static, Control> {
        self.0.control()
    }
}

async fn bus() -> TestBus {
    let redis = a2a_testing::TestRedis::create().await;
    let bus = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).expect("a Redis URL");
    TestBus(bus, redis)
}

crate::bus_conformance_suite!(bus().await);

/// The integer answer of a one-key command (`TTL`, `EXISTS`, `XLEN`).
async fn of_key(conn: &mut Conn, cmd: &str, key: &str) -> i64 {
    redis::cmd(cmd).arg(key).query_async(conn).await.unwrap()
}

/// The sequence numbers a subscription yields until it ends (each within 5 s).
async fn seqs_to_the_end(sub: &mut BoxStream<'static, BusItem>) -> Vec<u64> {
    let mut seqs = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), sub.next()).await {
            Ok(Some(BusItem::Event(ev))) => seqs.push(ev.seq),
            Ok(None) => return seqs,
            other => panic!("expected an event or the end, got {other:?}"),
        }
    }
}

/// Every entry of stream `key`.
pub(super) async fn xrange(conn: &mut Conn, key: &str) -> redis::streams::StreamRangeReply {
    redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .unwrap()
}

#[test]
fn stream_ids_compare_numerically() {
    assert!(parse_id("10-0") > parse_id("9-5"));
    assert!(parse_id("9-10") > parse_id("9-9"));
}

/// Every key the bus writes is bounded: the task stream expires an hour after its last event,
/// a minute after its terminal one, and the streams are capped by MAXLEN.
#[tokio::test]
async fn task_streams_expire_soon_after_their_terminal_event() {
    let bus = bus().await;
    let mut conn = bus.0.conn().await.unwrap();
    let key = bus.0.task_key("t");
    bus.publish(crate::suite::working("t", 2)).await.unwrap();
    let running = of_key(&mut conn, "TTL", &key).await;
    assert!(
        running > 3000 && running <= TASK_TTL_SECS as i64,
        "{running}"
    );
    let done = crate::suite::status_event("t", 3, a2a_types::v1::TaskState::Completed);
    bus.publish(done).await.unwrap();
    let ended = of_key(&mut conn, "TTL", &key).await;
    assert!(
        ended > 0 && ended <= TERMINAL_TASK_TTL_SECS as i64,
        "{ended}"
    );
    let worker = events_key(
        &bus.0.shared.prefix,
        keys::partition_of("t", bus.0.partitions),
    );
    assert_eq!(of_key(&mut conn, "XLEN", &worker).await, 2);
}

/// Only events of tasks with push configs reach the worker's stream; followers get them all.
#[tokio::test]
async fn the_worker_stream_gets_only_tasks_with_push_configs() {
    let bus = bus().await;
    let mut conn = bus.0.conn().await.unwrap();
    let mut sub = bus.subscribe("quiet").await.unwrap();
    let mut quiet = crate::suite::working("quiet", 1);
    quiet.push = false;
    bus.publish(quiet).await.unwrap();
    bus.publish(crate::suite::working("pushed", 1))
        .await
        .unwrap();
    let tasks: Vec<String> = {
        let mut all = Vec::new();
        for p in 0..bus.0.partitions {
            let entries = xrange(&mut conn, &events_key(&bus.0.shared.prefix, p)).await;
            all.extend(entries.ids.iter().filter_map(|e| e.get::<String>("t")));
        }
        all
    };
    assert_eq!(tasks, ["pushed"]);
    let got = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
    assert!(matches!(got, Ok(Some(BusItem::Event(e))) if e.seq == 1));
}

#[tokio::test]
async fn events_round_trip_through_the_encoding() {
    let ev = crate::suite::working("t", 3);
    let body = encode(&ev.event);
    assert_eq!(body[0], FORMAT_V1);
    assert_eq!(
        StreamResponse::decode(&body[1..]).unwrap(),
        *ev.event,
        "version byte, then protobuf"
    );
}

#[tokio::test]
async fn slow_subscribers_are_told_they_lagged() {
    let bus = bus().await;
    let mut sub = bus.subscribe("t").await.unwrap();
    for seq in 1..=(SUBSCRIBER_CAPACITY as u64 + 10) {
        bus.publish(crate::suite::working("t", seq)).await.unwrap();
    }
    let mut saw_lag = false;
    while let Ok(Some(item)) = tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
        saw_lag |= item == BusItem::Lagged;
    }
    assert!(saw_lag, "a subscriber that does not read is told it lagged");
}

#[tokio::test]
async fn subscribers_survive_a_redis_restart() {
    let server = Arc::new(a2a_testing::RedisServer::start().unwrap());
    let redis = a2a_testing::TestRedis::on(&server);
    let bus = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let mut sub = bus.subscribe("t").await.unwrap();
    bus.publish(crate::suite::working("t", 1)).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
    assert!(matches!(first, Ok(Some(BusItem::Event(ev))) if ev.seq == 1));

    server.stop().unwrap();
    let lag = tokio::time::timeout(Duration::from_secs(10), sub.next()).await;
    assert_eq!(
        lag.unwrap(),
        Some(BusItem::Lagged),
        "told to re-read the log"
    );
    assert!(bus.publish(crate::suite::working("t", 2)).await.is_err());

    server.start_again().unwrap();
    // Publishing succeeds again once the connection manager has reconnected.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while bus.publish(crate::suite::working("t", 3)).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "publish works again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(10), sub.next()).await {
            Ok(Some(BusItem::Lagged)) => continue,
            Ok(Some(BusItem::Event(ev))) => {
                assert_eq!(ev.seq, 3);
                break;
            }
            other => panic!("expected seq 3 after the restart, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn subscribing_while_redis_is_down_says_lagged_then_follows_once_it_is_back() {
    let server = Arc::new(a2a_testing::RedisServer::start().unwrap());
    let redis = a2a_testing::TestRedis::on(&server);
    server.stop().unwrap();
    let bus = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let mut sub = bus
        .subscribe("t")
        .await
        .expect("subscribe never fails on Redis");
    assert_eq!(sub.next().await, Some(BusItem::Lagged));
    server.start_again().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while bus.publish(crate::suite::working("t", 1)).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "publish works once Redis is up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(10), sub.next()).await {
            Ok(Some(BusItem::Lagged)) => continue,
            Ok(Some(BusItem::Event(ev))) => break assert_eq!(ev.seq, 1),
            other => panic!("expected seq 1, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_entry_that_does_not_decode_is_stepped_over() {
    let bus = bus().await;
    let mut sub = bus.subscribe("t").await.unwrap();
    let mut conn = bus.0.conn().await.unwrap();
    let _: String = redis::cmd("XADD")
        .arg(bus.0.task_key("t"))
        .arg("*")
        .arg("t")
        .arg("t")
        .arg("s")
        .arg(1)
        .arg("e")
        .arg(&[9u8, 9, 9][..])
        .query_async(&mut conn)
        .await
        .unwrap();
    // Published by another replica (another bus on the same prefix): this process's own
    // publishes reach its subscribers directly, ahead of its reader, which would race the
    // undecodable entry.
    let other = RedisEventBus::connect_lazy(bus.1.url(), bus.1.prefix()).expect("a Redis URL");
    other.publish(crate::suite::working("t", 2)).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
    assert_eq!(
        first.unwrap(),
        Some(BusItem::Lagged),
        "told to re-read the log"
    );
    let second = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
    assert!(matches!(second.unwrap(), Some(BusItem::Event(ev)) if ev.seq == 2));
}

/// Once the reader reads a task's stream, a second subscription to it is positioned where the
/// reader has read to, without a Redis command: it gets what is published after it, and
/// nothing the reader had already passed.
#[tokio::test]
async fn a_subscription_starts_where_the_reader_is() {
    let redis = a2a_testing::TestRedis::create().await;
    let here = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let there = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let read_to = || {
        there
            .shared
            .shard("t")
            .registry
            .lock()
            .unwrap()
            .tasks
            .get("t")
            .and_then(|f| f.read_to)
    };
    let mut first = there.subscribe("t").await.unwrap();
    here.publish(crate::suite::working("t", 2)).await.unwrap();
    assert!(matches!(first.next().await, Some(BusItem::Event(ev)) if ev.seq == 2));
    let mut conn = here.conn().await.unwrap();
    let end = last_id(&mut conn, &here.task_key("t")).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while read_to().is_none_or(|at| at < end) {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader reaches the end"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut sub = there.subscribe("t").await.unwrap();
    here.publish_all(vec![
        crate::suite::working("t", 3),
        crate::suite::working("t", 4),
    ])
    .await
    .unwrap();
    for sub in [&mut first, &mut sub] {
        let mut seqs = Vec::new();
        while seqs.len() < 2 {
            match tokio::time::timeout(Duration::from_secs(5), sub.next()).await {
                Ok(Some(BusItem::Event(ev))) => seqs.push(ev.seq),
                other => panic!("expected an event, got {other:?}"),
            }
        }
        assert_eq!(seqs, [3, 4]);
    }
}

/// A replica reads only the streams of the tasks it follows: another task's events, however
/// many, cost it no entry read, and a task followed while its XREAD blocks is read at once.
#[tokio::test]
async fn an_unrelated_task_costs_nothing() {
    let redis = a2a_testing::TestRedis::create().await;
    let here = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let there = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let mut warm = there.subscribe("warm").await.unwrap();
    here.publish(crate::suite::working("warm", 2))
        .await
        .unwrap();
    assert!(matches!(warm.next().await, Some(BusItem::Event(ev)) if ev.seq == 2));
    // The reader is now blocked in an XREAD over `warm`'s stream (and control, wake-up).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = there.shared.entries_read.load(Ordering::Relaxed);
    for seq in 1..=200 {
        here.publish(crate::suite::working("other", seq))
            .await
            .unwrap();
    }
    let mut mine = there.subscribe("mine").await.unwrap();
    let started = std::time::Instant::now();
    here.publish(crate::suite::working("mine", 2))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), mine.next()).await;
    assert!(matches!(got, Ok(Some(BusItem::Event(ev))) if ev.seq == 2));
    assert!(
        started.elapsed() < Duration::from_millis(BLOCK_MS / 2),
        "a newly followed task wakes the reader: {:?}",
        started.elapsed()
    );
    assert_eq!(
        there.shared.entries_read.load(Ordering::Relaxed) - before,
        1,
        "only the followed task's entry is read"
    );
    drop((warm, mine));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while there.open_channels() > 0 {
        assert!(std::time::Instant::now() < deadline, "unfollowed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(there.shared.followed_tasks.load(Ordering::Relaxed), 0);
}

/// Events published by this process reach its subscribers at once and the reader does not
/// deliver them again, while another process's subscribers get them through the reader: each
/// subscriber sees each event once, in order.
#[tokio::test]
async fn published_here_and_read_there_each_event_arrives_once() {
    let redis = a2a_testing::TestRedis::create().await;
    let here = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let there = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let mut local = here.subscribe("t").await.unwrap();
    let mut remote = there.subscribe("t").await.unwrap();
    here.publish_all((2..=4).map(|seq| crate::suite::working("t", seq)).collect())
        .await
        .unwrap();
    here.publish(crate::suite::working("t", 5)).await.unwrap();
    let done = crate::suite::status_event("t", 6, a2a_types::v1::TaskState::Completed);
    here.publish(done).await.unwrap();
    for sub in [&mut local, &mut remote] {
        assert_eq!(seqs_to_the_end(sub).await, [2, 3, 4, 5, 6]);
    }
    assert_eq!(
        here.open_channels(),
        0,
        "the terminal event ended the subscription"
    );
}

/// The commit that creates a task (sequence numbers from 1) is not added to the task's stream:
/// its followers are in the publishing process and get it there; another process's follower,
/// which can only have subscribed after the answer that named the task, starts with the next
/// commit (and the store's snapshot, in the gateway). Without push configs such a commit costs
/// Redis nothing; with them it goes to the worker's stream only.
#[tokio::test]
async fn a_tasks_creating_commit_stays_out_of_its_stream() {
    let bus = bus().await;
    let other = RedisEventBus::connect_lazy(bus.1.url(), bus.1.prefix()).expect("a Redis URL");
    let mut conn = bus.0.conn().await.unwrap();
    let in_worker_stream = |mut conn: Conn, task: &str| {
        let key = events_key(
            &bus.0.shared.prefix,
            keys::partition_of(task, bus.0.partitions),
        );
        let task = task.to_owned();
        async move {
            xrange(&mut conn, &key)
                .await
                .ids
                .iter()
                .filter_map(decode)
                .filter(|e| e.task_id == task)
                .map(|e| (e.task_id, e.seq))
                .collect::<Vec<_>>()
        }
    };
    // Without push configs: followed here, nothing in Redis.
    let mut here = bus.subscribe("quiet").await.unwrap();
    let mut there = other.subscribe("quiet").await.unwrap();
    let created: Vec<BusEvent> = (1..=3)
        .map(|seq| BusEvent {
            push: false,
            ..crate::suite::working("quiet", seq)
        })
        .collect();
    bus.publish_all(created).await.unwrap();
    assert_eq!(
        of_key(&mut conn, "EXISTS", &bus.0.task_key("quiet")).await,
        0
    );
    assert!(in_worker_stream(conn.clone(), "quiet").await.is_empty());
    let done = BusEvent {
        push: false,
        ..crate::suite::status_event("quiet", 4, a2a_types::v1::TaskState::Completed)
    };
    bus.publish(done).await.unwrap();
    for (sub, want) in [(&mut here, vec![1, 2, 3, 4]), (&mut there, vec![4])] {
        assert_eq!(seqs_to_the_end(sub).await, want);
    }
    assert_eq!(
        of_key(&mut conn, "XLEN", &bus.0.task_key("quiet")).await,
        1,
        "the task's stream holds the commits after its creation"
    );
    // With push configs: the worker's stream only.
    bus.publish_all(vec![
        crate::suite::working("pushed", 1),
        crate::suite::working("pushed", 2),
    ])
    .await
    .unwrap();
    assert_eq!(
        of_key(&mut conn, "EXISTS", &bus.0.task_key("pushed")).await,
        0
    );
    assert_eq!(
        in_worker_stream(conn.clone(), "pushed").await,
        [("pushed".to_owned(), 1), ("pushed".to_owned(), 2)]
    );
}

/// An artifact of 1 MiB: an event far above the inline limit.
fn big_artifact(task_id: &str, seq: u64) -> BusEvent {
    use a2a_types::v1::stream_response::Payload;
    use a2a_types::v1::{Artifact, Part, TaskArtifactUpdateEvent, part};
    let part = Part {
        content: Some(part::Content::Text("x".repeat(1 << 20))),
        ..Default::default()
    };
    BusEvent {
        task_id: task_id.to_owned(),
        seq,
        event: Arc::new(StreamResponse {
            payload: Some(Payload::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task_id.to_owned(),
                artifact: Some(Artifact {
                    artifact_id: "a".into(),
                    parts: vec![part],
                    ..Default::default()
                }),
                ..Default::default()
            })),
        }),
        trace: None,
        push: true,
    }
}

/// Review H6: an event larger than the inline limit is published as a reference (task id,
/// sequence number, kind; no payload), so what Redis holds per entry is bounded whatever the
/// artifact's size. A follower on another replica is told to read the log; the publishing
/// replica's own follower gets the event itself; small events still travel inline.
#[tokio::test]
async fn large_events_travel_as_references_and_redis_holds_only_small_entries() {
    let bus = bus().await;
    let other = RedisEventBus::connect_lazy(bus.1.url(), bus.1.prefix()).expect("a Redis URL");
    let mut here = bus.subscribe("t").await.unwrap();
    let mut there = other.subscribe("t").await.unwrap();
    const N: u64 = 20;
    // From sequence number 2: the task's creating commit is not in its stream (see below).
    for seq in 2..=N + 1 {
        bus.publish(big_artifact("t", seq)).await.unwrap();
    }
    bus.publish(crate::suite::status_event(
        "t",
        N + 2,
        a2a_types::v1::TaskState::Completed,
    ))
    .await
    .unwrap();
    let mut conn = bus.0.conn().await.unwrap();
    for key in [
        bus.0.task_key("t"),
        events_key(
            &bus.0.shared.prefix,
            keys::partition_of("t", bus.0.partitions),
        ),
    ] {
        let entries: Vec<(String, HashMap<String, redis::Value>)> = redis::cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(entries.len() as u64, N + 1, "{key}");
        for (_, fields) in &entries[..N as usize] {
            assert!(
                !fields.contains_key("e"),
                "{key}: a reference carries no payload"
            );
            let kind: String = redis::from_redis_value_ref(&fields["k"]).unwrap();
            assert_eq!(kind, "artifact");
        }
        let last = &entries[N as usize].1;
        assert!(last.contains_key("e"), "a small event travels inline");
        let kind: String = redis::from_redis_value_ref(&last["k"]).unwrap();
        assert_eq!(kind, "end");
        let bytes: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let bytes = bytes.unwrap_or(0);
        assert!(
            bytes < (N + 1) * DEFAULT_INLINE_MAX as u64,
            "{key}: {bytes} bytes for {} events of 1 MiB",
            N
        );
    }
    // The publisher's follower: the events handed over at publish are whole (its reader may
    // reach a reference first: then it is told to read the log), and the terminal one ends it.
    let mut whole = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(5), here.next())
            .await
            .unwrap()
        {
            Some(BusItem::Lagged) => {}
            Some(BusItem::Event(ev)) => {
                assert!(!ev.is_announcement());
                whole += 1;
                if ev.seq == N + 2 {
                    break;
                }
            }
            None => panic!("ended before the terminal event"),
        }
    }
    assert!(whole >= 1);
    // Another replica's follower: told to read the log for each reference, then the inline
    // terminal event, which ends the subscription.
    let mut lagged = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(5), there.next())
            .await
            .unwrap()
        {
            Some(BusItem::Lagged) => lagged += 1,
            Some(BusItem::Event(ev)) => {
                assert_eq!(ev.seq, N + 2);
                break;
            }
            None => panic!("ended before the terminal event"),
        }
    }
    assert!(lagged >= 1, "references make the follower read the log");
    // The worker's decoding: no payload, but the task and sequence number are there.
    let key = events_key(
        &bus.0.shared.prefix,
        keys::partition_of("t", bus.0.partitions),
    );
    let entries = xrange(&mut conn, &key).await;
    assert!(decode_entry(&entries.ids[0]).is_none());
    assert!(is_reference(&entries.ids[0]));
}

/// The inline limit is the deployment's: with 0 every event is a reference.
#[tokio::test]
async fn the_inline_limit_is_configurable() {
    let bus = bus().await;
    let all_refs = RedisEventBus::connect_lazy(bus.1.url(), bus.1.prefix())
        .expect("a Redis URL")
        .with_inline_max(0);
    all_refs
        .publish(crate::suite::working("t", 2))
        .await
        .unwrap();
    let mut conn = bus.0.conn().await.unwrap();
    let entries = xrange(&mut conn, &bus.0.task_key("t")).await;
    assert!(is_reference(&entries.ids[0]));
}

/// A publish Redis does not take fails and is not kept in memory (the store's outbox is the
/// record of what is left to publish): the bus holds nothing to republish.
#[tokio::test]
async fn a_publish_while_redis_is_down_fails_and_keeps_nothing() {
    let server = a2a_testing::RedisServer::start().expect("a private redis-server");
    let bus = RedisEventBus::connect_lazy(&server.url(), "x:").expect("a Redis URL");
    bus.publish(crate::suite::working("t", 2)).await.unwrap();
    server.stop().unwrap();
    let failed = bus.publish(crate::suite::working("t", 3)).await;
    assert!(failed.is_err(), "{failed:?}");
    server.start_again().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut conn = loop {
        match bus.conn().await {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let len: u64 = redis::cmd("XLEN")
        .arg(bus.task_key("t"))
        .query_async(&mut conn)
        .await
        .unwrap_or(0);
    assert!(len <= 1, "nothing was republished from memory: {len}");
}
