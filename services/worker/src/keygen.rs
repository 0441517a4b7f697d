//! `a2a-worker keygen`: prints a new P-256 signing key (PKCS#8 PEM) for `A2A_PUSH_SIGNING_KEYS`.

pub use a2a_push::es256_pem;

#[cfg(test)]
mod tests {
    #[test]
    fn generated_keys_load() {
        let pem = super::es256_pem().unwrap();
        let keys = a2a_push::SigningKeys::from_pems(vec![("k".into(), pem.into_bytes())]).unwrap();
        assert_eq!(keys.signing_alg(), Some(jsonwebtoken::Algorithm::ES256));
    }
}
