//! The walk's share of the CPU while the database serves (`docs/indexed.md`, "The walk's share of
//! the CPU").
//!
//! On a machine whose cores the clients keep busy, every CPU-second the walk takes is one the
//! requests do not get; the kernel shares the CPU per thread, so the walk's share would depend on
//! how many walkers there are against how many serving threads. The governor makes it a number:
//! time is cut into periods of [`PERIOD_MS`]; in a period after one in which the rest of the
//! process (event loops, fetching threads, loggers) took at least [`SERVING_CPU_PER_MILLE`] of a
//! core, the walkers together may take at most `share × cores` of the period's CPU time, and a
//! walker that finds the allowance spent sleeps until the period ends; what the walkers took past
//! the allowance (each finishes the batch it started) is taken from the next period's. In a
//! period after an idle one the walk is not held back: nobody is waiting for the CPU it takes.
//!
//! The walkers report the CPU time they spend ([`ThreadClock`], the thread's own CPU clock, so a
//! walker that was preempted is not charged for the wait); the rest of the process is the
//! process's CPU clock minus the walk's.
//!
//! The share need not be constant: a [`ShareSchedule`] makes it a function of how much of the
//! database is restored, larger at first and smaller at the end (`front_load`), with the same
//! restore time as the constant share. While little is restored, most requests miss and each
//! miss fetches its key at about the cost of a whole request; the walk then saves the requests
//! the most by restoring fast. Once most keys are in memory, requests are cheap and the CPU is
//! worth more to them than to the walk (`docs/indexed.md`, "A share that falls as the restore
//! goes on").

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Length of a period.
pub const PERIOD_MS: u64 = 10;
/// CPU the rest of the process must take in a period, in thousandths of one core, for the next
/// period to count as serving: well above what the epoch and logger threads of an idle database
/// take (a few microseconds every epoch), well below what one busy connection takes.
pub const SERVING_CPU_PER_MILLE: u64 = 50;

const PERIOD_NS: u64 = PERIOD_MS * 1_000_000;

/// The largest `front_load` a [`ShareSchedule`] takes: the share at the end is then a tenth of
/// the mean, and the walk's last keys are restored at a crawl that the requests hardly need.
pub const FRONT_LOAD_MAX: f64 = 0.9;

/// The walk's share of the machine as a function of the fraction of the images restored: it
/// falls linearly from `start` (nothing restored) to `end` (all restored).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShareSchedule {
    start: f64,
    end: f64,
}

impl ShareSchedule {
    /// The same share throughout.
    pub fn constant(share: f64) -> ShareSchedule {
        ShareSchedule { start: share, end: share }
    }

