//! TLS on the public listener (optional): one port for HTTP/1.1, HTTP/2 and gRPC (ALPN `h2`,
//! `http/1.1`), certificates read from files and reloaded when they change, and optional client
//! certificates (mTLS) whose verified subject authenticates the card's `mutualTLS` schemes.
//!
//! rustls on aws-lc-rs: the provider reqwest, sqlx and jsonwebtoken already use, so the process
//! carries one crypto library.

mod listener;
mod subject;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use sha2::Digest;

pub use listener::TlsPeer;
pub use subject::distinguished_name;

/// `[tls]` (or `A2A_TLS_CERT`, `A2A_TLS_KEY`, `A2A_TLS_CLIENT_CA`): PEM files.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (leaf first).
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates client certificates are verified against; set = a client may present
    /// a certificate (one that does not verify fails the handshake), and a `mutualTLS` scheme
    /// is satisfied by a verified one. Clients without a certificate still connect (API keys
    /// or tokens authenticate them).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// Certificate revocation lists (PEM `X509 CRL`) of the client CAs: a client certificate
    /// they revoke fails the handshake. With CRLs, the status of every client certificate
    /// must be known: the file holds a CRL of each CA that issues client certificates (a
    /// certificate of a CA without one is refused). Only end-entity certificates are checked.
    #[serde(default)]
    pub client_crl: Option<PathBuf>,
    /// How often the files' modification times are checked; changed files are loaded for the
    /// connections accepted afterwards (open connections keep their session).
    #[serde(default = "default_reload_ms")]
    pub reload_interval_ms: u64,
}

fn default_reload_ms() -> u64 {
    10_000
}

/// A verified client certificate, as the request sees it (see [`TlsPeer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The subject's distinguished name in RFC 4514 form (`CN=alice,O=Example`).
    pub subject: String,
    /// The CA it chains to, when `client_ca` trusts more than one: hex SHA-256 of that trust
    /// anchor's SubjectPublicKeyInfo (so two trusted CAs cannot mint one principal; see
    /// `auth::mtls_principal`). `None` with a single trusted CA, whose principals stay the
    /// subject alone.
    pub ca: Option<String>,
}

/// The client CAs as trust anchors, to tell which one a client certificate chains to.
pub(crate) struct ClientAnchors {
    anchors: Vec<rustls_pki_types::TrustAnchor<'static>>,
}

impl ClientAnchors {
    /// The [`ClientCert`] of a chain the handshake verified (leaf first), or why not. The
    /// chain is verified again here (one signature check per connection with a certificate),
    /// because rustls does not say which anchor it found.
    pub(crate) fn client_cert(&self, chain: &[CertificateDer<'_>]) -> Result<ClientCert, String> {
        let (leaf, intermediates) = chain.split_first().ok_or("no client certificate")?;
        let subject = distinguished_name(leaf)?;
        if self.anchors.len() <= 1 {
            return Ok(ClientCert { subject, ca: None });
        }
        let cert =
            webpki::EndEntityCert::try_from(leaf).map_err(|e| format!("certificate: {e}"))?;
        let algorithms = rustls::crypto::aws_lc_rs::default_provider()
            .signature_verification_algorithms
            .all;
        let path = cert
            .verify_for_usage(
                algorithms,
                &self.anchors,
                intermediates,
                rustls_pki_types::UnixTime::now(),
                webpki::KeyUsage::client_auth(),
                None,
                None,
            )
            .map_err(|e| format!("client certificate chain: {e}"))?;
        let spki = path.anchor().subject_public_key_info.as_ref();
        let digest = sha2::Sha256::digest(spki);
        let ca = digest.iter().map(|b| format!("{b:02x}")).collect();
        Ok(ClientCert {
            subject,
            ca: Some(ca),
        })
    }
}

/// What a connection is accepted with: the rustls configuration and the client CAs.
#[derive(Clone)]
pub(crate) struct Loaded {
    pub(crate) server: Arc<ServerConfig>,
    pub(crate) client_anchors: Option<Arc<ClientAnchors>>,
}

/// The rustls configuration new connections are accepted with; swapped whole when the files
/// change, so a rotated client CA (or CRL) is picked up as well as a renewed certificate.
#[derive(Clone)]
pub struct ServerTls {
    current: Arc<RwLock<Loaded>>,
}

impl ServerTls {
    /// Reads the files (an error names the file) and starts the reload check, which ends when
    /// the last clone of this value is dropped. Call it inside the tokio runtime that serves
    /// (outside one, the files are read once and never reloaded).
    pub fn load(config: &TlsConfig) -> Result<Self, String> {
        let loaded = build(config)?;
        let current = Arc::new(RwLock::new(loaded));
        let tls = Self { current };
        tls.watch(config.clone());
        Ok(tls)
    }

