//! The command line of Reef's benchmark programs: a run with options, or the usage.

use std::process::ExitCode;

/// What a command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Command<T> {
    /// Run with these options.
    Run(T),
    /// Print the usage and stop.
    Help,
}

/// The options of a run, or how the program ends now: `--help` prints `usage` and succeeds; a
/// bad line prints `<program>: <what is wrong>` and `usage` on standard error and exits 2.
pub fn options_or_exit<T>(program: &str, usage: &str, parsed: Result<Command<T>, String>) -> Result<T, ExitCode> {
    match parsed {
        Ok(Command::Run(options)) => Ok(options),
        Ok(Command::Help) => {
            println!("{usage}");
            Err(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("{program}: {message}\n{usage}");
            Err(ExitCode::from(2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_gives_its_options() {
        assert_eq!(options_or_exit("p", "usage", Ok(Command::Run(5))), Ok(5));
        assert_eq!(options_or_exit::<u8>("p", "usage", Ok(Command::Help)), Err(ExitCode::SUCCESS));
        assert_eq!(options_or_exit::<u8>("p", "usage", Err("bad".into())), Err(ExitCode::from(2)));
    }
}
