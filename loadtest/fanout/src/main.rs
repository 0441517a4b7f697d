//! `a2a-loadtest`: load tests for any A2A 1.0 endpoint (see the README's *Load testing* section).
//!
//! Scenarios (`send`, `send-async`, `stream`, `subscribe`, `push`, `resume`, `mixed`, and
//! `upstream-overhead`: one of them straight to an agent, then through the gateway) run under a
//! closed loop (`--concurrency`) or an open loop at a fixed or ramped arrival rate (`--rate`),
//! check every answer, and end with a text summary, `--json`, `--report report.html` and thresholds.
//! `baseline` measures the raw limits of this machine; `--compare a.json b.json` prints ratios.
//! The benchmark scripts' modes (`raw`, `fanout`, `idle`, `otlp-sink`) are in
//! [`legacy`].

mod baseline;
mod compare;
mod html;
mod legacy;
mod load;
mod otlp_sink;
mod progress;
mod push;
mod report;
mod scenario;
mod schedule;
mod stats;
mod table;
mod target;
mod thresholds;
mod units;

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::load::{Load, Operation, Plan, Recorder};
use crate::report::{Report, RunInfo};
use crate::schedule::RateSpec;
use crate::thresholds::Thresholds;

/// mimalloc, as the gateway: the generator runs on the cores it measures, and glibc malloc and
/// free were a tenth of its profile under `send`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status of a run whose thresholds were missed (1: an error or unexpected errors).
const THRESHOLD_MISSED: u8 = 3;

#[derive(Parser)]
#[command(
    name = "a2a-loadtest",
    version,
    about = "Load tests for A2A 1.0 endpoints"
)]
#[command(arg_required_else_help = true)]
struct Cli {
    /// Prints the second report's figures as ratios of the first's.
    #[arg(long, num_args = 2, value_names = ["A_JSON", "B_JSON"])]
    compare: Option<Vec<String>>,
    /// Runtime worker threads (default: one per core).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// SendMessage, blocking: each answer must be the finished task.
    Send(RunArgs),
    /// SendMessage with returnImmediately, then GetTask every --poll until the task finishes.
    SendAsync(RunArgs),
    /// SendStreamingMessage: time to the first event (`first_event`) and to the last.
    Stream(RunArgs),
    /// A task per operation followed by --subscribers SubscribeToTask streams.
    Subscribe(RunArgs),
    /// SendMessage with a push config to a built-in webhook receiver: event -> delivery.
    Push(RunArgs),
    /// SendStreamingMessage dropped after two events, resumed with Last-Event-ID: no gap.
    Resume(RunArgs),
    /// A weighted mix of the scenarios (`--mix send=70,stream=20,send-async=10`), each also
    /// reported with its own latency.
    Mixed(RunArgs),
    /// The same scenario straight to an agent (--agent-url), then through the gateway (--url)
    /// with the same load: both reports, and the gateway's cost as their difference.
    UpstreamOverhead(OverheadArgs),
    /// The raw limits of this machine: HTTP (a trivial route), PostgreSQL, Redis.
    Baseline(baseline::BaselineArgs),
    /// JSON reports as a Markdown table, with throughput ratios to a reference run (--ref).
    Table(table::TableArgs),
    /// [legacy] Redis XADD -> XREAD latency (loadtest/bench-fanout.sh).
    #[command(hide = true)]
    Raw {
        redis_url: String,
        rate: u64,
        secs: u64,
    },
    /// [legacy] Cross-replica fan-out latency (loadtest/bench-fanout.sh).
    #[command(hide = true)]
    Fanout {
        a: String,
        b: String,
        rate: u64,
        secs: u64,
    },
    /// [legacy] Idle subscribers' memory and database cost (loadtest/bench-fanout.sh).
    #[command(hide = true)]
    Idle {
        a: String,
        b: String,
        n: usize,
        b_pid: u32,
        db_url: Option<String>,
    },
    /// An OTLP receiver that only counts spans (loadtest/bench.sh).
    #[command(hide = true)]
    OtlpSink { addr: String, countfile: String },
}

