//! A bounded cache of tokens that already passed verification, so a client that reuses its
//! bearer token (the normal case: one token for its whole lifetime) pays for the signature check
//! once, not on every request.
//!
//! Entries are keyed by the token's SHA-256 (the token itself is never kept), live until the
//! token's `exp` or `max_age`, whichever is sooner, so a key the issuer withdraws stops being
//! trusted within `max_age`. Only successes are cached: a bad token is re-checked every time.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::jwt::Verified;

pub struct TokenCache {
    entries: RwLock<HashMap<[u8; 32], (Verified, Instant)>>,
    capacity: usize,
    max_age: Duration,
}

impl TokenCache {
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self {
            entries: RwLock::new(HashMap::new()),
            capacity,
            max_age,
        }
    }

    pub fn get(&self, token: &str) -> Option<Verified> {
        let key = digest(token);
        let entries = self.entries.read().expect("token cache lock");
        let (verified, until) = entries.get(&key)?;
        (Instant::now() < *until).then(|| verified.clone())
    }

    /// Remembers a verified token that expires at `exp` (seconds since the epoch).
    pub fn put(&self, token: &str, verified: &Verified, exp: u64) {
        if self.capacity == 0 {
            return;
        }
        let now_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let lifetime = Duration::from_secs(exp.saturating_sub(now_unix)).min(self.max_age);
        if lifetime.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.write().expect("token cache lock");
        if entries.len() >= self.capacity {
            entries.retain(|_, (_, until)| *until > now);
            // Still full of live tokens (many distinct callers): start over rather than grow.
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(digest(token), (verified.clone(), now + lifetime));
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
            assert!(cache.entries.read().unwrap().len() <= 3);
        }
        assert!(cache.get("t9").is_some(), "the newest token is cached");
    }
}
