//! `a2a-gateway healthcheck` and `a2a-worker healthcheck`: a probe client inside the image (it
//! has no shell or HTTP client) for docker-compose healthchecks and the image's `HEALTHCHECK`.
//! It GETs a path of the process's own listener on the loopback and exits 0 on a 200 answer,
//! 1 otherwise, within a bound.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use http_body_util::Empty;

/// `healthcheck [--live]`: the subcommand's arguments, the same in both binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct Probe {
    /// Ask /healthz (alive) instead of /readyz (ready).
    #[arg(long)]
    pub live: bool,
}

impl Probe {
    /// The path the check GETs: `/healthz` with `--live`, else `/readyz`.
    pub fn path(self) -> &'static str {
        if self.live { "/healthz" } else { "/readyz" }
    }
}

/// The whole check's bound (connect, request, status line): below compose's 3 s timeouts.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// Where to probe a listener bound to `listen`: the same port on the loopback when it is bound
/// to every interface (`0.0.0.0` or `[::]`), else the address itself. The unspecified IPv6
/// address is probed on 127.0.0.1 first (a `[::]` socket takes IPv4 too unless `bindv6only`),
/// then on `[::1]`.
pub fn targets(listen: SocketAddr) -> Vec<SocketAddr> {
    let port = listen.port();
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            vec![SocketAddr::from((Ipv4Addr::LOCALHOST, port))]
        }
        IpAddr::V6(ip) if ip.is_unspecified() => vec![
            SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
        ],
        _ => vec![listen],
    }
}

/// Runs the check of `path` on the listener `listen` (as the environment names it: `what`, for
/// messages) and returns the process's exit code. Needs no runtime of the caller.
pub fn run(binary: &str, what: &str, listen: &str, path: &str) -> ExitCode {
    let addr: SocketAddr = match listen.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{binary} healthcheck: {what}={listen:?} is not an address: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{binary} healthcheck: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut last = String::new();
    for target in targets(addr) {
        match runtime.block_on(async { tokio::time::timeout(TIMEOUT, get(target, path)).await }) {
            Ok(Ok(200)) => {
                println!("{binary} healthcheck: http://{target}{path} ok");
                return ExitCode::SUCCESS;
            }
            Ok(Ok(status)) => last = format!("http://{target}{path} answered {status}"),
            Ok(Err(e)) => last = format!("http://{target}{path}: {e}"),
            Err(_) => last = format!("http://{target}{path}: no answer within {TIMEOUT:?}"),
        }
    }
    eprintln!("{binary} healthcheck: {last}");
    ExitCode::FAILURE
}

async fn get(target: SocketAddr, path: &str) -> Result<u16, String> {
    let stream = tokio::net::TcpStream::connect(target)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = http::Request::get(path)
        .header(http::header::HOST, target.to_string())
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    // Only the status is read: the body (a word) is dropped with the connection.
    Ok(response.status().as_u16())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_are_probed_on_the_loopback() {
        let t = |s: &str| targets(s.parse().unwrap());
        assert_eq!(t("0.0.0.0:9464"), vec!["127.0.0.1:9464".parse().unwrap()]);
        assert_eq!(
            t("[::]:9090"),
            vec![
                "127.0.0.1:9090".parse().unwrap(),
                "[::1]:9090".parse().unwrap()
            ]
        );
        assert_eq!(t("10.0.0.5:1"), vec!["10.0.0.5:1".parse().unwrap()]);
    }
}
