//! # mrtr-gate-redis
//!
//! The gate's host services on Redis, for a client that runs as many processes:
//! [`RedisStorage`] is the `storage` service (live bindings, shared, every batch of
//! compare-and-swaps applied atomically on the server). `docs/redis.md` has the data layout
//! and why it is built this way.

pub mod storage;

pub use storage::RedisStorage;
