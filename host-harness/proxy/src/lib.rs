//! # mrtr-gate-proxy
//!
//! The gate in front of any MCP server, for any client, with no code change on either side
//! (issue 25): a stdio wrapper a client's server entry points at, and a streamable-HTTP
//! egress proxy; replicas share rounds and one trail on Redis.
//!
//! [`engine`] is the transport-free core that binds a client's gated request under a minted
//! id ([`ids`]), judges the server's answer and gives the client the judged bytes under its
//! own id, or the gate's refusal as a JSON-RPC error ([`errors`]), and files delivered
//! rounds for their retries ([`rounds`]); [`stdio::relay`] is the stdio wrapper's relay
//! around it (the engine on a thread of its own), run on this process's stdin and stdout by
//! [`run_stdio`]; [`http::serve`] the streamable-HTTP endpoint on hyper (the engine
//! likewise), run by [`run_http`]; [`consent`] the consent modes ([`tty_input`] the
//! terminal's). [`metrics`] counts what happens for the [`admin`] listener. The command line
//! is `mrtr-gate proxy` (host-harness/cli, `proxy.rs`).

pub mod admin;
pub mod capture;
pub mod consent;
pub mod engine;
pub mod errors;
pub mod http;
pub mod ids;
pub mod log;
pub mod message;
pub mod metrics;
pub mod no_cache;
pub mod rounds;
pub mod stdio;
pub mod trace;
pub mod tty_input;

pub use engine::{Action, Engine, EngineConfig, Principal};
pub use errors::Refusal;
pub use ids::{IdMinter, splice_id};

use mrtr_gate_host::GateApi;

/// The stdio wrapper on this process's own stdin and stdout: spawn `argv` (no shell) with
/// its stderr to `server_stderr`, relay and gate until the server's output ends (or the
/// client leaves and the server exits), or until the process is told to stop (SIGINT,
/// SIGTERM: a drain of up to `drain_timeout`, [`stdio::relay`]), with the `admin` listener
/// beside it if any. How it ended; an error when the server could not be started.
pub fn run_stdio<G, F>(
    make_engine: F,
    argv: &[String],
    server_stderr: std::process::Stdio,
    prepare: stdio::Prepare,
    drain_timeout: std::time::Duration,
    admin: Option<admin::Admin>,
) -> Result<stdio::Ended, String>
where
    G: GateApi + 'static,
    F: FnOnce() -> Engine<G> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("could not start the async runtime: {e}"))?;
    let draining = serve_admin(&runtime, admin);
    let outcome = runtime.block_on(stdio::relay(
        make_engine,
        argv,
        server_stderr,
        prepare,
        tokio::io::stdin(),
        tokio::io::stdout(),
        stdio::Stop {
            signal: stopping(draining),
            drain_timeout,
        },
    ));
    // The reader of stdin may sit in a blocking read the client never ends (the server went
    // first): nothing is left to wait for.
    runtime.shutdown_background();
    outcome
}

/// The HTTP proxy: serve the MCP endpoint on `listen` in front of `options.upstream`, gating
/// on `engines` engines (`make_engine` builds each for its index: [`http::serve_pool_until`]),
/// until the process is told to stop (SIGINT, SIGTERM), with the `admin` listener beside it if
/// any. `ready` is told the address bound (a port 0 becomes the one the system picked) before
/// the first request is taken.
pub fn run_http<G, F>(
    options: http::HttpOptions,
    engines: usize,
    listen: std::net::SocketAddr,
    make_engine: F,
    ready: impl FnOnce(std::net::SocketAddr),
    admin: Option<admin::Admin>,
) -> Result<(), String>
where
    G: GateApi + 'static,
    F: Fn(mrtr_gate_host::core::ServerIdentity, usize) -> Engine<G> + Send + Sync + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("could not start the async runtime: {e}"))?;
    let draining = serve_admin(&runtime, admin);
    let outcome = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("--listen {listen}: {e}"))?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("--listen {listen}: {e}"))?;
        ready(bound);
        http::serve_pool_until(options, listener, engines, make_engine, stopping(draining)).await
    });
    runtime.shutdown_background();
    outcome
}

/// The admin listener on `runtime`, if asked for; the flag its `/readyz` reads for a drain.
fn serve_admin(
    runtime: &tokio::runtime::Runtime,
    admin: Option<admin::Admin>,
) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    metrics::global().start();
    let admin = admin?;
    let draining = admin.draining.clone();
    runtime.spawn(async move {
        if let Err(e) = admin::serve(admin).await {
            log::error(
                "admin_failed",
                &format!("the admin listener stopped: {e}"),
                &[],
            );
        }
    });
    Some(draining)
}

/// [`stop_signal`], then the admin listener's `/readyz` says the proxy is draining.
async fn stopping(draining: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>) {
    stop_signal().await;
    if let Some(draining) = draining {
        draining.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Call `reload` on every SIGHUP from now on (a service manager's reload), on a thread of its
/// own: the handler is in place when this returns, so a SIGHUP sent after it never takes the
/// signal's default action (ending the process). Unix only; elsewhere an error.
pub fn on_hangup(reload: impl Fn() + Send + 'static) -> Result<(), String> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (installed, told) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("mrtr-gate-sighup".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = installed.send(Err(format!("SIGHUP: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let mut hangups = match signal(SignalKind::hangup()) {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = installed.send(Err(format!("SIGHUP: {e}")));
                            return;
                        }
                    };
                    let _ = installed.send(Ok(()));
                    while hangups.recv().await.is_some() {
                        reload();
                    }
                });
            })
            .map_err(|e| format!("SIGHUP: {e}"))?;
        told.recv()
            .map_err(|_| "SIGHUP: the handler's thread ended".to_owned())?
    }
    #[cfg(not(unix))]
    {
        let _ = reload;
        Err("SIGHUP is a Unix signal".into())
    }
}

/// SIGINT or SIGTERM (a service manager's stop); either ends the serving loop.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
