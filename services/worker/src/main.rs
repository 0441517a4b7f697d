//! The `a2a-worker` binary: `serve` (default), `migrate`, `dead-letters`, `keygen`,
//! `healthcheck`.

use std::process::ExitCode;

use a2a_process::telemetry::LogTo;
use a2a_worker::cli::{Cli, Command};
use a2a_worker::config::WorkerConfig;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code for configuration errors (sysexits EX_CONFIG).
const EX_CONFIG: u8 = 78;

fn main() -> ExitCode {
    let cli: Cli = match a2a_process::cli::parse(std::env::args_os().collect(), &["dead-letters"]) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let command = cli.chosen();
    match &command {
        Command::Serve | Command::Migrate | Command::DeadLetters(_) => {}
        Command::Healthcheck(probe) => {
            let listen = std::env::var("A2A_WORKER_LISTEN")
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "127.0.0.1:9090".into());
            return a2a_process::healthcheck::run(
                "a2a-worker",
                "A2A_WORKER_LISTEN",
                &listen,
                probe.path(),
            );
        }
        Command::Keygen => {
            return match a2a_worker::keygen::es256_pem() {
                Ok(pem) => {
                    print!("{pem}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("a2a-worker: {e}");
                    ExitCode::FAILURE
                }
            };
        }
    }
    // `serve` logs to stdout (where it says where it listens); the CLI keeps stdout for output.
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    // Inside the runtime: the OTLP exporter sends on it.
    let telemetry = {
        let _rt = runtime.enter();
        let to = if command == Command::Serve {
            LogTo::Stdout
        } else {
            LogTo::Stderr
        };
        a2a_process::telemetry::init("a2a-worker", to)
    };
    let config = match WorkerConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("a2a-worker: {e}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Migrate => {
                let store = a2a_worker::store(&config)?;
                store.migrate().await.map_err(|e| e.to_string())?;
                Ok("database migrations applied".to_owned())
            }
            Command::DeadLetters(dead) => a2a_worker::dead_letters::run(&config, &dead).await,
            _ => serve(config).await.map(|()| String::new()),
        }
    });
    // Flush the spans of the last deliveries before the process exits.
    telemetry.shutdown();
    match result {
        Ok(out) => {
            if !out.is_empty() {
                println!("{out}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("a2a-worker: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: WorkerConfig) -> Result<(), String> {
    config.check_serve()?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr().map_or(config.listen, |a| a);
    tracing::info!(
        "a2a-worker listening on http://{addr} (/metrics, /healthz) as consumer {}",
        config.name
    );
    let shutdown = CancellationToken::new();
    tokio::spawn(a2a_process::shutdown_on_signal(
        shutdown.clone(),
        "finishing in-flight deliveries",
    ));
    a2a_worker::run(config, listener, shutdown).await?;
    tracing::info!("a2a-worker stopped");
    Ok(())
}
