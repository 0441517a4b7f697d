//! The Redis bus on a real Redis Cluster (three primaries, three replicas, started by the
//! tests): the conformance suite, followers on another bus across every key group, and a
//! primary killed under load.

use std::collections::{BTreeSet, HashMap};

use super::*;

/// The bus plus the test's slice of the cluster, kept alive with it.
struct ClusterBus(RedisEventBus, #[allow(dead_code)] a2a_testing::TestCluster);

#[async_trait]
impl EventBus for ClusterBus {
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

fn on(cluster: &a2a_testing::TestCluster) -> RedisEventBus {
    let target = RedisTarget::cluster(&cluster.nodes()).expect("seed nodes");
    RedisEventBus::new(target, cluster.prefix()).expect("a bus")
}

async fn bus() -> ClusterBus {
    let cluster = a2a_testing::TestCluster::create().await;
    ClusterBus(on(&cluster), cluster)
}

crate::bus_conformance_suite!(bus().await);

/// Task ids covering every key group (so every reader, and every primary, takes part).
fn tasks_in_every_group() -> Vec<String> {
    let mut by_group: HashMap<usize, String> = HashMap::new();
    for i in 0.. {
        let task = format!("task-{i}");
        by_group.entry(keys::group_of(&task)).or_insert(task);
        if by_group.len() == keys::GROUPS {
            break;
        }
    }
    by_group.into_values().collect()
}

/// What one subscriber received: sequence numbers, and whether it was told to re-read the log.
async fn collect(
    mut sub: BoxStream<'static, BusItem>,
    until: u64,
    within: Duration,
) -> (Vec<u64>, bool) {
    let (mut seqs, mut lagged) = (Vec::new(), false);
    let deadline = tokio::time::Instant::now() + within;
    while seqs.last().is_none_or(|&s| s < until) {
        match tokio::time::timeout_at(deadline, sub.next()).await {
            Ok(Some(BusItem::Event(ev))) => seqs.push(ev.seq),
            Ok(Some(BusItem::Lagged)) => lagged = true,
            Ok(None) | Err(_) => break,
        }
    }
    (seqs, lagged)
}

/// Two buses standing for two replicas: every event published on one reaches the followers on
/// the other, in order, for tasks of every key group (each group's XREAD goes to the primary
/// of its slot), and the worker partitions get every event.
#[tokio::test]
async fn followers_on_another_bus_get_every_group_in_order() {
    let cluster = a2a_testing::TestCluster::create().await;
    let (here, there) = (on(&cluster), on(&cluster));
    let tasks = tasks_in_every_group();
    let mut subs = Vec::new();
    for task in &tasks {
        subs.push(there.subscribe(task).await.expect("subscribed"));
    }
    for task in &tasks {
        // From sequence number 2: a task's creating commit is not in its stream.
        here.publish_all(vec![
            crate::suite::working(task, 2),
            crate::suite::working(task, 3),
        ])
        .await
        .expect("published");
        here.publish(crate::suite::working(task, 4))
            .await
            .expect("published");
    }
    for (task, sub) in tasks.iter().zip(subs) {
        let (seqs, lagged) = collect(sub, 4, Duration::from_secs(10)).await;
        assert_eq!(seqs, [2, 3, 4], "{task}");
        assert!(!lagged, "{task}");
    }
    let mut conn = here.conn().await.unwrap();
    let mut entries = 0;
    for p in 0..here.partitions {
        let len: usize = redis::cmd("XLEN")
            .arg(events_key(cluster.prefix(), p))
            .query_async(&mut conn)
            .await
            .unwrap();
        entries += len;
    }
    assert_eq!(
        entries,
        tasks.len() * 3,
        "every event in a worker partition"
    );
    // A task's events are all in its own partition, in order.
    for task in &tasks {
        let key = events_key(cluster.prefix(), keys::partition_of(task, here.partitions));
        let entries = super::tests::xrange(&mut conn, &key).await;
        let seqs: Vec<u64> = entries
            .ids
            .iter()
            .filter_map(decode)
            .filter(|ev| &ev.task_id == task)
            .map(|ev| ev.seq)
            .collect();
        assert_eq!(seqs, [2, 3, 4], "{task} in partition {key}");
    }
}

/// A primary is killed (SIGKILL, by its PID) while events are published steadily on one bus
/// and followed on the other; its replica is promoted. Nothing acknowledged is lost: every
/// event whose publish returned Ok reaches the follower, or the follower is told to re-read
/// the event log (which is the record: a write the primary took but never passed to its
/// replica is lost from Redis, and the follower finds it there). Publishing works again after
/// the promotion, and the followers get those events.
#[tokio::test]
async fn a_primary_killed_under_load_loses_nothing_acknowledged() {
    let cluster = Arc::new(
        tokio::task::spawn_blocking(a2a_testing::RedisCluster::start)
            .await
            .unwrap()
            .expect("a private cluster"),
    );
    let slice = a2a_testing::TestCluster::on(&cluster);
    let (here, there) = (on(&slice), on(&slice));
    let tasks = tasks_in_every_group();
    let victim_key = task_key(slice.prefix(), &tasks[0]);
    let victim = cluster.primary_of(&victim_key).unwrap();
    // Followers read as the events come (a follower that stops reading is told it lagged).
    let rounds: u64 = 250;
    let mut followers = Vec::new();
    for task in &tasks {
        let sub = there.subscribe(task).await.expect("subscribed");
        followers.push(tokio::spawn(collect(sub, rounds, Duration::from_secs(60))));
    }
    // Small load: every task gets an event every 20 ms, from its own publisher.
    let publishers: Vec<_> = tasks
        .iter()
        .map(|task| {
            let (bus, task) = (here.clone(), task.clone());
            tokio::spawn(async move {
                let mut acked = BTreeSet::new();
                // From 2: a task's creating commit (1) is not in its stream.
                for seq in 2..=rounds {
                    if bus.publish(crate::suite::working(&task, seq)).await.is_ok() {
                        acked.insert(seq);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                acked
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let cluster2 = cluster.clone();
    let promoted = tokio::task::spawn_blocking(move || {
        cluster2.kill(victim)?;
        cluster2.wait_promoted(&victim_key, victim, Duration::from_secs(20))
    });
    let promoted = promoted.await.unwrap().expect("a replica is promoted");
    assert_ne!(promoted, victim);
    let mut acked = Vec::new();
    for p in publishers {
        acked.push(p.await.unwrap());
    }
    // The last round was published after the promotion (it took 250 × 20 ms = 5 s and more).
    for ((task, follower), acked) in tasks.iter().zip(followers).zip(acked) {
        assert!(
            acked.contains(&rounds),
            "{task}: publishing works after the promotion"
        );
        let (seqs, lagged) = follower.await.unwrap();
        let got: BTreeSet<u64> = seqs.iter().copied().collect();
        let missing: Vec<u64> = acked.difference(&got).copied().collect();
        assert!(
            missing.is_empty() || lagged,
            "{task}: acknowledged events {missing:?} neither delivered nor signalled as a lag"
        );
        // A publish that failed on its way back (the primary took it, then died or answered
        // late) is published again, and the republisher may append a task's kept event after
        // later ones: an event can come twice or late, which a follower skips (it keeps the
        // sequence numbers above the highest it has). What it keeps is what was acknowledged.
        let mut kept = Vec::new();
        for &seq in &seqs {
            if kept.last().is_none_or(|&last| seq > last) {
                kept.push(seq);
            }
        }
        let kept_set: BTreeSet<u64> = kept.iter().copied().collect();
        let gaps: Vec<u64> = acked.difference(&kept_set).copied().collect();
        assert!(
            gaps.is_empty() || lagged,
            "{task}: acknowledged events {gaps:?} skipped without a lag"
        );
        assert_eq!(
            kept.last(),
            Some(&rounds),
            "{task}: the follower reaches the end"
        );
    }
}

/// A commit with nothing for one of its two slots (an append of a task without push configs:
/// nothing for the worker; a create with push configs: nothing for the task's stream; a create
/// without: nothing at all) is published without sending an empty pipeline, which a cluster
/// refuses ("empty command").
#[tokio::test]
async fn commits_with_nothing_for_a_slot_publish() {
    let cluster = a2a_testing::TestCluster::create().await;
    let (here, there) = (on(&cluster), on(&cluster));
    let quiet = |seq| BusEvent {
        push: false,
        ..crate::suite::working("quiet", seq)
    };
    let sub = there.subscribe("quiet").await.expect("subscribed");
    here.publish(quiet(1))
        .await
        .expect("a create without push configs");
    here.publish(crate::suite::working("pushed", 1))
        .await
        .expect("a create with push configs");
    here.publish(quiet(2))
        .await
        .expect("an append without push configs");
    let (seqs, lagged) = collect(sub, 2, Duration::from_secs(10)).await;
    assert_eq!((seqs, lagged), (vec![2], false));
}
