//! `a2a-worker dead-letters list|replay`: inspect deliveries that gave up, and offer them again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use a2a_delivery::payload;
use a2a_store::pg::{DeadLetter, PgDeliveryStore};
use a2a_types::Dialect;
use bytes::Bytes;

use crate::cli::{DeadLettersCommand, Replay};
use crate::config::WorkerConfig;
use crate::deliver::{Deliverer, Delivery, LogSink, Outcome};

/// Runs the subcommand; returns what to print.
pub async fn run(config: &WorkerConfig, command: &DeadLettersCommand) -> Result<String, String> {
    let store = crate::store(config)?;
    match command {
        DeadLettersCommand::List { all, limit } => list(&store, *all, *limit).await,
        DeadLettersCommand::Replay(which) => replay(config, store, which).await,
    }
}

async fn list(store: &PgDeliveryStore, all: bool, limit: i64) -> Result<String, String> {
    let letters = store
        .dead_letters(all, limit)
        .await
        .map_err(|e| e.to_string())?;
    let mut out =
        String::from("id\tcreated\ttask\tseq\tconfig\turl\tattempts\tlast_error\treplayed");
    for d in &letters {
        out.push('\n');
        out.push_str(&line(d));
    }
    Ok(out)
}

/// One row; the URL without its query and user info (they may hold secrets).
fn line(d: &DeadLetter) -> String {
    let url = url::Url::parse(&d.config.url)
        .map(|u| {
            format!(
                "{}://{}{}",
                u.scheme(),
                u.host_str().unwrap_or(""),
                u.path()
            )
        })
        .unwrap_or_else(|_| "?".into());
    let time = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default()
    };
    let replayed = match (&d.replayed_ms, &d.replay_outcome) {
        (Some(ms), Some(outcome)) => format!("{} {outcome}", time(*ms)),
        _ => "-".into(),
    };
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        d.id,
        time(d.created_ms),
        d.task_id,
        d.seq,
        d.config.id,
        url,
        d.attempts,
        d.last_error.replace(['\t', '\n'], " "),
        replayed
    )
}

async fn replay(
    config: &WorkerConfig,
    store: PgDeliveryStore,
    which: &Replay,
) -> Result<String, String> {
    if config.keys.is_empty() {
        return Err(format!(
            "{} is required: replayed deliveries are signed",
            a2a_push::SIGNING_KEYS_VAR
        ));
    }
    let letters: Vec<DeadLetter> = if which.all {
        store
            .dead_letters(false, i64::MAX)
            .await
            .map_err(|e| e.to_string())?
    } else {
        let mut found = Vec::new();
        for &id in &which.ids {
            let letter = store
                .dead_letter(id)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("no dead letter {id}"))?;
            found.push(letter);
        }
        found
    };
    let (log, log_task) =
        LogSink::spawn(Arc::new(store.clone()), format!("{} (replay)", config.name));
    let deliverer = Deliverer {
        store: Arc::new(store.clone()),
        webhooks: crate::webhooks(config)?,
        retry: config.retry,
        log,
        gates: Arc::new(a2a_delivery::gates::Gates::new(config.limits)),
        dead_letters_per_owner: config.dead_letters_per_owner,
    };
    let mut out = Vec::new();
    for d in &letters {
        let body = match replay_body(&store, d).await {
            Ok(body) => body,
            Err(e) => {
                out.push(format!("{}\tnot replayed: {e}", d.id));
                continue;
            }
        };
        // A dead letter keeps its config without secrets: they come from the live config.
        let target = if a2a_store::pg::is_redacted(&d.config) {
            match store.push_config(&d.task_id, &d.config.id).await {
                Ok(Some(live)) => live,
                Ok(None) => {
                    out.push(format!(
                        "{}\tnot replayed: push config {} of task {} is gone, and a dead letter \
                         does not keep its credentials",
                        d.id, d.config.id, d.task_id
                    ));
                    continue;
                }
                Err(e) => return Err(e.to_string()),
            }
        } else {
            d.config.clone()
        };
        let outcome = deliverer
            .deliver(&Delivery {
                task_id: &d.task_id,
                owner: "",
                seq: d.seq,
                event: &d.event,
                body: &body,
                config: &target,
                dialect: d.dialect,
                published_ms: None,
                trace: None,
            })
            .await;
        let text = match &outcome {
            Outcome::Delivered { attempts } => format!("delivered after {attempts} attempt(s)"),
            Outcome::DeadLettered { error, .. } => {
                format!("failed again (new dead letter): {error}")
            }
        };
        let mark = match outcome {
            Outcome::Delivered { .. } => "delivered",
            Outcome::DeadLettered { .. } => "failed",
        };
        store
            .mark_replayed(d.id, mark)
            .await
            .map_err(|e| e.to_string())?;
        out.push(format!("{}\t{text}", d.id));
    }
    drop(deliverer);
    let _ = tokio::time::timeout(Duration::from_secs(5), log_task).await;
    Ok(out.join("\n"))
}

/// What the delivery would have sent: the event to a 1.0 webhook; to a 0.3 one the task as it
/// was after the event, folded from the task's event log (gone with the task: then the replay
/// is not replayed rather than send a 0.3 webhook a payload it cannot read).
async fn replay_body(store: &PgDeliveryStore, d: &DeadLetter) -> Result<Bytes, String> {
    match d.dialect {
        Dialect::V1 => payload::event_body(&d.event),
        Dialect::V03 => {
            let log = store
                .events(&d.task_id, 0, d.seq)
                .await
                .map_err(|e| e.to_string())?;
            let task = payload::snapshots(&log, &HashSet::from([d.seq]))
                .remove(&d.seq)
                .ok_or_else(|| {
                    format!(
                        "dead letter {}: the event log of task {} no longer holds event {} \
                         (a 0.3 webhook gets the task as it was then)",
                        d.id, d.task_id, d.seq
                    )
                })?;
            payload::task_body_v03(&task)
        }
    }
}
