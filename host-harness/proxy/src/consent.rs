//! The consent modes of `--consent` (to come): `client` (the client's own elicitation UI
//! collected the answers; the trail says consent was delegated, never that the user was
//! seen), `tty` (the gate's screen on the controlling terminal, never the protocol streams)
//! and `command CMD` (a hook that gets the consent view on stdin and answers yes or no).
