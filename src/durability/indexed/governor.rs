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
//! What the machine leaves idle the walk may take on top of its share ([`MachineIdle`]): in a
//! period after one in which CPUs sat idle, the allowance grows by an estimate of that idle time.
//! Under a load that waits on the disk rather than the CPU (writes waiting for their group
//! commit) the walk then restores faster without taking CPU the requests want; under a load that
//! keeps every core busy nothing changes (`docs/indexed.md`, "The walk's share of the CPU").
//!
//! The share need not be constant: a [`ShareSchedule`] makes it a function of how much of the
//! database is restored, larger at first and smaller at the end (`front_load`), with the same
//! restore time as the constant share. While little is restored, most requests miss and each
//! miss fetches its key at about the cost of a whole request; the walk then saves the requests
//! the most by restoring fast. Once most keys are in memory, requests are cheap and the CPU is
//! worth more to them than to the walk (`docs/indexed.md`, "A share that falls as the restore
//! goes on").

use parking_lot::Mutex;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Length of a period.
pub const PERIOD_MS: u64 = 10;
/// CPU the rest of the process must take in a period, in thousandths of one core, for the next
/// period to count as serving: well above what the epoch and logger threads of an idle database
/// take (a few microseconds every epoch), well below what one busy connection takes.
pub const SERVING_CPU_PER_MILLE: u64 = 50;

const PERIOD_NS: u64 = PERIOD_MS * 1_000_000;

/// The most `cpuidle` counter files [`MachineIdle`] reads at each period's start: on a machine
/// with more (CPUs × idle states), reading them every 10 ms would cost more than the idle time
/// is worth, and the walk keeps to its share alone.
pub const IDLE_FILES_MAX: usize = 64;

/// Of the CPU the walk took past its share in a period, the part counted as idle again when the
/// next period's spare is estimated. Below 1, so that CPU the walk took keeps justifying less of
/// itself each period and fades once the machine has no idle time left; at 1/2 the walk settles
/// at two thirds of the idle time there was without it.
const SPARE_REUSE: f64 = 0.5;

/// The weight of the newest period in the estimate of the machine's spare CPU (an exponential
/// average over about four periods: one period's idle time is noisy, and a `cpuidle` counter
/// advances only when its CPU wakes).
const SPARE_NEWEST_WEIGHT: f64 = 0.25;

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

/// The machine's idle CPU time, from the kernel's `cpuidle` counters
/// (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/time`, microseconds each CPU spent in each idle
/// state), kept open and re-read at offset 0.
pub struct MachineIdle {
    counters: Vec<std::fs::File>,
}

impl MachineIdle {
    /// The counters of every CPU's idle states, or `None` where the kernel has none (no
    /// `cpuidle` driver, not Linux) or more than [`IDLE_FILES_MAX`].
    pub fn open() -> Option<MachineIdle> {
        MachineIdle::open_under(std::path::Path::new("/sys/devices/system/cpu"))
    }

    fn open_under(root: &std::path::Path) -> Option<MachineIdle> {
        let mut counters = Vec::new();
        for cpu in std::fs::read_dir(root).ok()?.flatten() {
            let name = cpu.file_name();
            let is_cpu = name.to_str().and_then(|n| n.strip_prefix("cpu")).is_some_and(|n| n.parse::<u32>().is_ok());
            if !is_cpu {
                continue;
            }
            let Ok(states) = std::fs::read_dir(cpu.path().join("cpuidle")) else { continue };
            for state in states.flatten().filter(|s| s.file_name().to_str().is_some_and(|n| n.starts_with("state"))) {
                counters.push(std::fs::File::open(state.path().join("time")).ok()?);
                if counters.len() > IDLE_FILES_MAX {
                    return None;
                }
            }
        }
        let idle = MachineIdle { counters };
        (!idle.counters.is_empty() && idle.idle_ns().is_some()).then_some(idle)
    }

    /// Nanoseconds all CPUs have spent idle since boot (`None` if a counter cannot be read).
    pub fn idle_ns(&self) -> Option<u64> {
        let mut total_us = 0u64;
        let mut text = [0u8; 32];
        for counter in &self.counters {
            let len = counter.read_at(&mut text, 0).ok()?;
            let us: u64 = std::str::from_utf8(text.get(..len)?).ok()?.trim().parse().ok()?;
            total_us = total_us.saturating_add(us);
        }
        Some(total_us.saturating_mul(1_000))
    }
}

