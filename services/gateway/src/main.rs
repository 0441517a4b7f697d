//! The `a2a-gateway` binary: `serve` (default), `migrate`, `keys`, `agents` or `healthcheck`.

use std::process::ExitCode;

use a2a_gateway::{app, config::Config};
use tokio_util::sync::CancellationToken;

/// mimalloc: the request path allocates many small, short-lived objects (tasks, events, JSON),
/// where glibc malloc showed up as a quarter of the CPU profile.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: a2a-gateway [serve|migrate|keys ...|agents ...|healthcheck [--live]]

  serve     serve A2A over HTTP (default); with A2A_MIGRATE=1 it migrates the database first
  migrate   apply database migrations (A2A_DATABASE_URL) and exit
  keys      API keys in the database: keys create <id> (prints the key once) | keys list |
            keys revoke <id>
  agents    upstream agents through the admin API (A2A_ADMIN_LISTEN, bearer A2A_ADMIN_TOKEN):
            agents list | get <name> | add '<json entry>' | replace <name> '<json entry>'
            [--if-match <etag>] | remove <name> [--if-match <etag>]
  healthcheck  exit 0 when this container's gateway is ready (GET /readyz; --live: /healthz)
            on the admin listener (A2A_ADMIN_LISTEN, else A2A_LISTEN), within 2 s: the image's
            probe client for docker-compose healthchecks and HEALTHCHECK (no shell or curl)

Configuration comes from the environment (A2A_LISTEN, A2A_PUBLIC_URL, A2A_DATABASE_URL,
A2A_DATABASE_POOL_SIZE, A2A_DATABASE_ACQUIRE_TIMEOUT_MS, A2A_MIGRATE, A2A_REDIS_URL,
A2A_REDIS_PREFIX, A2A_ALLOW_UNAUTHENTICATED,
A2A_ADMIN_LISTEN, A2A_ADMIN_TOKEN_SHA256, A2A_CONFIG, A2A_LOG_FORMAT, RUST_LOG, OTEL_*); see the
README.";

