//! # mrtr-gate-redis
//!
//! The gate's host services on Redis, for a client that runs as many processes:
//! [`RedisStorage`] is the `storage` service (live bindings, shared, every batch of
//! compare-and-swaps applied atomically on the server); [`RedisAudit`] is the `audit` service
//! (one hash chain for all of them, extended atomically). `docs/redis.md` has the data layout
//! and why it is built this way.

pub mod audit;
mod connection;
pub mod storage;

pub use audit::RedisAudit;
pub use storage::RedisStorage;
