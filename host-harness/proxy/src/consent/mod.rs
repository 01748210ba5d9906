//! The consent modes of `--consent` (docs/proxy.md, "Consent"): who approves the answers a
//! retry carries, and what the trail may claim of it.
//!
//! - `client` ([`DelegatedConsent`]): the client's own elicitation UI collected the answers
//!   and sent them; the proxy cannot see who, or whether anyone, looked. It grants exactly
//!   the view and answers of the prompt, and the trail says `delegated_to_client`, never
//!   that a user was seen.
//! - `tty` ([`TtyConsent`]): the gate's consent screen on the controlling terminal
//!   (`/dev/tty`), never on the protocol streams; `user_at_screen`. No terminal: the gate
//!   answers `consent_unavailable`.
//! - `command CMD` ([`CommandConsent`]): a program, spawned without a shell, gets the view
//!   and the answers as JSON on stdin and grants only by printing exactly `yes` and exiting
//!   0 within a time limit; anything else is a refusal; `policy_hook`. A hook that cannot
//!   be started: `consent_unavailable`.

use crate::tty_input::{Prompting, TtyInput};
use mrtr_gate_host::consent_screen::render_view_text;
use mrtr_gate_host::core::host::{
    Consent, ConsentMethod, ConsentPrompt, ConsentReceipt, HostError,
};
#[cfg(unix)]
use mrtr_gate_host::reference_hosts::discard_typed_ahead;
use mrtr_gate_host::reference_hosts::{ReceiptIds, TerminalConsent};
use mrtr_gate_host::services::SharedConsent;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What `--consent` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsentMode {
    /// `client`: the client's UI consented.
    Client,
    /// `tty`: ask on the controlling terminal; no answer within `timeout` is a denial.
    Tty {
        /// How long the person has to answer.
        timeout: Duration,
    },
    /// `command CMD`: ask a program (its argv, run without a shell) within `timeout`.
    Command {
        /// The program and its arguments.
        argv: Vec<String>,
        /// How long the program has to answer before the answer is no.
        timeout: Duration,
    },
}

/// The default time a `--consent command` hook, or the person at `--consent tty`, has to
/// answer. A hook may ask a person, so it is long; it is a guard against a hook that hangs, or
/// a terminal nobody watches, not a pace.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(120);

/// The most a hook may print. Anything but `yes` is a refusal, so a little past it is enough
/// to tell; a hook that writes more is cut off (and refused), never buffered.
const MAX_HOOK_OUTPUT: u64 = 64;

/// The consent import for `mode`.
pub fn consent_for(mode: &ConsentMode) -> SharedConsent {
    match mode {
        ConsentMode::Client => Arc::new(DelegatedConsent::default()),
        ConsentMode::Tty { timeout } => Arc::new(TtyConsent::controlling_terminal(*timeout)),
        ConsentMode::Command { argv, timeout } => {
            Arc::new(CommandConsent::new(argv.clone(), *timeout))
        }
    }
}

/// `--consent client`: the answers came from the client's own elicitation UI, which is
/// where any consent was given. Grants exactly the prompt's view and answers (the gate has
/// already checked the answers against the round's schema); `delegated_to_client`.
#[derive(Debug)]
pub struct DelegatedConsent {
    ids: ReceiptIds,
}

impl Default for DelegatedConsent {
    fn default() -> Self {
        Self {
            ids: ReceiptIds::new("client", 0),
        }
    }
}

impl Consent for DelegatedConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        Ok(ConsentReceipt::for_prompt(
            prompt,
            self.ids.mint(),
            true,
            ConsentMethod::DelegatedToClient,
        ))
    }
}

/// `--consent tty`: the gate's consent screen on a terminal, opened when the first round
/// needs it (a proxy started by a desktop app has none, and learns it then). Each prompt
/// takes only what is typed after it is drawn, within `timeout` ([`TtyInput`]).
pub struct TtyConsent {
    path: PathBuf,
    timeout: Duration,
    prompting: Arc<Prompting>,
    opened: Mutex<Option<TerminalConsent>>,
}

