//! The proxy's options and their checks (to come): the upstream normalised once
//! (`ServerIdentity::origin` of `--upstream`, or the endpoint id of the spawned command), a
//! loopback listen address unless told otherwise, the principal (`--user`/`--tenant`, or
//! named headers trusted only when asked), `--consent`, `--max-rounds`, and a trail that is
//! a file or Redis, never one kept in memory by a process that runs for days.
