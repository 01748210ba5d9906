//! The call deadline of [`CallBudget::Deadline`](crate::CallBudget::Deadline): the guest's
//! own CPU time in one call, measured on the calling thread's CPU clock, with a much larger
//! wall-clock backstop ([`SandboxLimits::wall_backstop`](crate::SandboxLimits)).
//!
//! Why CPU time and not wall time: a thread that other processes keep off the cores, or that
//! waits on a page fault, a socket or a lock, is not running; charging it for that time
//! denied good rounds on a loaded machine. A guest that really loops runs, so it still uses up
//! its CPU budget and is stopped. The wall backstop bounds what CPU time cannot see (a guest
//! that waits forever in an import) and is far above any good call's wall time under load.
//!
//! The epoch ticker only decides when to look: every time the engine's epoch reaches the
//! store's deadline, [`on_epoch_deadline`] reads the clocks on the guest's own thread and
//! either interrupts or sets the next look at what is left.
//!
//! The CPU clock is read from the first look on, not as each call starts: reading a thread's
//! CPU clock is a system call (no vDSO serves it), and a good call ends long before its first
//! look (a form round takes about a tenth of a millisecond; the first look comes after a
//! quarter of the budget of wall time), so a good call never reads it. What a call used before
//! its first look is at most that quarter (CPU time never outruns the wall clock) and goes
//! uncounted; from the look on, the whole budget is measured. A guest that loops is therefore
//! stopped after at least its budget of CPU time and at most a quarter more.

use std::time::{Duration, Instant};

/// The calling thread's CPU time (user and system) since it started.
#[cfg(unix)]
pub(crate) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through a pointer to a live local.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        // No CPU clock: wall time since the process's first look, which only ever counts
        // more than the CPU clock would (never lets a looping guest run longer).
        return wall_since_first_look();
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Without a thread CPU clock, the deadline falls back to wall time (the old behaviour).
#[cfg(not(unix))]
pub(crate) fn thread_cpu() -> Duration {
    wall_since_first_look()
}

fn wall_since_first_look() -> Duration {
    static FIRST: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    FIRST.get_or_init(Instant::now).elapsed()
}

/// One call's accounting against its budget.
///
/// Host imports: the consent prompt's CPU time comes off the CPU budget and its wall time off
/// the backstop (a minute of thought is not the guest running away). The due listing's CPU
/// time comes off the CPU budget (an in-process store may walk many keys for it). The other
/// imports (clock, storage read and write, audit append) are not timed one by one: reading
/// the thread CPU clock is a system call, and timing every import would cost a good part of a
/// round (docs/performance.md). What they wait for (a socket, a lock, the scheduler) is not
/// CPU time, so it never counts; only their own CPU work on this thread does, and that is
/// small by their contract. All of it counts against the wall backstop.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GuestDeadline {
    cpu_budget: Duration,
    wall_budget: Duration,
    wall_started: Instant,
    /// The thread's CPU clock at the first look; `None` before it (nothing is measured yet).
    cpu_mark: Option<Duration>,
    /// CPU time spent in the timed host services since the mark.
    host_cpu: Duration,
    /// Wall time spent waiting on a person.
    waited: Duration,
}

impl GuestDeadline {
    /// A call starts now on this thread, with `cpu_budget` of guest CPU time and at most
    /// `wall_budget` of wall time (time waiting on a person excepted). Reads no CPU clock.
    pub(crate) fn start(cpu_budget: Duration, wall_budget: Duration) -> Self {
        Self {
            cpu_budget,
            wall_budget,
            wall_started: Instant::now(),
            cpu_mark: None,
            host_cpu: Duration::ZERO,
            waited: Duration::ZERO,
        }
    }

    /// When the first look is due: a quarter of the CPU budget (of wall time, which the
    /// guest's CPU time cannot outrun), or the backstop if that comes first.
    pub(crate) fn first_look(&self) -> Duration {
        (self.cpu_budget / 4).min(self.wall_budget)
    }

    /// How long until either budget could run out (the next time to look), or `None` once
    /// one of them has. Read on the thread that runs the call; the first call sets the mark
    /// the CPU budget is measured from.
    pub(crate) fn left(&mut self) -> Option<Duration> {
        let wall = self.wall_started.elapsed().saturating_sub(self.waited);
        let wall_left = self
            .wall_budget
            .checked_sub(wall)
            .filter(|d| !d.is_zero())?;
        let cpu = match self.cpu_mark {
            Some(mark) => thread_cpu()
                .saturating_sub(mark)
                .saturating_sub(self.host_cpu),
            None => {
                self.cpu_mark = Some(thread_cpu());
                Duration::ZERO
            }
        };
        let cpu_left = self.cpu_budget.checked_sub(cpu).filter(|d| !d.is_zero())?;
        Some(cpu_left.min(wall_left))
    }

    /// Run host work `f`, keeping its CPU time off the guest's budget (once the budget is
    /// measured: before the mark nothing is counted); with `person`, its wall time off the
    /// backstop as well (it waited on a user).
    pub(crate) fn off_budget<R>(&mut self, person: bool, f: impl FnOnce() -> R) -> R {
        let wall = Instant::now();
        let cpu = self.cpu_mark.map(|_| thread_cpu());
        let out = f();
        if let Some(cpu) = cpu {
            self.host_cpu = self
                .host_cpu
                .saturating_add(thread_cpu().saturating_sub(cpu));
        }
        if person {
            self.waited = self.waited.saturating_add(wall.elapsed());
        }
        out
    }
}

