//! The relay: the stdio server a client spawns when the probe runs it over stdio
//! (`mrtr-gate probe --relay 127.0.0.1:PORT`, the last word [`crate::stdio`] gives the
//! client). It connects to the probe and copies stdin to the connection and the connection
//! to stdout, byte for byte (nothing is parsed, so a hostile line reaches the probe as it was
//! written), and returns as soon as either side ends: the client closing stdin ends the
//! probe's connection, and the probe closing the connection (a transport error a scenario
//! causes) ends the process, which the client sees as its server dying.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;

/// Copies until `input` ends or `output` fails, flushing every chunk (a message must reach
/// the other side while the sender waits for its answer).
fn pump(mut input: impl Read, mut output: impl Write) -> io::Result<()> {
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let n = match input.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        output.write_all(buffer.get(..n).unwrap_or_default())?;
        output.flush()?;
    }
}

/// Standard output, locked per write only: a copy blocked on the socket holds no lock.
struct Stdout;

impl Write for Stdout {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        io::stdout().lock().write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        io::stdout().lock().write_all(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().lock().flush()
    }
}

/// Relays stdin and stdout to `address` until either side ends. An error only when the
/// connection cannot be made.
pub fn relay(address: &str) -> io::Result<()> {
    let socket = TcpStream::connect(address)?;
    let _ = socket.set_nodelay(true);
    let upstream = socket.try_clone()?;
    let (ended, first_end) = mpsc::channel();
    let downstream_ended = ended.clone();
    std::thread::spawn(move || {
        let _ = pump(&socket, Stdout);
        let _ = downstream_ended.send(());
    });
    std::thread::spawn(move || {
        let _ = pump(io::stdin(), &upstream);
        // The probe reads the end of the client's messages as the connection's end.
        let _ = upstream.shutdown(std::net::Shutdown::Write);
        let _ = ended.send(());
    });
    // The thread still copying is left blocked: the process ends with the caller's return.
    let _ = first_end.recv();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pump_copies_every_byte_as_it_is() {
        let mut hostile: Vec<u8> = (0..=255u8).collect();
        hostile.extend_from_slice(b"\n{\"a\":1,\"a\":2}\r\n\xff");
        hostile.extend(std::iter::repeat_n(b'x', 200_000));
        let mut out = Vec::new();
        pump(&hostile[..], &mut out).expect("copied");
        assert_eq!(out, hostile);
    }

    #[test]
    fn a_refused_connection_is_an_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
        let address = listener.local_addr().expect("an address").to_string();
        drop(listener);
        assert!(relay(&address).is_err());
    }
}
