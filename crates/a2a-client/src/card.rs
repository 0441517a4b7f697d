//! Agent-card discovery: fetch the public card and pick the interface to bind to.

use a2a_types::v1::{AgentCard, AgentInterface};

use crate::error::ClientError;
use crate::http::{decode_json, read_body, send};
use crate::{Binding, BindingKind, Limits};

/// The well-known path of the public agent card.
pub use a2a_types::WELL_KNOWN_AGENT_CARD_PATH as WELL_KNOWN_PATH;

/// How [`A2aClient::from_card_url`](crate::A2aClient::from_card_url) chooses an interface.
#[derive(Debug, Clone, Default)]
pub struct ClientPrefs {
    /// The bindings the caller accepts; empty = all three. The card's order still decides
    /// among the accepted ones (the first interface is the agent's preferred one).
    pub bindings: Vec<BindingKind>,
    pub limits: Limits,
    /// TLS toward the agent beyond the system's roots (a private CA, a client certificate).
    pub tls: crate::ClientTls,
}

impl ClientPrefs {
    /// Only this binding.
    pub fn only(binding: BindingKind) -> Self {
        Self {
            bindings: vec![binding],
            ..Self::default()
        }
    }
}

/// GETs the card at `url`; a URL without a path gets the well-known path.
pub async fn fetch_card(
    http: &reqwest::Client,
    url: &str,
    max_bytes: usize,
) -> Result<AgentCard, ClientError> {
    let mut u = crate::http::parse_url(url)?;
    if u.path().is_empty() || u.path() == "/" {
        u.set_path(WELL_KNOWN_PATH);
    }
    let context = "fetching the agent card";
    let resp = send(
        http.get(u.clone())
            .header(reqwest::header::ACCEPT, "application/json"),
        context,
    )
    .await?;
    let status = resp.status();
    let body = read_body(resp, max_bytes, context).await?;
    if !status.is_success() {
        return Err(ClientError::Unclassified {
            status: format!("HTTP {}", status.as_u16()),
            message: format!("GET {u}: {}", crate::error::truncated_text(&body)),
        });
    }
    decode_json(&body, context)
}

fn speaks_1x(iface: &AgentInterface) -> bool {
    let v = iface.protocol_version.trim();
    v.is_empty() || v == "1" || v.starts_with("1.")
}

/// The first interface of `card` (in the card's order) with an A2A 1.x version and a binding
/// `prefs` accepts, as a [`Binding`] and the interface's tenant.
pub fn select_interface(
    card: &AgentCard,
    prefs: &ClientPrefs,
) -> Result<(Binding, String), ClientError> {
    for iface in &card.supported_interfaces {
        let Some(kind) = BindingKind::from_card_name(&iface.protocol_binding) else {
            continue;
        };
        if !speaks_1x(iface) || !(prefs.bindings.is_empty() || prefs.bindings.contains(&kind)) {
            continue;
        }
        let url = iface.url.clone();
        let binding = match kind {
            BindingKind::JsonRpc => Binding::JsonRpc { url },
            BindingKind::HttpJson => Binding::Rest { url },
            BindingKind::Grpc => Binding::Grpc {
                endpoint: grpc_endpoint(card, url),
            },
        };
        return Ok((binding, iface.tenant.clone()));
    }
    let offered: Vec<String> = card
        .supported_interfaces
        .iter()
        .map(|i| format!("{} {} ({})", i.protocol_binding, i.url, i.protocol_version))
        .collect();
    Err(ClientError::Config(format!(
        "the card offers no A2A 1.x interface over {}: [{}]",
        if prefs.bindings.is_empty() {
            "JSONRPC, HTTP+JSON or GRPC".to_owned()
        } else {
            prefs
                .bindings
                .iter()
                .map(|b| b.card_name())
                .collect::<Vec<_>>()
                .join(", ")
        },
        offered.join(", ")
    )))
}

/// A gRPC interface's URL may be a bare `host:port` (the spec allows it), which says nothing
/// about TLS: it takes the scheme of the card's HTTP interfaces on the same host, so an agent
/// that serves https on one port is reached over TLS by gRPC too; otherwise it stays plaintext
/// (h2c).
fn grpc_endpoint(card: &AgentCard, url: String) -> String {
    if url.contains("://") {
        return url;
    }
    let host = url.rsplit_once(':').map_or(url.as_str(), |(h, _)| h);
    let tls = card.supported_interfaces.iter().any(|i| {
        url::Url::parse(&i.url).is_ok_and(|u| u.scheme() == "https" && u.host_str() == Some(host))
    });
    if tls { format!("https://{url}") } else { url }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(binding: &str, url: &str, version: &str, tenant: &str) -> AgentInterface {
        AgentInterface {
            url: url.into(),
            protocol_binding: binding.into(),
            tenant: tenant.into(),
            protocol_version: version.into(),
        }
    }

    fn card() -> AgentCard {
        AgentCard {
            supported_interfaces: vec![
                iface("JSONRPC", "http://h/old", "0.3", ""),
                iface("urn:custom", "http://h/custom", "1.0", ""),
                iface("HTTP+JSON", "http://h/a2a/rest", "1.0", "t1"),
                iface("JSONRPC", "http://h/a2a/jsonrpc", "1.0", ""),
                iface("GRPC", "h:8080", "1.0", ""),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn picks_the_first_supported_1x_interface_in_card_order() {
        let (b, tenant) = select_interface(&card(), &ClientPrefs::default()).unwrap();
        assert_eq!(
            b,
            Binding::Rest {
                url: "http://h/a2a/rest".into()
            }
        );
        assert_eq!(tenant, "t1");
    }

    #[test]
    fn a_bare_grpc_host_port_takes_https_from_the_cards_http_interfaces() {
        let grpc = |urls: &[&str], grpc: &str| {
            let mut ifaces: Vec<_> = urls
                .iter()
                .map(|u| iface("JSONRPC", u, "0.3", ""))
                .collect();
            ifaces.push(iface("GRPC", grpc, "1.0", ""));
            let card = AgentCard {
                supported_interfaces: ifaces,
                ..Default::default()
            };
            match select_interface(&card, &ClientPrefs::default()).unwrap().0 {
                Binding::Grpc { endpoint } => endpoint,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(grpc(&["https://h/a2a"], "h:8443"), "https://h:8443");
        assert_eq!(grpc(&["http://h/a2a"], "h:8080"), "h:8080");
        assert_eq!(grpc(&["https://other/a2a"], "h:8080"), "h:8080");
        assert_eq!(grpc(&["https://h/a2a"], "http://h:8080"), "http://h:8080");
        assert_eq!(grpc(&["https://[::1]:1/a2a"], "[::1]:2"), "https://[::1]:2");
    }

    #[test]
    fn preferences_restrict_the_choice() {
        let (b, _) = select_interface(&card(), &ClientPrefs::only(BindingKind::JsonRpc)).unwrap();
        assert_eq!(
            b,
            Binding::JsonRpc {
                url: "http://h/a2a/jsonrpc".into()
            }
        );
        let (b, _) = select_interface(&card(), &ClientPrefs::only(BindingKind::Grpc)).unwrap();
        assert_eq!(
            b,
            Binding::Grpc {
                endpoint: "h:8080".into()
            }
        );
        let only_old = AgentCard {
            supported_interfaces: vec![iface("JSONRPC", "http://h/old", "0.3", "")],
            ..Default::default()
        };
        assert!(matches!(
            select_interface(&only_old, &ClientPrefs::default()),
            Err(ClientError::Config(_))
        ));
    }
}