/// Exit code for configuration errors (sysexits EX_CONFIG).
const EX_CONFIG: u8 = 78;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map(String::as_str).unwrap_or("serve");
    match command {
        "serve" | "migrate" | "keys" => {}
        "healthcheck" => return healthcheck(&args[1..]),
        "agents" => return agents(&args[1..]),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("a2a-gateway: unknown command {other:?}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    // Inside the runtime: the OTLP exporter sends on it.
    let telemetry = {
        let _rt = runtime.enter();
        a2a_process::telemetry::init("a2a-gateway", a2a_process::telemetry::LogTo::Stdout)
    };
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    if command == "migrate" {
        return runtime.block_on(migrate(&config));
    }
    if command == "keys" {
        return match runtime.block_on(a2a_gateway::keys::run(&config, &args[1..])) {
            Ok(out) => {
                println!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("a2a-gateway: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let result = runtime.block_on(run(config));
    // Flush the spans of the last requests before the process exits.
    telemetry.shutdown();
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => {
            // Turns still run (the drain bound passed). Dropping the runtime would drop its
            // tasks in any order: a turn outliving the store's writer tasks would record a
            // failure that is only this shutdown. Left running, they end with the process,
            // like a crash, and their tasks stay as the store has them for the replica that
            // takes them over.
            std::mem::forget(runtime);
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `agents ...`: the admin API's client (`a2a_gateway::admin::cli`), toward the admin listener
/// `A2A_ADMIN_LISTEN` with the bearer token `A2A_ADMIN_TOKEN`.
fn agents(args: &[String]) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let (Some(admin), Some(token)) = (env("A2A_ADMIN_LISTEN"), env("A2A_ADMIN_TOKEN")) else {
        eprintln!("a2a-gateway agents: set A2A_ADMIN_LISTEN and A2A_ADMIN_TOKEN\n\n{USAGE}");
        return ExitCode::from(EX_CONFIG);
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    match runtime.block_on(a2a_gateway::admin::cli(&admin, &token, args)) {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("a2a-gateway agents: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `healthcheck [--live]`: the listener named by the environment as `serve` reads it.
fn healthcheck(args: &[String]) -> ExitCode {
    let path = match args {
        [] => "/readyz",
        [flag] if flag == "--live" => "/healthz",
        other => {
            eprintln!("a2a-gateway healthcheck: unexpected arguments {other:?}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (what, listen) = match (env("A2A_ADMIN_LISTEN"), env("A2A_LISTEN")) {
        (Some(admin), _) => ("A2A_ADMIN_LISTEN", admin),
        (None, Some(public)) => ("A2A_LISTEN", public),
        (None, None) => ("A2A_LISTEN", "127.0.0.1:8080".to_owned()),
    };
    a2a_process::healthcheck::run("a2a-gateway", what, &listen, path)
}

async fn migrate(config: &Config) -> ExitCode {
    if config.database_url.is_none() {
        eprintln!("a2a-gateway: migrate needs A2A_DATABASE_URL");
        return ExitCode::from(EX_CONFIG);
    }
    match app::migrate(config).await {
        Ok(()) => {
            tracing::info!("database migrations applied");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Serves until a signal, then drains; `Ok` with the number of turns still running at the
/// drain bound, `Err` with the exit code of a failure.
async fn run(config: Config) -> Result<usize, ExitCode> {
    if config.database_url.is_some() && config.database.migrate {
        if let Err(e) = app::migrate(&config).await {
            eprintln!("a2a-gateway: {e}");
            return Err(ExitCode::FAILURE);
        }
        tracing::info!("database migrations applied");
    }
    // Refused before anything starts: an open gateway beyond loopback needs the opt-in.
    let open_access = match app::open_access_check(&config, config.listen) {
        Ok(warning) => warning,
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            return Err(ExitCode::from(EX_CONFIG));
        }
    };
    let shutdown = CancellationToken::new();
    let svc = match app::build(&config, shutdown.clone()) {
        Ok(svc) => svc,
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            return Err(ExitCode::from(EX_CONFIG));
        }
    };
    app::start(&config, &svc).await;
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("a2a-gateway: cannot listen on {}: {e}", config.listen);
            return Err(ExitCode::FAILURE);
        }
    };
    let tls = match config
        .tls()
        .map(a2a_gateway::tls::ServerTls::load)
        .transpose()
    {
        Ok(tls) => tls,
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            return Err(ExitCode::from(EX_CONFIG));
        }
    };
    let addr = listener.local_addr().map_or(config.listen, |a| a);
    tracing::info!(
        "a2a-gateway listening on {}://{addr} in {} mode; card at {}/.well-known/agent-card.json",
        if tls.is_some() { "https" } else { "http" },
        config.mode(),
        config.public_url
    );
    if let Some(warning) = open_access {
        tracing::warn!("{warning}");
    }
    if let Some(warning) = app::mutual_tls_warning(&config) {
        tracing::warn!("{warning}");
    }
    if let Some(admin) = config.admin_listen {
        let listener = match tokio::net::TcpListener::bind(admin).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("a2a-gateway: cannot listen on {admin} (A2A_ADMIN_LISTEN): {e}");
                return Err(ExitCode::FAILURE);
            }
        };
        let addr = listener.local_addr().map_or(admin, |a| a);
        tracing::info!("admin listener on http://{addr} (/metrics, /healthz, /readyz)");
        // Not stopped by the shutdown: it serves through the drain (the drain's metrics, and
        // `/readyz` answering 503 `draining`) and ends with the process.
        tokio::spawn(app::serve_admin(
            listener,
            svc.clone(),
            CancellationToken::new(),
        ));
    }
    tokio::spawn(a2a_process::shutdown_on_signal(
        shutdown.clone(),
        "closing streams, finishing requests and running turns",
    ));
    let drain = std::time::Duration::from_secs(config.file.limits.drain_timeout_secs);
    match app::serve_and_drain(listener, tls, svc, shutdown, drain).await {
        Ok(left) => {
            tracing::info!("a2a-gateway stopped");
            Ok(left)
        }
        Err(e) => {
            tracing::error!(error = %e, "server error");
            Err(ExitCode::FAILURE)
        }
    }
}
