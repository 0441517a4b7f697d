//! The `a2a-gateway` command line (clap): the subcommands and their arguments, parsed before
//! anything else runs. Each command's work lives with its subject (`app`, `keys`,
//! `admin::cli`); this module only names them, so it depends on nothing in the crate.

use a2a_process::healthcheck::Probe;
use clap::{Parser, Subcommand};

/// What `a2a-gateway --help` ends with: the environment it reads.
const CONFIGURATION: &str = "Configuration comes from the environment (A2A_LISTEN, A2A_PUBLIC_URL, \
A2A_DATABASE_URL, A2A_DATABASE_POOL_SIZE, A2A_DATABASE_ACQUIRE_TIMEOUT_MS, A2A_MIGRATE, \
A2A_REDIS_URL, A2A_REDIS_PREFIX, A2A_ALLOW_UNAUTHENTICATED, A2A_ADMIN_LISTEN, \
A2A_ADMIN_TOKEN_SHA256, A2A_CONFIG, A2A_LOG_FORMAT, RUST_LOG, OTEL_*); see the README.";

/// An A2A 1.0 gateway.
#[derive(Debug, Parser)]
#[command(name = "a2a-gateway", version, after_help = CONFIGURATION)]
pub struct Cli {
    /// What to do; `serve` without one.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Serve A2A over HTTP (the default); with A2A_MIGRATE=1 it migrates the database first.
    Serve,
    /// Apply database migrations (A2A_DATABASE_URL) and exit.
    Migrate,
    /// API keys in the database (A2A_DATABASE_URL).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Upstream agents through the admin API (A2A_ADMIN_LISTEN, bearer A2A_ADMIN_TOKEN).
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Exit 0 when this container's gateway is ready (GET /readyz) on the admin listener
    /// (A2A_ADMIN_LISTEN, else A2A_LISTEN), within 2 s: the image's probe client for
    /// docker-compose healthchecks and HEALTHCHECK (no shell or curl).
    Healthcheck(Probe),
}

/// `a2a-gateway keys ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (the only time it is shown).
    Create {
        /// The key's id: letters, digits and - _ . @.
        id: String,
    },
    /// List the keys (id, created, revoked).
    List,
    /// Revoke a live key.
    Revoke { id: String },
}

/// `a2a-gateway agents ...`: the admin API's `/admin/agents` from the command line.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum AgentsCommand {
    /// Every agent, with its source.
    List,
    /// One agent and its ETag.
    Get { name: String },
    /// Register an agent from a JSON entry (as in `[[agents]]`).
    Add { entry: String },
    /// Replace an API-registered agent.
    Replace {
        name: String,
        entry: String,
        /// Only if the agent is still at this ETag.
        #[arg(long)]
        if_match: Option<String>,
    },
    /// Remove an API-registered agent.
    Remove {
        name: String,
        /// Only if the agent is still at this ETag.
        #[arg(long)]
        if_match: Option<String>,
    },
}

impl Cli {
    /// The command to run (`serve` without one).
    pub fn chosen(&self) -> Command {
        self.command.clone().unwrap_or(Command::Serve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        a2a_testing::cli::parse::<Cli>("a2a-gateway", args).map(|c| c.chosen())
    }

    #[test]
    fn every_subcommand_and_flag_parses() {
        assert_eq!(parse(&[]).unwrap(), Command::Serve);
        assert_eq!(parse(&["serve"]).unwrap(), Command::Serve);
        assert_eq!(parse(&["migrate"]).unwrap(), Command::Migrate);
        assert_eq!(
            parse(&["healthcheck"]).unwrap(),
            Command::Healthcheck(Probe { live: false })
        );
        assert_eq!(
            parse(&["healthcheck", "--live"]).unwrap(),
            Command::Healthcheck(Probe { live: true })
        );
        assert_eq!(
            parse(&["keys", "create", "ci"]).unwrap(),
            Command::Keys(KeysCommand::Create { id: "ci".into() })
        );
        assert_eq!(
            parse(&["keys", "list"]).unwrap(),
            Command::Keys(KeysCommand::List)
        );
        assert_eq!(
            parse(&["keys", "revoke", "ci"]).unwrap(),
            Command::Keys(KeysCommand::Revoke { id: "ci".into() })
        );
        assert_eq!(
            parse(&["agents", "list"]).unwrap(),
            Command::Agents(AgentsCommand::List)
        );
        assert_eq!(
            parse(&["agents", "get", "billing"]).unwrap(),
            Command::Agents(AgentsCommand::Get {
                name: "billing".into()
            })
        );
        assert_eq!(
            parse(&["agents", "add", "{}"]).unwrap(),
            Command::Agents(AgentsCommand::Add { entry: "{}".into() })
        );
        // The flag before or after the positionals, as before.
        for args in [
            &["agents", "replace", "b", "{}", "--if-match", "\"e\""][..],
            &["agents", "replace", "--if-match", "\"e\"", "b", "{}"][..],
        ] {
            assert_eq!(
                parse(args).unwrap(),
                Command::Agents(AgentsCommand::Replace {
                    name: "b".into(),
                    entry: "{}".into(),
                    if_match: Some("\"e\"".into())
                })
            );
        }
        assert_eq!(
            parse(&["agents", "remove", "b"]).unwrap(),
            Command::Agents(AgentsCommand::Remove {
                name: "b".into(),
                if_match: None
            })
        );
    }

    #[test]
    fn bad_command_lines_are_usage_errors() {
        a2a_testing::cli::assert_usage::<Cli>(
            "a2a-gateway",
            &[
                &["frobnicate"],
                &["healthcheck", "--ready"],
                &["healthcheck", "extra"],
                &["keys"],
                &["keys", "create"],
                &["keys", "rotate", "x"],
                &["agents", "frobnicate"],
                &["agents", "get"],
                &["agents", "remove", "b", "--if-match"],
            ],
            &["--help"],
        );
    }
}
