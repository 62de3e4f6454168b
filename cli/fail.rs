//! How a command ends when it does not succeed: an exit status and one
//! message naming the file and the reason (docs/CLI.md).
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done (diff: the files hold equal tensors; verify: every check passed) |
//! | 1 | the files differ (diff), a file is invalid (verify), or the output cannot be written (convert, memory-view: the writer's refusal, a missing directory) |
//! | 2 | usage: an unknown option, a missing argument, a format that cannot be told |
//! | 3 | an input cannot be read: missing, a directory, not a tensor file, damaged |

use std::path::Path;
use std::process::ExitCode;

/// The files differ, a file is invalid, the output cannot be written.
pub const DIFFERENT: u8 = 1;
/// The command line is wrong (clap exits with the same status).
pub const USAGE: u8 = 2;
/// An input cannot be read.
pub const UNREADABLE: u8 = 3;

/// A command that did not succeed: its exit status and what to print
/// (nothing for a closed stdout: `tessera ls | head`).
#[derive(Debug)]
pub struct Fail {
    pub code: u8,
    pub message: Option<String>,
}

/// What a command returns.
pub type Outcome = Result<ExitCode, Fail>;

impl Fail {
    pub fn new(code: u8, message: impl Into<String>) -> Fail {
        Fail {
            code,
            message: Some(message.into()),
        }
    }

    /// An input the library could not load: status 3, its path and why.
    pub fn unreadable(path: &Path, e: &tessera::Error) -> Fail {
        Fail::new(UNREADABLE, naming(path, e.message()))
    }
}

/// `message`, led by the path unless it names it already (the library's
/// I/O errors do: "cannot open 'x.pt': No such file or directory").
pub fn naming(path: &Path, message: &str) -> String {
    let shown = tessera::serialize::shown_path(path);
    if message.contains(&shown) {
        message.to_owned()
    } else {
        format!("{shown}: {message}")
    }
}

impl From<std::io::Error> for Fail {
    /// A failed write to stdout: a reader that went away (`| head`) ends
    /// the command quietly, anything else is reported.
    fn from(e: std::io::Error) -> Fail {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Fail {
                code: 0,
                message: None,
            }
        } else {
            Fail::new(DIFFERENT, format!("cannot write the output: {e}"))
        }
    }
}
