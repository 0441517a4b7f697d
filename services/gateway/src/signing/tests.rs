use std::time::Duration;

use a2a_types::v1::{AgentCard, AgentSkill};
use jsonwebtoken::DecodingKey;
use serde_json::{Value, json};

use super::verify::{Rejected, TrustedKeys, verify};
use super::*;

fn keys(kids: &[&str]) -> a2a_push::SigningKeys {
    let pems = kids
        .iter()
        .map(|k| (k.to_string(), a2a_push::es256_pem().unwrap().into_bytes()))
        .collect();
    a2a_push::SigningKeys::from_pems(pems).unwrap()
}

/// Trusts every key of `keys`' JWKS, as PEM-configured keys would be.
fn trusting(keys: &a2a_push::SigningKeys) -> TrustedKeys {
    let set = keys.jwks();
    TrustedKeys::from_keys(
        set.keys
            .iter()
            .map(|k| {
                let kid = k.common.key_id.clone().unwrap();
                (kid, DecodingKey::from_jwk(k).unwrap())
            })
            .collect(),
    )
}

fn card() -> AgentCard {
    AgentCard {
        name: "gw".into(),
        description: "a gateway — with ünïcode".into(),
        version: "1.0.0".into(),
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "echoes".into(),
            tags: vec!["test".into()],
            ..Default::default()
        }],
        ..Default::default()
    }
}

async fn check(card: &Value, trusted: &TrustedKeys) -> Result<String, Rejected> {
    verify(
        card,
        trusted,
        &reqwest::Client::new(),
        Duration::from_secs(1),
    )
    .await
}

fn header(sig: &Value) -> Value {
    let raw = URL_SAFE_NO_PAD
        .decode(sig["protected"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&raw).unwrap()
}

#[tokio::test]
async fn a_signed_card_verifies_and_a_tampered_one_does_not() {
    let keys = keys(&["k1"]);
    let signer = CardSigner::new(&keys, "https://gw.example.com/").unwrap();
    let plain = serde_json::to_value(card()).unwrap();
    let (signed_card, bytes) = signed(card(), plain.clone(), Some(&signer));
    let json: Value = serde_json::from_slice(&bytes).unwrap();

    assert_eq!(signed_card.signatures.len(), 1);
    assert_eq!(
        serde_json::to_value(&signed_card).unwrap(),
        json,
        "the served JSON is the card's ProtoJSON"
    );
    let sig = &json[SIGNATURES][0];
    assert_eq!(
        header(sig),
        json!({"alg": "ES256", "kid": "k1", "typ": "JOSE",
               "jku": "https://gw.example.com/.well-known/jwks.json"})
    );
    assert!(sig.get("header").is_none());
    assert_eq!(check(&json, &trusting(&keys)).await, Ok("k1".into()));

    let mut tampered = json.clone();
    tampered["description"] = json!("another gateway");
    assert_eq!(
        check(&tampered, &trusting(&keys)).await,
        Err(Rejected::BadSignature)
    );
    // Another key of the same kind does not verify it either.
    assert_eq!(
        check(&json, &trusting(&self::keys(&["k1"]))).await,
        Err(Rejected::BadSignature)
    );
    let mut unsigned = json.clone();
    unsigned.as_object_mut().unwrap().remove(SIGNATURES);
    assert_eq!(
        check(&unsigned, &trusting(&keys)).await,
        Err(Rejected::Unsigned)
    );
    let mut garbled = json;
    garbled[SIGNATURES][0]["protected"] = json!("not base64 json!");
    assert!(matches!(
        check(&garbled, &trusting(&keys)).await,
        Err(Rejected::Malformed(_))
    ));
}

#[test]
fn signatures_are_cached_per_content() {
    let keys = keys(&["k"]);
    let signer = CardSigner::new(&keys, "http://127.0.0.1:1").unwrap();
    let a = serde_json::to_value(card()).unwrap();
    let first = signer.sign(&a).unwrap();
    // ES256 signatures are randomised: the same bytes mean the cache answered.
    assert_eq!(signer.sign(&a).unwrap(), first);
    // A card that already carries signatures is the same content.
    let mut with_sigs = a.clone();
    with_sigs[SIGNATURES] = json!([{"protected": "x", "signature": "y"}]);
    assert_eq!(signer.sign(&with_sigs).unwrap(), first);
    let mut other = a;
    other["name"] = json!("other");
    assert_ne!(signer.sign(&other).unwrap().signature, first.signature);
}

#[test]
fn the_payload_is_the_canonical_card_without_signatures() {
    let card = json!({"skills": [], "name": "n", "signatures": [{"protected": "p"}],
                      "capabilities": {"streaming": true}});
    assert_eq!(
        String::from_utf8(payload(&card).unwrap()).unwrap(),
        r#"{"capabilities":{"streaming":true},"name":"n","skills":[]}"#
    );
}

#[test]
fn a_served_document_with_more_fields_is_signed_as_served() {
    let keys = keys(&["k"]);
    let signer = CardSigner::new(&keys, "http://gw").unwrap();
    let mut served = serde_json::to_value(card()).unwrap();
    served["url"] = json!("http://gw/a2a/jsonrpc");
    let (card, bytes) = signed(card(), served, Some(&signer));
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["url"], "http://gw/a2a/jsonrpc");
    let proto = serde_json::to_value(&card).unwrap();
    assert_ne!(
        proto[SIGNATURES], json[SIGNATURES],
        "each form has the signature of its own fields"
    );
}

#[test]
fn without_keys_cards_are_unsigned() {
    assert!(CardSigner::new(&a2a_push::SigningKeys::default(), "http://gw").is_none());
    let (card, bytes) = signed(card(), serde_json::to_value(card()).unwrap(), None);
    assert!(card.signatures.is_empty());
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(json.get(SIGNATURES).is_none());
}

/// L7: a trusted JWKS URL that streams without end is cut at the cap: the card is refused as
/// keys unavailable, nothing buffered past 256 KiB.
#[tokio::test]
async fn an_endless_trusted_jwks_is_refused_at_the_cap() {
    let keys = keys(&["k1"]);
    let signer = CardSigner::new(&keys, "https://gw.example.com/").unwrap();
    let plain = serde_json::to_value(card()).unwrap();
    let (_, bytes) = signed(card(), plain, Some(&signer));
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    let base = crate::fetch::endless::json_server().await;
    let trusted = TrustedKeys::load(Some(&format!("{base}/jwks.json")), &[]).unwrap();
    let err = verify(
        &json,
        &trusted,
        &reqwest::Client::new(),
        Duration::from_secs(10),
    )
    .await
    .unwrap_err();
    match err {
        Rejected::KeysUnavailable(why) => assert!(why.contains("larger than 262144"), "{why}"),
        other => panic!("{other:?}"),
    }
}
