//! The stdio wrapper (to come): `mrtr-gate proxy -- COMMAND ARGS` spawns the server without a
//! shell, relays JSON-RPC lines both ways through the [`crate::engine`], logs the server's
//! stderr to a private file (never the client's protocol stream), and ends every binding
//! when either side goes away.
