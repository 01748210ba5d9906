//! What the CLI's integration tests share: the proxy under test and its trail
//! (`proxy.rs`, re-exported here), raw JSON-RPC rounds and a proxy's stop (`raw.rs`), the official SDK clients' rounds (`sdk_rounds.rs`), and a
//! terminal driven through tmux (`tmux.rs`). Each test binary uses a part of it.

#![allow(dead_code)]

pub mod proxy;
pub mod raw;
pub mod sdk_rounds;
pub mod tmux;

pub use proxy::*;
