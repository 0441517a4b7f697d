//! Redis for tests: a unique key prefix per test, on the server `A2A_TEST_REDIS_URL` names or on a
//! private `redis-server` started from the local binary (no persistence) on a free port.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::TEST_REDIS_URL_VAR;

/// One test's slice of a Redis server: its own key prefix, whose keys are deleted on drop.
pub struct TestRedis {
    url: String,
    prefix: String,
    /// Keeps a private server alive while a test uses it.
    server: Option<Arc<RedisServer>>,
}

impl TestRedis {
    /// A fresh prefix for this test; panics with instructions when no Redis can be had.
    pub async fn create() -> Self {
        let made = match std::env::var(TEST_REDIS_URL_VAR) {
            Ok(url) if !url.trim().is_empty() => Ok(Self::with_url(url.trim(), None)),
            _ => tokio::task::spawn_blocking(shared_private_server)
                .await
                .map_err(|e| format!("starting a private server panicked: {e}"))
                .and_then(|r| r)
                .map(|server| Self::on(&server)),
        };
        made.unwrap_or_else(|e| {
            panic!(
                "Redis for tests: {e}\nSet {TEST_REDIS_URL_VAR}=redis://127.0.0.1:6379 (tests use \
                 a unique key prefix), or install redis-server so the tests can start a private one."
            )
        })
    }

    /// A fresh prefix on a private server the test controls (for fault tests).
    pub fn on(server: &Arc<RedisServer>) -> Self {
        Self::with_url(&server.url(), Some(server.clone()))
    }

    fn with_url(url: &str, server: Option<Arc<RedisServer>>) -> Self {
        Self {
            url: url.to_owned(),
            prefix: format!("a2a-test-{}:", uuid::Uuid::new_v4().simple()),
            server,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every key of this test starts with this.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        // A private server is thrown away whole; on a shared one, delete this test's keys.
        if self.server.is_some() {
            return;
        }
        let delete = || -> redis::RedisResult<()> {
            let client = redis::Client::open(self.url.as_str())?;
            let mut conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
            redis::cmd("EVAL")
                .arg(DELETE_PREFIX)
                .arg(0)
                .arg(format!("{}*", self.prefix))
                .query::<()>(&mut conn)
        };
        if let Err(e) = delete() {
            eprintln!("a2a-testing: could not delete keys {}*: {e}", self.prefix);
        }
    }
}

const DELETE_PREFIX: &str = "local cursor = '0' repeat \
    local r = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000) cursor = r[1] \
    for _, k in ipairs(r[2]) do redis.call('DEL', k) end until cursor == '0' return 0";

fn shared_private_server() -> Result<Arc<RedisServer>, String> {
    static SHARED: Mutex<Weak<RedisServer>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(server) = shared.upgrade() {
        return Ok(server);
    }
    let server = Arc::new(RedisServer::start()?);
    *shared = Arc::downgrade(&server);
    Ok(server)
}

/// A private `redis-server` in a temporary directory on a free loopback port, without
/// persistence unless started with [`start_with_aof`](Self::start_with_aof). Stopped by its PID
/// and deleted on drop.
pub struct RedisServer {
    root: PathBuf,
    port: u16,
    /// The append-only file is on (`appendfsync always`), so a restart keeps every write.
    aof: bool,
    child: Mutex<Option<Child>>,
}

impl RedisServer {
    pub fn start() -> Result<Self, String> {
        Self::start_persistent(false)
    }

    /// A server with the append-only file on, fsynced on every write: what a deployment runs
    /// (docker-compose.yml's Redis), so [`restart`](Self::restart) loses nothing.
    pub fn start_with_aof() -> Result<Self, String> {
        Self::start_persistent(true)
    }

    fn start_persistent(aof: bool) -> Result<Self, String> {
        let root =
            std::env::temp_dir().join(format!("a2a-redis-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&root)
            .map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        let mut last = String::new();
        // A few attempts: the free port found here can be taken before the server binds it.
        for _ in 0..3 {
            let server = Self {
                root: root.clone(),
                port: crate::free_port()?,
                aof,
                child: Mutex::new(None),
            };
            match server.start_again() {
                Ok(()) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.lock().ok()?.as_ref().map(Child::id)
    }

    /// Kills this server (by its PID) and waits for it; [`start_again`](Self::start_again)
    /// brings it back on the same port, empty unless the append-only file is on.
    pub fn stop(&self) -> Result<(), String> {
        let mut child = self.child.lock().map_err(|_| "lock poisoned".to_owned())?;
        if let Some(mut c) = child.take() {
            c.kill()
                .map_err(|e| format!("cannot stop redis-server: {e}"))?;
            let _ = c.wait();
        }
        Ok(())
    }

    /// Graceful stop (SIGTERM: the server flushes its append-only file and exits), waited for.
    pub fn terminate(&self) -> Result<(), String> {
        let mut child = self.child.lock().map_err(|_| "lock poisoned".to_owned())?;
        if let Some(mut c) = child.take() {
            let sent = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status()
                .map_err(|e| format!("cannot signal redis-server: {e}"))?;
            if !sent.success() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        Ok(())
    }

    /// [`terminate`](Self::terminate), then [`start_again`](Self::start_again) on the same port
    /// and directory (with AOF on, with the same data).
    pub fn restart(&self) -> Result<(), String> {
        self.terminate()?;
        self.start_again()
    }

    pub fn start_again(&self) -> Result<(), String> {
        let bin = std::env::var("A2A_TEST_REDIS_BIN").unwrap_or_else(|_| "redis-server".into());
        let persistence: &[&str] = if self.aof {
            &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ]
        } else {
            &["--save", "", "--appendonly", "no"]
        };
        let child = Command::new(&bin)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(persistence)
            .current_dir(&self.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("{TEST_REDIS_URL_VAR} is not set and {bin} cannot be started: {e}")
            })?;
        *self.child.lock().map_err(|_| "lock poisoned".to_owned())? = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            let exited = self
                .child
                .lock()
                .ok()
                .and_then(|mut c| c.as_mut().and_then(|c| c.try_wait().ok().flatten()));
            if let Some(status) = exited {
                return Err(format!(
                    "redis-server exited ({status}) on port {}",
                    self.port
                ));
            }
            if Instant::now() > deadline {
                let _ = self.stop();
                return Err(format!(
                    "redis-server did not listen on {} in 10 s",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("a2a-testing: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
