//! Where a stdio server's stderr goes under `mrtr-gate proxy`: by default one log per server
//! command in the state folder (`$XDG_STATE_HOME/mrtr-gate/logs`, else
//! `~/.local/state/mrtr-gate/logs`, made 0700), appended run after run, never a new file in
//! the temporary folder per run; or `--server-log FILE`. Either way the file is the owner's
//! alone (0600) and bounded: the server writes into a pipe, and the proxy copies it over,
//! moving the file to `FILE.1` (replacing the one before) when it holds [`MAX_LOG_BYTES`], so
//! one server's log holds at most twice that.

use mrtr_gate_client::transport::stdio::append_private;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// How large a server's log grows before it is moved aside.
pub const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// `$XDG_STATE_HOME/mrtr-gate` (an absolute path only, as the XDG spec says), else
/// `$HOME/.local/state/mrtr-gate`.
pub fn state_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    var("XDG_STATE_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".local").join("state")))
        .map(|d| d.join("mrtr-gate"))
}

/// The default log of the server whose endpoint id is `endpoint`: one name per command.
pub fn default_path(endpoint: &str) -> Result<PathBuf, String> {
    let dir = state_dir()
        .ok_or("no state folder ($XDG_STATE_HOME or $HOME) for the server's log: give --server-log FILE")?
        .join("logs");
    let digest = mrtr_gate_host::core::digest::sha256_hex(endpoint.as_bytes());
    let short = digest.get(..16).unwrap_or(&digest);
    Ok(dir.join(format!("server-{short}.log")))
}

/// Open `path` (its folder made 0700 when missing, the file 0600) and start copying what the
/// server writes into it, bounded ([`MAX_LOG_BYTES`]); the server's stderr, and the copy
/// (waited for once the server is gone: [`Copier::finish`]).
pub fn open(path: &Path) -> Result<(std::process::Stdio, Copier), String> {
    let (stdio, copier) = open_bounded(path, MAX_LOG_BYTES)?;
    let (done, finished) = std::sync::mpsc::channel();
    // The copy's end, told on a channel so the wait for it can be bounded.
    std::thread::Builder::new()
        .name("mrtr-gate-server-log-wait".into())
        .spawn(move || {
            let _ = copier.join();
            let _ = done.send(());
        })
        .map_err(|e| format!("the server's log copier: {e}"))?;
    Ok((stdio, Copier(finished)))
}

/// The copy of a server's stderr into its log.
#[derive(Debug)]
pub struct Copier(std::sync::mpsc::Receiver<()>);

impl Copier {
    /// Wait until the copy is done (the server's stderr closed and every byte written), at
    /// most `within`: a process the server left behind may hold the pipe open. Without the
    /// wait, the proxy could exit before the server's last lines reach the log.
    pub fn finish(self, within: std::time::Duration) {
        let _ = self.0.recv_timeout(within);
    }
}

/// [`open`] with its cap, and the copier (done once every writer of the pipe is closed).
fn open_bounded(
    path: &Path,
    cap: u64,
) -> Result<(std::process::Stdio, std::thread::JoinHandle<()>), String> {
    let shown = path.display();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        mrtr_gate_host::reference_hosts::create_private_dir(dir)
            .map_err(|e| format!("the server's log folder {}: {e}", dir.display()))?;
    }
    let file = append_private(path, false).map_err(|e| format!("the server's log {shown}: {e}"))?;
    let (reader, writer) =
        std::io::pipe().map_err(|e| format!("a pipe for the server's stderr: {e}"))?;
    let path = path.to_owned();
    let copier = std::thread::Builder::new()
        .name("mrtr-gate-server-log".into())
        .spawn(move || copy(reader, file, &path, cap))
        .map_err(|e| format!("the server's log copier: {e}"))?;
    Ok((std::process::Stdio::from(writer), copier))
}

/// Copy `from` into `file` (at `path`) until the server closes its stderr, moving the file to
/// `path.1` whenever it holds `cap` bytes (a write is split there: no file passes the cap). A
/// write that fails ends the copy: the server then gets a broken pipe on its stderr, never a
/// proxy that stops.
fn copy(mut from: impl Read, mut file: std::fs::File, path: &Path, cap: u64) {
    let mut written = file.metadata().map_or(0, |m| m.len());
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut rest = buffer.get(..n).unwrap_or_default();
        while !rest.is_empty() {
            if written >= cap {
                let mut aside = path.as_os_str().to_owned();
                aside.push(".1");
                if std::fs::rename(path, &aside).is_err() {
                    return;
                }
                match append_private(path, false) {
                    Ok(f) => file = f,
                    Err(_) => return,
                }
                written = 0;
            }
            let room = usize::try_from(cap - written).unwrap_or(usize::MAX);
            let (now, later) = rest.split_at(rest.len().min(room));
            if file.write_all(now).is_err() {
                return;
            }
            written = written.saturating_add(now.len() as u64);
            rest = later;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_at_its_cap_is_moved_aside_and_no_file_passes_the_cap() {
        let dir = std::env::temp_dir().join(format!("mrtr-gate-server-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("logs/server.log");
        let (stdio, copier) = open_bounded(&path, 1000).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 100 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done >&2"])
            .stderr(stdio)
            .spawn()
            .unwrap();
        assert!(child.wait().unwrap().success());
        // The copier ends when the child's stderr closes (the command, and its copy of the
        // pipe, are gone).
        copier.join().unwrap();
        let total = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let aside = dir.join("logs/server.log.1");
        assert!(total(&path) > 0);
        assert!(total(&path) <= 1000, "{}", total(&path));
        assert!(total(&aside) <= 1000, "{}", total(&aside));
        assert!(total(&aside) > 0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(&dir.join("logs")), 0o700);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
