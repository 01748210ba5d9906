//! Running the client once, the conformance suite's way: `/bin/sh -c "<command> <url>"` (the
//! command is a shell line, the URL its last word; over stdio the server command line, quoted), in a process group of its own, with the
//! scenario in the environment and a folder of URL-opener shims first on `PATH`. The run ends
//! with an event: the client's stdout and stderr at EOF (every descendant inherits them, so
//! EOF means the whole tree is gone) and the shell reaped. The hang guard is the one timer,
//! and its expiry is a FAILURE, never a SUCCESS.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The names a program uses to open a URL in a browser.
const OPENERS: [&str; 6] = [
    "xdg-open",
    "open",
    "x-www-browser",
    "sensible-browser",
    "www-browser",
    "gio",
];

/// One launch of the client.
pub struct Launch<'a> {
    /// The client's shell line.
    pub command: &'a str,
    /// The last word: the endpoint's URL, or the stdio server's command line as one shell
    /// word.
    pub last_word: &'a str,
    /// Extra environment (the scenario's variables).
    pub env: Vec<(String, String)>,
    /// The hang guard.
    pub timeout: Duration,
}

/// How the client's run ended.
pub struct Exited {
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// The shell's exit code (`None`: ended by a signal).
    pub exit_code: Option<i32>,
    /// The hang guard ended it.
    pub timed_out: bool,
    /// How long it ran.
    pub duration: Duration,
    /// What the opener shims were called with, one line per call.
    pub opened: Vec<String>,
}

/// A private folder for one run (mode 0700), removed when dropped.
pub struct RunDir(PathBuf);

impl RunDir {
    /// Creates a new folder in the temporary folder.
    pub fn create() -> io::Result<RunDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("mrtr-probe-{}-{n}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&path)?;
        Ok(RunDir(path))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes an executable file.
fn write_script(path: &Path, text: &str) -> io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o755);
    io::Write::write_all(&mut options.open(path)?, text.as_bytes())
}

/// Puts the opener shims in `dir/bin`; each appends its name and arguments to `dir/opened`.
/// Returns the `PATH` and `BROWSER` the client gets.
fn install_shims(dir: &Path) -> io::Result<Vec<(String, String)>> {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin)?;
    let log = dir.join("opened");
    let quoted = shlex::try_quote(&log.to_string_lossy())
        .map_err(|e| io::Error::other(e.to_string()))?
        .into_owned();
    for name in OPENERS {
        write_script(
            &bin.join(name),
            &format!("#!/bin/sh\nprintf '%s\\n' \"{name} $*\" >> {quoted}\n"),
        )?;
    }
    let path = match std::env::var_os("PATH") {
        Some(rest) => format!("{}:{}", bin.display(), rest.to_string_lossy()),
        None => bin.display().to_string(),
    };
    Ok(vec![
        ("PATH".into(), path),
        (
            "BROWSER".into(),
            bin.join("x-www-browser").display().to_string(),
        ),
    ])
}

fn collect(
    pipe: Option<impl AsyncRead + Unpin + Send + 'static>,
    into: Arc<Mutex<Vec<u8>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(mut pipe) = pipe else { return };
        let mut buffer = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            if let Ok(mut all) = into.lock() {
                all.extend_from_slice(buffer.get(..n).unwrap_or_default());
            }
        }
    })
}

fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Runs the client in `dir` (a [`RunDir`]) to the end of its process tree.
pub async fn run(launch: Launch<'_>, dir: &Path) -> io::Result<Exited> {
    let mut env = install_shims(dir)?;
    env.extend(launch.env);
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(format!("{} {}", launch.command, launch.last_word))
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    command.process_group(0);
    let started = Instant::now();
    let mut child = command.spawn()?;
    let pid = child.id();
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let out_task = collect(child.stdout.take(), stdout.clone());
    let err_task = collect(child.stderr.take(), stderr.clone());
    let whole_tree = async {
        let _ = out_task.await;
        let _ = err_task.await;
        child.wait().await
    };
    let (status, timed_out) = match tokio::time::timeout(launch.timeout, whole_tree).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            kill_group(pid);
            (child.wait().await.ok(), true)
        }
    };
    // A descendant that closed its pipes and lingers is the client's too: it goes with it.
    kill_group(pid);
    let duration = started.elapsed();
    let text = |buffer: &Arc<Mutex<Vec<u8>>>| {
        buffer
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let opened = std::fs::read_to_string(dir.join("opened"))
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    Ok(Exited {
        stdout: text(&stdout),
        stderr: text(&stderr),
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        duration,
        opened,
    })
}
