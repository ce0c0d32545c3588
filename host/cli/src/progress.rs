//! A progress bar on standard error for commands that go through many samples (`cvm import`'s
//! calibration and validation, `cvm run --batch`), drawn only when standard error is a terminal
//! so that logs and pipes receive nothing of it.

use std::io::{IsTerminal, Write};

/// A progress line on standard error, drawn only when it is a terminal.
pub struct Progress {
    what: &'static str,
    shown: bool,
}

impl Progress {
    /// A bar labelled `what` (`calibrating`, `running`, …), shown when standard error is a
    /// terminal.
    pub fn new(what: &'static str) -> Progress {
        Progress {
            what,
            shown: std::io::stderr().is_terminal(),
        }
    }

    /// Redraws the bar for `done` of `total` samples: every 16 samples and at the end (redrawing
    /// after every sample would cost more than a small model's run), with a line break once
    /// `done` reaches `total`. A failure to write to standard error has nowhere to be reported
    /// and is ignored.
    pub fn update(&self, done: usize, total: usize) {
        if self.shown && (done == total || done.is_multiple_of(16)) {
            let width = 30;
            let filled = (done * width / total.max(1)).min(width);
            let mut stderr = std::io::stderr().lock();
            let _ = write!(
                stderr,
                "\r{:<11} [{}{}] {done}/{total}",
                self.what,
                "#".repeat(filled),
                " ".repeat(width - filled)
            );
            if done == total {
                let _ = writeln!(stderr);
            }
        }
    }
}
