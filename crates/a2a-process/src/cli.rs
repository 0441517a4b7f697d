//! The binaries' command-line entry: clap parses, and an error becomes the exit code each
//! binary has always used.

use std::ffi::OsString;
use std::process::ExitCode;

/// The exit code of a command-line error inside a command that has subcommands of its own
/// (`keys`, `agents`, `dead-letters`): 1, what those commands exited with when they parsed their
/// arguments by hand. A top-level usage error is clap's 2, as it was.
pub const EX_NESTED_USAGE: u8 = 1;

/// Parses `args` (the program name first) as `C`. On an error, prints it (help and version to
/// stdout, usage errors to stderr) and returns the exit code: 0 for help and version,
/// [`EX_NESTED_USAGE`] when the first argument names one of `nested`, else 2.
pub fn parse<C: clap::Parser>(args: Vec<OsString>, nested: &[&str]) -> Result<C, ExitCode> {
    C::try_parse_from(&args).map_err(|e| {
        let _ = e.print();
        ExitCode::from(exit_code(&e, &args, nested))
    })
}

fn exit_code(e: &clap::Error, args: &[OsString], nested: &[&str]) -> u8 {
    if !e.use_stderr() {
        return 0;
    }
    match args.get(1).and_then(|a| a.to_str()) {
        Some(command) if nested.contains(&command) => EX_NESTED_USAGE,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Parser, Subcommand};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Option<Command>,
    }

    #[derive(Debug, Subcommand)]
    enum Command {
        Serve,
        #[command(subcommand)]
        Keys(Keys),
    }

    #[derive(Debug, Subcommand)]
    enum Keys {
        List,
    }

    fn code(args: &[&str]) -> Option<u8> {
        let args: Vec<OsString> = std::iter::once("bin")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect();
        match Cli::try_parse_from(&args) {
            Ok(_) => None,
            Err(e) => Some(exit_code(&e, &args, &["keys"])),
        }
    }

    #[test]
    fn errors_keep_the_exit_codes_the_binaries_had() {
        assert_eq!(code(&["serve"]), None);
        assert_eq!(code(&["keys", "list"]), None);
        assert_eq!(code(&["--help"]), Some(0));
        assert_eq!(code(&["keys", "--help"]), Some(0));
        assert_eq!(code(&["frobnicate"]), Some(2));
        assert_eq!(code(&["serve", "extra"]), Some(2));
        assert_eq!(code(&["keys"]), Some(EX_NESTED_USAGE));
        assert_eq!(code(&["keys", "rotate"]), Some(EX_NESTED_USAGE));
    }
}
