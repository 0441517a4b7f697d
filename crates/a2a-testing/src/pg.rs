//! PostgreSQL for tests: a fresh database per test, on the server `A2A_TEST_DATABASE_URL` names or
//! on a private server started from the local binaries (`initdb`, `pg_ctl`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection};

use crate::TEST_DATABASE_URL_VAR;

/// A database that exists for one test: created empty, dropped when this value is dropped.
pub struct TestDatabase {
    url: String,
    name: String,
    admin_url: String,
    /// Keeps a private server alive while a database on it is in use.
    server: Option<Arc<PgServer>>,
}

impl TestDatabase {
    /// A fresh database for this test; panics with instructions when no PostgreSQL can be had.
    pub async fn create() -> Self {
        match Self::try_create().await {
            Ok(db) => db,
            Err(e) => panic!(
                "PostgreSQL for tests: {e}\n\
                 Set {TEST_DATABASE_URL_VAR}=postgres://postgres@127.0.0.1:5432/test (a server \
                 whose user may CREATE DATABASE), or install the PostgreSQL server binaries \
                 (initdb, pg_ctl) so the tests can start a private server."
            ),
        }
    }

    /// Like [`create`](Self::create), but reports the failure instead of panicking.
    pub async fn try_create() -> Result<Self, String> {
        match std::env::var(TEST_DATABASE_URL_VAR) {
            Ok(url) if !url.trim().is_empty() => Self::create_with_admin(url.trim(), None).await,
            _ => {
                let server = tokio::task::spawn_blocking(shared_private_server)
                    .await
                    .map_err(|e| format!("starting a private server panicked: {e}"))??;
                Self::create_on(&server).await
            }
        }
    }

    /// A fresh database on a private server the test controls (for fault tests).
    pub async fn create_on(server: &Arc<PgServer>) -> Result<Self, String> {
        Self::create_with_admin(&server.url("postgres"), Some(server.clone())).await
    }

    async fn create_with_admin(
        admin_url: &str,
        server: Option<Arc<PgServer>>,
    ) -> Result<Self, String> {
        let name = format!("a2a_test_{}", uuid::Uuid::new_v4().simple());
        let mut url =
            url::Url::parse(admin_url).map_err(|e| format!("{admin_url:?} is not a URL: {e}"))?;
        url.set_path(&format!("/{name}"));
        let mut admin = PgConnection::connect(admin_url)
            .await
            .map_err(|e| format!("cannot connect to {admin_url}: {e}"))?;
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .map_err(|e| format!("cannot create a database on {admin_url}: {e}"))?;
        let _ = admin.close().await;
        Ok(Self {
            url: url.to_string(),
            name,
            admin_url: admin_url.to_owned(),
            server,
        })
    }

    /// The URL of this test's database.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if self.server.is_some() {
            // The private server's data directory goes away with the server.
            return;
        }
        // Drop may run inside a runtime (a test's end) where blocking on async code is refused,
        // so the DROP runs on a thread of its own with a small runtime.
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async move {
                let mut admin = PgConnection::connect(&admin_url)
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::raw_sql(AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await
                .map_err(|e| e.to_string())?;
                let _ = admin.close().await;
                Ok::<(), String>(())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!(
                "a2a-testing: could not drop test database {}: {e}",
                self.name
            );
        }
    }
}

/// The private server shared by the tests of this process while any of them uses it.
fn shared_private_server() -> Result<Arc<PgServer>, String> {
    static SHARED: Mutex<Weak<PgServer>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(server) = shared.upgrade() {
        return Ok(server);
    }
    let server = Arc::new(PgServer::start()?);
    *shared = Arc::downgrade(&server);
    Ok(server)
}

/// A private PostgreSQL server in a temporary directory, on a free loopback port, with trust
/// authentication for `postgres`. Stopped (immediately) and deleted on drop.
pub struct PgServer {
    root: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Root cannot run PostgreSQL: commands then run as the `postgres` user.
    as_postgres: bool,
}

