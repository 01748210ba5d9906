//! A client's event stream (a GET stream, or a streamed answer): what the upstream's reader
//! queued for it, each event holding its bytes of the principal's allowance
//! ([`super::caps::Caps::queued_bytes`]) until hyper takes it for the socket. A client that
//! does not read stops its own streams' readers (and through them its upstream), never the
//! proxy's memory or another principal's streams.

use super::answer::ProxyBody;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Events queued for one stream before its reader waits (whatever their size).
const STREAM_QUEUE: usize = 64;

/// One event and the bytes of the allowance it holds.
struct Queued {
    bytes: Bytes,
    _held: Option<OwnedSemaphorePermit>,
}

/// A body fed by a channel: the client's event stream. When the client goes, hyper drops it,
/// and the sender sees the channel closed.
struct ChannelBody(mpsc::Receiver<Queued>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // The allowance comes back as the frame goes to hyper.
        self.0
            .poll_recv(cx)
            .map(|q| q.map(|q| Ok(Frame::data(q.bytes))))
    }
}

/// The upstream reader's end of a client's event stream.
#[derive(Debug)]
pub struct EventSender {
    tx: mpsc::Sender<Queued>,
    allowance: Arc<Semaphore>,
    cap: u32,
}

/// A stream whose events count against `allowance` (of `cap` bytes), and its body.
pub fn event_stream(allowance: Arc<Semaphore>, cap: usize) -> (EventSender, ProxyBody) {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    let cap = u32::try_from(cap).unwrap_or(u32::MAX);
    (EventSender { tx, allowance, cap }, ChannelBody(rx).boxed())
}

impl EventSender {
    /// Queue `bytes` once the allowance has room for them (an event larger than the whole
    /// allowance waits for all of it); `false` when the client is gone.
    pub async fn send(&self, bytes: Bytes) -> bool {
        let need = u32::try_from(bytes.len()).unwrap_or(u32::MAX).min(self.cap);
        let held = tokio::select! {
            () = self.tx.closed() => return false,
            held = Arc::clone(&self.allowance).acquire_many_owned(need) => held.ok(),
        };
        self.tx.send(Queued { bytes, _held: held }).await.is_ok()
    }

    /// Until the client is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_unread_stream_holds_its_principals_bytes_and_gives_them_back_when_read() {
        let allowance = Arc::new(Semaphore::new(10));
        let (tx, mut body) = event_stream(allowance.clone(), 10);
        assert!(tx.send(Bytes::from_static(b"123456")).await);
        assert_eq!(allowance.available_permits(), 4);
        // The next event does not fit: the reader waits until the client reads.
        let waiting = tokio::spawn(async move {
            tx.send(Bytes::from_static(b"abcdef")).await;
            tx
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"123456");
        let tx = waiting.await.unwrap();
        let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&second[..], b"abcdef");
        assert_eq!(allowance.available_permits(), 10);
        // An event larger than the whole allowance still goes, alone.
        assert!(tx.send(Bytes::from(vec![0u8; 25])).await);
        assert_eq!(allowance.available_permits(), 0);
        drop(body);
        assert!(
            !tx.send(Bytes::from_static(b"x")).await,
            "the client is gone"
        );
    }
}