/// What to do when the epoch reaches the store's deadline: interrupt once a budget is used
/// up, otherwise look again when the rest could be (CPU time never runs faster than the
/// wall clock, so no later look is too late by more than a tick).
pub(crate) fn decide(deadline: Option<&mut GuestDeadline>) -> wasmtime::UpdateDeadline {
    match deadline.and_then(GuestDeadline::left) {
        Some(left) => wasmtime::UpdateDeadline::Continue(
            crate::runtime::CallBudget::deadline_ticks(left).max(1),
        ),
        None => wasmtime::UpdateDeadline::Interrupt,
    }
}

/// The store's epoch deadline callback (runs on the guest's thread, inside the call).
pub(crate) fn on_epoch_deadline(
    mut ctx: wasmtime::StoreContextMut<'_, crate::imports::HostState>,
) -> wasmtime::Result<wasmtime::UpdateDeadline> {
    Ok(decide(ctx.data_mut().deadline.as_mut()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::runtime::{CallBudget, EpochTicker};
    use wasmtime::{Config, Engine, Instance, Module, Store, Trap};

    /// `(module (func (export "spin") (loop (br 0))))`: a guest that never returns.
    const SPIN: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
        0x03, 0x02, 0x01, 0x00, // func 0 of type 0
        0x07, 0x08, 0x01, 0x04, b's', b'p', b'i', b'n', 0x00, 0x00, // export "spin"
        0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // loop br 0 end end
    ];

    /// Run the spinning guest under `cpu` and `wall`; returns the CPU and wall time it ran.
    fn spin(cpu: Duration, wall: Duration) -> (Duration, Duration) {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let _ticker = EpochTicker::start(&engine).unwrap();
        let module = Module::new(&engine, SPIN).unwrap();
        let mut store = Store::new(&engine, None::<GuestDeadline>);
        store.epoch_deadline_callback(|mut ctx| Ok(decide(ctx.data_mut().as_mut())));
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        let f = instance
            .get_typed_func::<(), ()>(&mut store, "spin")
            .unwrap();
        let deadline = GuestDeadline::start(cpu, wall);
        store.set_epoch_deadline(CallBudget::deadline_ticks(deadline.first_look()));
        *store.data_mut() = Some(deadline);
        let (cpu0, wall0) = (thread_cpu(), Instant::now());
        let err = f.call(&mut store, ()).expect_err("the loop never returns");
        assert_eq!(
            err.downcast_ref::<Trap>(),
            Some(&Trap::Interrupt),
            "{err:?}"
        );
        (thread_cpu().saturating_sub(cpu0), wall0.elapsed())
    }

    /// Busy threads, more than the machine has cores, until dropped (or a minute passed).
    struct Hog(std::sync::Arc<std::sync::atomic::AtomicBool>);

    impl Hog {
        fn start() -> Self {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            for _ in 0..cores * 2 {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let until = Instant::now() + Duration::from_secs(60);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < until
                    {
                        std::hint::spin_loop();
                    }
                });
            }
            Self(stop)
        }
    }

    impl Drop for Hog {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn a_guest_that_loops_is_stopped_once_it_has_used_its_cpu_budget_even_on_a_loaded_machine() {
        // Under a hog with twice as many busy threads as cores, the looping guest gets a
        // fraction of a core: it is stopped by its CPU time, not by the wall time its turns
        // took, so it ran its whole budget first; and it is stopped soon after.
        let _hog = Hog::start();
        let budget = Duration::from_millis(200);
        let (cpu, wall) = spin(budget, Duration::from_secs(60));
        eprintln!("a {budget:?} budget: stopped after {cpu:?} of CPU, {wall:?} of wall");
        assert!(
            cpu >= budget,
            "stopped after {cpu:?} of CPU, {wall:?} of wall"
        );
        // At most a quarter unmeasured before the first look, then the budget, then a tick
        // or two (and the scheduler's slack) until the look that stops it.
        assert!(
            cpu < budget + budget / 4 + Duration::from_secs(2),
            "ran {cpu:?} of CPU past a {budget:?} budget"
        );
    }

    #[test]
    fn the_wall_backstop_stops_a_loop_whose_cpu_budget_is_out_of_reach() {
        let backstop = Duration::from_millis(300);
        let (_, wall) = spin(Duration::from_secs(3600), backstop);
        assert!(wall >= backstop, "stopped after {wall:?}");
        assert!(wall < Duration::from_secs(60), "ran {wall:?} of wall time");
    }

    #[test]
    fn cpu_work_in_a_timed_host_service_is_kept_off_the_cpu_budget() {
        let mut d = GuestDeadline::start(Duration::from_millis(50), Duration::from_secs(3600));
        assert!(d.left().is_some(), "the first look: {d:?}");
        d.off_budget(false, || {
            let t = thread_cpu();
            while thread_cpu().saturating_sub(t) < Duration::from_millis(250) {
                std::hint::spin_loop();
            }
        });
        assert!(d.left().is_some(), "{d:?}");
    }

    #[test]
    fn a_persons_wait_is_kept_off_the_backstop_and_other_waits_are_not() {
        let mut d = GuestDeadline::start(Duration::from_secs(3600), Duration::from_millis(200));
        d.off_budget(true, || std::thread::sleep(Duration::from_millis(400)));
        assert!(d.left().is_some(), "{d:?}");
        std::thread::sleep(Duration::from_millis(250));
        assert!(d.left().is_none(), "{d:?}");
    }
}
