//! The `a2a-worker` binary: `serve` (default), `migrate`, `dead-letters`, `keygen`,
//! `healthcheck`.

use std::process::ExitCode;

use a2a_process::telemetry::LogTo;
use a2a_worker::config::WorkerConfig;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: a2a-worker [serve|migrate|dead-letters ...|keygen|healthcheck [--live]]

  serve         deliver push notifications (default)
  migrate       apply database migrations (A2A_DATABASE_URL) and exit
  dead-letters  list [--all] [--limit N]   deliveries that gave up (not yet replayed, or all)
                replay (<id>... | --all)   deliver them again (with the same retry policy)
  keygen        print a new ES256 signing key (PKCS#8 PEM) for A2A_PUSH_SIGNING_KEYS
  healthcheck   exit 0 when this container's worker is ready (GET /readyz; --live: /healthz)
                on A2A_WORKER_LISTEN, within 2 s (the image has no shell or curl)

Configuration comes from the environment (A2A_DATABASE_URL, A2A_REDIS_URL, A2A_REDIS_PREFIX,
A2A_PUBLIC_URL, A2A_PUSH_SIGNING_KEYS, A2A_PUSH_ALLOWED_HOSTS, A2A_WORKER_*); see the README.";

/// Exit code for configuration errors (sysexits EX_CONFIG).
const EX_CONFIG: u8 = 78;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map(String::as_str).unwrap_or("serve");
    match command {
        "serve" | "migrate" | "dead-letters" => {}
        "healthcheck" => {
            let path = match &args[1..] {
                [] => "/readyz",
                [flag] if flag == "--live" => "/healthz",
                other => {
                    eprintln!("a2a-worker healthcheck: unexpected arguments {other:?}\n\n{USAGE}");
                    return ExitCode::from(2);
                }
            };
            let listen = std::env::var("A2A_WORKER_LISTEN")
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "127.0.0.1:9090".into());
            return a2a_process::healthcheck::run("a2a-worker", "A2A_WORKER_LISTEN", &listen, path);
        }
        "keygen" => {
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
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("a2a-worker: unknown command {other:?}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    // `serve` logs to stdout (where it says where it listens); the CLI keeps stdout for output.
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    // Inside the runtime: the OTLP exporter sends on it.
    let telemetry = {
        let _rt = runtime.enter();
        let to = if command == "serve" {
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
            "migrate" => {
                let store = a2a_worker::store(&config)?;
                store.migrate().await.map_err(|e| e.to_string())?;
                Ok("database migrations applied".to_owned())
            }
            "dead-letters" => a2a_worker::dead_letters::run(&config, &args[1..]).await,
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
