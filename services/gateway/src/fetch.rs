//! Bodies of documents the gateway fetches from others (an issuer's discovery document and
//! JWKS, an upstream agent's card, a card's signing keys), read with a size cap while they
//! stream in: a body that announces more than the cap is refused before it is read, and one
//! that streams past it is cut there (the connection is dropped), so a compromised or broken
//! server cannot make the gateway buffer more than the cap.

/// Reads `resp`'s body, at most `limit` bytes; the error says what went wrong (never the
/// body), e.g. `larger than 1048576 bytes`.
pub async fn read_capped(mut resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    let too_large = || format!("the body is larger than {limit} bytes");
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A real HTTP/1.1 server on loopback that never stops sending a body, for the tests of every
/// capped fetch.
#[cfg(test)]
pub(crate) mod endless {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Answers every request with a chunked JSON body of spaces that never ends; returns the
    /// server's base URL (`http://127.0.0.1:port`).
    pub async fn json_server() -> String {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        let mut chunk = format!("{:x}\r\n", 64 * 1024).into_bytes();
        chunk.extend(std::iter::repeat_n(b' ', 64 * 1024));
        chunk.extend_from_slice(b"\r\n");
        let url = server(head, chunk).await;
        url.trim_end_matches("/doc").to_owned()
    }

    /// A server that answers every connection with `head`, then writes `chunk` forever (or
    /// until the reader goes away); returns the URL of `/doc` on it.
    pub async fn server(head: &'static str, chunk: Vec<u8>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let chunk = chunk.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = conn.read(&mut buf).await;
                    conn.write_all(head.as_bytes()).await?;
                    loop {
                        conn.write_all(&chunk).await?;
                    }
                    #[allow(unreachable_code)]
                    Ok::<_, std::io::Error>(())
                });
            }
        });
        format!("http://{addr}/doc")
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::endless::server as endless;
    use super::read_capped;

    #[tokio::test]
    async fn an_endless_body_is_cut_at_the_cap() {
        // Chunked, no length: only reading tells the size.
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        let mut chunk = format!("{:x}\r\n", 64 * 1024).into_bytes();
        chunk.extend(std::iter::repeat_n(b' ', 64 * 1024));
        chunk.extend_from_slice(b"\r\n");
        let url = endless(head, chunk).await;
        let started = Instant::now();
        let resp = reqwest::get(&url).await.unwrap();
        let err = read_capped(resp, 256 * 1024).await.unwrap_err();
        assert!(err.contains("larger than 262144 bytes"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn an_announced_length_past_the_cap_is_refused_unread() {
        let head = "HTTP/1.1 200 OK\r\ncontent-length: 10000000000\r\n\r\n";
        let url = endless(head, vec![b'x'; 1024]).await;
        let resp = reqwest::get(&url).await.unwrap();
        let err = read_capped(resp, 1024).await.unwrap_err();
        assert!(err.contains("larger than 1024 bytes"), "{err}");
    }

    #[tokio::test]
    async fn a_body_within_the_cap_is_read_whole() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let body = "{\"keys\":[]}";
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            conn.write_all(head.as_bytes()).await.unwrap();
            conn.write_all(body.as_bytes()).await.unwrap();
        });
        let resp = reqwest::get(format!("http://{addr}/")).await.unwrap();
        assert_eq!(read_capped(resp, 11).await.unwrap(), b"{\"keys\":[]}");
    }
}
