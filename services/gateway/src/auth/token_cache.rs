//! A bounded cache of tokens that already passed verification, so a client that reuses its
//! bearer token (the normal case: one token for its whole lifetime) pays for the signature check
//! once, not on every request.
//!
//! Entries are keyed by the token's SHA-256 (the token itself is never kept), live until the
//! token's `exp` or `max_age`, whichever is sooner, so a key the issuer withdraws stops being
//! trusted within `max_age`. Only successes are cached: a bad token is re-checked every time.
//!
//! When full, the cache evicts one entry for each one it takes (`quick_cache`'s S3-FIFO: a
//! token seen once goes before the tokens in use), so many distinct callers cannot flush the
//! tokens of the others.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::jwt::Verified;

pub struct TokenCache {
    entries: Option<quick_cache::sync::Cache<[u8; 32], (Verified, Instant)>>,
    max_age: Duration,
}

impl TokenCache {
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self {
            entries: (capacity > 0).then(|| quick_cache::sync::Cache::new(capacity)),
            max_age,
        }
    }

    pub fn get(&self, token: &str) -> Option<Verified> {
        let entries = self.entries.as_ref()?;
        let key = digest(token);
        let (verified, until) = entries.get(&key)?;
        if Instant::now() < until {
            return Some(verified);
        }
        entries.remove(&key);
        None
    }

    /// Remembers a verified token that expires at `exp` (seconds since the epoch).
    pub fn put(&self, token: &str, verified: &Verified, exp: u64) {
        let Some(entries) = &self.entries else {
            return;
        };
        let now_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let lifetime = Duration::from_secs(exp.saturating_sub(now_unix)).min(self.max_age);
        if lifetime.is_zero() {
            return;
        }
        entries.insert(digest(token), (verified.clone(), Instant::now() + lifetime));
    }

    /// Tokens held (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.as_ref().map_or(0, |e| e.len())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verified(who: &str) -> Verified {
        Verified {
            principal: who.into(),
            scopes: vec!["a2a.read".into()],
        }
    }

    fn in_secs(s: u64) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + s
    }

    #[test]
    fn a_cached_token_answers_with_its_principal() {
        let cache = TokenCache::new(10, Duration::from_secs(60));
        assert!(cache.get("t1").is_none());
        cache.put("t1", &verified("iss|alice"), in_secs(3600));
        assert_eq!(cache.get("t1").unwrap().principal, "iss|alice");
        assert!(cache.get("t2").is_none());
    }

    #[test]
    fn expired_tokens_are_not_kept() {
        let cache = TokenCache::new(10, Duration::from_secs(60));
        cache.put("old", &verified("iss|bob"), in_secs(0).saturating_sub(5));
        assert!(cache.get("old").is_none());
    }

    #[test]
    fn entries_live_no_longer_than_max_age() {
        let cache = TokenCache::new(10, Duration::from_millis(30));
        cache.put("t", &verified("iss|carol"), in_secs(3600));
        assert!(cache.get("t").is_some());
        std::thread::sleep(Duration::from_millis(50));
        assert!(cache.get("t").is_none());
    }

    #[test]
    fn the_cache_stays_within_its_capacity() {
        let cache = TokenCache::new(3, Duration::from_secs(60));
        for i in 0..10 {
            cache.put(&format!("t{i}"), &verified("iss|dave"), in_secs(3600));
            assert!(cache.len() <= 3);
        }
        assert!(cache.get("t9").is_some(), "the newest token is cached");
    }

    /// A full cache makes room one entry at a time: the tokens in use survive a stream of
    /// one-off tokens (the old cache dropped everything when full).
    #[test]
    fn a_full_cache_evicts_one_entry_not_all() {
        let cache = TokenCache::new(100, Duration::from_secs(60));
        for i in 0..50 {
            cache.put(&format!("hot{i}"), &verified("iss|hot"), in_secs(3600));
        }
        // The callers in use keep using their tokens.
        for _ in 0..2 {
            for i in 0..50 {
                assert!(cache.get(&format!("hot{i}")).is_some());
            }
        }
        // Many one-off callers: the cache fills and overflows several times over.
        for i in 0..300 {
            cache.put(&format!("cold{i}"), &verified("iss|cold"), in_secs(3600));
            assert!(cache.len() <= 100);
        }
        let kept = (0..50)
            .filter(|i| cache.get(&format!("hot{i}")).is_some())
            .count();
        assert!(kept >= 40, "only {kept} of the 50 tokens in use survived");
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let cache = TokenCache::new(0, Duration::from_secs(60));
        cache.put("t", &verified("iss|erin"), in_secs(3600));
        assert!(cache.get("t").is_none());
    }
}
