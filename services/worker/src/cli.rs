//! The `a2a-worker` command line (clap): the subcommands and their arguments, parsed before
//! anything else runs. The work lives with each subject (`dead_letters`, `keygen`, `run`).

use a2a_process::healthcheck::Probe;
use clap::{Args, Parser, Subcommand};

/// What `a2a-worker --help` ends with: the environment it reads.
const CONFIGURATION: &str = "Configuration comes from the environment (A2A_DATABASE_URL, \
A2A_REDIS_URL, A2A_REDIS_PREFIX, A2A_PUBLIC_URL, A2A_PUSH_SIGNING_KEYS, A2A_PUSH_ALLOWED_HOSTS, \
A2A_WORKER_*); see the README.";

/// Push-notification delivery for a2a-gateway.
#[derive(Debug, Parser)]
#[command(name = "a2a-worker", version, after_help = CONFIGURATION)]
pub struct Cli {
    /// What to do; `serve` without one.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Deliver push notifications (the default).
    Serve,
    /// Apply database migrations (A2A_DATABASE_URL) and exit.
    Migrate,
    /// Deliveries that gave up: list them, or deliver them again.
    #[command(subcommand)]
    DeadLetters(DeadLettersCommand),
    /// Print a new ES256 signing key (PKCS#8 PEM) for A2A_PUSH_SIGNING_KEYS.
    Keygen,
    /// Exit 0 when this container's worker is ready (GET /readyz) on A2A_WORKER_LISTEN,
    /// within 2 s (the image has no shell or curl).
    Healthcheck(Probe),
}

/// `a2a-worker dead-letters ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum DeadLettersCommand {
    /// Deliveries that gave up and were not replayed yet (all of them with --all).
    List {
        /// Replayed ones too.
        #[arg(long)]
        all: bool,
        /// At most this many rows.
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
    /// Deliver them again, with the same retry policy.
    Replay(Replay),
}

/// `dead-letters replay (<id>... | --all)`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Replay {
    /// The dead letters to replay.
    #[arg(required_unless_present = "all")]
    pub ids: Vec<i64>,
    /// Every dead letter not replayed yet (the ids are then ignored).
    #[arg(long)]
    pub all: bool,
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
        a2a_testing::cli::parse::<Cli>("a2a-worker", args).map(|c| c.chosen())
    }

    #[test]
    fn every_subcommand_and_flag_parses() {
        assert_eq!(parse(&[]).unwrap(), Command::Serve);
        assert_eq!(parse(&["serve"]).unwrap(), Command::Serve);
        assert_eq!(parse(&["migrate"]).unwrap(), Command::Migrate);
        assert_eq!(parse(&["keygen"]).unwrap(), Command::Keygen);
        assert_eq!(
            parse(&["healthcheck", "--live"]).unwrap(),
            Command::Healthcheck(Probe { live: true })
        );
        let list = |all, limit| Command::DeadLetters(DeadLettersCommand::List { all, limit });
        assert_eq!(parse(&["dead-letters", "list"]).unwrap(), list(false, 100));
        assert_eq!(
            parse(&["dead-letters", "list", "--limit", "5", "--all"]).unwrap(),
            list(true, 5)
        );
        let replay = |ids: Vec<i64>, all| {
            Command::DeadLetters(DeadLettersCommand::Replay(Replay { ids, all }))
        };
        assert_eq!(
            parse(&["dead-letters", "replay", "3", "7"]).unwrap(),
            replay(vec![3, 7], false)
        );
        assert_eq!(
            parse(&["dead-letters", "replay", "--all"]).unwrap(),
            replay(vec![], true)
        );
    }

    #[test]
    fn bad_command_lines_are_usage_errors() {
        a2a_testing::cli::assert_usage::<Cli>(
            "a2a-worker",
            &[
                &["frobnicate"],
                &["healthcheck", "extra"],
                &["keygen", "extra"],
                &["dead-letters"],
                &["dead-letters", "list", "--limit"],
                &["dead-letters", "list", "--limit", "many"],
                &["dead-letters", "list", "--bogus"],
                &["dead-letters", "replay"],
                &["dead-letters", "replay", "seven"],
            ],
            &["help"],
        );
    }
}
