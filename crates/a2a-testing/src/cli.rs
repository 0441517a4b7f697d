//! Checks of a binary's command line (clap), the same for `a2a-gateway` and `a2a-worker`: its
//! definition, and that a usage error goes to stderr while help goes to stdout.

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

/// `args` (without the program name) parsed as binary `bin`'s command line `C`.
pub fn parse<C: Parser>(bin: &str, args: &[&str]) -> Result<C, clap::Error> {
    C::try_parse_from(std::iter::once(bin).chain(args.iter().copied()))
}

/// `C`'s definition is consistent (clap's debug assertions), each of `bad` is a usage error
/// (printed on stderr, a failing exit), and `help` prints help on stdout (exit 0).
pub fn assert_usage<C: Parser + CommandFactory>(bin: &str, bad: &[&[&str]], help: &[&str]) {
    C::command().debug_assert();
    for args in bad {
        match parse::<C>(bin, args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => assert!(e.use_stderr(), "{args:?}: {e}"),
        }
    }
    match parse::<C>(bin, help) {
        Ok(_) => panic!("{help:?} parsed"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::DisplayHelp, "{help:?}");
            assert!(!e.use_stderr(), "help goes to stdout and exits 0");
        }
    }
}
