//! # mrtr-gate-checker
//!
//! A schedule-exploring checker over the real policy core (issue 26): several gate
//! processes, each its own [`mrtr_gate_core::Gate`] with its own record cache, share one
//! store, one audit sink, one clock and one consent provider ([`world`]). Every host call
//! is a scheduling point of [shuttle](https://docs.rs/shuttle) ([`gate_host`]), so shuttle's
//! schedulers interleave any gate's calls with any other's and place the faults
//! ([`world::Fault`]) anywhere: its DFS scheduler explores every schedule of a small
//! configuration, its PCT scheduler samples deep ones. The store and the sink may each run as
//! a master with a replica that lags ([`replica`]: Redis Cluster's asynchronous replication),
//! writes confirmed before or only once the replica holds them. The invariants ([`trail`]) are
//! read off the audit trail after every line and at the end of every run; a broken one fails
//! the run with the host calls that led to it, and shuttle prints the schedule that replays it.
//! The configurations are in [`configs`]; docs/testing.md says what was explored.

pub mod configs;
pub mod gate_host;
pub mod replica;
pub mod scenario;
pub mod trail;
pub mod world;

use scenario::{Config, run_once};

/// What an exploration covered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Explored {
    /// Schedules run.
    pub schedules: usize,
    /// Wall time taken.
    pub elapsed: std::time::Duration,
}

/// Which shuttle scheduler explores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Every schedule, depth first (bounded by this many when `Some`: then not exhaustive).
    Dfs(Option<usize>),
    /// PCT: this many schedules, each with this many priority change points.
    Pct {
        /// Schedules.
        iterations: usize,
        /// Depth (priority change points + 1).
        depth: usize,
    },
    /// Uniformly random schedules, this many.
    Random(usize),
}

/// Explore `config` with `search`. A broken invariant fails the run by a panic carrying the
/// violation and its host calls: shuttle knows a failing schedule only by a panic, and
/// prints it (the encoded schedule for [`replay`]) before passing the panic on.
#[allow(clippy::panic)]
pub fn explore(config: Config, search: Search) -> Explored {
    use shuttle::scheduler::{DfsScheduler, PctScheduler, RandomScheduler};
    let began = std::time::Instant::now();
    let name = config.name;
    let test = move || {
        if let Err(v) = run_once(&config) {
            panic!("configuration {name}: {v}");
        }
    };
    let settings = settings();
    let schedules = match search {
        Search::Dfs(bound) => {
            shuttle::Runner::new(DfsScheduler::new(bound, false), settings).run(test)
        }
        Search::Pct { iterations, depth } => {
            shuttle::Runner::new(PctScheduler::new(depth, iterations), settings).run(test)
        }
        Search::Random(iterations) => {
            shuttle::Runner::new(RandomScheduler::new(iterations), settings).run(test)
        }
    };
    Explored {
        schedules,
        elapsed: began.elapsed(),
    }
}

/// Run `config` once under the schedule shuttle printed for a failing run.
#[allow(clippy::panic)]
pub fn replay(config: Config, schedule: &str) {
    let name = config.name;
    let scheduler = shuttle::scheduler::ReplayScheduler::new_from_encoded(schedule);
    shuttle::Runner::new(scheduler, settings()).run(move || {
        if let Err(v) = run_once(&config) {
            panic!("configuration {name}: {v}");
        }
    });
}

/// Shuttle's settings: each thread's stack large enough for the gate's calls in a debug build
/// (shuttle's default is sized for small test bodies).
fn settings() -> shuttle::Config {
    let mut settings = shuttle::Config::new();
    settings.stack_size = STACK_BYTES;
    settings
}

/// The stack of each thread of a run.
const STACK_BYTES: usize = 4 << 20;

/// One run of `config` under a random schedule drawn from `seed`: its host calls and faults
/// in order, or the violation it ran into (to read what a configuration does).
pub fn one_run(config: Config, seed: u64) -> Result<Vec<String>, trail::Violation> {
    use std::sync::{Arc, Mutex, PoisonError};
    type Kept = Option<Result<Vec<String>, trail::Violation>>;
    let out: Arc<Mutex<Kept>> = Arc::default();
    let kept = Arc::clone(&out);
    let scheduler = shuttle::scheduler::RandomScheduler::new_from_seed(seed, 1);
    shuttle::Runner::new(scheduler, settings()).run(move || {
        let result = run_once(&config).map(|o| o.log);
        *kept.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
    });
    let result = out.lock().unwrap_or_else(PoisonError::into_inner).take();
    result.unwrap_or_else(|| Ok(Vec::new()))
}
