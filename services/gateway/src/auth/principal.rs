//! The owner a credential proves, as a string: an API key's, a client certificate's, and an
//! AND-set's (every principal it proved). Tasks are owned by these strings, so their forms must
//! never let two different callers give one string.

/// Where an API key was found: the configuration's `keys`, or the database's `api_keys`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    Config,
    Db,
}

/// The owner of what an API key does: `apikey:<scheme>:<config|db>:<id>`. The scheme and the
/// source are part of it, so two keys that share an id (one in the file, one in the database,
/// or one per scheme) are two owners. In the scheme name `%` and `:` are percent-encoded, so
/// the scheme ends at the third `:` and the id (which may hold anything) is the rest: no two
/// (scheme, source, id) give one string.
pub fn api_key_principal(scheme: &str, source: KeySource, id: &str) -> String {
    let scheme = scheme.replace('%', "%25").replace(':', "%3A");
    let source = match source {
        KeySource::Config => "config",
        KeySource::Db => "db",
    };
    format!("apikey:{scheme}:{source}:{id}")
}

/// The owner of what a client certificate does: `mtls:<scheme>:<subject>`, the subject as an
/// RFC 4514 distinguished name (`CN=alice,O=Example`); when `[tls] client_ca` trusts more
/// than one CA, `mtls:<scheme>:ca=<hex SHA-256 of the CA's SubjectPublicKeyInfo>:<subject>`,
/// so that two CAs issuing one subject give two owners. The scheme is escaped as in
/// [`api_key_principal`], so it ends at the second `:`; a subject never starts with `ca=`
/// (attribute types print upper case, or as dotted numbers), so the two forms never meet.
pub fn mtls_principal(scheme: &str, cert: &crate::tls::ClientCert) -> String {
    let scheme = scheme.replace('%', "%25").replace(':', "%3A");
    match &cert.ca {
        None => format!("mtls:{scheme}:{}", cert.subject),
        Some(ca) => format!("mtls:{scheme}:ca={ca}:{}", cert.subject),
    }
}

/// The owner of a satisfied requirement set: the principal of its one scheme (so the owners of
/// single-scheme configurations are what they always were), or, for an AND-set, every
/// principal it proved, in the set's order (by scheme name), as `and:` and a JSON array of
/// strings: `and:["apikey:app:config:web","https://idp.example|alice"]`. One person is then one
/// owner: users who share an application key (or a client certificate) beside their own token
/// are told apart by the token. JSON makes the list unambiguous whatever the principals hold.
pub(super) fn set_owner(principals: &[&str]) -> String {
    match principals {
        [one] => (*one).to_owned(),
        all => {
            let list = serde_json::Value::from(all.to_vec());
            format!("and:{list}")
        }
    }
}
