//! A loopback listener whose every connection is known to have ended when the run is judged:
//! connections are accepted by a task while the client runs, and when its process tree has
//! exited the backlog is drained without blocking (a connection the kernel completed is in it
//! even if the task never ran) and every connection is awaited to its end (the client is gone,
//! so each one reads EOF). No quiet period decides anything.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What serves one accepted connection.
type Serve = Arc<dyn Fn(TcpStream) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A listener and the connections it has handed out.
pub struct Listener {
    port: u16,
    drain: std::net::TcpListener,
    open: Arc<watch::Sender<usize>>,
    accepting: JoinHandle<()>,
    serve: Serve,
}

impl Listener {
    /// Binds `127.0.0.1:0` and serves each connection with `serve` until [`Listener::finish`].
    pub fn start<F, Fut>(serve: F) -> io::Result<Listener>
    where
        F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let bound = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        bound.set_nonblocking(true)?;
        let port = bound.local_addr()?.port();
        let drain = bound.try_clone()?;
        let listener = tokio::net::TcpListener::from_std(bound)?;
        let serve: Serve = Arc::new(move |stream| Box::pin(serve(stream)));
        let open = Arc::new(watch::Sender::new(0usize));
        let accepting = {
            let serve = serve.clone();
            let open = open.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    spawn_counted(&open, serve(stream));
                }
            })
        };
        Ok(Listener {
            port,
            drain,
            open,
            accepting,
            serve,
        })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops accepting, takes what is left in the backlog, and returns when every connection
    /// has been served to its end (`true`), or when `guard` has passed with one still open
    /// (`false`: something outside the client's process tree holds it). Call it only once the
    /// client's process tree has exited.
    pub async fn finish(self, guard: Duration) -> bool {
        self.accepting.abort();
        loop {
            match self.drain.accept() {
                Ok((stream, _)) => {
                    let Ok(()) = stream.set_nonblocking(true) else {
                        continue;
                    };
                    let Ok(stream) = TcpStream::from_std(stream) else {
                        continue;
                    };
                    spawn_counted(&self.open, (self.serve)(stream));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let mut watching = self.open.subscribe();
        tokio::time::timeout(guard, watching.wait_for(|open| *open == 0))
            .await
            .is_ok_and(|ended| ended.is_ok())
    }
}

/// Runs `work` as a task counted in `open` until it ends. The count rises before the task is
/// spawned, so a connection is never uncounted between its accept and its task.
fn spawn_counted(
    open: &Arc<watch::Sender<usize>>,
    work: impl Future<Output = ()> + Send + 'static,
) {
    open.send_modify(|n| *n += 1);
    let open = open.clone();
    tokio::spawn(async move {
        work.await;
        open.send_modify(|n| *n = n.saturating_sub(1));
    });
}
