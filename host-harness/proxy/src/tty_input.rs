//! The terminal's input for `--consent tty`, read for one prompt at a time: a person who does
//! not answer by the deadline is an error, which the gate turns into a denial, instead of a
//! wait without end. (What was typed before the prompt is discarded just before it is drawn:
//! `TerminalConsent::with_before_prompt`.)

use std::fs::File;
use std::io::{self, Read};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// When the answer to the prompt being drawn is due, set by the consent provider before
/// each prompt.
#[derive(Debug, Default)]
pub struct Prompting {
    deadline: Mutex<Option<Instant>>,
}

impl Prompting {
    /// A prompt is about to be drawn; its answer is due within `timeout`.
    pub fn start(&self, timeout: Duration) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) =
            Instant::now().checked_add(timeout);
    }

    fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The terminal, read under [`Prompting`]. Read it through a one-byte buffer: the answer's
/// line is all that is taken, nothing after it waits in a buffer for the next prompt.
#[derive(Debug)]
pub struct TtyInput {
    file: File,
    prompting: Arc<Prompting>,
}

impl TtyInput {
    /// `file`, read under `prompting`.
    pub fn new(file: File, prompting: Arc<Prompting>) -> Self {
        Self { file, prompting }
    }
}

impl Read for TtyInput {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.prompting.deadline() {
            wait_readable(&self.file, deadline)?;
        }
        self.file.read(buf)
    }
}

#[cfg(unix)]
fn wait_readable(file: &File, deadline: Instant) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = Timespec::try_from(left).map_err(|_| io::ErrorKind::InvalidInput)?;
        let mut fds = [PollFd::new(file, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "nobody answered at the terminal in time",
                ));
            }
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(not(unix))]
fn wait_readable(_: &File, _: Instant) -> io::Result<()> {
    // No way to bound the wait here: refuse to ask rather than wait without end.
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "--consent tty needs a unix terminal",
    ))
}
