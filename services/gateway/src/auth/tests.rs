//! Unit tests of the authenticator: API key locations, config errors, and logs without secrets.
use super::*;
use axum::http::header;

fn auth(toml: &str) -> Authenticator {
    let c: AuthConfig = toml::from_str(toml).unwrap();
    Authenticator::new(&c).unwrap()
}

const KEYS: &str = r#"
    [schemes.key]
    scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
    keys = [
        { id = "alice", key = "alice-secret" },
        # sha256("bob-secret")
        { id = "bob", sha256 = "9f03ef1533a68d2f506f81ef463c1183a82a6bd40e45613f36e6fe1889cf1b99" },
    ]
"#;

#[tokio::test]
async fn api_keys_in_header() {
    let a = auth(KEYS);
    let mut h = HeaderMap::new();
    let creds = async |h: &HeaderMap| {
        a.authenticate(Credentials {
            headers: h,
            query: None,
            client_cert: None,
        })
        .await
    };
    let none = creds(&h).await.unwrap_err();
    assert!(matches!(none.error, A2aError::Unauthenticated(_)));
    let challenge = none.challenge.unwrap();
    assert_eq!(
        challenge,
        r#"ApiKey realm="a2a-gateway", in="header", name="x-api-key""#
    );
    h.insert("x-api-key", HeaderValue::from_static("alice-secret"));
    assert_eq!(creds(&h).await.unwrap().owner, "apikey:key:config:alice");
    h.insert("x-api-key", HeaderValue::from_static("bob-secret"));
    assert_eq!(creds(&h).await.unwrap().owner, "apikey:key:config:bob");
    h.insert("x-api-key", HeaderValue::from_static("wrong"));
    let err = creds(&h).await.unwrap_err().error;
    assert!(!err.to_string().contains("wrong"), "{err}");
}

#[tokio::test]
async fn api_keys_in_query_and_cookie() {
    let a = auth(
        r#"
        [schemes.q]
        scheme = { apiKeySecurityScheme = { location = "query", name = "api_key" } }
        keys = [{ id = "q", key = "in-query" }]
        [schemes.c]
        scheme = { apiKeySecurityScheme = { location = "cookie", name = "session" } }
        keys = [{ id = "c", key = "in-cookie" }]
    "#,
    );
    let empty = HeaderMap::new();
    let by_query = Credentials {
        headers: &empty,
        query: Some("a=b&api_key=in-query"),
        client_cert: None,
    };
    assert_eq!(
        a.authenticate(by_query).await.unwrap().owner,
        "apikey:q:config:q"
    );
    let mut cookies = HeaderMap::new();
    cookies.insert(
        header::COOKIE,
        HeaderValue::from_static("theme=dark; session=in-cookie"),
    );
    let by_cookie = Credentials {
        headers: &cookies,
        query: None,
        client_cert: None,
    };
    assert_eq!(
        a.authenticate(by_cookie).await.unwrap().owner,
        "apikey:c:config:c"
    );
    let wrong = Credentials {
        headers: &empty,
        query: Some("api_key=nope"),
        client_cert: None,
    };
    let err = a.authenticate(wrong).await.unwrap_err();
    assert!(err.error.to_string().contains("API key is not valid"));
}

/// Refusals are logged (debug) and issuer outages warned about, but never with the key or
/// the token.
#[tokio::test]
async fn credentials_never_reach_the_logs() {
    use std::sync::{Arc, Mutex};
    let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || SinkWriter(sink.clone()))
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let a = auth(&format!(
        r#"{KEYS}
        [schemes.jwt]
        scheme = {{ httpAuthSecurityScheme = {{ scheme = "Bearer", bearerFormat = "JWT" }} }}
        issuer = "http://127.0.0.1:1"
        audiences = ["a2a-gateway"]
    "#
    ));
    let token = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJzZWNyZXQtc3ViIn0.c2lnbmF0dXJl";
    let mut h = HeaderMap::new();
    h.insert("x-api-key", HeaderValue::from_static("leaky-secret-key"));
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    let err = a
        .authenticate(Credentials {
            headers: &h,
            query: None,
            client_cert: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err.error, A2aError::Unauthenticated(_)));
    let logged = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    assert!(logged.contains("JWKS"), "the outage is logged: {logged}");
    assert!(!logged.contains("leaky-secret-key"), "{logged}");
    assert!(
        !logged.contains(token) && !logged.contains("c2lnbmF0dXJl"),
        "{logged}"
    );
}

