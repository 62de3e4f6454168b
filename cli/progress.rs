//! Progress on stderr, through indicatif: shown only when stderr is a
//! terminal, the command was not asked to be quiet, and the work has
//! already taken a second (a quick command prints no bar at all).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

/// How long work runs before its bar appears.
const DELAY: Duration = Duration::from_secs(1);

/// A bar (bytes done of a total) or a spinner, hidden until [`DELAY`]
/// has passed; cleared when dropped.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Dropped (or sent to) when the work ends: wakes the thread that
    /// shows the bar.
    done: Option<mpsc::Sender<()>>,
    shower: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// A bar of `total` bytes.
    pub fn bytes(quiet: bool, total: u64, message: String) -> Progress {
        let style = ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}, {eta} left",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        Progress::start(quiet, ProgressBar::new(total).with_style(style), message)
    }

    /// A spinner, for work whose progress the library does not report.
    pub fn spinner(quiet: bool, message: String) -> Progress {
        let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        Progress::start(quiet, ProgressBar::new_spinner().with_style(style), message)
    }

    fn start(quiet: bool, bar: ProgressBar, message: String) -> Progress {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress {
                bar: None,
                done: None,
                shower: None,
            };
        }
        bar.set_draw_target(ProgressDrawTarget::hidden());
        // The message names files: escaped as every printed line is.
        bar.set_message(crate::text::escape(&message).into_owned());
        let (done, wait) = mpsc::channel::<()>();
        let shown = bar.clone();
        let shower = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(DELAY) {
                shown.set_draw_target(ProgressDrawTarget::stderr());
                shown.enable_steady_tick(Duration::from_millis(200));
            }
        });
        Progress {
            bar: Some(bar),
            done: Some(done),
            shower: Some(shower),
        }
    }

    /// Sets the bytes of the whole work.
    pub fn set_total(&self, total: u64) {
        if let Some(bar) = &self.bar {
            if bar.length() != Some(total) {
                bar.set_length(total);
            }
        }
    }

    /// Sets the bytes done.
    pub fn set(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        if let Some(shower) = self.shower.take() {
            let _ = shower.join();
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
