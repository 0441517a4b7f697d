//! TLS on the public port: JSON-RPC, HTTP+JSON and gRPC over one TLS listener (ALPN `h2` and
//! `http/1.1`), client certificates as the `mutualTLS` principal, certificates refused at the
//! handshake, and certificates reloaded without dropping open connections. Every certificate is
//! generated here (rcgen), in a directory of the test's own.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a_client::{A2aClient, Binding, BindingKind, ClientError, ClientTls};
use a2a_gateway::app;
use a2a_gateway::config::{Config, FileConfig};
use a2a_gateway::tls::ServerTls;
use a2a_types::A2aError;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::auth::{BINDINGS, assert_separate_owners, send};

/// A certificate authority of the test's own.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::CrlSign,
        ];
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// (certificate PEM, key PEM) for 127.0.0.1.
    fn server(&self) -> (String, String) {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "gateway");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// (certificate PEM, key PEM) of a client named `cn`, valid now unless `expired`.
    fn client(&self, cn: &str, expired: bool) -> (String, String) {
        self.client_serial(cn, expired, None)
    }

    /// [`Self::client`] with a chosen serial number (what a CRL names).
    fn client_serial(&self, cn: &str, expired: bool, serial: Option<u64>) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.serial_number = serial.map(rcgen::SerialNumber::from);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        self.sign(params)
    }

    /// A CRL (PEM) of this CA revoking the certificates with `serials`.
    fn crl(&self, serials: &[u64]) -> String {
        let params = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(2099, 1, 1),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|&n| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from(n),
                    revocation_time: rcgen::date_time_ymd(2024, 1, 1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        params.signed_by(&self.issuer).unwrap().pem().unwrap()
    }

    fn sign(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

struct TlsGateway {
    addr: std::net::SocketAddr,
    dir: PathBuf,
    ca: Ca,
    shutdown: CancellationToken,
}

impl Drop for TlsGateway {
    fn drop(&mut self) {
        self.shutdown.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const AUTH: &str = r#"
[auth.schemes.mtls]
scheme = { mtlsSecurityScheme = { description = "client certificates of the test CA" } }
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "k", key = "k-secret" }]
"#;

impl TlsGateway {
    /// An in-memory gateway serving TLS with a client CA, `mutualTLS` or an API key required.
    async fn start() -> Self {
        Self::start_with("").await
    }

    /// [`Self::start`] with more configuration (`toml`, appended).
    async fn start_with(extra: &str) -> Self {
        Self::start_full(extra, Ca::new("test clients and server CA"), &[], None).await
    }

    /// [`Self::start_with`], the client CA file also trusting `other_cas`, and `client_crl`
    /// (a PEM file's content) if given.
    async fn start_full(
        extra: &str,
        ca: Ca,
        other_cas: &[&Ca],
        client_crl: Option<String>,
    ) -> Self {
        let dir = std::env::temp_dir().join(format!("a2a-tls-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = ca.server();
        std::fs::write(dir.join("server.pem"), cert).unwrap();
        std::fs::write(dir.join("server.key"), key).unwrap();
        let mut bundle = ca.pem.clone();
        for other in other_cas {
            bundle.push_str(&other.pem);
        }
        std::fs::write(dir.join("ca.pem"), bundle).unwrap();
        let crl = match client_crl {
            Some(pem) => {
                std::fs::write(dir.join("crl.pem"), pem).unwrap();
                format!("client_crl = {:?}\n", dir.join("crl.pem"))
            }
            None => String::new(),
        };
        let toml = format!(
            "[tls]\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\n{crl}reload_interval_ms = 100\n{AUTH}\n{extra}",
            dir.join("server.pem"),
            dir.join("server.key"),
            dir.join("ca.pem"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let listen = addr.to_string();
        let config = Config::from_parts(FileConfig::parse(&toml).unwrap(), |k| {
            (k == "A2A_LISTEN").then(|| listen.clone())
        })
        .unwrap();
        assert_eq!(config.public_url, format!("https://{addr}"));
        let shutdown = CancellationToken::new();
        let svc = app::build(&config, shutdown.clone()).unwrap();
        app::start(&config, &svc).await;
        let tls = ServerTls::load(config.tls().unwrap()).unwrap();
        tokio::spawn(app::serve_tls(listener, tls, svc, shutdown.clone()));
        Self {
            addr,
            dir,
            ca,
            shutdown,
        }
    }

    fn client(&self, kind: BindingKind, tls: &ClientTls) -> A2aClient {
        let url = |p: &str| format!("https://{}{p}", self.addr);
        let binding = match kind {
            BindingKind::JsonRpc => Binding::JsonRpc {
                url: url("/a2a/jsonrpc"),
            },
            BindingKind::HttpJson => Binding::Rest {
                url: url("/a2a/rest"),
            },
            BindingKind::Grpc => Binding::Grpc { endpoint: url("") },
        };
        A2aClient::with_tls(binding, tls)
            .unwrap()
            .with_timeout(Duration::from_secs(10))
    }

    /// Trusts the test CA; presents `identity` (certificate, key) if given.
    fn tls(&self, identity: Option<(String, String)>) -> ClientTls {
        let (cert_pem, key_pem) = match identity {
            Some((c, k)) => (Some(c.into_bytes()), Some(k.into_bytes())),
            None => (None, None),
        };
        ClientTls {
            ca_pem: Some(self.ca.pem.clone().into_bytes()),
            cert_pem,
            key_pem,
        }
    }
}

#[tokio::test]
async fn every_binding_over_tls_with_client_certificates_as_principals() {
    let gw = TlsGateway::start().await;
    let alice = gw.ca.client("alice", false);
    let bob = gw.ca.client("bob", false);
    for kind in BINDINGS {
        let as_alice = gw.client(kind, &gw.tls(Some(alice.clone())));
        let as_bob = gw.client(kind, &gw.tls(Some(bob.clone())));
        // Two certificates of one CA are two owners: the subject is the principal.
        assert_separate_owners(&as_alice, &as_bob, &format!("{kind:?}")).await;
        // A certificate outranks nothing: an API key on a connection without one still works,
        // and is its own owner.
        let keyed = gw
            .client(kind, &gw.tls(None))
            .with_header("x-api-key", "k-secret")
            .unwrap();
        assert_separate_owners(&as_alice, &keyed, &format!("{kind:?} key")).await;
        // Neither certificate nor key: refused in the binding's own format (401 / -31401 /
        // UNAUTHENTICATED, each decoded by the client to the one error).
        let anonymous = gw.client(kind, &gw.tls(None));
        match send(&anonymous).await {
            Err(ClientError::A2a(A2aError::Unauthenticated(m))) => {
                assert!(m.contains("mtls"), "{kind:?}: {m}")
            }
            other => panic!("{kind:?}: expected Unauthenticated, got {other:?}"),
        }
    }
    // The same subject on a new connection is the same owner.
    let again = gw.client(BindingKind::JsonRpc, &gw.tls(Some(alice.clone())));
    let first = gw.client(BindingKind::Grpc, &gw.tls(Some(alice)));
    let listed = |c: A2aClient| async move {
        c.list_tasks(Default::default())
            .await
            .unwrap()
            .tasks
            .into_iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    let seen = listed(first).await;
    assert!(seen.len() >= 6, "alice's tasks of every binding: {seen:?}");
    assert_eq!(listed(again).await, seen);
}

#[tokio::test]
async fn bad_client_certificates_fail_the_handshake_on_every_binding() {
    let gw = TlsGateway::start().await;
    let expired = gw.ca.client("alice", true);
    let stranger = Ca::new("another CA").client("alice", false);
    for (what, identity) in [("expired", expired.clone()), ("wrong CA", stranger.clone())] {
        for kind in BINDINGS {
            let c = gw.client(kind, &gw.tls(Some(identity.clone())));
            match send(&c).await {
                Err(ClientError::Transport { .. }) => {}
                other => panic!("{what} on {kind:?}: expected a TLS failure, got {other:?}"),
            }
        }
    }
    // At the TLS layer: the server's alert names why (TLS 1.3 clients learn it on first read).
    for (identity, alert) in [(expired, "CertificateExpired"), (stranger, "UnknownCA")] {
        let err = http1_get(&gw, Some(identity), "/healthz")
            .await
            .expect_err("refused");
        assert!(err.contains(alert), "{err}");
    }
    // The control: a valid certificate, and none at all, get through to HTTP.
    let ok = http1_get(&gw, Some(gw.ca.client("alice", false)), "/healthz").await;
    assert!(ok.unwrap().starts_with("HTTP/1.1 200"));
    assert!(
        http1_get(&gw, None, "/healthz")
            .await
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
}

/// Two trusted CAs that both issue `CN=alice,O=Example` give two owners (M8: the subject alone
/// was the principal, so either CA could take the other's tasks).
#[tokio::test]
async fn two_trusted_cas_issuing_one_subject_are_two_owners() {
    let partner = Ca::new("partner CA");
    let ca = Ca::new("test clients and server CA");
    let gw = TlsGateway::start_full("", ca, &[&partner], None).await;
    let ours = gw.ca.client("alice", false);
    let theirs = partner.client("alice", false);
    for kind in BINDINGS {
        let a = gw.client(kind, &gw.tls(Some(ours.clone())));
        let b = gw.client(kind, &gw.tls(Some(theirs.clone())));
        assert_separate_owners(&a, &b, &format!("{kind:?}")).await;
    }
    // The same CA's certificate on a new connection (a new key, the same subject) is the same
    // owner.
    let again = gw.client(
        BindingKind::JsonRpc,
        &gw.tls(Some(gw.ca.client("alice", false))),
    );
    let first = gw.client(BindingKind::JsonRpc, &gw.tls(Some(ours)));
    let ids =
        |r: a2a_types::v1::ListTasksResponse| r.tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    let seen = ids(first.list_tasks(Default::default()).await.unwrap());
    assert!(!seen.is_empty());
    assert_eq!(
        ids(again.list_tasks(Default::default()).await.unwrap()),
        seen
    );
}

/// H2 with a client certificate: a service's certificate AND each user's own key. The users
/// of the one certificate are separate owners on every binding (the owner was the certificate's
/// principal alone, `mtls` sorting before `user`).
#[tokio::test]
async fn users_behind_one_client_certificate_are_separate_owners() {
    let gw = TlsGateway::start_with(
        r#"
[auth]
requirements = [{ mtls = [], user = [] }]
[auth.schemes.user]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-User-Key" } }
keys = [{ id = "alice", key = "alice-secret" }, { id = "bob", key = "bob-secret" }]
"#,
    )
    .await;
    let service = gw.ca.client("frontend-service", false);
    for kind in BINDINGS {
        let user = |key: &str| {
            gw.client(kind, &gw.tls(Some(service.clone())))
                .with_header("x-user-key", key)
                .unwrap()
        };
        assert_separate_owners(
            &user("alice-secret"),
            &user("bob-secret"),
            &format!("{kind:?}"),
        )
        .await;
        // The certificate alone no longer meets the requirement.
        let bare = gw.client(kind, &gw.tls(Some(service.clone())));
        assert!(
            matches!(
                send(&bare).await,
                Err(ClientError::A2a(A2aError::Unauthenticated(_)))
            ),
            "{kind:?}"
        );
    }
}

/// A certificate the client CRL revokes fails the handshake; another of the same CA passes.
#[tokio::test]
async fn a_revoked_client_certificate_is_refused() {
    let ca = Ca::new("test clients and server CA");
    let revoked = ca.client_serial("mallory", false, Some(4242));
    let good = ca.client_serial("alice", false, Some(7));
    let crl = ca.crl(&[4242]);
    // A second trusted CA, with no CRL in the file: its certificates' status is unknown.
    let partner = Ca::new("partner CA without a CRL");
    let with_crl = TlsGateway::start_full("", ca, &[&partner], Some(crl)).await;
    assert!(
        http1_get(&with_crl, Some(partner.client("eve", false)), "/healthz")
            .await
            .is_err(),
        "a certificate whose revocation status is unknown is refused"
    );
    let err = http1_get(&with_crl, Some(revoked.clone()), "/healthz")
        .await
        .expect_err("a revoked certificate is refused");
    assert!(err.contains("Revoked"), "{err}");
    assert!(
        http1_get(&with_crl, Some(good.clone()), "/healthz")
            .await
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
    // Without the CRL the same certificate passes (the control).
    let without = TlsGateway::start().await;
    let other = without.ca.client_serial("mallory", false, Some(4242));
    assert!(http1_get(&without, Some(other), "/healthz").await.is_ok());
    for kind in BINDINGS {
        let c = with_crl.client(kind, &with_crl.tls(Some(revoked.clone())));
        assert!(
            matches!(send(&c).await, Err(ClientError::Transport { .. })),
            "{kind:?}"
        );
        let ok = with_crl.client(kind, &with_crl.tls(Some(good.clone())));
        send(&ok).await.unwrap();
    }
}

#[tokio::test]
async fn alpn_offers_h2_and_http1_on_the_one_port() {
    let gw = TlsGateway::start().await;
    // A client that connects and never says hello delays nobody (handshakes run beside the
    // accept loop).
    let _silent = TcpStream::connect(gw.addr).await.unwrap();
    for proto in ["h2", "http/1.1"] {
        let (_, mut tls) =
            tokio::time::timeout(Duration::from_secs(5), connect(&gw, None, &[proto]))
                .await
                .expect("served while another client stays silent")
                .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(proto.as_bytes()));
        if proto == "http/1.1" {
            assert!(
                request(&mut tls, "/healthz")
                    .await
                    .starts_with("HTTP/1.1 200")
            );
        }
    }
}

#[tokio::test]
async fn renewed_certificates_are_served_to_new_connections_and_open_ones_stay() {
    let gw = TlsGateway::start().await;
    let before = served_cert(&gw).await;
    // An open HTTP/1.1 keep-alive connection and an open gRPC (h2) client.
    let (_, mut open) = connect(&gw, None, &["http/1.1"]).await.unwrap();
    assert!(
        request(&mut open, "/healthz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let grpc = gw
        .client(BindingKind::Grpc, &gw.tls(None))
        .with_header("x-api-key", "k-secret")
        .unwrap();
    send(&grpc).await.unwrap();

    // Renewal: a new key and certificate, written by rename as a deployment would.
    let (cert, key) = gw.ca.server();
    for (name, content) in [("server.key", key), ("server.pem", cert)] {
        let tmp = gw.dir.join(format!("{name}.new"));
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, gw.dir.join(name)).unwrap();
    }
    let mut after = served_cert(&gw).await;
    for _ in 0..50 {
        if after != before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = served_cert(&gw).await;
    }
    assert_ne!(after, before, "new connections get the renewed certificate");
    assert_eq!(
        after,
        CertificateDer::from_pem_file(gw.dir.join("server.pem")).unwrap()
    );
    // The connections opened before still work.
    assert!(
        request(&mut open, "/readyz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    send(&grpc).await.unwrap();
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(
    gw: &TlsGateway,
    identity: Option<(String, String)>,
    alpn: &[&str],
) -> std::io::Result<(Vec<CertificateDer<'static>>, Tls)> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(gw.ca.pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    let tcp = TcpStream::connect(gw.addr).await?;
    let name = ServerName::IpAddress(gw.addr.ip().into());
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let chain = tls
        .get_ref()
        .1
        .peer_certificates()
        .unwrap_or_default()
        .iter()
        .map(|c| c.clone().into_owned())
        .collect();
    Ok((chain, tls))
}

/// The leaf certificate a new connection is served.
async fn served_cert(gw: &TlsGateway) -> CertificateDer<'static> {
    let (chain, _) = connect(gw, None, &["http/1.1"]).await.unwrap();
    chain.into_iter().next().unwrap()
}

/// One HTTP/1.1 GET on a keep-alive connection; the status line and headers, read up to the
/// (short) body.
async fn request(tls: &mut Tls, path: &str) -> String {
    try_request(tls, path).await.unwrap()
}

async fn try_request(tls: &mut Tls, path: &str) -> Result<String, String> {
    let req = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
    tls.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("{e:?}"))?;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
        .await
        .map_err(|_| "timed out".to_owned())?
        .map_err(|e| format!("{e:?}"))?;
    if n == 0 {
        return Err("closed".into());
    }
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// A GET on a fresh HTTP/1.1 connection; `Err` with the TLS error (its debug form, which names
/// the alert) when the server refuses.
async fn http1_get(
    gw: &TlsGateway,
    identity: Option<(String, String)>,
    path: &str,
) -> Result<String, String> {
    let (_, mut tls) = connect(gw, identity, &["http/1.1"])
        .await
        .map_err(|e| format!("{e:?}"))?;
    try_request(&mut tls, path).await
}

/// The real binary with `A2A_TLS_CERT` and `A2A_TLS_KEY`: it says it listens on https, serves
/// the card there (with https URLs), and still stops gracefully on SIGTERM.
#[tokio::test]
async fn the_binary_serves_tls_from_the_environment() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("a2a-tls-bin-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new("binary test CA");
    let (cert, key) = ca.server();
    std::fs::write(dir.join("cert.pem"), cert).unwrap();
    std::fs::write(dir.join("key.pem"), key).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .env_remove("A2A_CONFIG")
        .env_remove("A2A_DATABASE_URL")
        .env_remove("A2A_REDIS_URL")
        .env_remove("A2A_PUBLIC_URL")
        .env("A2A_LISTEN", "127.0.0.1:0")
        .env("A2A_TLS_CERT", dir.join("cert.pem"))
        .env("A2A_TLS_KEY", dir.join("key.pem"))
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    std::thread::spawn(move || for _ in lines {});
    let start = line.find("https://").unwrap_or_else(|| panic!("{line}")) + "https://".len();
    let addr = line[start..].split_whitespace().next().unwrap().to_owned();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap()])
        .build()
        .unwrap();
    let card: serde_json::Value = client
        .get(format!("https://{addr}/.well-known/agent-card.json"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The default public URL is https (here from A2A_LISTEN, so port 0).
    let url = card["supportedInterfaces"][0]["url"].as_str().unwrap();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    // Plaintext on the TLS port gets no HTTP answer.
    let plain = reqwest::get(format!("http://{addr}/healthz")).await;
    assert!(plain.is_err(), "{plain:?}");
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let exit = tokio::task::spawn_blocking(move || {
        for _ in 0..100 {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        panic!("no exit within 10 s of SIGTERM");
    })
    .await
    .unwrap();
    assert!(exit.success(), "{exit:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An upstream agent at an `https://` URL of a private CA that wants a client certificate:
/// `[[agents]] tls` gives the CA and the gateway's certificate, on the binding the card
/// prefers (JSON-RPC) and on gRPC; the upstream sees the gateway as its `mtls` principal.
#[tokio::test]
async fn upstream_agents_over_tls_with_a_private_ca_and_a_client_certificate() {
    let upstream = TlsGateway::start().await;
    let (cert, key) = upstream.ca.client("downstream gateway", false);
    std::fs::write(upstream.dir.join("gw.pem"), &cert).unwrap();
    std::fs::write(upstream.dir.join("gw.key"), &key).unwrap();
    let mut toml = String::new();
    for (name, bindings) in [("secure", "[]"), ("secure-grpc", r#"["GRPC"]"#)] {
        toml.push_str(&format!(
            "[[agents]]\nname = {name:?}\ncard_url = \"https://{}\"\nbindings = {bindings}\n\
             tls = {{ ca = {:?}, cert = {:?}, key = {:?} }}\n",
            upstream.addr,
            upstream.dir.join("ca.pem"),
            upstream.dir.join("gw.pem"),
            upstream.dir.join("gw.key"),
        ));
    }
    let gw = crate::harness::TestGateway::with_config(&toml).await;
    for tenant in ["secure", "secure-grpc"] {
        let reply = gw
            .rpc(
                "SendMessage",
                serde_json::json!({"tenant": tenant, "message": crate::harness::user_message("hi")}),
            )
            .await;
        assert_eq!(
            reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{tenant}: {reply}"
        );
    }
    // Upstream, the tasks belong to the certificate's subject.
    let same_subject = upstream.client(BindingKind::JsonRpc, &upstream.tls(Some((cert, key))));
    let tasks = same_subject
        .list_tasks(Default::default())
        .await
        .unwrap()
        .tasks;
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    // Without the CA the agent's certificate is not trusted: the agent stays unusable.
    let untrusted = format!(
        "[[agents]]\nname = \"untrusted\"\ncard_url = \"https://{}\"\n",
        upstream.addr
    );
    let gw = crate::harness::TestGateway::with_config(&untrusted).await;
    let reply = gw
        .rpc(
            "SendMessage",
            serde_json::json!({"tenant": "untrusted", "message": crate::harness::user_message("hi")}),
        )
        .await;
    assert!(reply["error"].is_object(), "{reply}");
}

/// Certificate files that do not load stop the start with one line naming the file.
#[test]
fn unreadable_certificates_fail_the_start_with_one_clear_line() {
    let dir = std::env::temp_dir().join(format!("a2a-tls-bad-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cert.pem"), "not a certificate").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .env_remove("A2A_CONFIG")
        .env_remove("A2A_DATABASE_URL")
        .env_remove("A2A_REDIS_URL")
        .env("A2A_LISTEN", "127.0.0.1:0")
        .env("A2A_TLS_CERT", dir.join("cert.pem"))
        .env("A2A_TLS_KEY", dir.join("missing.key"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cert.pem"), "{stderr}");
}

/// Per-IP rate limits see the client's address over TLS too (the TLS listener records the peer
/// as the plaintext one does): a send takes the whole burst, the next one is refused.
#[tokio::test]
async fn per_ip_rate_limits_apply_over_tls() {
    let gw = TlsGateway::start_with("[limits.rate]\nip = { rate = 1, burst = 5 }\n").await;
    let alice = gw.ca.client("alice", false);
    let client = gw.client(BindingKind::JsonRpc, &gw.tls(Some(alice)));
    send(&client).await.expect("the first send fits the burst");
    match send(&client).await {
        Err(ClientError::A2a(A2aError::RateLimited { scope, .. })) => assert_eq!(scope, "ip"),
        other => panic!("expected the IP's rate limit, got {other:?}"),
    }
}

/// Reads until the peer closes (EOF, close_notify or reset); whether it did within `within`.
async fn tls_closed_within(tls: &mut Tls, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// The abuse suite over TLS (M2): a client that never starts its handshake is closed within
/// the handshake timeout; one that completes it and then sends nothing, or half a head, within
/// the header-read timeout, on HTTP/1.1 and HTTP/2 alike.
#[tokio::test]
async fn slow_tls_clients_are_closed_within_their_timeouts() {
    let gw = TlsGateway::start_with(
        "[limits.connections]\ntls_handshake_timeout_ms = 400\nheader_read_timeout_ms = 400\n\
         idle_timeout_ms = 400\n",
    )
    .await;
    let mut silent = TcpStream::connect(gw.addr).await.unwrap();
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(Duration::from_secs(3), silent.read(&mut buf)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "no handshake: closed"
    );
    let (_, mut quiet) = connect(&gw, None, &["http/1.1"]).await.unwrap();
    let (_, mut half) = connect(&gw, None, &["http/1.1"]).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    half.flush().await.unwrap();
    let (_, mut h2_quiet) = connect(&gw, None, &["h2"]).await.unwrap();
    for (name, tls) in [
        ("handshake, then nothing", &mut quiet),
        ("half a head", &mut half),
        ("h2, then nothing", &mut h2_quiet),
    ] {
        assert!(
            tls_closed_within(tls, Duration::from_secs(3)).await,
            "{name}: still open after 3 s"
        );
    }
    // A request that comes in time is served.
    let (_, mut prompt) = connect(&gw, None, &["http/1.1"]).await.unwrap();
    assert!(
        request(&mut prompt, "/healthz")
            .await
            .starts_with("HTTP/1.1 200")
    );
}

/// At most `max_tls_handshakes` handshakes run at once: while silent clients hold them, a new
/// connection is closed at once; once they time out, handshakes succeed again.
#[tokio::test]
async fn tls_handshakes_are_capped() {
    let gw = TlsGateway::start_with(
        "[limits.connections]\nmax_tls_handshakes = 2\ntls_handshake_timeout_ms = 1500\n",
    )
    .await;
    let silent: Vec<TcpStream> =
        futures::future::join_all((0..2).map(|_| TcpStream::connect(gw.addr)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    assert!(
        connect(&gw, None, &["http/1.1"]).await.is_err(),
        "refused while two handshakes are pending"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert!(
        http1_get(&gw, None, "/healthz")
            .await
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
    drop(silent);
}
