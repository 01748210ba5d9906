//! Server-sent events (to come): the upstream stream read event by event, the one response
//! under the call's id judged by the gate, notifications relayed as they come, and the
//! client's stream written afresh (no `id:` or `retry:` that a replay could ride on).