impl std::fmt::Debug for TtyConsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtyConsent")
            .field("path", &self.path)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl TtyConsent {
    /// The process's controlling terminal, `/dev/tty`: never stdin or stdout, which carry
    /// the protocol in stdio mode.
    pub fn controlling_terminal(timeout: Duration) -> Self {
        Self::at(PathBuf::from("/dev/tty"), timeout)
    }

    /// The terminal at `path` (tests).
    pub fn at(path: PathBuf, timeout: Duration) -> Self {
        Self {
            path,
            timeout,
            prompting: Arc::default(),
            opened: Mutex::new(None),
        }
    }

    fn open(&self) -> Result<TerminalConsent, HostError> {
        let unavailable = |e: std::io::Error| {
            HostError::new(format!(
                "--consent tty: no terminal to ask on ({}: {e})",
                self.path.display()
            ))
        };
        let input = std::fs::File::open(&self.path).map_err(unavailable)?;
        // Appending: the screen never writes over what the person has yet to type.
        let output = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(unavailable)?;
        let typed_ahead = input.try_clone().map_err(unavailable)?;
        let input = TtyInput::new(input, Arc::clone(&self.prompting));
        let terminal = TerminalConsent::with_io(
            Box::new(std::io::BufReader::with_capacity(1, input)),
            Box::new(output),
        );
        Ok(discarding_type_ahead(terminal, typed_ahead))
    }
}

impl Consent for TtyConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let mut opened = self.opened.lock().unwrap_or_else(PoisonError::into_inner);
        if opened.is_none() {
            *opened = Some(self.open()?);
        }
        match opened.as_ref() {
            Some(terminal) => {
                self.prompting.start(self.timeout);
                terminal.request_consent(prompt)
            }
            None => Err(HostError::new("--consent tty: no terminal to ask on")),
        }
    }
}

#[cfg(unix)]
fn discarding_type_ahead(terminal: TerminalConsent, input: std::fs::File) -> TerminalConsent {
    terminal.with_before_prompt(move || discard_typed_ahead(&input))
}

#[cfg(not(unix))]
fn discarding_type_ahead(terminal: TerminalConsent, _: std::fs::File) -> TerminalConsent {
    // No unix terminal: `TtyInput` refuses to wait on it, so nothing is ever read.
    terminal
}

/// `--consent command CMD`: a policy program decides.
#[derive(Debug)]
pub struct CommandConsent {
    argv: Vec<String>,
    timeout: Duration,
    ids: ReceiptIds,
}

impl CommandConsent {
    /// Run `argv` (no shell) for each prompt; no answer within `timeout` is a refusal.
    pub fn new(argv: Vec<String>, timeout: Duration) -> Self {
        Self {
            argv,
            timeout,
            ids: ReceiptIds::new("hook", 1),
        }
    }

    /// What the hook reads on stdin: the view and the answers as the gate hashed them, their
    /// digests, and the screen a person would be shown.
    fn input(prompt: &ConsentPrompt) -> Result<Vec<u8>, HostError> {
        let parse = |text: &str| {
            serde_json::from_str::<serde_json::Value>(text)
                .map_err(|e| HostError::new(format!("the consent prompt is not json: {e}")))
        };
        let (screen, _) = render_view_text(&prompt.view_json);
        let input = serde_json::json!({
            "view": parse(&prompt.view_json)?,
            "view_sha256": prompt.view_sha256,
            "answers": parse(&prompt.responses_json)?,
            "responses_sha256": prompt.responses_sha256,
            "screen": screen,
        });
        let mut bytes = input.to_string().into_bytes();
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// Whether the hook granted: it printed exactly `yes` (a final newline allowed) and
    /// exited 0, all before the deadline.
    fn ask(&self, input: Vec<u8>) -> Result<bool, HostError> {
        let (program, args) = self
            .argv
            .split_first()
            .ok_or_else(|| HostError::new("--consent command: no command"))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // The hook's own complaints are the operator's, beside the proxy's.
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                HostError::new(format!("--consent command: `{program}` did not start: {e}"))
            })?;
        let deadline = Instant::now() + self.timeout;
        // Written from a thread of its own: a hook that never reads must not hold up the
        // deadline (a pipe takes only so much), and one that exits unread is no error here.
        if let Some(mut stdin) = child.stdin.take() {
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            });
        }
        let (said, heard) = std::sync::mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let read = stdout.take(MAX_HOOK_OUTPUT + 1).read_to_end(&mut out);
                let _ = said.send(read.map(|_| out));
            });
        }
        let output = heard
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()
            .and_then(Result::ok);
        let granted = match output {
            Some(out) if out == b"yes" || out == b"yes\n" => wait_until(&mut child, deadline),
            _ => false,
        };
        // Whatever it was doing (still writing, sleeping, past its time), it is done now.
        let _ = child.kill();
        let _ = child.wait();
        Ok(granted)
    }
}

