//! The rate limiter's own tests (scopes, costs, overrides, eviction, the client address).

use super::*;
use crate::config::FileConfig;

fn limiter(toml: &str) -> Arc<RateLimiter> {
    let file = FileConfig::parse(toml).unwrap();
    RateLimiter::new(&file.limits.rate).expect("limits are set")
}

#[tokio::test]
async fn a_burst_passes_then_the_caller_waits() {
    let rl = limiter("[limits.rate]\nip = { rate = 10, burst = 5 }");
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    for left in (0..5).rev() {
        let a = rl.check_ip(ip, 1).await.unwrap().unwrap();
        assert_eq!(a.remaining, left);
    }
    match rl.check_ip(ip, 1).await {
        Err(A2aError::RateLimited {
            scope,
            limit,
            window_secs,
            retry_after_ms,
        }) => {
            assert_eq!((scope.as_str(), limit, window_secs), ("ip", 5, 1));
            assert!((1..=100).contains(&retry_after_ms), "{retry_after_ms}");
        }
        other => panic!("{other:?}"),
    }
    // Another address has its own bucket.
    assert!(rl.check_ip("10.0.0.2".parse().unwrap(), 5).await.is_ok());
}

#[tokio::test]
async fn sends_cost_more_than_reads() {
    let rl = limiter("[limits.rate]\nprincipal = { rate = 1, burst = 10 }");
    assert_eq!(rl.cost(Some(Method::SendMessage)), 5);
    assert_eq!(rl.cost(Some(Method::GetTask)), 1);
    assert_eq!(rl.cost(None), 1);
    let owner = "alice".to_owned();
    rl.check_principal(&owner, 5).await.unwrap();
    rl.check_principal(&owner, 5).await.unwrap();
    assert!(rl.check_principal(&owner, 1).await.is_err());
}

#[tokio::test]
async fn overrides_by_principal_and_by_key_id() {
    let rl = limiter(
        r#"
        [limits.rate]
        principal = { rate = 1, burst = 5 }
        costs = { GetTask = 2 }
        [[limits.rate.overrides]]
        principal = "vip"
        rate = 100
        burst = 50
        [[limits.rate.overrides]]
        key = "ci"
        rate = 100
        burst = 20
        "#,
    );
    assert_eq!(rl.cost(Some(Method::GetTask)), 2);
    let vip = rl.check_principal(&"vip".into(), 1).await.unwrap().unwrap();
    assert_eq!(vip.policy.burst, 50);
    let ci = "apikey:key:config:ci".to_owned();
    let key = rl.check_principal(&ci, 1).await.unwrap().unwrap();
    assert_eq!(key.policy.burst, 20);
    let other = rl.check_principal(&"bob".into(), 1).await.unwrap().unwrap();
    assert_eq!(other.policy.burst, 5);
    assert_eq!(
        api_key_id("apikey:k%3Ay:db:id:with:colons"),
        Some("id:with:colons")
    );
    assert_eq!(api_key_id("https://issuer|sub"), None);
}

#[tokio::test]
async fn full_buckets_are_evicted() {
    let rl = limiter("[limits.rate]\nip = { rate = 1000, burst = 5 }");
    for i in 0..100u8 {
        rl.check_ip(IpAddr::from([10, 0, 0, i]), 1).await.unwrap();
    }
    assert_eq!(rl.keys(), 100);
    // 5 units at 1000/s are earned back within 5 ms.
    tokio::time::sleep(Duration::from_millis(20)).await;
    rl.evict();
    assert_eq!(rl.keys(), 0);
}

#[test]
fn the_client_ip_header_wins_when_configured() {
    let rl_off = RateConfig {
        ip: Some(Rate {
            rate: 1.0,
            burst: 5,
        }),
        ..RateConfig::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let peer: IpAddr = "127.0.0.1".parse().unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("x-forwarded-for", "1.2.3.4, 5.6.7.8".parse().unwrap());
    let off = RateLimiter::new(&rl_off).unwrap();
    assert_eq!(off.client_ip(&headers, Some(peer)), Some(peer));
    let on = RateConfig {
        client_ip_header: Some("X-Forwarded-For".into()),
        trusted_proxies: vec!["127.0.0.1".into()],
        ..rl_off.clone()
    };
    let on = RateLimiter::new(&on).unwrap();
    assert_eq!(
        on.client_ip(&headers, Some(peer)),
        Some("5.6.7.8".parse().unwrap())
    );
    assert_eq!(on.client_ip(&HeaderMap::new(), Some(peer)), Some(peer));
}

#[test]
fn bad_limits_are_refused() {
    for bad in [
        "[limits.rate]\nip = { rate = 0, burst = 5 }",
        // Positive, but its period (1/rate) once panicked `Duration::from_secs_f64` (L5).
        "[limits.rate]\nip = { rate = 1e-20, burst = 5 }",
        "[limits.rate]\nip = { rate = 1e-7, burst = 5 }",
        "[limits.rate]\nip = { rate = 1e-6, burst = 4000000 }",
        "[limits.rate]\nprincipal = { rate = 1, burst = 4 }",
        "[limits.rate]\ncosts = { Nope = 1 }",
        "[limits.rate]\ncosts = { GetTask = 0 }",
        "[limits.rate]\n[[limits.rate.overrides]]\nrate = 1\nburst = 5",
        "[limits.rate]\nbackend = \"memcached\"",
        "[limits.rate]\ntrusted_proxies = [\"10.0.0.0/33\"]",
        "[limits.rate]\nipv6_prefix = 129",
    ] {
        assert!(FileConfig::parse(bad).is_err(), "{bad}");
    }
    // The flat [limits] keys still parse beside the new table.
    let f =
        FileConfig::parse("[limits]\nmax_parts = 3\n[limits.rate]\nip = { rate = 5, burst = 10 }")
            .unwrap();
    assert_eq!(f.limits.max_parts, 3);
    assert_eq!(
        f.limits.rate.ip,
        Some(Rate {
            rate: 5.0,
            burst: 10
        })
    );
}

/// A scope built from any positive rate never panics (the configuration refuses tiny ones, but
/// the limiter does not rely on it).
#[test]
fn any_positive_rate_builds_a_scope() {
    for rate in [1e-300, 1e-20, MIN_RATE_FOR_TESTS, 1.0, 1e300] {
        for burst in [1, 5, u32::MAX] {
            let _ = Scope::<u32>::new("ip", Rate { rate, burst });
        }
    }
    assert!(
        FileConfig::parse("[limits.rate]\nip = { rate = 1e-6, burst = 5 }").is_ok(),
        "the smallest rate accepted"
    );
}

const MIN_RATE_FOR_TESTS: f64 = crate::limits::config::MIN_RATE;