/// Where a governor reads the machine's idle CPU time (`None`: unknown, or no idle time to add).
pub type IdleClock = Box<dyn Fn() -> Option<u64> + Send + Sync>;

/// What the thread rolling a period keeps from one period to the next (under its lock).
struct RollState {
    /// The process's CPU time when the current period began.
    process_ns: u64,
    /// The machine's idle time when the current period began.
    idle_ns: Option<u64>,
    /// The current period's allowance at the share alone, without spare CPU.
    share_allowance_ns: u64,
    /// The estimate of the CPU a period leaves idle, nanoseconds a period.
    spare_ns: f64,
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
    /// The roller's state; its lock is held by the thread rolling the period, which alone
    /// stores the two fields below.
    roll_state: Mutex<RollState>,
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
    /// The machine's idle clock.
    idle_ns: IdleClock,
    /// CPU nanoseconds the walk was allowed past its share, for the progress report.
    spare_allowed_ns: AtomicU64,
}

/// This process's CPU time in nanoseconds, all threads.
pub fn process_cpu_ns() -> u64 {
    cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

impl Governor {
    /// A governor giving the walk the share `schedule` says (each in (0, 1]) of `cores` cores
    /// while the database serves, and what the machine leaves idle ([`MachineIdle`], where the
    /// kernel counts it); a share of 1 holds nothing back.
    pub fn new(schedule: ShareSchedule, cores: usize) -> Governor {
        let idle_ns: IdleClock = match MachineIdle::open() {
            Some(idle) => Box::new(move || idle.idle_ns()),
            None => Box::new(|| None),
        };
        Governor::with_clocks(schedule, cores, process_cpu_ns, idle_ns)
    }

    /// [`Governor::new`] reading the process's CPU time from `process_ns`, without idle time.
    pub fn with_process_clock(schedule: ShareSchedule, cores: usize, process_ns: fn() -> u64) -> Governor {
        Governor::with_clocks(schedule, cores, process_ns, Box::new(|| None))
    }

    /// [`Governor::new`] reading the process's CPU time from `process_ns` and the machine's idle
    /// time from `idle_ns`.
    pub fn with_clocks(schedule: ShareSchedule, cores: usize, process_ns: fn() -> u64, idle_ns: IdleClock) -> Governor {
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
            roll_state: Mutex::new(RollState {
                process_ns: process_ns(),
                idle_ns: idle_ns(),
                share_allowance_ns: allowance_ns(schedule.at(0.0), cores),
                spare_ns: 0.0,
            }),
            period_start_ns: AtomicU64::new(0),
            period_walk_ns: AtomicU64::new(0),
            period_debt_ns: AtomicU64::new(0),
            serving: AtomicBool::new(false),
            walk_ns: AtomicU64::new(0),
            held_ns: AtomicU64::new(0),
            process_ns,
            idle_ns,
            spare_allowed_ns: AtomicU64::new(0),
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

    /// The CPU time serving periods allowed the walk past its share, from the machine's idle time.
    pub fn spare_allowed(&self) -> Duration {
        Duration::from_nanos(self.spare_allowed_ns.load(Ordering::Relaxed))
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Starts a new period at `now_ns` (unless another thread is doing so): it is a serving one if
    /// the rest of the process took [`SERVING_CPU_PER_MILLE`] of a core in the one that ended.
    fn roll(&self, now_ns: u64) {
        let Some(mut state) = self.roll_state.try_lock() else { return };
        let start_ns = self.period_start_ns.load(Ordering::Acquire);
        if now_ns < start_ns + PERIOD_NS {
            return;
        }
        let process_ns = (self.process_ns)();
        let walk_ns = self.walk_ns.load(Ordering::Relaxed);
        let used_ns = walk_ns.saturating_sub(self.period_walk_ns.load(Ordering::Acquire));
        // The process's clock counts what the walk took in this period, not the debt it started with.
        let taken_ns = used_ns.saturating_sub(self.period_debt_ns.load(Ordering::Relaxed));
        let others_ns = process_ns.saturating_sub(state.process_ns).saturating_sub(taken_ns);
        let elapsed_ns = now_ns - start_ns;
        let ended_allowance_ns = self.period_allowance_ns.load(Ordering::Acquire);
        let idle_ns = (self.idle_ns)();
        // Only what the spare allowed counts: a batch past the whole allowance is overshoot
        // (paid back as debt), not idle time the walk used.
        let ended_spare_ns = ended_allowance_ns.saturating_sub(state.share_allowance_ns);
        let past_share_ns = taken_ns.saturating_sub(state.share_allowance_ns).min(ended_spare_ns);
        state.spare_ns = next_spare_ns(state.spare_ns, state.idle_ns, idle_ns, past_share_ns, elapsed_ns);
        state.idle_ns = idle_ns;
        let share_allowance_ns = self.allowance_now_ns();
        state.share_allowance_ns = share_allowance_ns;
        let allowance_ns = with_spare_ns(share_allowance_ns, state.spare_ns, self.cores);
        let debt_ns = if self.serving.load(Ordering::Acquire) {
            overshoot_ns(used_ns, ended_allowance_ns, allowance_ns)
        } else {
            0
        };
        let serving = others_ns.saturating_mul(1000) >= elapsed_ns.saturating_mul(SERVING_CPU_PER_MILLE);
        state.process_ns = process_ns;
        if serving {
            self.spare_allowed_ns.fetch_add(allowance_ns - share_allowance_ns, Ordering::Relaxed);
        }
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

/// The estimate of a period's spare CPU after a period of `elapsed_ns` in which the machine's
/// idle clock went from `before` to `after` and the walk took `past_share_ns` past its share:
/// the idle time, plus [`SPARE_REUSE`] of what the walk took past its share (idle time there
/// would have been without it), per [`PERIOD_NS`], averaged into `spare_ns`. Without an idle
/// clock the estimate is 0.
fn next_spare_ns(spare_ns: f64, before: Option<u64>, after: Option<u64>, past_share_ns: u64, elapsed_ns: u64) -> f64 {
    let (Some(before), Some(after)) = (before, after) else { return 0.0 };
    let spare_then_ns = after.saturating_sub(before) as f64 + SPARE_REUSE * past_share_ns as f64;
    let per_period_ns = spare_then_ns * PERIOD_NS as f64 / elapsed_ns.max(1) as f64;
    spare_ns * (1.0 - SPARE_NEWEST_WEIGHT) + per_period_ns * SPARE_NEWEST_WEIGHT
}

/// A period's allowance: `share_ns` (the share's) plus the spare CPU, together at most the whole
/// machine's period; `u64::MAX` (no limit) stays so.
fn with_spare_ns(share_ns: u64, spare_ns: f64, cores: usize) -> u64 {
    if share_ns == u64::MAX {
        return u64::MAX;
    }
    let machine_ns = PERIOD_NS.saturating_mul(cores.max(1) as u64);
    // Truncating: a fraction of a nanosecond is nothing to allow.
    share_ns.saturating_add(spare_ns.max(0.0) as u64).min(machine_ns.max(share_ns))
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

    /// How long a governor of one core at a share of 0.2, whose process serves throughout, holds
    /// 40 ms of walk in 1 ms batches with the machine's idle clock `idle_ns`, and how much CPU
    /// past its share it allowed.
    fn held_with_idle(clock: &'static AtomicU64, process: fn() -> u64, idle_ns: IdleClock) -> (Duration, Duration) {
        let governor = Governor::with_clocks(ShareSchedule::constant(0.2), 1, process, idle_ns);
        clock.fetch_add(PERIOD_MS * MS, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(PERIOD_MS + 1));
        for _ in 0..40 {
            clock.fetch_add(2 * MS, Ordering::Relaxed);
            governor.charge(MS, 0.0);
        }
        (governor.held(), governor.spare_allowed())
    }

    #[test]
    fn idle_machine_time_lets_the_walk_past_its_share() {
        static BUSY: AtomicU64 = AtomicU64::new(0);
        static IDLE: AtomicU64 = AtomicU64::new(0);
        // A fifth of one core: 2 ms a period, so 40 ms of walk wait through about 20 periods on a
        // machine without idle time.
        let (held_busy, spare_busy) = held_with_idle(&BUSY, || BUSY.load(Ordering::Relaxed), Box::new(|| Some(0)));
        assert!(held_busy >= Duration::from_millis(15 * PERIOD_MS), "held only {held_busy:?}");
        assert_eq!(spare_busy, Duration::ZERO);
        // A machine that leaves a core's worth of time idle throughout: the allowance grows
        // towards the whole core within a few periods.
        let start = Instant::now();
        let idle: IdleClock = Box::new(move || Some(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)));
        let (held_idle, spare_idle) = held_with_idle(&IDLE, || IDLE.load(Ordering::Relaxed), idle);
        assert!(spare_idle > Duration::ZERO, "no spare CPU allowed on an idle machine");
        assert!(held_idle * 2 < held_busy, "held {held_idle:?} with an idle core, {held_busy:?} without");
    }

    #[test]
    fn the_spare_estimate_settles_below_the_idle_time_and_fades_without_it() {
        // The feedback loop in whole periods: the machine would be idle `idle` without the walk,
        // and the walk takes all the spare it is allowed.
        let step = |spare: f64, idle: f64| {
            let taken = spare.min(idle);
            let elapsed = PERIOD_NS;
            next_spare_ns(spare, Some(0), Some((idle - taken) as u64), taken as u64, elapsed)
        };
        let idle = 0.3 * PERIOD_NS as f64;
        let mut spare = 0.0;
        for _ in 0..200 {
            spare = step(spare, idle);
        }
        assert!((spare - idle * 2.0 / 3.0).abs() < idle * 0.01, "settled at {spare}, idle {idle}");
        // The idle time gone (requests want every core), the spare halves about every 3 periods.
        for _ in 0..30 {
            spare = step(spare, 0.0);
        }
        assert!(spare < idle * 0.01, "the spare did not fade: {spare}");
        // Without an idle clock there is none.
        assert_eq!(next_spare_ns(5.0, None, Some(9), 0, PERIOD_NS), 0.0);
        // A period twice as long counts its idle time per period.
        assert_eq!(
            next_spare_ns(0.0, Some(0), Some(2 * PERIOD_NS), 0, 2 * PERIOD_NS),
            PERIOD_NS as f64 * SPARE_NEWEST_WEIGHT
        );
        // The allowance never passes the machine, and no limit stays none.
        assert_eq!(with_spare_ns(2 * MS, 50.0 * MS as f64, 1), PERIOD_NS);
        assert_eq!(with_spare_ns(2 * MS, MS as f64, 2), 3 * MS);
        assert_eq!(with_spare_ns(u64::MAX, MS as f64, 2), u64::MAX);
    }

    #[test]
    fn machine_idle_sums_every_cpus_idle_states() {
        let root = tempfile::tempdir().expect("temporary directory");
        let write = |path: &str, text: &str| {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("directory");
            std::fs::write(path, text).expect("counter");
        };
        write("cpu0/cpuidle/state0/time", "100\n");
        write("cpu0/cpuidle/state1/time", "250\n");
        write("cpu1/cpuidle/state0/time", "5\n");
        // Not a CPU's idle state: skipped.
        write("cpuidle/state0/time", "7000\n");
        write("cpufreq/cpuidle/state0/time", "7000\n");
        write("cpu1/cpuidle/driver/time", "7000\n");
        let idle = MachineIdle::open_under(root.path()).expect("counters");
        assert_eq!(idle.idle_ns(), Some(355_000));
        write("cpu1/cpuidle/state0/time", "905\n");
        assert_eq!(idle.idle_ns(), Some(1_255_000), "the counters are read again, not remembered");
        // A counter that is not a number: no idle clock rather than a wrong one.
        write("cpu1/cpuidle/state0/time", "n/a\n");
        assert_eq!(idle.idle_ns(), None);
        assert!(MachineIdle::open_under(root.path()).is_none());
        // No cpuidle at all.
        let empty = tempfile::tempdir().expect("temporary directory");
        assert!(MachineIdle::open_under(empty.path()).is_none());
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
