//! `a2a-loadtest baseline`: the raw limits of this machine, measured with the same load model,
//! recorder and report as the scenarios, so every published figure comes with its ratio: an
//! HTTP/1.1 GET of a trivial route served in this process (the HTTP stack the gateway also
//! uses), single-row INSERTs into PostgreSQL (one transaction each) and Redis XADDs.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::FutureExt;

use crate::load::{Failure, Load, Operation, Outcome, Plan};
use crate::{Measured, OutputArgs, conclude, measure, units};

#[derive(Debug, Clone, clap::Args)]
pub struct BaselineArgs {
    /// Requests in flight (closed loop) for every row.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// How long each row runs after its warm-up.
    #[arg(long, default_value = "5s", value_parser = units::parse_duration)]
    duration: Duration,
    #[arg(long, default_value = "1s", value_parser = units::parse_duration)]
    warmup: Duration,
    /// Also measure single-row INSERTs into this PostgreSQL database (a table
    /// `a2a_loadtest_baseline` is created and dropped: one baseline at a time per database).
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Also measure XADD on this Redis (a key `a2a-loadtest-baseline:<run>`, deleted after).
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

fn failure(kind: &str, e: impl std::fmt::Display) -> Failure {
    Failure::new(kind, e.to_string())
}

pub async fn run(a: BaselineArgs) -> Result<ExitCode> {
    let plan = Plan {
        load: Load::Closed {
            concurrency: a.concurrency.max(1),
        },
        warmup: a.warmup,
        duration: Some(a.duration),
        requests: None,
    };
    let mut reports = Vec::new();

    // HTTP: a trivial route on the loopback, served by axum/hyper in this process.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()?;
    let url = format!("http://{addr}/");
    let op: Operation = Arc::new(move |_| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let resp = http
                .get(&url)
                .send()
                .await
                .map_err(|e| failure("transport", e))?;
            let status = resp.status();
            let body = resp.bytes().await.map_err(|e| failure("transport", e))?;
            if !status.is_success() || &body[..] != b"ok" {
                return Err(failure("check:answer", format!("HTTP {status}")));
            }
            Ok(Outcome::default())
        }
        .boxed()
    });
    let target = format!("http://{addr}/");
    reports.push(
        measure(
            Measured {
                scenario: "baseline-http",
                target: &target,
                binding: "HTTP/1.1 GET",
            },
            &plan,
            op,
            a.output.quiet,
            &[],
        )
        .await?,
    );
    server.abort();

    if let Some(db) = &a.postgres {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(a.concurrency.max(1) as u32)
            .connect(db)
            .await
            .context("connecting to PostgreSQL")?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS a2a_loadtest_baseline \
             (id bigserial PRIMARY KEY, body text NOT NULL)",
        )
        .execute(&pool)
        .await?;
        let p = pool.clone();
        let op: Operation = Arc::new(move |n| {
            let p = p.clone();
            async move {
                sqlx::query("INSERT INTO a2a_loadtest_baseline (body) VALUES ($1)")
                    .bind(format!("row {n}"))
                    .execute(&p)
                    .await
                    .map_err(|e| failure("postgres", e))?;
                Ok(Outcome::default())
            }
            .boxed()
        });
        let report = measure(
            Measured {
                scenario: "baseline-postgres",
                target: "PostgreSQL",
                binding: "single-row INSERT",
            },
            &plan,
            op,
            a.output.quiet,
            &[],
        )
        .await;
        sqlx::query("DROP TABLE a2a_loadtest_baseline")
            .execute(&pool)
            .await?;
        reports.push(report?);
    }

    if let Some(url) = &a.redis {
        let client = redis::Client::open(url.as_str())?;
        let conn = client.get_multiplexed_async_connection().await?;
        let key = format!("a2a-loadtest-baseline:{}", uuid::Uuid::new_v4().simple());
        let k = key.clone();
        let c = conn.clone();
        let op: Operation = Arc::new(move |n| {
            let (mut c, k) = (c.clone(), k.clone());
            async move {
                let _: String = redis::cmd("XADD")
                    .arg(&k)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(10_000)
                    .arg("*")
                    .arg("n")
                    .arg(n)
                    .query_async(&mut c)
                    .await
                    .map_err(|e| failure("redis", e))?;
                Ok(Outcome::default())
            }
            .boxed()
        });
        let report = measure(
            Measured {
                scenario: "baseline-redis",
                target: "Redis",
                binding: "XADD",
            },
            &plan,
            op,
            a.output.quiet,
            &[],
        )
        .await;
        let mut conn = conn;
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await?;
        reports.push(report?);
    }
    conclude(reports, &a.output, "")
}