/// Whether `child` exits with status 0 before `deadline`.
fn wait_until(child: &mut std::process::Child, deadline: Instant) -> bool {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => return false,
        }
    }
}

impl Consent for CommandConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let granted = self.ask(Self::input(prompt)?)?;
        Ok(ConsentReceipt::for_prompt(
            prompt,
            self.ids.mint(),
            granted,
            ConsentMethod::PolicyHook,
        ))
    }
}

/// How many decisions made off the engine's thread may wait for the retry they were made for.
/// A decision is taken by its retry at once (the client's message goes back to the engine as
/// soon as the person or the hook answered); one whose retry never comes (the client gave up,
/// the round fitted no retry) is let go after [`DECIDED_KEPT_FOR`], or first when this many
/// wait.
pub const MAX_DECIDED: usize = 1024;

/// How long a decision waits for its retry.
pub const DECIDED_KEPT_FOR: Duration = Duration::from_secs(60);

/// A slow consent (`tty`, `command`) asked off the engine's thread, so that a person or a hook
/// taking minutes holds up only the call waiting for it (HTTP mode, many clients on one
/// engine). The engine names the prompt a retry will need ([`DeferredConsent::decided`] says
/// whether it has been asked); the call's own task asks ([`DeferredConsent::ask`], blocking,
/// on a thread of its own) and records the receipt, or the failure; the gate's
/// `request-consent` then takes exactly that outcome, once. A prompt nobody asked off the
/// thread (a round another replica delivered, whose view this one never saw) is asked inline,
/// as without deferral.
pub struct DeferredConsent {
    inner: SharedConsent,
    decided: Mutex<HashMap<PromptKey, Decided>>,
}

/// A prompt by its view's and its answers' digests.
type PromptKey = (String, String);

/// What was decided off the thread (the receipt, or why there is none), and when.
type Decided = (Result<ConsentReceipt, String>, Instant);

impl std::fmt::Debug for DeferredConsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredConsent").finish_non_exhaustive()
    }
}

fn prompt_key(prompt: &ConsentPrompt) -> PromptKey {
    (prompt.view_sha256.clone(), prompt.responses_sha256.clone())
}

impl DeferredConsent {
    /// `inner`, asked off the engine's thread.
    pub fn new(inner: SharedConsent) -> Self {
        Self {
            inner,
            decided: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an outcome for `prompt` waits to be taken.
    pub fn decided(&self, prompt: &ConsentPrompt) -> bool {
        self.decided
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&prompt_key(prompt))
    }

    /// Ask `inner` (blocking: a person, a hook) and record the outcome for the gate's
    /// `request-consent` to take. A failure is recorded too: the gate denies it
    /// (`consent_unavailable`) rather than asking again.
    pub fn ask(&self, prompt: &ConsentPrompt) {
        let outcome = self
            .inner
            .request_consent(prompt)
            .map_err(|e| e.to_string());
        let mut decided = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        decided.retain(|_, (_, at)| at.elapsed() < DECIDED_KEPT_FOR);
        if decided.len() >= MAX_DECIDED {
            let oldest = decided
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                decided.remove(&oldest);
            }
        }
        decided.insert(prompt_key(prompt), (outcome, Instant::now()));
    }
}

impl Consent for DeferredConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let taken = self
            .decided
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&prompt_key(prompt));
        match taken {
            Some((outcome, _)) => outcome.map_err(HostError::new),
            None => self.inner.request_consent(prompt),
        }
    }
}

#[cfg(test)]
mod tests;