struct SinkWriter(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SinkWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn api_key_principals_are_unambiguous() {
    use KeySource::{Config, Db};
    assert_eq!(
        api_key_principal("key", Config, "ci"),
        "apikey:key:config:ci"
    );
    assert_eq!(api_key_principal("key", Db, "ci"), "apikey:key:db:ci");
    // A `:` in the scheme cannot make one (scheme, source, id) look like another.
    let a = api_key_principal("a:config", Config, "x");
    let b = api_key_principal("a", Config, "config:x");
    assert_ne!(a, b);
    assert_eq!(a, "apikey:a%3Aconfig:config:x");
    assert_ne!(
        api_key_principal("a%3A", Config, "x"),
        api_key_principal("a:", Config, "x")
    );
}

#[test]
fn config_errors() {
    let bad = |t: &str| {
        Authenticator::new(&toml::from_str::<AuthConfig>(t).unwrap())
            .err()
            .unwrap()
    };
    assert!(bad("").contains("no schemes"));
    assert!(bad(&format!("requirements = [{{ other = [] }}]\n{KEYS}")).contains("undeclared"));
    assert!(
        bad(r#"[schemes.b]
            scheme = { httpAuthSecurityScheme = { scheme = "Bearer" } }
            issuer = "https://i"
            audiences = ["a"]
            algorithms = ["HS256"]"#)
        .contains("HMAC")
    );
}

/// `requirements = [{}]` (OpenAPI's "anonymous allowed") is refused when the config loads,
/// with a message that names it, never accepted to fail per request.
#[test]
fn an_empty_requirement_is_refused_at_load() {
    for requirements in ["requirements = [{}]", "requirements = [{ key = [] }, {}]"] {
        let text = format!(
            "[auth]\n{requirements}\n{}",
            KEYS.replace("[schemes.", "[auth.schemes.")
        );
        let err = crate::config::FileConfig::parse(&text).unwrap_err();
        assert!(err.contains("[auth] requirements["), "{err}");
        assert!(err.contains("empty requirement `{}`"), "{err}");
        assert!(err.contains("anonymous"), "{err}");
    }
    let skill = format!(
        "[auth]\n[auth.skill_requirements]\nscenario = [{{}}]\n{}",
        KEYS.replace("[schemes.", "[auth.schemes.")
    );
    let err = crate::config::FileConfig::parse(&skill).unwrap_err();
    assert!(err.contains("skill_requirements.scenario[0]"), "{err}");
}

#[test]
fn implicit_requirements_are_published_as_one_alternative_per_scheme() {
    let a = auth(
        r#"
        [schemes.a]
        scheme = { apiKeySecurityScheme = { location = "header", name = "X-A" } }
        keys = [{ id = "a", key = "a" }]
        [schemes.b]
        scheme = { apiKeySecurityScheme = { location = "header", name = "X-B" } }
        keys = [{ id = "b", key = "b" }]
    "#,
    );
    let (schemes, requirements) = a.card();
    assert_eq!(schemes.len(), 2);
    let published: Vec<Vec<&str>> = requirements
        .iter()
        .map(|r| r.schemes.keys().map(String::as_str).collect())
        .collect();
    assert_eq!(published, vec![vec!["a"], vec!["b"]]);
}

#[tokio::test]
async fn mutual_tls_is_satisfied_by_a_verified_certificate_only() {
    let a = auth(
        r#"
        [schemes."client:cert"]
        scheme = { mtlsSecurityScheme = {} }
        [schemes.key]
        scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
        keys = [{ id = "k", key = "k-secret" }]
    "#,
    );
    let h = HeaderMap::new();
    let cert = crate::tls::ClientCert {
        subject: "CN=alice,O=Example".into(),
        ca: None,
    };
    let with = |client_cert| Credentials {
        headers: &h,
        query: None,
        client_cert,
    };
    assert_eq!(
        a.authenticate(with(Some(&cert))).await.unwrap().owner,
        "mtls:client%3Acert:CN=alice,O=Example"
    );
    let none = a.authenticate(with(None)).await.unwrap_err();
    assert!(matches!(none.error, A2aError::Unauthenticated(_)));
}

#[tokio::test]
async fn mutual_tls_principals_name_the_ca_when_several_are_trusted() {
    let a = auth(
        r#"
        [schemes.cert]
        scheme = { mtlsSecurityScheme = {} }
    "#,
    );
    let h = HeaderMap::new();
    let owner = async |ca: Option<&str>| {
        let cert = crate::tls::ClientCert {
            subject: "CN=alice,O=Example".into(),
            ca: ca.map(str::to_owned),
        };
        a.authenticate(Credentials {
            headers: &h,
            query: None,
            client_cert: Some(&cert),
        })
        .await
        .unwrap()
        .owner
    };
    assert_eq!(owner(None).await, "mtls:cert:CN=alice,O=Example");
    assert_eq!(
        owner(Some("ab12")).await,
        "mtls:cert:ca=ab12:CN=alice,O=Example"
    );
    assert_ne!(owner(Some("ab12")).await, owner(Some("cd34")).await);
}

/// An AND-set's owner names every principal it proved: users who share an application key
/// beside their own key are different owners (H2: the owner was the first scheme's alone).
#[tokio::test]
async fn an_and_set_owner_names_every_principal() {
    let a = auth(
        r#"
        requirements = [{ app = [], user = [] }, { user = [] }]
        [schemes.app]
        scheme = { apiKeySecurityScheme = { location = "header", name = "X-App-Key" } }
        keys = [{ id = "web", key = "app-secret" }]
        [schemes.user]
        scheme = { apiKeySecurityScheme = { location = "header", name = "X-User-Key" } }
        keys = [{ id = "alice", key = "alice-secret" }, { id = "bob", key = "bob-secret" }]
    "#,
    );
    let owner = async |app: Option<&'static str>, user: &'static str| {
        let mut h = HeaderMap::new();
        if let Some(app) = app {
            h.insert("x-app-key", HeaderValue::from_static(app));
        }
        h.insert("x-user-key", HeaderValue::from_static(user));
        a.authenticate(Credentials {
            headers: &h,
            query: None,
            client_cert: None,
        })
        .await
        .unwrap()
        .owner
    };
    let alice = owner(Some("app-secret"), "alice-secret").await;
    let bob = owner(Some("app-secret"), "bob-secret").await;
    assert_ne!(alice, bob);
    assert_eq!(
        alice,
        r#"and:["apikey:app:config:web","apikey:user:config:alice"]"#
    );
    // A single-scheme set keeps the scheme's own principal.
    assert_eq!(
        owner(None, "alice-secret").await,
        "apikey:user:config:alice"
    );
}
