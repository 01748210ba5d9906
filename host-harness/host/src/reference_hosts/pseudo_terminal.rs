//! A pseudo-terminal for tests of a consent prompt on a real terminal: the person's side (the
//! master: what they type, what the screen shows) and the path of the terminal the prompt
//! opens (the slave). Unix only.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A pseudo-terminal pair; the screen is read as it is drawn (or the terminal's buffer would
/// fill and block the prompt).
#[derive(Debug)]
pub struct PseudoTerminal {
    master: File,
    path: PathBuf,
    shown: Arc<Mutex<String>>,
    /// Held open so that what is typed before the prompt opens the terminal is queued on it.
    _held: File,
}

impl PseudoTerminal {
    /// A new pair.
    pub fn new() -> std::io::Result<Self> {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)?;
        grantpt(&master)?;
        unlockpt(&master)?;
        let path = PathBuf::from(
            ptsname(&master, Vec::new())?
                .into_string()
                .map_err(|_| std::io::Error::other("a terminal path that is not utf-8"))?,
        );
        let held = File::open(&path)?;
        let master = File::from(master);
        let shown = Arc::new(Mutex::new(String::new()));
        let (mut reader, sink) = (master.try_clone()?, Arc::clone(&shown));
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                let Some(read) = buf.get(..n).filter(|r| !r.is_empty()) else {
                    break;
                };
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(read));
            }
        });
        Ok(Self {
            master,
            path,
            shown,
            _held: held,
        })
    }

    /// The terminal a prompt opens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The terminal itself, opened for reading and writing.
    pub fn open(&self) -> std::io::Result<File> {
        File::options().read(true).write(true).open(&self.path)
    }

    /// The person types `keys`.
    pub fn type_keys(&self, keys: &str) -> std::io::Result<()> {
        (&self.master).write_all(keys.as_bytes())
    }

    /// Everything the screen showed so far.
    pub fn shown(&self) -> String {
        self.shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Wait until the screen has shown `text` `times` times; false if it has not within
    /// `guard` (a hang guard, never a pace).
    pub fn wait_for(&self, text: &str, times: usize, guard: Duration) -> bool {
        let started = Instant::now();
        while self.shown().matches(text).count() < times {
            if started.elapsed() > guard {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }
}
