//! Where and how to export, from the standard OTLP variables (signal-specific `*_TRACES_*`
//! first, then the generic ones), as the OpenTelemetry exporter specification defines them.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Uri};

/// OTLP's transports that this exporter speaks (no TLS: the collector runs beside the process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Unary gRPC over HTTP/2 cleartext.
    Grpc,
    /// A protobuf POST over HTTP/1.1.
    HttpProtobuf,
}

/// The gRPC method OTLP trace export calls.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// No `Debug`: the headers may carry credentials.
#[derive(Clone)]
pub struct Config {
    pub protocol: Protocol,
    /// `host:port`, to connect to and for `Host`/`:authority`.
    pub authority: http::uri::Authority,
    /// The request target: the gRPC method, or the traces endpoint's path and query.
    pub path: http::uri::PathAndQuery,
    /// The URI of a request: absolute for HTTP/2 (its `:scheme` and `:authority` come from
    /// it), the path alone for HTTP/1.1 (with a `Host` header).
    pub uri: Uri,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`): may hold credentials,
    /// never printed.
    pub headers: HeaderMap,
    /// One export's bound, connecting included.
    pub timeout: Duration,
}

impl Config {
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        // An empty variable counts as unset, as the SDKs read them.
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let either = |name: &str| {
            let signal = format!("OTEL_EXPORTER_OTLP_TRACES_{name}");
            var(&signal).map(|v| (signal, v, true)).or_else(|| {
                let generic = format!("OTEL_EXPORTER_OTLP_{name}");
                var(&generic).map(|v| (generic, v, false))
            })
        };
        let protocol = match either("PROTOCOL").map(|(_, v, _)| v) {
            None => Protocol::Grpc,
            Some(v) => match v.trim() {
                "grpc" => Protocol::Grpc,
                "http/protobuf" => Protocol::HttpProtobuf,
                other => {
                    return Err(format!(
                        "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported (grpc or http/protobuf)"
                    ));
                }
            },
        };
        let (name, endpoint, signal) = either("ENDPOINT").unwrap_or_else(|| {
            let default = match protocol {
                Protocol::Grpc => "http://localhost:4317",
                Protocol::HttpProtobuf => "http://localhost:4318",
            };
            ("default endpoint".into(), default.into(), false)
        });
        let uri: Uri = endpoint
            .trim()
            .parse()
            .map_err(|e| format!("{name}={endpoint:?} is not a URL: {e}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(format!(
                    "{name}={endpoint:?}: the trace exporter has no TLS; run the collector beside \
                     the process and use http://"
                ));
            }
            _ => return Err(format!("{name}={endpoint:?} is not an http:// URL")),
        }
        let host = uri
            .authority()
            .ok_or_else(|| format!("{name}={endpoint:?} names no host"))?;
        let authority = if host.port().is_some() {
            host.clone()
        } else {
            format!("{}:80", host.host())
                .parse()
                .map_err(|e| format!("{name}={endpoint:?}: {e}"))?
        };
        let path = match protocol {
            // gRPC names the method itself; an endpoint's path is not used.
            Protocol::Grpc => GRPC_PATH.to_owned(),
            // The signal's own endpoint is the URL to post to, as given; the generic one is a
            // base to which the signal's path is appended.
            Protocol::HttpProtobuf if signal => uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
            Protocol::HttpProtobuf => {
                format!("{}/v1/traces", uri.path().trim_end_matches('/'))
            }
        };
        let path: http::uri::PathAndQuery = path
            .parse()
            .map_err(|e| format!("{name}={endpoint:?}: {e}"))?;
        let uri = match protocol {
            Protocol::Grpc => Uri::builder()
                .scheme("http")
                .authority(authority.clone())
                .path_and_query(path.clone())
                .build()
                .map_err(|e| format!("{name}={endpoint:?}: {e}"))?,
            Protocol::HttpProtobuf => Uri::from(path.clone()),
        };

        let mut headers = HeaderMap::new();
        if let Some((name, value, _)) = either("HEADERS") {
            for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let Some((k, v)) = pair.split_once('=') else {
                    return Err(format!("{name}: {pair:?} is not key=value"));
                };
                let v = percent_decode(v.trim());
                let k = HeaderName::from_bytes(k.trim().as_bytes())
                    .map_err(|_| format!("{name}: {:?} is not a header name", k.trim()))?;
                let v = HeaderValue::from_str(&v)
                    .map_err(|_| format!("{name}: the value of {k} is not a header value"))?;
                headers.append(k, v);
            }
        }
        let timeout = match either("TIMEOUT") {
            None => Duration::from_secs(10),
            Some((name, v, _)) => v
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("{name}={v:?} is not a number of milliseconds"))?,
        };
        Ok(Self {
            protocol,
            authority,
            path,
            uri,
            headers,
            timeout,
        })
    }
}

/// The batch processor's bounds, from the specification's `OTEL_BSP_*` variables (its defaults
/// when unset; `OTEL_BSP_EXPORT_TIMEOUT` is not read: an export is bounded by
/// `OTEL_EXPORTER_OTLP_TIMEOUT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Spans waiting to be exported at most (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048); more are dropped.
    pub max_queue: usize,
    /// Spans per export at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512; at most the queue).
    pub max_batch: usize,
    /// The longest a span waits before its batch is exported (`OTEL_BSP_SCHEDULE_DELAY`, ms,
    /// 5000).
    pub delay: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_queue: 2048,
            max_batch: 512,
            delay: Duration::from_millis(5000),
        }
    }
}

