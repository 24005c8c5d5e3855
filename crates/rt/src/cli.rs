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

/// How a run ends: success, or `<TAG>-ERROR <message on one line>` on standard output for the
/// harness that reads it, the message on standard error, and status 1.
pub fn exit_status(program: &str, tag: &str, result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            println!("{tag}-ERROR {}", message.replace('\n', " "));
            eprintln!("{program}: {message}");
            ExitCode::FAILURE
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

    #[test]
    fn a_failed_run_ends_with_status_one() {
        assert_eq!(exit_status("p", "P", Ok(())), ExitCode::SUCCESS);
        assert_eq!(exit_status("p", "P", Err("two\nlines".into())), ExitCode::FAILURE);
    }
}
