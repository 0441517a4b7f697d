//! Connection URLs for `Debug` and logs: the password (in the userinfo, or a `password` query
//! parameter as libpq accepts it) replaced by `***`, the rest kept so the URL still says where.

/// `url` with any password hidden: `postgres://user:***@host/db`, `redis://:***@host`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let path = match path.split_once('?') {
        Some((before, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{before}?{}", query.join("&"))
        }
        None => path.to_owned(),
    };
    match scheme {
        Some(s) => format!("{s}://{authority}{path}"),
        None => format!("{authority}{path}"),
    }
}

/// A comma-separated list of URLs (Redis Cluster seed nodes), each with any password hidden.
pub fn redact_urls(list: &str) -> String {
    list.split(',')
        .map(|url| redact_url(url.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::{redact_url, redact_urls};

    #[test]
    fn every_url_of_a_list_is_redacted() {
        assert_eq!(
            redact_urls("redis://:a@n1:7000, redis://n2:7001,redis://u:b@n3:7002"),
            "redis://:***@n1:7000,redis://n2:7001,redis://u:***@n3:7002"
        );
    }

    #[test]
    fn passwords_are_hidden_and_the_rest_kept() {
        for (url, want) in [
            (
                "postgres://app:s3cret@db.example.com:5432/a2a",
                "postgres://app:***@db.example.com:5432/a2a",
            ),
            (
                "postgres://app:p%40ss@db/a2a?sslmode=require&password=other",
                "postgres://app:***@db/a2a?sslmode=require&password=***",
            ),
            (
                "redis://:hunter2@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            ("redis://default:a:b@host", "redis://default:***@host"),
            (
                "postgres://postgres@127.0.0.1/test",
                "postgres://postgres@127.0.0.1/test",
            ),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }
}
