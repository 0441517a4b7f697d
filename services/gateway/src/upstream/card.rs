//! Fetching an upstream's agent card with HTTP caching: a conditional GET (`If-None-Match` with
//! the last `ETag`), and the next refresh after the card's `Cache-Control: max-age`.

use std::time::Duration;

use a2a_types::v1::AgentCard;
use serde::Deserialize;

/// The well-known path appended to a card URL that is a bare base URL.
const WELL_KNOWN: &str = "/.well-known/agent-card.json";
/// Refresh bounds: a card is re-read at most this often ...
pub const MIN_MAX_AGE: Duration = Duration::from_secs(5);
/// ... and at least this often.
pub const MAX_MAX_AGE: Duration = Duration::from_secs(3600);
/// Without `Cache-Control`.
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(300);
const MAX_CARD_BYTES: usize = 1024 * 1024;

pub enum Fetched {
    /// A new card (and the JSON document it was read from, which its signatures cover), its
    /// ETag, and how long it stays fresh.
    Card {
        card: AgentCard,
        json: serde_json::Value,
        etag: Option<String>,
        max_age: Duration,
    },
    /// 304: the card is unchanged, fresh for `max_age` more.
    NotModified { max_age: Duration },
}

pub fn card_location(url: &str) -> Result<url::Url, String> {
    let mut u = url::Url::parse(url).map_err(|e| format!("card URL {url:?}: {e}"))?;
    if u.path().is_empty() || u.path() == "/" {
        u.set_path(WELL_KNOWN);
    }
    Ok(u)
}

/// `max-age` of a `Cache-Control` value (`no-cache`/`no-store` = refresh as soon as allowed).
fn max_age(cache_control: Option<&str>) -> Duration {
    let Some(cc) = cache_control else {
        return DEFAULT_MAX_AGE;
    };
    let mut age = DEFAULT_MAX_AGE;
    for directive in cc.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-cache" || lower == "no-store" {
            return MIN_MAX_AGE;
        }
        if let Some(v) = lower.strip_prefix("max-age=")
            && let Ok(secs) = v.trim_matches('"').parse::<u64>()
        {
            age = Duration::from_secs(secs);
        }
    }
    age.clamp(MIN_MAX_AGE, MAX_MAX_AGE)
}

/// GETs the card; `etag` makes it conditional. `v03` parses the 0.3 card shape.
pub async fn fetch(
    http: &reqwest::Client,
    url: &url::Url,
    etag: Option<&str>,
    v03: bool,
    timeout: Duration,
) -> Result<Fetched, String> {
    let mut req = http
        .get(url.clone())
        .header("accept", "application/json")
        .timeout(timeout);
    if let Some(tag) = etag {
        req = req.header("if-none-match", tag);
    }
    let resp = req.send().await.map_err(|e| format!("GET {url}: {e}"))?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let age = max_age(header("cache-control").as_deref());
    if resp.status() == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(Fetched::NotModified { max_age: age });
    }
    if !resp.status().is_success() {
        return Err(format!("GET {url}: HTTP {}", resp.status().as_u16()));
    }
    let new_etag = header("etag");
    let bytes = crate::fetch::read_capped(resp, MAX_CARD_BYTES)
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("GET {url}: not JSON: {e}"))?;
    let card = if v03 {
        a2a_types::v03::card(&json)?
    } else {
        AgentCard::deserialize(&json).map_err(|e| format!("GET {url}: not an AgentCard: {e}"))?
    };
    Ok(Fetched::Card {
        card,
        json,
        etag: new_etag,
        max_age: age,
    })
}

#[cfg(test)]
mod tests {
    /// L7: an upstream that streams a card without end is cut at the cap, not buffered.
    #[tokio::test]
    async fn an_endless_card_is_refused_at_the_cap() {
        let base = crate::fetch::endless::json_server().await;
        let url = url::Url::parse(&format!("{base}/.well-known/agent-card.json")).unwrap();
        let http = reqwest::Client::new();
        let started = std::time::Instant::now();
        let timeout = std::time::Duration::from_secs(30);
        let err = match super::fetch(&http, &url, None, false, timeout).await {
            Err(e) => e,
            Ok(_) => panic!("an endless card was accepted"),
        };
        assert!(err.contains("larger than 1048576 bytes"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    use super::*;

    #[test]
    fn cache_control_sets_the_refresh() {
        assert_eq!(max_age(Some("public, max-age=60")), Duration::from_secs(60));
        assert_eq!(max_age(Some("max-age=1")), MIN_MAX_AGE);
        assert_eq!(max_age(Some("max-age=999999")), MAX_MAX_AGE);
        assert_eq!(max_age(Some("no-cache")), MIN_MAX_AGE);
        assert_eq!(max_age(None), DEFAULT_MAX_AGE);
        assert_eq!(
            card_location("http://h:1").unwrap().as_str(),
            "http://h:1/.well-known/agent-card.json"
        );
    }
}
