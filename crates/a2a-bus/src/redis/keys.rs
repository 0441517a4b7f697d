//! Every Redis key the gateway, the push worker and the shared rate limiter use, and which slot
//! of a Redis Cluster each lands on.
//!
//! A Redis Cluster runs a command that names several keys (an `XREAD` over several streams, a
//! pipeline sent to one node, a Lua script) only when they hash to one slot, and it hashes only
//! the part of a key between its first `{` and the next `}` (the hash tag) when there is one. So
//! what is read or written together carries one tag:
//!
//! | key | tag | read/written with |
//! |---|---|---|
//! | `{<prefix>t<g>}:task:<task id>`, one stream per task | `<prefix>t<g>`, `g` = [`group_of`] the task id (0..[`GROUPS`]) | the other tasks of group `g` and the wake-up streams of `g`, in one reader's `XREAD`; its own `EXPIRE` in the publish pipeline |
//! | `{<prefix>t<g>}:wake:<process uuid>`, one per reader of each gateway process | `<prefix>t<g>` | the task streams of group `g` (same `XREAD`) |
//! | `{<prefix>events:<p>}`, partition `p` of the push worker's input | the whole name | alone (`XREADGROUP`, `XACK`, `XAUTOCLAIM` per partition) |
//! | `<prefix>control` | none (used alone) | alone |
//! | `<prefix>ratelimit:<scope>:<key>` (the shared rate limiter's GCRA state) | none (used alone, one key per script call) | alone |
//!
//! The publish of a commit writes a task stream and a worker partition, which are on different
//! slots: on a cluster that is one pipeline per slot, sent at once (see `append`). `<g>` and
//! `<p>` come from a fixed hash of the task id (CRC16, as Redis Cluster's own), the same in
//! every process and every build, so every replica and worker agree on a task's keys.
//!
//! The prefix (`A2A_REDIS_PREFIX`) must hold no `{` or `}` ([`check_prefix`]): a brace in it
//! would become the tag of every key.

/// Groups of task streams: each is one slot of a cluster, read by one reader per process.
pub const GROUPS: usize = 32;

/// Partitions of the push worker's input when `A2A_REDIS_PARTITIONS` is unset.
pub const DEFAULT_PARTITIONS: usize = 8;
/// At most this many partitions (each is a stream, a consumer group and, on a cluster, a
/// reader in every worker).
pub const MAX_PARTITIONS: usize = 256;

/// `A2A_REDIS_PARTITIONS`: 1 to [`MAX_PARTITIONS`], default [`DEFAULT_PARTITIONS`]. Gateways
/// and workers must agree: a task's events go to the partition its id hashes to among them.
pub fn partitions(value: Option<&str>) -> Result<usize, String> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_PARTITIONS);
    };
    match v.parse::<usize>() {
        Ok(n) if (1..=MAX_PARTITIONS).contains(&n) => Ok(n),
        _ => Err(format!(
            "A2A_REDIS_PARTITIONS={v:?} must be a whole number from 1 to {MAX_PARTITIONS} \
             (the same on every gateway and worker)"
        )),
    }
}

/// Refuses a key prefix that would change which part of a key Redis Cluster hashes.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.contains(['{', '}']) {
        return Err(format!(
            "A2A_REDIS_PREFIX {prefix:?} holds a brace: Redis Cluster hashes the first {{...}} \
             of a key, which the gateway's keys use to keep what is read together on one slot"
        ));
    }
    Ok(())
}

/// A fixed hash of a task id: CRC16 (XMODEM), what Redis Cluster hashes keys with.
fn hash(task_id: &str) -> usize {
    usize::from(crc16::State::<crc16::XMODEM>::calculate(task_id.as_bytes()))
}

/// The group of a task's stream (and the reader that reads it).
pub fn group_of(task_id: &str) -> usize {
    hash(task_id) % GROUPS
}

/// The worker partition of a task's events, among `partitions`.
pub fn partition_of(task_id: &str, partitions: usize) -> usize {
    // Not the group's bits: with 32 groups and 8 partitions the two would line up.
    (hash(task_id) / GROUPS) % partitions.max(1)
}

/// The stream of one task's events.
pub fn task_key(prefix: &str, task_id: &str) -> String {
    format!("{{{prefix}t{}}}:task:{task_id}", group_of(task_id))
}

/// The wake-up stream of reader `group` of process `process`.
pub fn wake_key(prefix: &str, group: usize, process: &str) -> String {
    format!("{{{prefix}t{group}}}:wake:{process}")
}

/// Partition `partition` of the push worker's input: the events of the tasks whose
/// [`partition_of`] it is, in order.
pub fn events_key(prefix: &str, partition: usize) -> String {
    format!("{{{prefix}events:{partition}}}")
}

/// The control stream (cancels for turns running on another replica).
pub fn control_key(prefix: &str) -> String {
    format!("{prefix}control")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot Redis Cluster gives a key: the CRC16 of its tag, or of the whole key.
    fn slot(key: &str) -> u16 {
        let tagged = key
            .find('{')
            .and_then(|open| {
                let rest = &key[open + 1..];
                rest.find('}')
                    .filter(|&close| close > 0)
                    .map(|c| &rest[..c])
            })
            .unwrap_or(key);
        crc16::State::<crc16::XMODEM>::calculate(tagged.as_bytes()) % 16384
    }

    #[test]
    fn a_readers_keys_share_one_slot() {
        for task in ["a", "task-1", "0199b5b2-7c1e-7d7f-8b1a-5f4c1f2e3d4c"] {
            let group = group_of(task);
            assert_eq!(
                slot(&task_key("a2a:", task)),
                slot(&wake_key("a2a:", group, "p1"))
            );
        }
        // Redis's own test vector: CRC16 of "123456789" is 0x31C3.
        assert_eq!(slot("123456789"), 0x31C3);
    }

    #[test]
    fn groups_and_partitions_spread() {
        let mut groups = [0usize; GROUPS];
        let mut partitions = [0usize; 8];
        for i in 0..8000 {
            let task = format!("task-{i}");
            groups[group_of(&task)] += 1;
            partitions[partition_of(&task, 8)] += 1;
        }
        assert!(groups.iter().all(|&n| n > 150), "{groups:?}");
        assert!(partitions.iter().all(|&n| n > 800), "{partitions:?}");
    }

    #[test]
    fn braces_in_the_prefix_are_refused() {
        assert!(check_prefix("a2a:").is_ok());
        assert!(check_prefix("a{b}:").is_err());
    }
}
