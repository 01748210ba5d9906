//! The gate pool (to come): component instances over one set of host services, each with a
//! store connection of its own, checked out per call and run off the async threads (a gate
//! call is synchronous and its deadline reads the thread's CPU clock); stale bindings
//! expired on a timer.
