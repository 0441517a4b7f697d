//! A TCP proxy that can black-hole its traffic: one replica reaches PostgreSQL through it, and the
//! partition scenario cuts that replica off (nothing it sends arrives, nothing comes back, its
//! connections stay open, as when packets are dropped) and heals it again (what was held goes
//! through, as TCP retransmission would deliver it: a stale replica's late writes arrive late).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy: listens on a loopback port, forwards every connection to `target`.
pub struct TcpProxy {
    pub addr: SocketAddr,
    /// `true` while black-holed.
    holes: watch::Sender<bool>,
    bytes: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

/// How much one direction reads at a time.
const BUF: usize = 16 * 1024;

impl TcpProxy {
    /// Listens on `listen` (a port the replica restarts on) and forwards to `target`.
    pub async fn start(listen: SocketAddr, target: SocketAddr) -> Self {
        let listener = TcpListener::bind(listen)
            .await
            .unwrap_or_else(|e| panic!("the proxy binds {listen}: {e}"));
        let addr = listener.local_addr().expect("a bound address");
        let (holes, watching) = watch::channel(false);
        let bytes = Arc::new(AtomicU64::new(0));
        let counted = bytes.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let hole = watching.clone();
                let counted = counted.clone();
                tokio::spawn(async move {
                    // A connection opened during the partition waits for it to heal, like a SYN
                    // that is dropped and retried.
                    let mut wait = hole.clone();
                    if wait.wait_for(|h| !*h).await.is_err() {
                        return;
                    }
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let up = pump(cr, sw, hole.clone(), counted.clone());
                    let down = pump(sr, cw, hole, counted);
                    // Either side closing ends both (the other's half is dropped with it).
                    tokio::select! {
                        _ = up => {}
                        _ = down => {}
                    }
                });
            }
        });
        Self {
            addr,
            holes,
            bytes,
            task,
        }
    }

    /// Black-holes every connection, open or new: nothing goes through until [`heal`].
    ///
    /// [`heal`]: Self::heal
    pub fn black_hole(&self) {
        let _ = self.holes.send(true);
    }

    /// Lets traffic through again (what was held is delivered).
    pub fn heal(&self) {
        let _ = self.holes.send(false);
    }

    /// Bytes forwarded so far, both directions.
    pub fn forwarded(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`; while the hole is open, neither reads nor writes (bytes already read
/// are held, and delivered after the heal).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut hole: watch::Receiver<bool>,
    counted: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; BUF];
    loop {
        if hole.wait_for(|h| !*h).await.is_err() {
            return;
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            // The partition began while waiting to read: stop reading.
            _ = hole.wait_for(|h| *h) => continue,
        };
        // Read before the partition began, held while it lasts.
        if hole.wait_for(|h| !*h).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        counted.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Waits until `proxy` forwarded more than `floor` bytes (the replica uses it), up to `limit`.
pub async fn wait_traffic(proxy: &TcpProxy, floor: u64, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while proxy.forwarded() <= floor {
        assert!(
            std::time::Instant::now() < deadline,
            "no traffic through the proxy in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
