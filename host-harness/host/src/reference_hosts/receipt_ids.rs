//! [`ReceiptIds`]: the ids a host's consent gives its receipts, `<kind>-<pid>-<n>`: unique in
//! the process, told apart from another process's on one trail, and saying which consent made
//! them (`tty`, `hook`, `client`, `cli-yes`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Receipt ids of one kind.
#[derive(Debug)]
pub struct ReceiptIds {
    kind: &'static str,
    next: AtomicU64,
}

impl ReceiptIds {
    /// Ids `<kind>-<pid>-<n>`, `n` counting from `first`.
    pub const fn new(kind: &'static str, first: u64) -> Self {
        Self {
            kind,
            next: AtomicU64::new(first),
        }
    }

    /// The next id.
    pub fn mint(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}-{}-{n}", self.kind, std::process::id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_kind_the_process_and_a_count() {
        let ids = ReceiptIds::new("tty", 1);
        let pid = std::process::id();
        assert_eq!(ids.mint(), format!("tty-{pid}-1"));
        assert_eq!(ids.mint(), format!("tty-{pid}-2"));
    }
}