    /// The configuration for a connection accepted now.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.loaded().server
    }

    /// The configuration and client CAs for a connection accepted now (one snapshot).
    pub(crate) fn loaded(&self) -> Loaded {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn watch(&self, config: TlsConfig) {
        let slot = Arc::downgrade(&self.current);
        let every = Duration::from_millis(config.reload_interval_ms.max(100));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut seen = stamps(&config);
            loop {
                tokio::time::sleep(every).await;
                let Some(slot) = slot.upgrade() else { return };
                let now = stamps(&config);
                if now == seen {
                    continue;
                }
                // A half-written pair (new certificate, old key) fails here and is retried on
                // the next tick, because `seen` is only advanced on success.
                match build(&config) {
                    Ok(fresh) => {
                        *slot.write().unwrap_or_else(|e| e.into_inner()) = fresh;
                        seen = now;
                        tracing::info!(cert = %config.cert.display(), "TLS certificates reloaded");
                    }
                    Err(e) => tracing::warn!(error = %e, "TLS files changed but do not load; keeping the previous ones"),
                }
            }
        });
    }
}

/// Modification time and length of each file (`None` where unreadable).
fn stamps(config: &TlsConfig) -> Vec<Option<(SystemTime, u64)>> {
    [
        Some(&config.cert),
        Some(&config.key),
        config.client_ca.as_ref(),
        config.client_crl.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|p| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    })
    .collect()
}

fn build(config: &TlsConfig) -> Result<Loaded, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = read_certs(&config.cert)?;
    let key = PrivateKeyDer::from_pem_file(&config.key)
        .map_err(|e| format!("TLS key {}: {e}", config.key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let mut client_anchors = None;
    let builder = match &config.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(ca)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("TLS client CA {}: {e}", ca.display()))?;
            }
            client_anchors = Some(Arc::new(ClientAnchors {
                anchors: roots.roots.clone(),
            }));
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .allow_unauthenticated();
            if let Some(path) = &config.client_crl {
                verifier = verifier
                    .with_crls(read_crls(path)?)
                    .only_check_end_entity_revocation();
            }
            let verifier = verifier
                .build()
                .map_err(|e| format!("TLS client CA {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS certificate {}: {e}", config.cert.display()))?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Loaded {
        server: Arc::new(server),
        client_anchors,
    })
}

fn read_crls(
    path: &Path,
) -> Result<Vec<rustls_pki_types::CertificateRevocationListDer<'static>>, String> {
    let crls = rustls_pki_types::CertificateRevocationListDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("TLS client CRL {}: {e}", path.display()))?;
    if crls.is_empty() {
        return Err(format!(
            "TLS client CRL {}: no X509 CRL in the file",
            path.display()
        ));
    }
    Ok(crls)
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("TLS certificates {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "TLS certificates {}: no CERTIFICATE in the file",
            path.display()
        ));
    }
    Ok(certs)
}

/// The verified client certificate of the request's connection, if any: what the bindings
/// hand to authentication. Served without TLS, every request has none.
#[derive(Debug, Clone, Default)]
pub struct PeerCert(pub Option<ClientCert>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PeerCert {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self::from_extensions(&parts.extensions))
    }
}

impl PeerCert {
    /// From a request's extensions (gRPC requests keep the HTTP request's).
    pub fn from_extensions(ext: &http::Extensions) -> Self {
        Self(
            ext.get::<axum::extract::ConnectInfo<TlsPeer>>()
                .and_then(|c| c.0.client.clone()),
        )
    }
}
