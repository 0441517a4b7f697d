//! Push-notification rules that the gateway and the worker must agree on:
//!
//! - [`AddressPolicy`]: which webhook addresses may be called (the SSRF guard). The gateway checks
//!   a URL when a config is created; the worker checks every address a host name resolves to,
//!   at connect time, so a name that later resolves inside the network (DNS rebinding) is still
//!   refused.
//! - [`SigningKeys`]: the keys that sign every delivery (a JWT in [`SIGNATURE_HEADER`]). The
//!   worker signs with the first key; the gateway publishes the public half of every key at
//!   [`JWKS_PATH`], so keys rotate by overlapping.
//!
//! *Boundary*: no I/O here besides reading key files; no HTTP client, no SQL, no Redis.
//! [`es256_pem`] makes a new key.

mod keygen;
mod policy;
mod signing;

pub use keygen::es256_pem;
pub use policy::{AddressPolicy, Blocked};
pub use signing::{DeliveryClaims, KeyError, SigningKeys, body_sha256};

/// Where the gateway serves the JWKS of the delivery signing keys.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// The request header that carries the delivery JWT (beside the config's `Authorization`).
pub const SIGNATURE_HEADER: &str = "X-A2A-Push-Signature";

/// The header that carries the config's token (the SDK convention).
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// Extension URI under which the agent card advertises the JWKS and the signature header.
pub const SIGNATURE_EXTENSION_URI: &str = "urn:a2a-gateway:push-signature:v1";

/// Environment variable naming the signing keys (shared by the gateway and the worker).
pub const SIGNING_KEYS_VAR: &str = "A2A_PUSH_SIGNING_KEYS";

/// Environment variable listing the hosts and networks webhooks may reach although they are
/// internal (shared by the gateway and the worker).
pub const ALLOWED_HOSTS_VAR: &str = "A2A_PUSH_ALLOWED_HOSTS";
