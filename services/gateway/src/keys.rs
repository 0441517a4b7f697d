//! `a2a-gateway keys create <id> | list | revoke <id>`: API keys in the PostgreSQL `api_keys`
//! table. `create` prints the new key once; only its SHA-256 is stored, so it is never shown
//! again. A key is `a2a_` + 64 hex digits from two random (v4) UUIDs: 244 random bits.

use a2a_store::{PgApiKeys, PgTaskStore};
use sha2::{Digest, Sha256};

use crate::cli::KeysCommand;
use crate::config::Config;

/// Runs one `keys` subcommand and returns what to print.
pub async fn run(config: &Config, command: &KeysCommand) -> Result<String, String> {
    let keys = directory(config)?;
    match command {
        KeysCommand::Create { id } => {
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
            {
                return Err("a key id may use letters, digits and - _ . @".into());
            }
            let key = new_key();
            let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
            keys.create(id, &hash).await.map_err(|e| e.to_string())?;
            Ok(format!(
                "{key}\n# key {id} created (principal apikey:<scheme>:db:{id}, <scheme> being the \
                 apiKey scheme that carries it); this is the only time the key is shown"
            ))
        }
        KeysCommand::List => {
            let mut out = String::from("id\tcreated\trevoked\n");
            for k in keys.list().await.map_err(|e| e.to_string())? {
                let revoked = k.revoked_at.map(|t| t.to_rfc3339()).unwrap_or("-".into());
                out.push_str(&format!(
                    "{}\t{}\t{revoked}\n",
                    k.id,
                    k.created_at.to_rfc3339()
                ));
            }
            Ok(out.trim_end().to_owned())
        }
        KeysCommand::Revoke { id } => {
            if keys.revoke(id).await.map_err(|e| e.to_string())? {
                Ok(format!("key {id} revoked"))
            } else {
                Err(format!("no live key with id {id}"))
            }
        }
    }
}

fn directory(config: &Config) -> Result<PgApiKeys, String> {
    let url = config
        .database_url
        .as_deref()
        .ok_or("keys are stored in PostgreSQL: set A2A_DATABASE_URL")?;
    let store = PgTaskStore::connect_lazy(url, &a2a_store::PgOptions::default())
        .map_err(|e| format!("A2A_DATABASE_URL: {e}"))?;
    Ok(store.api_keys())
}

fn new_key() -> String {
    format!(
        "a2a_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}
