//! The A2A endpoint under test: its card, the interface to bind, auth headers, connections.

use std::time::Duration;

use a2a_client::{A2aClient, Binding, BindingKind, ClientPrefs};
use anyhow::{Context, Result, bail};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BindingArg {
    Jsonrpc,
    Rest,
    Grpc,
}

impl BindingArg {
    fn kind(self) -> BindingKind {
        match self {
            Self::Jsonrpc => BindingKind::JsonRpc,
            Self::Rest => BindingKind::HttpJson,
            Self::Grpc => BindingKind::Grpc,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// The agent card URL, or the agent's base URL (the card is then fetched from
    /// `/.well-known/agent-card.json`; without a card, the gateway's layout `/a2a/jsonrpc`,
    /// `/a2a/rest`, gRPC at the base, is assumed).
    #[arg(long)]
    pub url: String,
    /// The binding to use; default: the card's first (its preferred) interface.
    #[arg(long, value_enum)]
    pub binding: Option<BindingArg>,
    /// The tenant put into every request (default: the card interface's).
    #[arg(long)]
    pub tenant: Option<String>,
    /// `Authorization: Bearer TOKEN` on every request.
    #[arg(long, value_name = "TOKEN")]
    pub bearer: Option<String>,
    /// An API key header on every request, e.g. `x-api-key=secret` (repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    pub api_key_header: Vec<String>,
    /// Any other header (HTTP) or metadata entry (gRPC) on every request (repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    pub header: Vec<String>,
    /// Connections to open (requests are spread round robin). HTTP/1.1 opens more as needed
    /// for concurrent requests; with `--h2c` or gRPC each connection multiplexes.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// HTTP/2 without TLS (prior knowledge) for the HTTP bindings.
    #[arg(long)]
    pub h2c: bool,
    /// A request without its answer after this long fails with kind `transport`.
    #[arg(long, default_value = "30s", value_parser = crate::units::parse_duration)]
    pub timeout: Duration,
}

fn http_client(h2c: bool) -> Result<reqwest::Client> {
    let mut b = reqwest::Client::builder().pool_max_idle_per_host(1024);
    if h2c {
        b = b.http2_prior_knowledge();
    }
    Ok(b.build()?)
}

fn name_value(s: &str) -> Result<(&str, &str)> {
    s.split_once('=')
        .map(|(n, v)| (n.trim(), v.trim()))
        .with_context(|| format!("{s:?}: NAME=VALUE"))
}

/// The binding the gateway serves at `base` when there is no card to read.
fn gateway_layout(base: &str, kind: BindingKind) -> Binding {
    let base = base.trim_end_matches('/');
    match kind {
        BindingKind::JsonRpc => Binding::JsonRpc {
            url: format!("{base}/a2a/jsonrpc"),
        },
        BindingKind::HttpJson => Binding::Rest {
            url: format!("{base}/a2a/rest"),
        },
        BindingKind::Grpc => Binding::Grpc {
            endpoint: base.to_owned(),
        },
    }
}

/// One client per connection, all bound to the same interface, with the auth headers.
pub async fn clients(t: &TargetArgs) -> Result<Vec<A2aClient>> {
    let prefs = match t.binding {
        Some(b) => ClientPrefs::only(b.kind()),
        None => ClientPrefs::default(),
    };
    let probe = http_client(false)?;
    let card = a2a_client::fetch_card(&probe, &t.url, prefs.limits.max_body_bytes).await;
    let (binding, card_tenant) = match &card {
        Ok(card) => a2a_client::select_interface(card, &prefs)
            .with_context(|| format!("the card at {}", t.url))?,
        Err(e) => {
            let u = url::Url::parse(&t.url).with_context(|| format!("--url {}", t.url))?;
            if !(u.path().is_empty() || u.path() == "/") {
                bail!("no agent card at {}: {e}", t.url);
            }
            let kind = t.binding.map_or(BindingKind::JsonRpc, BindingArg::kind);
            eprintln!(
                "a2a-loadtest: no agent card at {} ({e}); assuming the gateway's layout",
                t.url
            );
            (gateway_layout(&t.url, kind), String::new())
        }
    };
    let mut headers = Vec::new();
    if let Some(token) = &t.bearer {
        headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    }
    for h in t.api_key_header.iter().chain(&t.header) {
        let (n, v) = name_value(h)?;
        headers.push((n.to_owned(), v.to_owned()));
    }
    (0..t.connections.max(1))
        .map(|_| {
            // A reqwest client (and a tonic channel) per A2aClient: a connection pool each.
            let mut c = A2aClient::with_http_client(binding.clone(), http_client(t.h2c)?)?
                .with_tenant(t.tenant.clone().unwrap_or_else(|| card_tenant.clone()))
                .with_timeout(t.timeout);
            for (n, v) in &headers {
                c = c.with_header(n, v)?;
            }
            Ok(c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_layout_by_binding() {
        let base = "http://127.0.0.1:1/";
        assert_eq!(
            gateway_layout(base, BindingKind::JsonRpc),
            Binding::JsonRpc {
                url: "http://127.0.0.1:1/a2a/jsonrpc".into()
            }
        );
        assert_eq!(
            gateway_layout(base, BindingKind::HttpJson),
            Binding::Rest {
                url: "http://127.0.0.1:1/a2a/rest".into()
            }
        );
        assert_eq!(
            gateway_layout(base, BindingKind::Grpc),
            Binding::Grpc {
                endpoint: "http://127.0.0.1:1".into()
            }
        );
        assert_eq!(name_value("x-api-key = s=1").unwrap(), ("x-api-key", "s=1"));
        assert!(name_value("novalue").is_err());
    }
}
