//! New signing keys: `a2a-worker keygen` prints one; the embedded gateway makes one for its
//! run when none is configured.

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine;

/// A fresh ES256 key as PKCS#8 PEM.
pub fn es256_pem() -> Result<String, String> {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
        .map_err(|e| format!("key generation failed: {e}"))?;
    let der = pair
        .to_pkcs8v1()
        .map_err(|e| format!("key encoding failed: {e}"))?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    Ok(pem)
}
