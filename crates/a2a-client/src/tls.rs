//! TLS for the three bindings: `https://` URLs and endpoints are verified against the system's
//! roots plus any CA certificates given here, and may present a client certificate (mTLS).

use crate::error::ClientError;

/// TLS beyond the defaults. The default (empty) trusts the system's roots and presents no
/// client certificate.
#[derive(Clone, Default)]
pub struct ClientTls {
    /// PEM CA certificates trusted besides the system's roots (a private CA, a test CA).
    pub ca_pem: Option<Vec<u8>>,
    /// PEM client certificate chain (leaf first) presented to servers that ask (mTLS)...
    pub cert_pem: Option<Vec<u8>>,
    /// ...and its PEM private key.
    pub key_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca_pem", &self.ca_pem.is_some())
            .field("cert_pem", &self.cert_pem.is_some())
            .field("key_pem", &self.key_pem.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A client certificate chain and its key, both PEM.
type Identity<'a> = (&'a [u8], &'a [u8]);

impl ClientTls {
    fn identity(&self) -> Result<Option<Identity<'_>>, ClientError> {
        match (&self.cert_pem, &self.key_pem) {
            (Some(c), Some(k)) => Ok(Some((c, k))),
            (None, None) => Ok(None),
            _ => Err(ClientError::Config(
                "a client certificate needs its key (give both or neither)".into(),
            )),
        }
    }

    /// The reqwest client of the HTTP bindings.
    pub(crate) fn http_client(&self) -> Result<reqwest::Client, ClientError> {
        self.configure(crate::http::client_builder())?
            .build()
            .map_err(|e| ClientError::transport("building the HTTP client", e))
    }

    /// Adds these CA certificates and client certificate to a caller's reqwest builder (for a
    /// client of its own that the A2A client then uses, see
    /// [`A2aClient::from_card`](crate::A2aClient::from_card)).
    pub fn configure(
        &self,
        mut builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, ClientError> {
        if let Some(ca) = &self.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(ca)
                .map_err(|e| ClientError::Config(format!("TLS CA certificates: {e}")))?;
            builder = builder.tls_certs_merge(certs);
        }
        if let Some((cert, key)) = self.identity()? {
            // reqwest reads the key and the chain from one buffer.
            let pem = [key, b"\n", cert].concat();
            let identity = reqwest::Identity::from_pem(&pem)
                .map_err(|e| ClientError::Config(format!("TLS client certificate: {e}")))?;
            builder = builder.identity(identity);
        }
        Ok(builder)
    }

    /// tonic's configuration of an `https://` gRPC endpoint.
    pub(crate) fn grpc(&self) -> Result<tonic::transport::ClientTlsConfig, ClientError> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut config = ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = &self.ca_pem {
            config = config.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = self.identity()? {
            config = config.identity(Identity::from_pem(cert, key));
        }
        Ok(config)
    }
}