impl PgServer {
    /// initdb and start; a few seconds.
    pub fn start() -> Result<Self, String> {
        let bin = find_bin_dir()?;
        let as_postgres = is_root();
        let root = std::env::temp_dir().join(format!("a2a-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(root.join("sock"))
            .map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        let mut server = Self {
            root,
            bin,
            port: 0,
            as_postgres,
        };
        if as_postgres {
            run(Command::new("chown")
                .arg("-R")
                .arg("postgres:postgres")
                .arg(&server.root))
            .map_err(|e| format!("running as root needs a `postgres` user: {e}"))?;
        }
        server.pg(
            "initdb",
            &[
                "-D".as_ref(),
                server.data().as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
                "--encoding=UTF8".as_ref(),
                "--locale=C".as_ref(),
            ],
        )?;
        // A few attempts: the free port found here can be taken before the server binds it.
        let mut last = String::new();
        for _ in 0..3 {
            server.port = crate::free_port()?;
            server.write_config()?;
            match server.start_again() {
                Ok(()) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// `postgres://postgres@127.0.0.1:<port>/<database>`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's PID while the server runs.
    pub fn pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data().join("postmaster.pid")).ok()?;
        let pid: u32 = text.lines().next()?.trim().parse().ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    }

    /// Fast shutdown of this server only: SIGINT to its postmaster's PID, then wait until the
    /// process is gone. The data directory stays, so [`start_again`](Self::start_again) works.
    pub fn stop(&self) -> Result<(), String> {
        self.signal_and_wait("-INT")
    }

    /// Starts the (stopped) server again on the same port and data directory.
    pub fn start_again(&self) -> Result<(), String> {
        let log = self.root.join("server.log");
        self.pg(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data().as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "30".as_ref(),
                "start".as_ref(),
            ],
        )
        .map_err(|e| {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            format!("{e}\nserver log:\n{tail}")
        })
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    /// Loopback only, our own socket directory, and durability off: these servers hold test
    /// data, and the crash tests kill the gateway, not PostgreSQL.
    fn write_config(&self) -> Result<(), String> {
        let conf = format!(
            "\n# a2a-testing\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nmax_connections = 200\nshared_buffers = 32MB\n\
             fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n",
            self.port,
            self.root.join("sock").display()
        );
        let path = self.data().join("postgresql.conf");
        let base = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let base = base.split("\n# a2a-testing\n").next().unwrap_or_default();
        std::fs::write(&path, format!("{base}{conf}"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn signal_and_wait(&self, signal: &str) -> Result<(), String> {
        let Some(pid) = self.pid() else {
            return Ok(());
        };
        run(Command::new("kill").arg(signal).arg(pid.to_string()))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{pid}")).exists() {
            if Instant::now() > deadline {
                return Err(format!("PostgreSQL (pid {pid}) did not stop within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Runs a PostgreSQL program from the server's bin directory (as `postgres` under root).
    fn pg(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        let exe = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args).current_dir(&self.root);
        run(&mut cmd).map(|_| ())
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // Immediate shutdown: nothing on a test server needs to survive.
        if let Err(e) = self.signal_and_wait("-QUIT") {
            eprintln!("a2a-testing: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn run(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{:?} failed ({}): {}{}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `A2A_TEST_PG_BIN`, else the newest `/usr/lib/postgresql/<version>/bin`, else the directory
/// of `initdb` on the `PATH`.
fn find_bin_dir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("A2A_TEST_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path).find(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists())
        })
        .ok_or_else(|| {
            format!("{TEST_DATABASE_URL_VAR} is not set and no PostgreSQL server binaries (initdb, pg_ctl) were found")
        })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Appends push-worker delivery-log rows for `task_id` aged `ages` (seconds before now), ids in
/// the order of the array, as ids follow insertion time in the worker's log: the fixture of the
/// log-retention tests (store and worker).
pub async fn insert_delivery_log_rows(pool: &sqlx::PgPool, task_id: &str, ages: &[f64]) {
    sqlx::query(
        "INSERT INTO push_delivery_log \
             (task_id, seq, config_id, attempt, outcome, latency_us, worker, at) \
         SELECT $1, n, 'c', 1, 'delivered', 1, 'w', now() - make_interval(secs => age) \
           FROM unnest($2::float8[]) WITH ORDINALITY AS x(age, n) ORDER BY n",
    )
    .bind(task_id)
    .bind(ages)
    .execute(pool)
    .await
    .expect("delivery-log rows insert");
}