impl Limits {
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let number = |name: &str, default: u64| -> Result<u64, String> {
            match env(name).filter(|v| !v.trim().is_empty()) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{name}={v:?} is not a positive whole number")),
            }
        };
        let d = Self::default();
        let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", d.max_queue as u64)? as usize;
        let max_batch = number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", d.max_batch as u64)? as usize;
        let delay = number("OTEL_BSP_SCHEDULE_DELAY", d.delay.as_millis() as u64)?;
        Ok(Self {
            max_queue,
            // As the specification says: a batch larger than the queue could never fill.
            max_batch: max_batch.min(max_queue),
            delay: Duration::from_millis(delay),
        })
    }
}

/// `%XX` escapes decoded (the spec's header values are URL-encoded); invalid ones kept as is.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_env(&move |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn grpc_uses_the_endpoint_authority_and_the_trace_service_method() {
        let c = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")]).unwrap();
        assert_eq!(c.protocol, Protocol::Grpc);
        assert_eq!(c.authority, "127.0.0.1:4317");
        assert_eq!(c.path, GRPC_PATH);
        assert_eq!(c.timeout, Duration::from_secs(10));
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector"),
        ])
        .unwrap();
        assert_eq!(c.authority, "collector:80");
    }

    #[test]
    fn http_appends_the_signal_path_to_the_generic_endpoint_only() {
        let http = ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
        let c = config(&[http, ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318")]).unwrap();
        assert_eq!(
            (c.authority.as_str(), c.path.as_str()),
            ("h:4318", "/v1/traces")
        );
        let c = config(&[http, ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/base/")]).unwrap();
        assert_eq!(c.path, "/base/v1/traces");
        let c = config(&[
            http,
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://h:9/custom?x=1",
            ),
        ])
        .unwrap();
        assert_eq!(c.path, "/custom?x=1");
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ])
        .unwrap();
        assert_eq!(
            (c.authority.as_str(), c.path.as_str()),
            ("localhost:4318", "/v1/traces")
        );
    }

    #[test]
    fn headers_and_timeout_signal_specific_first() {
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_HEADERS", "ignored=1"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "authorization=Bearer%20abc, x-tenant = t1",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ])
        .unwrap();
        assert_eq!(c.headers["authorization"], "Bearer abc");
        assert_eq!(c.headers["x-tenant"], "t1");
        assert!(!c.headers.contains_key("ignored"));
        assert_eq!(c.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn unusable_settings_are_refused() {
        for bad in [
            vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317")],
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")],
            vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")],
            vec![("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign")],
        ] {
            assert!(config(&bad).is_err(), "{bad:?}");
        }
    }

    fn limits(pairs: &[(&'static str, &'static str)]) -> Result<Limits, String> {
        let pairs = pairs.to_vec();
        Limits::from_env(&move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn batch_limits_default_as_the_specification_says_and_are_checked() {
        assert_eq!(limits(&[]).unwrap(), Limits::default());
        let l = limits(&[
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "500"),
            ("OTEL_BSP_SCHEDULE_DELAY", "250"),
        ])
        .unwrap();
        assert_eq!(
            (l.max_queue, l.max_batch, l.delay),
            (100, 100, Duration::from_millis(250)),
            "a batch is at most the queue"
        );
        for bad in ["0", "-1", "1.5", "lots"] {
            assert!(
                limits(&[("OTEL_BSP_MAX_QUEUE_SIZE", bad)]).is_err(),
                "{bad}"
            );
        }
    }
}
