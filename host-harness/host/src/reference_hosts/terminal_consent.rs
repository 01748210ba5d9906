//! The interactive consent provider: the consent screen on a terminal, `y` or nothing.

use crate::consent_screen::{LastView, render_answers};
use mrtr_gate_core::host::{Consent, ConsentMethod, ConsentPrompt, ConsentReceipt, HostError};
use std::io::{BufRead, BufReader, Write};
use std::sync::{Mutex, PoisonError};

/// A terminal that cannot be written or read. (The message has said "audit file" since this
/// code shared a module with the audit file; it is kept as it is until a change of behaviour
/// is wanted.)
fn io(e: std::io::Error) -> HostError {
    HostError::new(format!("audit file: {e}"))
}

/// Asks a person at the terminal: shows the consent view and the answers, and takes `y`
/// as the only yes (anything else, end of input included, is a refusal).
pub struct TerminalConsent {
    input: Mutex<Box<dyn BufRead + Send>>,
    output: Mutex<Box<dyn Write + Send>>,
    ids: super::ReceiptIds,
    method: ConsentMethod,
    views: LastView,
    before_prompt: Option<Box<dyn Fn() + Send + Sync>>,
}

/// Drop what was typed on `terminal` and not read yet: called just before a consent screen
/// is drawn, so that a `y` typed ahead (for an earlier prompt, or before the screen was
/// there) is never taken for consent to a screen nobody saw. Not a terminal (a pipe, a
/// test's file): nothing was typed ahead, nothing to drop.
#[cfg(unix)]
pub fn discard_typed_ahead(terminal: &impl std::os::fd::AsFd) {
    let _ = rustix::termios::tcflush(terminal, rustix::termios::QueueSelector::IFlush);
}

impl std::fmt::Debug for TerminalConsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TerminalConsent")
    }
}

impl Default for TerminalConsent {
    fn default() -> Self {
        Self::with_io(
            Box::new(BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        )
    }
}

impl TerminalConsent {
    /// Ask on `output`, read the answer from `input` (tests, or another terminal).
    pub fn with_io(input: Box<dyn BufRead + Send>, output: Box<dyn Write + Send>) -> Self {
        Self {
            input: Mutex::new(input),
            output: Mutex::new(output),
            ids: super::ReceiptIds::new("tty", 1),
            method: ConsentMethod::UserAtScreen,
            views: LastView::default(),
            before_prompt: None,
        }
    }

    /// Run `before` just before each consent screen is drawn: on a terminal, discard what
    /// was typed ahead ([`discard_typed_ahead`]).
    pub fn with_before_prompt(mut self, before: impl Fn() + Send + Sync + 'static) -> Self {
        self.before_prompt = Some(Box::new(before));
        self
    }

    /// Render from `views` the view a client already read for the round (by its bytes).
    pub fn with_views(mut self, views: LastView) -> Self {
        self.views = views;
        self
    }

    /// The method the receipts name (a person at this screen unless told otherwise: answers
    /// written before the round was seen are [`ConsentMethod::PresetAnswers`] even when the
    /// person confirms them here, so the trail never claims more of a person than there was).
    pub fn with_method(mut self, method: ConsentMethod) -> Self {
        self.method = method;
        self
    }
}

impl Consent for TerminalConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let (shown, readable) = self.views.render(&prompt.view_json);
        let answers = render_answers(&prompt.responses_json);
        if let Some(before) = &self.before_prompt {
            before();
        }
        {
            let mut out = self.output.lock().unwrap_or_else(PoisonError::into_inner);
            write!(
                out,
                "{shown}\nAnswers to send:\n{answers}\nSend these answers? [y/N] "
            )
            .and_then(|()| out.flush())
            .map_err(io)?;
        }
        let mut line = String::new();
        self.input
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read_line(&mut line)
            .map_err(io)?;
        // A view that does not read was shown as a refusal: nothing is granted on it.
        let granted = readable && line.trim().eq_ignore_ascii_case("y");
        Ok(ConsentReceipt::for_prompt(
            prompt,
            self.ids.mint(),
            granted,
            self.method,
        ))
    }
}
