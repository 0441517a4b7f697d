//! Governance of what one caller may take from a shared gateway: rate limits (`[limits.rate]`,
//! [`rate`]). The bindings never call these directly: the request pipeline
//! (`bindings::pipeline`) checks the IP and principal limits, the service the agent limit.

pub mod clients;
mod config;
pub mod edge;
pub mod rate;
mod shared;

pub use clients::ClientAddressing;
pub use config::{Backend, Override, Rate, RateConfig, RedisTarget, default_cost};
pub use edge::{ConnectionsConfig, EdgeConfig};
pub use rate::{AgentLimit, Allowance, Policy, RateLimiter};
