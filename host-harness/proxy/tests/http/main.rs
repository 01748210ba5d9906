//! The streamable-HTTP endpoint over real sockets on 127.0.0.1: a raw upstream written with
//! hyper here (it records every request it receives and answers as each test scripts it), the
//! proxy in front of it, and a raw client. Then the official Python SDK's server upstream.

#![cfg(test)]

mod answers;
mod caps;
mod consent;
mod differential;
mod neighbours;
mod requests;
mod retries;
mod sdk;
mod streams;
mod support;
mod tls;
