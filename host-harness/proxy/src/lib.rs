//! # mrtr-gate-proxy
//!
//! The gate in front of any MCP server, for any client, with no code change on either side
//! (issue 25): a stdio wrapper a client's server entry points at, and a streamable-HTTP
//! egress proxy; replicas share rounds and one trail on Redis.
//!
//! Work in progress. Done: [`engine`], the transport-free core that binds a client's gated
//! request under a minted id ([`ids`]), judges the server's answer and gives the client the
//! judged bytes under its own id, or the gate's refusal as a JSON-RPC error ([`errors`]); and
//! [`stdio::relay`], the stdio wrapper's relay around it (the engine on a thread of its own).
//! Still to come, each in its module: the options ([`config`]), consent modes ([`consent`]),
//! the gate pool ([`pool`]) and the HTTP endpoint ([`http`]).

pub mod config;
pub mod consent;
pub mod engine;
pub mod errors;
pub mod http;
pub mod ids;
pub mod message;
pub mod pool;
pub mod rounds;
pub mod stdio;

pub use engine::{Action, Engine, EngineConfig, Principal};
pub use errors::Refusal;
pub use ids::{IdMinter, splice_id};
