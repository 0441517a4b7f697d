//! The `a2a-gateway` binary: `serve` (default), `migrate`, `keys`, `agents` or `healthcheck`.

use std::process::ExitCode;

use a2a_gateway::cli::{AgentsCommand, Cli, Command};
use a2a_gateway::{app, config::Config};
use tokio_util::sync::CancellationToken;

/// mimalloc: the request path allocates many small, short-lived objects (tasks, events, JSON),
/// where glibc malloc showed up as a quarter of the CPU profile.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code for configuration errors (sysexits EX_CONFIG).
const EX_CONFIG: u8 = 78;

fn main() -> ExitCode {
    let cli: Cli = match a2a_process::cli::parse(std::env::args_os().collect(), &["keys", "agents"])
    {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let command = cli.chosen();
    match &command {
        Command::Serve | Command::Migrate | Command::Keys(_) => {}
        Command::Healthcheck(probe) => return healthcheck(probe.path()),
        Command::Agents(agents) => return agents_command(agents),
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
    if command == Command::Migrate {
        return runtime.block_on(migrate(&config));
    }
    if let Command::Keys(keys) = &command {
        return match runtime.block_on(a2a_gateway::keys::run(&config, keys)) {
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
fn agents_command(command: &AgentsCommand) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let (Some(admin), Some(token)) = (env("A2A_ADMIN_LISTEN"), env("A2A_ADMIN_TOKEN")) else {
        eprintln!("a2a-gateway agents: set A2A_ADMIN_LISTEN and A2A_ADMIN_TOKEN");
        return ExitCode::from(EX_CONFIG);
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    match runtime.block_on(a2a_gateway::admin::cli(&admin, &token, command)) {
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

/// `healthcheck [--live]`: `path` on the listener named by the environment as `serve` reads it.
fn healthcheck(path: &str) -> ExitCode {
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
