//! The canary: a bare TCP listener that scenarios put in URLs and `$ref`s. A client that
//! fetches one (a prefetch, a preview, a schema dereference, a TLS handshake) connects here;
//! any connection is a hit. The first read is kept for the report, then the connection is
//! closed so the client does not wait on it.

use crate::listen::Listener;
use crate::record::CanaryHit;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The running canary.
pub struct Canary {
    listener: Listener,
    hits: Arc<Mutex<Vec<CanaryHit>>>,
}

impl Canary {
    /// Binds the canary on `127.0.0.1:0`.
    pub fn start() -> io::Result<Canary> {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let recording = hits.clone();
        let listener = Listener::start(move |mut stream| {
            let hits = recording.clone();
            async move {
                let mut buffer = vec![0u8; 1024];
                let read = stream.read(&mut buffer).await.unwrap_or(0);
                let first = buffer.get(..read).unwrap_or_default();
                let text = String::from_utf8_lossy(first);
                let first_line = text.lines().next().unwrap_or_default().to_owned();
                if let Ok(mut hits) = hits.lock() {
                    hits.push(CanaryHit { first_line });
                }
            }
        })?;
        Ok(Canary { listener, hits })
    }

    /// The canary's port.
    pub fn port(&self) -> u16 {
        self.listener.port()
    }

    /// Waits for every connection to end and returns the hits, and whether every connection
    /// ended within `guard`.
    pub async fn finish(self, guard: Duration) -> (Vec<CanaryHit>, bool) {
        let ended = self.listener.finish(guard).await;
        let hits = self
            .hits
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        (hits, ended)
    }
}
