//! The A2A endpoint under test: its card, the interface to bind, auth headers, connections.

use std::path::PathBuf;
use std::time::Duration;

use a2a_client::{A2aClient, Binding, BindingKind, ClientPrefs, ClientTls};
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
    /// OAuth2 client credentials: the token endpoint. The token is fetched once, at the start,
    /// and sent as a bearer token (a run must end before the token expires).
    #[arg(long, value_name = "URL", requires_all = ["client_id", "client_secret"])]
    pub oauth2_token_url: Option<String>,
    #[arg(long)]
    pub client_id: Option<String>,
    #[arg(long)]
    pub client_secret: Option<String>,
    /// OAuth2 scopes (repeatable).
    #[arg(long)]
    pub scope: Vec<String>,
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
    /// TLS (`https://` targets): PEM CA certificates trusted besides the system's roots.
    #[arg(long, value_name = "PEM")]
    pub ca: Option<PathBuf>,
    /// TLS: a PEM client certificate chain to present (mutual TLS); needs --key.
    #[arg(long, value_name = "PEM", requires = "key")]
    pub cert: Option<PathBuf>,
    /// TLS: the client certificate's PEM private key.
    #[arg(long, value_name = "PEM", requires = "cert")]
    pub key: Option<PathBuf>,
}

impl TargetArgs {
    fn tls(&self) -> Result<ClientTls> {
        let read = |p: &Option<PathBuf>| -> Result<Option<Vec<u8>>> {
            p.as_ref()
                .map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display())))
                .transpose()
        };
        Ok(ClientTls {
            ca_pem: read(&self.ca)?,
            cert_pem: read(&self.cert)?,
            key_pem: read(&self.key)?,
        })
    }
}

fn http_client(h2c: bool, tls: &ClientTls) -> Result<reqwest::Client> {
    let mut b = reqwest::Client::builder().pool_max_idle_per_host(1024);
    if h2c {
        b = b.http2_prior_knowledge();
    }
    Ok(tls.configure(b)?.build()?)
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

/// An access token from an OAuth2 token endpoint (client credentials grant, RFC 6749 §4.4).
async fn client_credentials(
    http: &reqwest::Client,
    token_url: &str,
    client_id: &str,
    client_secret: &str,
    scopes: &[String],
) -> Result<String> {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials");
    form.append_pair("client_id", client_id);
    form.append_pair("client_secret", client_secret);
    if !scopes.is_empty() {
        form.append_pair("scope", &scopes.join(" "));
    }
    let resp = http
        .post(token_url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(form.finish())
        .send()
        .await
        .with_context(|| format!("token endpoint {token_url}"))?;
    let status = resp.status();
    let body: serde_json::Value = resp
        .json()
        .await
        .with_context(|| format!("token endpoint {token_url}: HTTP {status}"))?;
    if !status.is_success() {
        bail!("token endpoint {token_url}: HTTP {status}: {body}");
    }
    body["access_token"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("token endpoint {token_url}: no access_token in {body}"))
}

/// One client per connection, all bound to the same interface, with the auth headers.
pub async fn clients(t: &TargetArgs) -> Result<Vec<A2aClient>> {
    let prefs = match t.binding {
        Some(b) => ClientPrefs::only(b.kind()),
        None => ClientPrefs::default(),
    };
    let tls = t.tls()?;
    let probe = http_client(false, &tls)?;
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
    if let Some(token_url) = &t.oauth2_token_url {
        let token = client_credentials(
            &probe,
            token_url,
            t.client_id.as_deref().unwrap_or_default(),
            t.client_secret.as_deref().unwrap_or_default(),
            &t.scope,
        )
        .await?;
        headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    }
    for h in t.api_key_header.iter().chain(&t.header) {
        let (n, v) = name_value(h)?;
        headers.push((n.to_owned(), v.to_owned()));
    }
    (0..t.connections.max(1))
        .map(|_| {
            // A reqwest client (and a tonic channel) per A2aClient: a connection pool each.
            let http = http_client(t.h2c, &tls)?;
            let mut c = A2aClient::with_http_client_and_tls(binding.clone(), http, &tls)?
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

    #[tokio::test]
    async fn a_token_by_client_credentials() {
        // A token endpoint that checks the form and answers with a token, over real HTTP.
        let app = axum::Router::new().route(
            "/token",
            axum::routing::post(|body: String| async move {
                let form: std::collections::HashMap<String, String> =
                    url::form_urlencoded::parse(body.as_bytes())
                        .into_owned()
                        .collect();
                let ok = form["grant_type"] == "client_credentials"
                    && form["client_id"] == "lt"
                    && form["client_secret"] == "s3cret"
                    && form["scope"] == "a2a.send a2a.read";
                if ok {
                    (
                        axum::http::StatusCode::OK,
                        r#"{"access_token":"tok-1","token_type":"Bearer"}"#,
                    )
                } else {
                    (
                        axum::http::StatusCode::UNAUTHORIZED,
                        r#"{"error":"invalid_client"}"#,
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let http = reqwest::Client::new();
        let scopes = ["a2a.send".to_owned(), "a2a.read".to_owned()];
        let token = client_credentials(&http, &url, "lt", "s3cret", &scopes)
            .await
            .unwrap();
        assert_eq!(token, "tok-1");
        let err = client_credentials(&http, &url, "lt", "wrong", &scopes)
            .await
            .unwrap_err();
        assert!(format!("{err:#}").contains("401"), "{err:#}");
        server.abort();
    }
}