#[derive(Args, Debug, Clone)]
struct LoadArgs {
    /// Closed loop: this many requests in flight, each sent when the previous one is answered.
    #[arg(long, conflicts_with = "rate")]
    concurrency: Option<usize>,
    /// Open loop: requests per second (`2000`), a ramp `FROM:TO:OVER` (`1000:5000:30s`) or
    /// steps `R1,R2,...@EACH` (`1000,2000,4000@10s`), then the last rate; latency counts from
    /// each request's intended send time.
    #[arg(long, value_parser = RateSpec::parse)]
    rate: Option<RateSpec>,
    /// Open loop: requests outstanding at most; later ones wait (and their wait counts).
    #[arg(long, default_value_t = 10_000)]
    max_in_flight: usize,
    /// How long to send after the warm-up (default 10s unless --requests is given).
    #[arg(long, value_parser = units::parse_duration)]
    duration: Option<Duration>,
    /// Stop after this many measured requests.
    #[arg(long)]
    requests: Option<u64>,
    /// Sent and checked, but left out of the figures.
    #[arg(long, default_value = "1s", value_parser = units::parse_duration)]
    warmup: Duration,
}

impl LoadArgs {
    fn plan(&self) -> Plan {
        let load = match &self.rate {
            Some(rate) => Load::Open {
                rate: rate.clone(),
                max_in_flight: self.max_in_flight,
            },
            None => Load::Closed {
                concurrency: self.concurrency.unwrap_or(1),
            },
        };
        let duration = match (self.duration, self.requests) {
            (None, None) => Some(Duration::from_secs(10)),
            (d, _) => d,
        };
        Plan {
            load,
            warmup: self.warmup,
            duration,
            requests: self.requests,
        }
    }
}

#[derive(Args, Debug, Clone)]
struct OutputArgs {
    /// Print the JSON report instead of the text summary, or write it to PATH.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "-")]
    json: Option<String>,
    /// Write an HTML report (inline SVG charts, no network) to PATH.
    #[arg(long, value_name = "PATH")]
    report: Option<String>,
    /// No live progress line (it is shown only when stderr is a terminal anyway).
    #[arg(long)]
    quiet: bool,
    /// Fail (exit 3) when the p50 latency is above this.
    #[arg(long, value_parser = units::parse_duration)]
    max_p50: Option<Duration>,
    /// Fail (exit 3) when the p99 latency is above this.
    #[arg(long, value_parser = units::parse_duration)]
    max_p99: Option<Duration>,
    /// Fail (exit 3) when the p99.9 latency is above this.
    #[arg(long, value_parser = units::parse_duration)]
    max_p999: Option<Duration>,
    /// Fail (exit 3) when the throughput (successes per second) is below this.
    #[arg(long)]
    min_rps: Option<f64>,
    /// Fail (exit 3) when errors / requests is above this (`0.1%` or `0.001`).
    #[arg(long, value_parser = units::parse_ratio)]
    max_error_rate: Option<f64>,
    /// An error kind that does not fail the run (e.g. `QUOTA_EXCEEDED`; repeatable).
    #[arg(long, value_name = "KIND")]
    expect_error: Vec<String>,
}

impl OutputArgs {
    fn thresholds(&self) -> Thresholds {
        Thresholds {
            max_p50: self.max_p50,
            max_p99: self.max_p99,
            max_p999: self.max_p999,
            min_rps: self.min_rps,
            max_error_rate: self.max_error_rate,
        }
    }
}

#[derive(Args, Debug, Clone)]
struct RunArgs {
    #[command(flatten)]
    target: target::TargetArgs,
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// The message text.
    #[arg(long, default_value = "hello")]
    text: String,
    /// A JSON data part after the text, e.g. the `scenario` agent's script
    /// `{"chunks": 20, "delayMs": 10}`.
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    data: Option<serde_json::Value>,
    /// A fresh `Idempotency-Key` on every send that creates a task (`lt-<run>-<n>`), as a
    /// client that retries safely sends it (the gateway then claims each key).
    #[arg(long)]
    idempotency_key: bool,
    /// The state every finished task must reach.
    #[arg(long, default_value = "completed", value_parser = parse_state)]
    expect_state: a2a_types::v1::TaskState,
    /// send-async: how often to poll GetTask.
    #[arg(long, default_value = "5ms", value_parser = units::parse_duration)]
    poll: Duration,
    /// subscribe: subscribers per task.
    #[arg(long, default_value_t = 2)]
    subscribers: usize,
    /// subscribe: the subscribers' target, another replica of the same deployment (its card
    /// URL or base URL; the other target options apply): the fan-out across replicas.
    #[arg(long, value_name = "URL")]
    subscribe_url: Option<String>,
    /// mixed: scenarios and weights, e.g. `send=70,stream=20,send-async=10`.
    #[arg(long, default_value = "send=1")]
    mix: String,
    /// push: where the built-in webhook receiver listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    webhook_listen: String,
    /// push: the URL the target delivers to (default `http://<--webhook-listen address>/hook`;
    /// the target must allow it: the gateway needs `A2A_PUSH_ALLOWED_HOSTS` for loopback).
    #[arg(long)]
    webhook_url: Option<String>,
    /// push: how long to wait for a task's terminal delivery.
    #[arg(long, default_value = "30s", value_parser = units::parse_duration)]
    push_timeout: Duration,
}