    /// A share that ends at `mean × (1 − front_load)` and starts where a walk of keys of even
    /// cost takes as long as at the constant `mean`: the harmonic mean of the share over the
    /// restored fraction is `mean` (`∫₀¹ dp / share(p) = 1 / mean`). `front_load` 0 is the
    /// constant share; the start is at most 1 (the whole machine), which for large `mean` and
    /// `front_load` makes the restore a little longer than at `mean`.
    pub fn front_loaded(mean: f64, front_load: f64) -> ShareSchedule {
        assert!(mean > 0.0 && mean <= 1.0, "a share of the CPU is in (0, 1], not {mean}");
        assert!((0.0..=FRONT_LOAD_MAX).contains(&front_load), "front load must be in [0, {FRONT_LOAD_MAX}]");
        let end = mean * (1.0 - front_load);
        if front_load == 0.0 {
            return ShareSchedule::constant(mean);
        }
        // For a linear share from `start` down to `end`, ∫₀¹ dp / share = ln(start / end) / (start − end),
        // which falls from 1 / end towards 0 as `start` grows: bisect for 1 / mean.
        let inverse_time = |start: f64| (start / end).ln() / (start - end);
        let (mut lo, mut hi) = (mean, 1.0_f64);
        if inverse_time(hi) > 1.0 / mean {
            return ShareSchedule { start: 1.0, end };
        }
        for _ in 0..64 {
            let mid = (lo + hi) / 2.0;
            if inverse_time(mid) > 1.0 / mean {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        ShareSchedule { start: hi, end }
    }

    /// The share when `restored` (0 to 1) of the images are restored.
    pub fn at(&self, restored: f64) -> f64 {
        let restored = if restored.is_nan() { 0.0 } else { restored.clamp(0.0, 1.0) };
        // Weighted so that the ends are exact: `start` at 0 and `end` at 1.
        self.start * (1.0 - restored) + self.end * restored
    }

    /// The share at the start (the largest).
    pub fn start(&self) -> f64 {
        self.start
    }

    /// The share at the end (the smallest).
    pub fn end(&self) -> f64 {
        self.end
    }
}

/// CPU nanoseconds a walk at `share` of `cores` may take in a period (`u64::MAX`: no limit).
fn allowance_ns(share: f64, cores: usize) -> u64 {
    if share >= 1.0 {
        u64::MAX
    } else {
        // Truncating: a fraction of a nanosecond is nothing to hold back.
        (share * cores.max(1) as f64 * PERIOD_NS as f64) as u64
    }
}

/// A thread's CPU clock, read in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
pub struct ThreadClock {
    last_ns: u64,
}

impl ThreadClock {
    /// Starts counting from this thread's CPU time now.
    pub fn start() -> ThreadClock {
        ThreadClock { last_ns: cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) }
    }

    /// CPU nanoseconds this thread spent since the last lap (or the start).
    pub fn lap(&mut self) -> u64 {
        let now_ns = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        let spent_ns = now_ns.saturating_sub(self.last_ns);
        self.last_ns = now_ns;
        spent_ns
    }
}

/// A CPU clock in nanoseconds (0 if the kernel does not answer: the governor then sees no
/// serving and holds nothing back, which is the behaviour without it).
fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer for the call's duration.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

/// Holds the walkers to their share of the CPU while the database serves (module docs).
pub struct Governor {
    /// The share as the restore goes on, and the cores it is a share of.
    schedule: ShareSchedule,
    cores: usize,
    /// CPU nanoseconds the walk may take in the current period if it is a serving one
    /// (`u64::MAX`: no limit); set by the roller from `restored_ppm`.
    period_allowance_ns: AtomicU64,
    /// The fraction of the images restored, in millionths, as the walkers last reported it.
    restored_ppm: AtomicU64,
    epoch: Instant,
    /// The process's CPU time when the current period began; its lock is held by the thread
    /// rolling the period, which alone stores the two fields below.
    period_process_ns: Mutex<u64>,
    /// When the current period began, from `epoch`, and the walk's CPU time then.
    period_start_ns: AtomicU64,
    period_walk_ns: AtomicU64,
    /// The ended period's overshoot the current one started with (written by the roller only).
    period_debt_ns: AtomicU64,
    /// Whether the current period is held to the allowance.
    serving: AtomicBool,
    walk_ns: AtomicU64,
    /// Nanoseconds walkers slept for the allowance, for the progress report.
    held_ns: AtomicU64,
    /// The process's CPU clock (a fake one in tests).
    process_ns: fn() -> u64,
}

/// This process's CPU time in nanoseconds, all threads.
pub fn process_cpu_ns() -> u64 {
    cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

impl Governor {
    /// A governor giving the walk the share `schedule` says (each in (0, 1]) of `cores` cores
    /// while the database serves; a share of 1 holds nothing back.
    pub fn new(schedule: ShareSchedule, cores: usize) -> Governor {
        Governor::with_process_clock(schedule, cores, process_cpu_ns)
    }

    /// [`Governor::new`] reading the process's CPU time from `process_ns`.
    pub fn with_process_clock(schedule: ShareSchedule, cores: usize, process_ns: fn() -> u64) -> Governor {
        for share in [schedule.start, schedule.end] {
            assert!(share > 0.0 && share <= 1.0, "a share of the CPU is in (0, 1], not {share}");
        }
        let epoch = Instant::now();
        Governor {
            schedule,
            cores,
            period_allowance_ns: AtomicU64::new(allowance_ns(schedule.at(0.0), cores)),
            restored_ppm: AtomicU64::new(0),
            epoch,
            period_process_ns: Mutex::new(process_ns()),
            period_start_ns: AtomicU64::new(0),
            period_walk_ns: AtomicU64::new(0),
            period_debt_ns: AtomicU64::new(0),
            serving: AtomicBool::new(false),
            walk_ns: AtomicU64::new(0),
            held_ns: AtomicU64::new(0),
            process_ns,
        }
    }

    /// Charges `spent_ns` of a walker's CPU to the walk, notes that `restored` (0 to 1) of the
    /// images are restored (the next period's allowance follows it), and sleeps while the walk
    /// has taken its allowance of a serving period.
    pub fn charge(&self, spent_ns: u64, restored: f64) {
        let walk_ns = self.walk_ns.fetch_add(spent_ns, Ordering::Relaxed) + spent_ns;
        // Truncating: a millionth of the restore is nothing to change the share for.
        let restored_ppm = (restored.clamp(0.0, 1.0) * 1e6) as u64;
        self.restored_ppm.fetch_max(restored_ppm, Ordering::Relaxed);
        loop {
            let now_ns = self.now_ns();
            let start_ns = self.period_start_ns.load(Ordering::Acquire);
            if now_ns >= start_ns + PERIOD_NS {
                self.roll(now_ns);
                if self.period_start_ns.load(Ordering::Acquire) == start_ns {
                    // Another thread is rolling it: go on, it will have rolled by the next charge.
                    return;
                }
                continue;
            }
            let allowance_ns = self.period_allowance_ns.load(Ordering::Acquire);
            if allowance_ns == u64::MAX {
                return;
            }
            let used_ns = walk_ns.saturating_sub(self.period_walk_ns.load(Ordering::Acquire));
            if !self.serving.load(Ordering::Acquire) || used_ns < allowance_ns {
                return;
            }
            let wait_ns = start_ns + PERIOD_NS - now_ns;
            self.held_ns.fetch_add(wait_ns, Ordering::Relaxed);
            std::thread::sleep(Duration::from_nanos(wait_ns));
        }
    }

    /// How long walkers have slept for the allowance, summed over walkers.
    pub fn held(&self) -> Duration {
        Duration::from_nanos(self.held_ns.load(Ordering::Relaxed))
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Starts a new period at `now_ns` (unless another thread is doing so): it is a serving one if
    /// the rest of the process took [`SERVING_CPU_PER_MILLE`] of a core in the one that ended.
    fn roll(&self, now_ns: u64) {
        let Some(mut period_process_ns) = self.period_process_ns.try_lock() else { return };
        let start_ns = self.period_start_ns.load(Ordering::Acquire);
        if now_ns < start_ns + PERIOD_NS {
            return;
        }
        let process_ns = (self.process_ns)();
        let walk_ns = self.walk_ns.load(Ordering::Relaxed);
        let used_ns = walk_ns.saturating_sub(self.period_walk_ns.load(Ordering::Acquire));
        // The process's clock counts what the walk took in this period, not the debt it started with.
        let taken_ns = used_ns.saturating_sub(self.period_debt_ns.load(Ordering::Relaxed));
        let others_ns = process_ns.saturating_sub(*period_process_ns).saturating_sub(taken_ns);
        let elapsed_ns = now_ns - start_ns;
        let ended_allowance_ns = self.period_allowance_ns.load(Ordering::Acquire);
        let allowance_ns = self.allowance_now_ns();
        let debt_ns = if self.serving.load(Ordering::Acquire) {
            overshoot_ns(used_ns, ended_allowance_ns, allowance_ns)
        } else {
            0
        };
        let serving = others_ns.saturating_mul(1000) >= elapsed_ns.saturating_mul(SERVING_CPU_PER_MILLE);
        *period_process_ns = process_ns;
        self.period_allowance_ns.store(allowance_ns, Ordering::Release);
        self.serving.store(serving, Ordering::Release);
        // The new period starts with the ended one's overshoot already used (at most `used_ns`,
        // so the baseline never passes the walk's total).
        self.period_debt_ns.store(debt_ns, Ordering::Relaxed);
        self.period_walk_ns.store(walk_ns - debt_ns, Ordering::Release);
        self.period_start_ns.store(now_ns, Ordering::Release);
    }

    /// The share the walk may take while the database serves when `restored` (0 to 1) of the
    /// images are restored (capped at 1: the whole machine).
    pub fn share_at(&self, restored: f64) -> f64 {
        self.schedule.at(restored).min(1.0)
    }

    /// The allowance of a period that starts now: the schedule's share at the restored fraction
    /// the walkers last reported.
    fn allowance_now_ns(&self) -> u64 {
        let restored = self.restored_ppm.load(Ordering::Relaxed) as f64 / 1e6;
        allowance_ns(self.schedule.at(restored), self.cores)
    }
}

/// How far the walk's `used_ns` in a held period went past its allowance (`ended_ns`), at most
/// one allowance of the next period (`next_ns`): a walker checks the allowance before a batch,
/// not during one, so each walker can finish a batch past it, and four walkers together took
/// 5-15 % more than their share (0.74-0.81 of a core for 0.7, `docs/PERFORMANCE.md`, "Instant
/// recovery", "Session 35"). Carried into the next period, the overshoot is paid back; the cap
/// keeps one long batch (a burst of page faults) from stopping the walk for several periods. A
/// period that ran long (rolled late, its walkers asleep or in a batch) allows no more than a
/// period's allowance: CPU a batch took past the period's end is the next period's to pay.
fn overshoot_ns(used_ns: u64, ended_ns: u64, next_ns: u64) -> u64 {
    used_ns.saturating_sub(ended_ns).min(next_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Charges `charges` walker milliseconds one by one, advancing the fake process clock by each
    /// and by `others_ms_each` of the rest of the process, after a first period in which the rest
    /// of the process took `others_first_ms`; returns the governor.
    fn run(clock: &'static AtomicU64, process: fn() -> u64, share: f64, others: (u64, u64), charges: u64) -> Governor {
        let governor = Governor::with_process_clock(ShareSchedule::constant(share), 1, process);
        let (others_first_ms, others_ms_each) = others;
        clock.fetch_add(others_first_ms * MS, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(PERIOD_MS + 1));
        for _ in 0..charges {
            clock.fetch_add((1 + others_ms_each) * MS, Ordering::Relaxed);
            governor.charge(MS, 0.0);
        }
        governor
    }

    /// How many 1 ms batches pass in the first serving period of a governor of one core on
    /// `schedule` whose walkers report `restored`, before one is held (at most 20). `process`
    /// reads `clock`.
    fn batches_before_held(
        clock: &'static AtomicU64,
        process: fn() -> u64,
        schedule: ShareSchedule,
        restored: f64,
    ) -> u64 {
        let governor = Governor::with_process_clock(schedule, 1, process);
        // The rest of the process takes a whole period, so the next one is a serving one.
        clock.fetch_add(PERIOD_MS * MS, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(PERIOD_MS + 1));
        governor.charge(0, restored);
        let mut passed = 0;
        while governor.held() == Duration::ZERO && passed < 20 {
            governor.charge(MS, restored);
            passed += 1;
        }
        passed
    }

    #[test]
    fn a_serving_process_holds_the_walk_to_its_share() {
        static CLOCK: AtomicU64 = AtomicU64::new(0);
        let started = Instant::now();
        // Half of one core: 5 ms of walk per 10 ms period, so 50 ms of walk take 9 periods of
        // waiting at least (the first 5 charges pass in the first serving period).
        let governor = run(&CLOCK, || CLOCK.load(Ordering::Relaxed), 0.5, (PERIOD_MS, 1), 50);
        let held = governor.held();
        assert!(held >= Duration::from_millis(9 * PERIOD_MS / 2), "held only {held:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(9 * PERIOD_MS),
            "50 ms of walk passed in {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_periods_overshoot_is_taken_from_the_next() {
        static CLOCK: AtomicU64 = AtomicU64::new(0);
        // Half of one core: 5 ms of walk per 10 ms period.
        let governor = Governor::with_process_clock(ShareSchedule::constant(0.5), 1, || CLOCK.load(Ordering::Relaxed));
        CLOCK.fetch_add(PERIOD_MS * MS, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(PERIOD_MS + 1));
        // Rolls into a serving period, then one batch of 9.5 ms passes its 5 ms: held to its end.
        governor.charge(0, 0.0);
        CLOCK.fetch_add((PERIOD_MS + 10) * MS, Ordering::Relaxed);
        governor.charge(9 * MS + MS / 2, 0.0);
        let held = governor.held();
        assert!(held > Duration::ZERO, "the overshooting batch was not held");
        // The next period starts 4.5 ms in debt: the first 1 ms batch is held, where five would
        // pass without the debt (three allowed for a period that ends while the loop runs).
        let mut passed = 0;
        while governor.held() == held && passed < 5 {
            governor.charge(MS, 0.0);
            passed += 1;
        }
        assert!(passed <= 3, "{passed} batches of 1 ms passed in a period that started in debt");
    }

    #[test]
    fn a_front_loaded_share_takes_as_long_as_its_mean() {
        for (mean, front_load) in [(0.35, 0.5), (0.35, 0.8), (0.1, 0.9), (0.5, 0.3)] {
            let schedule = ShareSchedule::front_loaded(mean, front_load);
            assert!(schedule.start() > mean && schedule.end() < mean, "{schedule:?} does not fall through {mean}");
            assert!((schedule.end() - mean * (1.0 - front_load)).abs() < 1e-12);
            // The walk's time over the restored fraction, for keys of even cost: ∫ dp / share.
            let steps = 100_000;
            let time: f64 =
                (0..steps).map(|i| 1.0 / schedule.at((i as f64 + 0.5) / steps as f64)).sum::<f64>() / steps as f64;
            assert!((time * mean - 1.0).abs() < 1e-3, "{schedule:?} takes {time} where {mean} takes {}", 1.0 / mean);
        }
        assert_eq!(ShareSchedule::front_loaded(0.35, 0.0), ShareSchedule::constant(0.35));
        // Past the whole machine the start is capped: the walk takes longer than at the mean.
        let capped = ShareSchedule::front_loaded(0.9, 0.9);
        assert_eq!(capped.start(), 1.0);
        assert!((capped.at(0.5) - (1.0 + 0.09) / 2.0).abs() < 1e-12);
        assert_eq!(capped.at(f64::NAN), 1.0);
        assert_eq!(capped.at(2.0), capped.end());
    }

    #[test]
    fn a_front_loaded_share_allows_more_while_little_is_restored() {
        static EARLY: AtomicU64 = AtomicU64::new(0);
        static LATE: AtomicU64 = AtomicU64::new(0);
        // Mean 0.3 of one core: from about 0.6 (6 ms a period) down to 0.12 (1.2 ms).
        let schedule = ShareSchedule::front_loaded(0.3, 0.6);
        assert!((schedule.start() - 0.605).abs() < 0.01, "{schedule:?}");
        let early = batches_before_held(&EARLY, || EARLY.load(Ordering::Relaxed), schedule, 0.0);
        let late = batches_before_held(&LATE, || LATE.load(Ordering::Relaxed), schedule, 1.0);
        // A period that ends while the loop runs allows a few more: bounds, not counts.
        assert!(early >= 6, "only {early} batches of 1 ms passed at the start of a front-loaded restore");
        assert!(late <= 3, "{late} batches of 1 ms passed at the end of a front-loaded restore");
    }

    #[test]
    fn an_idle_process_does_not_hold_the_walk() {
        static CLOCK: AtomicU64 = AtomicU64::new(0);
        let governor = run(&CLOCK, || CLOCK.load(Ordering::Relaxed), 0.5, (0, 0), 200);
        assert_eq!(governor.held(), Duration::ZERO, "the walk was held with nobody served");
    }

    #[test]
    fn a_share_of_one_never_holds_the_walk() {
        static CLOCK: AtomicU64 = AtomicU64::new(0);
        let governor = run(&CLOCK, || CLOCK.load(Ordering::Relaxed), 1.0, (PERIOD_MS, 1), 200);
        assert_eq!(governor.held(), Duration::ZERO);
    }

    #[test]
    fn the_thread_clock_counts_this_threads_work() {
        let mut clock = ThreadClock::start();
        let mut x = 0u64;
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spent = clock.lap();
        assert!(spent >= 5 * MS, "20 ms of spinning counted {spent} ns");
        std::thread::sleep(Duration::from_millis(20));
        assert!(clock.lap() < 5 * MS, "a sleep counted as CPU");
    }
}
