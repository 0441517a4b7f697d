//! The OTLP span exporter: `opentelemetry-otlp` (gRPC over tonic, or HTTP/protobuf), configured
//! by the standard variables, which the crate reads itself (endpoint, protocol, headers,
//! compression, timeout) — except the TLS files (`OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE`,
//! `..._CLIENT_CERTIFICATE`, `..._CLIENT_KEY`), read here. Failed exports are retried by the
//! crate (3 retries, exponential backoff from 100 ms to 1.6 s with jitter, within the export's
//! timeout; on gRPC `UNAVAILABLE`/`RESOURCE_EXHAUSTED`/... and HTTP 429/502/503/504 and
//! transport errors; honouring `Retry-After` and gRPC `RetryInfo`).

use std::fmt;

use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The value of a trace exporter variable: `OTEL_EXPORTER_OTLP_TRACES_<name>` wins over
/// `OTEL_EXPORTER_OTLP_<name>`; empty counts as unset.
fn var(env: Env<'_>, name: &str) -> Option<String> {
    [
        format!("OTEL_EXPORTER_OTLP_TRACES_{name}"),
        format!("OTEL_EXPORTER_OTLP_{name}"),
    ]
    .iter()
    .find_map(|k| env(k).filter(|v| !v.trim().is_empty()))
}

/// `grpc` (the default here, as before) or `http/protobuf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Grpc,
    HttpProtobuf,
}

pub(crate) fn protocol(env: Env<'_>) -> Result<Protocol, String> {
    match var(env, "PROTOCOL").as_deref().map(str::trim) {
        None | Some("grpc") => Ok(Protocol::Grpc),
        Some("http/protobuf") => Ok(Protocol::HttpProtobuf),
        Some(other) => Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported (grpc or http/protobuf)"
        )),
    }
}

/// The PEM files of the TLS variables, read.
#[derive(Default)]
pub(crate) struct TlsFiles {
    /// `CERTIFICATE`: the CA (bundle) the collector's certificate is checked against, instead
    /// of the system's roots.
    ca: Option<Vec<u8>>,
    /// `CLIENT_CERTIFICATE` and `CLIENT_KEY`: this process's identity (mTLS); both or neither.
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsFiles {
    pub(crate) fn from_env(env: Env<'_>) -> Result<Self, String> {
        let read = |name: &str| -> Result<Option<Vec<u8>>, String> {
            var(env, name)
                .map(|path| {
                    std::fs::read(path.trim()).map_err(|e| {
                        format!("OTEL_EXPORTER_OTLP_{name}: cannot read {path:?}: {e}")
                    })
                })
                .transpose()
        };
        let ca = read("CERTIFICATE")?;
        let identity = match (read("CLIENT_CERTIFICATE")?, read("CLIENT_KEY")?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and \
                            OTEL_EXPORTER_OTLP_CLIENT_KEY go together"
                    .into());
            }
        };
        Ok(Self { ca, identity })
    }

    fn is_set(&self) -> bool {
        self.ca.is_some() || self.identity.is_some()
    }
}

/// The exporter the standard variables describe. Call it inside a tokio runtime (the gRPC
/// channel's connection runs on it).
pub(crate) fn exporter(env: Env<'_>) -> Result<CountingExporter, String> {
    let tls = TlsFiles::from_env(env)?;
    let inner = match protocol(env)? {
        Protocol::Grpc => {
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_protocol(opentelemetry_otlp::Protocol::Grpc);
            if tls.is_set() {
                let mut config = tonic::transport::ClientTlsConfig::new();
                config = match &tls.ca {
                    Some(ca) => config.ca_certificate(tonic::transport::Certificate::from_pem(ca)),
                    None => config.with_native_roots(),
                };
                if let Some((cert, key)) = &tls.identity {
                    config = config.identity(tonic::transport::Identity::from_pem(cert, key));
                }
                b = b.with_tls_config(config);
            }
            b.build()
        }
        Protocol::HttpProtobuf => {
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
            if tls.is_set() {
                b = b.with_http_client(http_client(&tls, env)?);
            }
            b.build()
        }
    }
    .map_err(|e| e.to_string())?;
    Ok(CountingExporter(inner))
}

/// A blocking reqwest client with the TLS files (the crate builds an equivalent one without
/// them). Built on its own thread, as the crate does: the blocking client owns a runtime.
fn http_client(tls: &TlsFiles, env: Env<'_>) -> Result<reqwest::blocking::Client, String> {
    let timeout = var(env, "TIMEOUT")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_millis,
        );
    let ca = match &tls.ca {
        Some(pem) => Some(
            reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| format!("OTEL_EXPORTER_OTLP_CERTIFICATE: {e}"))?,
        ),
        None => None,
    };
    let identity = match &tls.identity {
        Some((cert, key)) => {
            let mut pem = cert.clone();
            pem.push(b'\n');
            pem.extend_from_slice(key);
            Some(
                reqwest::Identity::from_pem(&pem)
                    .map_err(|e| format!("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE/_KEY: {e}"))?,
            )
        }
        None => None,
    };
    std::thread::spawn(move || {
        let mut b = reqwest::blocking::Client::builder().timeout(timeout);
        if let Some(ca) = ca {
            b = b.tls_certs_only(ca);
        }
        if let Some(id) = identity {
            b = b.identity(id);
        }
        b.build().map_err(|e| format!("the OTLP HTTP client: {e}"))
    })
    .join()
    .map_err(|_| "the OTLP HTTP client's builder panicked".to_owned())?
}

/// The crate's exporter, counting what it sends: `a2a_trace_spans_exported_total` (spans the
/// collector accepted, retries included) and `a2a_trace_exports_failed_total` (exports that
/// failed after their retries; their spans are lost).
pub(crate) struct CountingExporter(opentelemetry_otlp::SpanExporter);

impl fmt::Debug for CountingExporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl SpanExporter for CountingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.0.export(batch).await;
        match &result {
            Ok(()) => metrics::counter!("a2a_trace_spans_exported_total").increment(n),
            Err(e) => {
                metrics::counter!("a2a_trace_exports_failed_total").increment(1);
                tracing::warn!(target: "a2a_process::otlp", error = %e, spans = n, "trace export failed");
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.0.set_resource(resource);
    }
}
