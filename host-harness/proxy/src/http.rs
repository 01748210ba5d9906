//! The streamable-HTTP endpoint (to come), on hyper over tokio, never a hand-written parser.

pub mod headers;
pub mod server;
pub mod sse;
pub mod upstream;