#[derive(Args, Debug, Clone)]
struct OverheadArgs {
    #[command(flatten)]
    run: RunArgs,
    /// The agent itself (its card URL or base URL), measured first. --tenant is not sent to it
    /// (the tenant names the agent at the gateway); the auth and TLS options are.
    #[arg(long)]
    agent_url: String,
    /// The binding toward the agent (default: its card's preferred interface).
    #[arg(long, value_enum)]
    agent_binding: Option<target::BindingArg>,
    /// The scenario run both ways.
    #[arg(long, value_enum, default_value = "send")]
    scenario: scenario::Kind,
}

fn parse_json(s: &str) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(s)?)
}

fn parse_state(s: &str) -> Result<a2a_types::v1::TaskState> {
    let name = format!("TASK_STATE_{}", s.to_ascii_uppercase().replace('-', "_"));
    a2a_types::v1::TaskState::from_str_name(&name)
        .with_context(|| format!("{s:?}: completed, failed, canceled, rejected, input-required..."))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("a2a-loadtest: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    if let Some(files) = &cli.compare {
        let (a, b) = (compare::load(&files[0])?, compare::load(&files[1])?);
        for (a, b) in a.iter().zip(&b) {
            print!("{}", compare::compare(a, b));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let command = cli.command.context("a command or --compare; see --help")?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.threads {
        runtime.worker_threads(n.max(1));
    }
    runtime.enable_all().build()?.block_on(async move {
        match command {
            Command::Send(a) => scenario_run(scenario::Kind::Send, a).await,
            Command::SendAsync(a) => scenario_run(scenario::Kind::SendAsync, a).await,
            Command::Stream(a) => scenario_run(scenario::Kind::Stream, a).await,
            Command::Subscribe(a) => scenario_run(scenario::Kind::Subscribe, a).await,
            Command::Push(a) => scenario_run(scenario::Kind::Push, a).await,
            Command::Resume(a) => scenario_run(scenario::Kind::Resume, a).await,
            Command::Mixed(a) => scenario_run(scenario::Kind::Mixed, a).await,
            Command::UpstreamOverhead(o) => overhead_run(o).await,
            Command::Baseline(a) => baseline::run(a).await,
            Command::Table(a) => table::run(&a).map(|()| ExitCode::SUCCESS),
            Command::Raw {
                redis_url,
                rate,
                secs,
            } => legacy::raw(&redis_url, rate, secs)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Fanout { a, b, rate, secs } => legacy::fanout(&a, &b, rate, secs)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Idle {
                a,
                b,
                n,
                b_pid,
                db_url,
            } => legacy::idle(&a, &b, n, b_pid, db_url.as_deref())
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::OtlpSink { addr, countfile } => otlp_sink::run(&addr, &countfile)
                .await
                .map(|()| ExitCode::SUCCESS),
        }
    })
}

/// What a measured run needs to become a report.
struct Measured<'a> {
    pub scenario: &'a str,
    pub target: &'a str,
    pub binding: &'a str,
}

/// Runs `op` under `plan` with the live progress line, and builds the report.
async fn measure(
    m: Measured<'_>,
    plan: &Plan,
    op: Operation,
    quiet: bool,
    expected_errors: &[String],
) -> Result<Report> {
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let cpu_before = legacy::cpu_time()?;
    let rec = Arc::new(Recorder::new(plan.warmup));
    let progress = (!quiet).then(|| progress::spawn(rec.clone()));
    load::run(plan, rec.clone(), op).await;
    if let Some(p) = progress {
        p.abort();
        progress::clear();
    }
    let wall = rec.t0.elapsed().as_secs_f64();
    let cores = (legacy::cpu_time()? - cpu_before).as_secs_f64() / wall;
    let (stats, first_errors, window) = rec.finish();
    Ok(Report::build(
        RunInfo {
            scenario: m.scenario,
            target: m.target,
            binding: m.binding,
            load: plan.load.to_string(),
            started_at,
            expected_errors,
            generator_cores: cores,
        },
        &stats,
        first_errors,
        window,
    ))
}

/// Prints or writes the reports (and, in the text summary, `footer` after them), checks the
/// thresholds; the exit status of the run.
fn conclude(mut reports: Vec<Report>, out: &OutputArgs, footer: &str) -> Result<ExitCode> {
    let thresholds = out.thresholds();
    for r in &mut reports {
        r.thresholds = thresholds.evaluate(r);
    }
    let json = || -> Result<String> {
        Ok(if reports.len() == 1 {
            serde_json::to_string_pretty(&reports[0])?
        } else {
            serde_json::to_string_pretty(&reports)?
        })
    };
    match out.json.as_deref() {
        Some("-") => println!("{}", json()?),
        other => {
            for r in &reports {
                print!("{}", r.summary());
            }
            print!("{footer}");
            if let Some(path) = other {
                std::fs::write(path, json()? + "\n").with_context(|| format!("writing {path}"))?;
            }
        }
    }
    if let Some(path) = &out.report {
        std::fs::write(path, html::render(&reports)).with_context(|| format!("writing {path}"))?;
    }
    std::io::stdout().flush()?;
    let unexpected: u64 = reports.iter().map(|r| r.unexpected_errors).sum();
    if unexpected > 0 {
        eprintln!("a2a-loadtest: {unexpected} unexpected errors");
        return Ok(ExitCode::FAILURE);
    }
    if reports.iter().any(|r| r.ok == 0) {
        eprintln!("a2a-loadtest: no request succeeded in the measured window");
        return Ok(ExitCode::FAILURE);
    }
    let missed: Vec<String> = reports
        .iter()
        .flat_map(|r| &r.thresholds)
        .filter(|v| !v.passed)
        .map(|v| format!("{} {} (actual {})", v.name, v.limit, v.actual))
        .collect();
    if !missed.is_empty() {
        eprintln!("a2a-loadtest: thresholds missed: {}", missed.join(", "));
        return Ok(ExitCode::from(THRESHOLD_MISSED));
    }
    Ok(ExitCode::SUCCESS)
}

async fn scenario_run(kind: scenario::Kind, a: RunArgs) -> Result<ExitCode> {
    let report = scenario_report(kind, &a).await?;
    conclude(vec![report], &a.output, "")
}

async fn overhead_run(o: OverheadArgs) -> Result<ExitCode> {
    if o.scenario == scenario::Kind::Mixed {
        bail!("upstream-overhead runs one scenario; --scenario mixed is not one");
    }
    let mut direct = o.run.clone();
    direct.target.url = o.agent_url.clone();
    direct.target.binding = o.agent_binding;
    direct.target.tenant = None;
    let a = scenario_report(o.scenario, &direct).await?;
    let b = scenario_report(o.scenario, &o.run).await?;
    let footer = format!(
        "\nupstream overhead (A: straight to the agent, B: through the gateway)\n{}",
        compare::table(&format!("{} A vs B", o.scenario.name()), &a, &b)
    );
    conclude(vec![a, b], &o.run.output, &footer)
}

async fn scenario_report(kind: scenario::Kind, a: &RunArgs) -> Result<Report> {
    if a.load.concurrency == Some(0) {
        bail!("--concurrency must be at least 1");
    }
    let clients = target::clients(&a.target).await?;
    let followers = match &a.subscribe_url {
        Some(url) => {
            let mut t = a.target.clone();
            t.url = url.clone();
            target::clients(&t).await?
        }
        None => Vec::new(),
    };
    let binding = clients[0].binding().kind().to_string();
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let mix = scenario::parse_mix(&a.mix).context("--mix")?;
    let pushes = kind == scenario::Kind::Push
        || (kind == scenario::Kind::Mixed && mix.iter().any(|(k, _)| *k == scenario::Kind::Push));
    let webhook = if pushes {
        let hook = push::Webhook::default();
        let addr = hook.serve(&a.webhook_listen).await?;
        let url = a
            .webhook_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}/hook"));
        Some((hook, url))
    } else {
        None
    };
    let op = scenario::operation(
        kind,
        clients,
        followers,
        scenario::Options {
            text: a.text.clone(),
            data: a.data.clone(),
            expect: a.expect_state,
            poll: a.poll,
            subscribers: a.subscribers,
            run_id,
            idempotency_key: a.idempotency_key,
            webhook,
            push_timeout: a.push_timeout,
            mix,
        },
    );
    measure(
        Measured {
            scenario: kind.name(),
            target: &a.target.url,
            binding: &binding,
        },
        &a.load.plan(),
        op,
        a.output.quiet,
        &a.output.expect_error,
    )
    .await
}
