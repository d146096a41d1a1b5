//! `lazarus instant-bench`: the indexed-log paper's recovery experiments (§5.2, Figures 4–6),
//! made repeatable against real servers over the network.
//!
//! For each server configuration (SLR = `--durability value`, AILIR = `indexed`, SILIR =
//! `indexed-sync`, and Redis with `appendonly yes` when `redis-server` is installed):
//! 1. start the server on a fresh directory and preload `keys` keys (`key:<n>`, 32-byte values)
//!    with pipelined SETs, every one acknowledged;
//! 2. let it run idle for `settle_s` seconds, SIGKILL it, and keep the directory as the crash
//!    image;
//! 3. for each workload (read-only, read-write 50:50, write-only), copy the image (synced),
//!    restart the server on it and at once drive a memtier-like load (with `in_place`, each
//!    workload crashes a server of its own, steps 1–2, and restarts it at once on the same
//!    directory, as after a real crash: no copy between the kill and the restart): `clients`
//!    connections over `driver_threads` threads (memtier's default is 4 threads × 50 clients),
//!    one request at a time each, uniform random keys ([`load`]);
//!    record every reply in windows of `window_ms` from the restart, the time the first request
//!    was served, and when recovery finished (INFO: `recovery_state:done` for Lazarus, `loading:0`
//!    for Redis, polled every 20 ms).
//!
//! Each run writes a timeline CSV in the format `lazarus report` reads (`docs/FORMAT.md`, bench
//! output files): `committed` counts successful replies, `aborts` error replies (Redis's
//! `LOADING`), the latencies are request round trips, and the `checkpoint` column marks the
//! windows in which recovery was still running (the report shades them). So
//! `lazarus report <out>/<workload>-*.csv` draws one of Figures 4–6 per workload.

pub mod load;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most connections the load may open.
pub const CLIENTS_MAX: usize = 1000;
/// The most threads the load may run on.
pub const DRIVER_THREADS_MAX: usize = 64;
/// The most windows a run records.
pub const WINDOWS_MAX: usize = 100_000;
/// How long a load client waits before it connects again or after an error reply: connection
/// attempts of hundreds of clients in a tight loop would slow the very recovery being measured.
/// The first request served is timed by one probe that retries every millisecond.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Bytes of each value (memtier's `--data-size 32`).
pub const VALUE_SIZE_BYTES: usize = 32;

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum InstantBenchError {
    /// An I/O error (spawning a server, a connection, a file).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// A server misbehaved (did not start, answered an error while preloading).
    #[error("{0}")]
    Server(String),
    /// An option is out of range.
    #[error("invalid option: {0}")]
    Config(String),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> InstantBenchError {
    let context = context.into();
    move |source| InstantBenchError::Io { context, source }
}

/// A server configuration under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `lazarus serve --durability <name>` (`value` is SLR).
    Lazarus(String),
    /// `redis-server --appendonly yes --appendfsync <policy>`.
    Redis(String),
}

impl Target {
    /// The name used in file names and tables (`slr`, `ailir`, `silir`, `redis-always`, ...).
    pub fn label(&self) -> String {
        match self {
            Target::Lazarus(d) if d == "value" => "slr".into(),
            Target::Lazarus(d) if d == "indexed" => "ailir".into(),
            Target::Lazarus(d) if d == "indexed-sync" => "silir".into(),
            Target::Lazarus(d) => d.clone(),
            Target::Redis(policy) => format!("redis-{policy}"),
        }
    }

    /// Parses a label back.
    pub fn parse(label: &str) -> Result<Target, InstantBenchError> {
        Ok(match label {
            "slr" => Target::Lazarus("value".into()),
            "ailir" => Target::Lazarus("indexed".into()),
            "silir" => Target::Lazarus("indexed-sync".into()),
            "redis-always" => Target::Redis("always".into()),
            "redis-everysec" => Target::Redis("everysec".into()),
            other => {
                return Err(InstantBenchError::Config(format!(
                    "unknown target {other:?}; expected slr, ailir, silir, redis-always, redis-everysec"
                )));
            }
        })
    }
}

/// Options of one bench.
#[derive(Clone, Debug)]
pub struct InstantBenchOptions {
    /// The `lazarus` executable to run as the server.
    pub lazarus_exe: PathBuf,
    /// Keys preloaded.
    pub keys: u64,
    /// Server configurations, in order.
    pub targets: Vec<Target>,
    /// Workloads as read fractions (1.0 read-only, 0.5, 0.0 write-only), named.
    pub workloads: Vec<(String, f64)>,
    /// Connections of the load.
    pub clients: usize,
    /// Threads the connections are spread over (memtier's `--threads`; no more are used than
    /// there are connections).
    pub driver_threads: usize,
    /// Seconds of load after each restart.
    pub duration_s: f64,
    /// Window of the timeline.
    pub window_ms: u64,
    /// Where crash images, server directories and the CSVs go.
    pub out_dir: PathBuf,
    /// First TCP port to use (each server takes the next one).
    pub first_port: u16,
    /// Seconds the server runs idle between the preload and the SIGKILL (the Indexer catches up
    /// in that time; 0 kills it right after the last acknowledgement: the largest unindexed tail).
    pub settle_s: f64,
    /// `lazarus serve --restore-walkers` for the Lazarus targets (`None`: its default).
    pub restore_walkers: Option<u16>,
    /// `lazarus serve --restore-cpu-share` for the Lazarus targets (`None`: its default).
    pub restore_cpu_share: Option<f64>,
    /// `lazarus serve --restore-front-load` for the Lazarus targets (`None`: its default).
    pub restore_front_load: Option<f64>,
    /// `lazarus serve --restore-start-delay-ms` for the Lazarus targets (`None`: its default).
    pub restore_start_delay_ms: Option<u64>,
    /// `lazarus serve --unindexed-max-mib` for the Lazarus targets (`None`: its default).
    pub unindexed_max_mib: Option<u64>,
    /// Restart each crashed server at once on its own directory, as after a real crash, instead
    /// of on a copy of one crash image per workload (each workload then preloads its own). The
    /// copy and its sync take seconds, in which a VM host may take back the memory the killed
    /// server freed; on this project's VM the restores measured the same either way
    /// (`docs/PERFORMANCE.md`, "Instant recovery", "Session 30").
    pub in_place: bool,
}

/// What one restart under load measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The target's label.
    pub target: String,
    /// The workload's name.
    pub workload: String,
    /// Milliseconds from the restart (process spawn) to the first successful reply.
    pub first_reply_ms: f64,
    /// Milliseconds from the restart until recovery was reported finished.
    pub recovered_ms: f64,
    /// Successful replies per second while recovery ran (from the first reply on).
    pub during_recovery_per_s: f64,
    /// Successful replies per second after recovery.
    pub after_recovery_per_s: f64,
    /// Keys the server restored on demand (for requests that missed) rather than by its walk,
    /// from its last `INFO recovery`; `None` for Redis, or when recovery did not finish.
    pub restored_on_demand: Option<u64>,
    /// GETs the server answered from its indexed log without restoring their key, from the
    /// same `INFO`; `None` as above.
    pub read_ahead: Option<u64>,
    /// CPU milliseconds of the restore's walk, and of the whole server while the walk ran
    /// (serving and on-demand fetches included), from the same `INFO`; `None` as above.
    pub restore_cpu_ms: Option<(f64, f64)>,
    /// CPU milliseconds of the server's threads that fetched keys on demand (part of the
    /// server's above), from the same `INFO`; `None` as above.
    pub fetch_cpu_ms: Option<f64>,
    /// Milliseconds the walk slept for its share, and CPU milliseconds it was allowed past its
    /// share from the machine's idle time, from the same `INFO`; `None` as above.
    pub walk_held_spare_ms: Option<(f64, f64)>,
    /// Milliseconds from the server's own start (its `main`, so without the spawn) until it
    /// listened, and until its first fetch on demand ended (`None`: no fetch), from its last
    /// `INFO` (recovery finished or not): which of the two a late first reply waited for; `None`
    /// for Redis.
    pub server_startup_ms: Option<(f64, Option<f64>)>,
    /// Seconds the preload took, and its rate.
    pub preload_s: f64,
    /// The timeline file written.
    pub csv: PathBuf,
}

/// Runs the bench; returns one result per (target, workload).
pub fn run(options: &InstantBenchOptions) -> Result<Vec<RunResult>, InstantBenchError> {
    if options.keys == 0 || options.clients == 0 || options.clients > CLIENTS_MAX {
        return Err(InstantBenchError::Config(format!("keys ≥ 1 and clients in 1..={CLIENTS_MAX}")));
    }
    if !(1..=DRIVER_THREADS_MAX).contains(&options.driver_threads) {
        return Err(InstantBenchError::Config(format!("driver threads in 1..={DRIVER_THREADS_MAX}")));
    }
    if !(100..=10_000).contains(&options.window_ms)
        || !(0.5..=3600.0).contains(&options.duration_s)
        || !(0.0..=600.0).contains(&options.settle_s)
    {
        return Err(InstantBenchError::Config("window 100..=10000 ms, duration 0.5..=3600 s, settle 0..=600 s".into()));
    }
    if options.targets.iter().any(|t| matches!(t, Target::Redis(_))) {
        redis_installed()?;
    }
    std::fs::create_dir_all(&options.out_dir).map_err(io("create the output directory"))?;
    let mut results = Vec::new();
    let mut port = options.first_port;
    for target in &options.targets {
        let label = target.label();
        // One crash image per target, copied for each workload; in place, each workload crashes
        // a server of its own on its run directory.
        let image = options.out_dir.join(format!("image-{label}"));
        let image_preload_s = if options.in_place { None } else { Some(crash(options, target, &image, &mut port)?) };
        for (workload, read_fraction) in &options.workloads {
            let dir = options.out_dir.join(format!("run-{label}-{workload}"));
            let preload_s = match image_preload_s {
                Some(preload_s) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    copy_dir(&image, &dir)?;
                    preload_s
                }
                None => crash(options, target, &dir, &mut port)?,
            };
            port = port.wrapping_add(1).max(1024);
            let result = restart_under_load(options, target, &dir, port, workload, *read_fraction)?;
            results.push(report(RunResult { preload_s, ..result }));
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(results)
}

/// Starts `target` on a fresh `dir`, preloads it, lets it settle and kills it: `dir` is then a
/// crash image. Returns the seconds the preload took.
fn crash(options: &InstantBenchOptions, target: &Target, dir: &Path, port: &mut u16) -> Result<f64, InstantBenchError> {
    let label = target.label();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(io("create the image directory"))?;
    *port = port.wrapping_add(1).max(1024);
    let mut server = start(options, target, dir, *port)?;
    let addr = wait_listening(*port, &mut server, Duration::from_secs(600))?.0;
    let started = Instant::now();
    preload(addr, options.keys)?;
    let preload_s = started.elapsed().as_secs_f64();
    eprintln!("instant-bench: {label}: {} keys preloaded in {preload_s:.1} s", options.keys);
    std::thread::sleep(Duration::from_secs_f64(options.settle_s));
    kill(server);
    Ok(preload_s)
}

/// Prints one run's line and hands it back.
fn report(result: RunResult) -> RunResult {
    eprintln!(
        "instant-bench: {} {}: first reply {:.1} ms, recovered {:.1} ms, {:.0}/s during, {:.0}/s after{}{}",
        result.target,
        result.workload,
        result.first_reply_ms,
        result.recovered_ms,
        result.during_recovery_per_s,
        result.after_recovery_per_s,
        match (result.restored_on_demand, result.restore_cpu_ms) {
            (Some(n), Some((walk, process))) => format!(
                ", {n} keys restored on demand, {} read ahead, CPU while restoring: walk {:.2} s of the server's {:.2} s{}{}",
                result.read_ahead.unwrap_or(0),
                walk / 1e3,
                process / 1e3,
                result.fetch_cpu_ms.map(|f| format!(" (fetches {:.2} s)", f / 1e3)).unwrap_or_default(),
                result
                    .walk_held_spare_ms
                    .map(|(held, spare)| format!(
                        "; the walk slept {:.2} s for its share, allowed {:.2} s of idle CPU past it",
                        held / 1e3,
                        spare / 1e3
                    ))
                    .unwrap_or_default(),
            ),
            _ => String::new(),
        },
        match result.server_startup_ms {
            Some((listening, first_fetch)) => format!(
                "; the server listened {listening:.1} ms after its start{}",
                first_fetch.map(|f| format!(", its first fetch ended at {f:.1} ms")).unwrap_or_default()
            ),
            None => String::new(),
        }
    );
    result
}

fn start(options: &InstantBenchOptions, target: &Target, dir: &Path, port: u16) -> Result<Child, InstantBenchError> {
    let mut command = match target {
        Target::Lazarus(durability) => {
            let mut c = Command::new(&options.lazarus_exe);
            c.args(["serve", "--port", &port.to_string(), "--durability", durability, "--dir"]).arg(dir);
            c.args(["--max-clients", &(options.clients + 64).to_string()]);
            if let Some(walkers) = options.restore_walkers {
                c.args(["--restore-walkers", &walkers.to_string()]);
            }
            if let Some(share) = options.restore_cpu_share {
                c.args(["--restore-cpu-share", &share.to_string()]);
            }
            if let Some(front_load) = options.restore_front_load {
                c.args(["--restore-front-load", &front_load.to_string()]);
            }
            if let Some(delay_ms) = options.restore_start_delay_ms {
                c.args(["--restore-start-delay-ms", &delay_ms.to_string()]);
            }
            if let Some(max_mib) = options.unindexed_max_mib {
                c.args(["--unindexed-max-mib", &max_mib.to_string()]);
            }
            c
        }
        Target::Redis(policy) => {
            let mut c = Command::new("redis-server");
            c.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"]).arg(dir);
            c.args(["--appendonly", "yes", "--appendfsync", policy, "--save", "", "--daemonize", "no"]);
            c.args(["--maxclients", &(options.clients + 64).to_string(), "--logfile", ""]);
            c
        }
    };
    // A Lazarus server's stderr is its few lines of startup timings (how long opening the
    // indexed log and indexing its tail took: what a slow first reply waited for) and any error
    // it exits with; Redis logs to stdout.
    let stderr = if matches!(target, Target::Lazarus(_)) { Stdio::inherit() } else { Stdio::null() };
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
    command.spawn().map_err(io(format!("start {target:?}")))
}

/// Checks that `redis-server` runs, before any target's preload: a missing one would otherwise
/// be found only when its turn comes, after the Lazarus targets' minutes of runs.
fn redis_installed() -> Result<(), InstantBenchError> {
    let probe = Command::new("redis-server").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    match probe {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(InstantBenchError::Config(
            "the redis-* targets need redis-server on the PATH (Debian: apt-get install redis-server)".into(),
        )),
        Err(e) => Err(InstantBenchError::Io { context: "run redis-server --version".into(), source: e }),
    }
}

/// Connects until the server accepts; returns the address and the time it first accepted.
fn wait_listening(port: u16, server: &mut Child, limit: Duration) -> Result<(SocketAddr, Instant), InstantBenchError> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    loop {
        if TcpStream::connect(addr).is_ok() {
            return Ok((addr, Instant::now()));
        }
        if let Ok(Some(status)) = server.try_wait() {
            return Err(InstantBenchError::Server(format!("the server on port {port} exited: {status}")));
        }
        if started.elapsed() > limit {
            return Err(InstantBenchError::Server(format!("no server listening on port {port}")));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn kill(mut server: Child) {
    let _ = server.kill();
    let _ = server.wait();
}

/// Copies a crash image and syncs the copy: after a real crash the image is on disk, while a
/// fresh copy is hundreds of MB of dirty page cache whose writeback the restarted server's first
/// fsyncs would wait for (with synced copies the previous binary's first reply under the
/// 200-client load fell from 0.4–1.3 s to 64–175 ms: docs/PERFORMANCE.md, issue 7, session 5).
fn copy_dir(from: &Path, to: &Path) -> Result<(), InstantBenchError> {
    std::fs::create_dir_all(to).map_err(io(format!("create {}", to.display())))?;
    for entry in std::fs::read_dir(from).map_err(io(format!("list {}", from.display())))? {
        let entry = entry.map_err(io("list"))?;
        let target = to.join(entry.file_name());
        if entry.file_type().map_err(io("stat"))?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(io(format!("copy {}", entry.path().display())))?;
            let copy = std::fs::File::open(&target).map_err(io(format!("open {}", target.display())))?;
            copy.sync_all().map_err(io(format!("sync {}", target.display())))?;
        }
    }
    let dir = std::fs::File::open(to).map_err(io(format!("open {}", to.display())))?;
    dir.sync_all().map_err(io(format!("sync {}", to.display())))
}

/// Appends to `out` the request for key `n` (`key:<n>`): a GET if `read`, else a SET of its value
/// (`v<n>:` padded with `x` to [`VALUE_SIZE_BYTES`]). The preload, the probe and the load all
/// encode here, so the load's keys are the preloaded ones; `scratch` holds the arguments.
fn encode_request(n: u64, read: bool, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    scratch.clear();
    let _ = write!(scratch, "key:{n}");
    let key_len = scratch.len();
    if read {
        encode(&[b"GET", scratch], out);
        return;
    }
    let _ = write!(scratch, "v{n}:");
    while scratch.len() - key_len < VALUE_SIZE_BYTES {
        scratch.push(b'x');
    }
    let (key, value) = scratch.split_at(key_len);
    encode(&[b"SET", key, value], out);
}

/// Appends `args` to `out` as a RESP array of bulk strings. Writing into a `Vec` cannot fail.
fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        let _ = write!(out, "${}\r\n", a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One reply: `Ok(true)` for a success, `Ok(false)` for an error reply.
fn read_reply(r: &mut BufReader<TcpStream>, line: &mut String) -> std::io::Result<bool> {
    line.clear();
    if r.read_line(line)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    match line.as_bytes().first() {
        Some(b'-') => Ok(false),
        Some(b'$') => {
            let len: i64 = line[1..].trim_end().parse().unwrap_or(-1);
            if len >= 0 {
                let mut body = vec![0u8; len as usize + 2];
                r.read_exact(&mut body)?;
            }
            Ok(true)
        }
        Some(b'*') => {
            let count: i64 = line[1..].trim_end().parse().unwrap_or(0);
            let mut ok = true;
            let mut inner = String::new();
            for _ in 0..count.max(0) {
                ok &= read_reply(r, &mut inner)?;
            }
            Ok(ok)
        }
        _ => Ok(true),
    }
}

/// SETs every key, pipelined over 8 connections; every reply must be OK.
fn preload(addr: SocketAddr, keys: u64) -> Result<(), InstantBenchError> {
    const CONNECTIONS: u64 = 8;
    const BATCH: u64 = 1000;
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let failed = &failed;
                s.spawn(move || -> Result<(), InstantBenchError> {
                    let stream = TcpStream::connect(addr).map_err(io("connect for the preload"))?;
                    let mut reader = BufReader::new(stream.try_clone().map_err(io("clone"))?);
                    let mut writer = stream;
                    let mut line = String::new();
                    let (mut wire, mut scratch) = (Vec::new(), Vec::new());
                    let mut n = c * BATCH;
                    while n < keys && !failed.load(Ordering::Relaxed) {
                        wire.clear();
                        let end = (n + BATCH).min(keys);
                        for k in n..end {
                            encode_request(k, false, &mut scratch, &mut wire);
                        }
                        writer.write_all(&wire).map_err(io("preload write"))?;
                        for _ in n..end {
                            if !read_reply(&mut reader, &mut line).map_err(io("preload read"))? {
                                failed.store(true, Ordering::Relaxed);
                                return Err(InstantBenchError::Server(format!("preload: {}", line.trim_end())));
                            }
                        }
                        n += CONNECTIONS * BATCH;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join().unwrap_or_else(|_| Err(InstantBenchError::Server("preload thread panicked".into())))
        })
    })
}

fn restart_under_load(
    options: &InstantBenchOptions,
    target: &Target,
    dir: &Path,
    port: u16,
    workload: &str,
    read_fraction: f64,
) -> Result<RunResult, InstantBenchError> {
    let windows_count =
        ((options.duration_s * 1000.0) as u64 / options.window_ms).clamp(1, WINDOWS_MAX as u64) as usize;
    let first_reply_us = AtomicU64::new(u64::MAX);
    let recovered_us = AtomicU64::new(u64::MAX);
    let latest_info = parking_lot::Mutex::new(None);
    let stop = AtomicBool::new(false);
    let restart = Instant::now();
    let mut server = start(options, target, dir, port)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let end = restart + Duration::from_secs_f64(options.duration_s);
    let load = load::Load {
        addr,
        keys: options.keys,
        read_fraction,
        restart,
        end,
        window_ms: options.window_ms,
        windows: windows_count,
    };
    let counts = std::thread::scope(|s| {
        let (recovered, latest, stop, first) = (&recovered_us, &latest_info, &stop, &first_reply_us);
        s.spawn(move || watch_recovery(addr, target, restart, end, recovered, latest, stop));
        s.spawn(move || probe_first_reply(addr, restart, end, first, stop));
        let counts = load::run(&load, options.driver_threads, options.clients, first, stop);
        stop.store(true, Ordering::SeqCst);
        counts
    });
    kill_and_report(&mut server);
    let first_ms = us_to_ms(first_reply_us.load(Ordering::SeqCst));
    let recovered_ms = us_to_ms(recovered_us.load(Ordering::SeqCst));
    // The watcher stops at the reply that reported recovery finished: then its last is that one.
    let latest_info = latest_info.into_inner();
    let final_info = latest_info.as_deref().filter(|_| recovered_ms.is_finite());
    let latest_info = latest_info.as_deref();
    let label = target.label();
    let csv = options.out_dir.join(format!("{workload}-{label}.csv"));
    let (during, after) = write_timeline(&csv, &counts, options.window_ms, first_ms, recovered_ms)?;
    Ok(RunResult {
        target: label,
        workload: workload.to_string(),
        first_reply_ms: first_ms,
        recovered_ms,
        during_recovery_per_s: during,
        restored_on_demand: info_field(final_info, "recovery_keys_restored_on_demand"),
        read_ahead: info_field(final_info, "recovery_keys_read_ahead"),
        restore_cpu_ms: info_field(final_info, "recovery_walk_cpu_ms")
            .zip(info_field(final_info, "recovery_process_cpu_ms")),
        fetch_cpu_ms: info_field(final_info, "recovery_fetch_cpu_ms"),
        walk_held_spare_ms: info_field(final_info, "recovery_walk_held_ms")
            .zip(info_field(final_info, "recovery_walk_spare_ms")),
        server_startup_ms: info_field(latest_info, "recovery_listening_ms").map(|listening| {
            (listening, info_field(latest_info, "recovery_first_fetch_ms").filter(|&ms: &f64| ms >= 0.0))
        }),
        after_recovery_per_s: after,
        preload_s: 0.0,
        csv,
    })
}

fn kill_and_report(server: &mut Child) {
    let _ = server.kill();
    let _ = server.wait();
}

fn us_to_ms(us: u64) -> f64 {
    if us == u64::MAX { f64::NAN } else { us as f64 / 1000.0 }
}

/// Sends one GET at a time, reconnecting every millisecond, until one is answered without an
/// error: the time the server first served a request, at a 1 ms resolution.
fn probe_first_reply(addr: SocketAddr, restart: Instant, end: Instant, first: &AtomicU64, stop: &AtomicBool) {
    let mut wire = Vec::new();
    encode_request(0, true, &mut Vec::new(), &mut wire);
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        let Ok(stream) = TcpStream::connect(addr) else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok(clone) = stream.try_clone() else { continue };
        let mut reader = BufReader::new(clone);
        let mut writer = stream;
        loop {
            if writer.write_all(&wire).is_err() {
                break;
            }
            match read_reply(&mut reader, &mut line) {
                Ok(true) => {
                    first.fetch_min(restart.elapsed().as_micros() as u64, Ordering::SeqCst);
                    return;
                }
                Ok(false) => std::thread::sleep(Duration::from_millis(1)),
                Err(_) => break,
            }
        }
    }
}

/// Field `name` of an `INFO` reply kept by [`watch_recovery`], if there is one and it parses.
fn info_field<T: std::str::FromStr>(info: Option<&str>, name: &str) -> Option<T> {
    info?.lines().find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':')?.parse().ok())
}

/// Polls INFO until the server reports recovery finished, then stores the time in `recovered`.
/// `latest` keeps each reply, so the last one is the reply that reported it finished, if one did
/// (the server's startup timeline is known from the first replies on).
fn watch_recovery(
    addr: SocketAddr,
    target: &Target,
    restart: Instant,
    end: Instant,
    recovered: &AtomicU64,
    latest: &parking_lot::Mutex<Option<String>>,
    stop: &AtomicBool,
) {
    let section: &[u8] = match target {
        Target::Lazarus(_) => b"recovery",
        Target::Redis(_) => b"persistence",
    };
    let done_line = match target {
        Target::Lazarus(_) => "recovery_state:done",
        Target::Redis(_) => "loading:0",
    };
    let mut wire = Vec::new();
    encode(&[b"INFO", section], &mut wire);
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        let Ok(stream) = TcpStream::connect(addr) else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let Ok(clone) = stream.try_clone() else { continue };
        let mut reader = BufReader::new(clone);
        let mut writer = stream;
        let mut line = String::new();
        loop {
            if writer.write_all(&wire).is_err() {
                break;
            }
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let len: usize = line[1..].trim_end().parse().unwrap_or(0);
            let mut body = vec![0u8; len + 2];
            if reader.read_exact(&mut body).is_err() {
                break;
            }
            let body = String::from_utf8_lossy(&body);
            let done = body.lines().any(|l| l.trim_end() == done_line);
            *latest.lock() = Some(body.into_owned());
            if done {
                recovered.store(restart.elapsed().as_micros() as u64, Ordering::SeqCst);
                return;
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Writes the timeline; returns (replies/s during recovery, replies/s after it).
fn write_timeline(
    path: &Path,
    counts: &load::Counts,
    window_ms: u64,
    first_ms: f64,
    recovered_ms: f64,
) -> Result<(f64, f64), InstantBenchError> {
    let mut out = String::from(crate::bench::stats::TIMELINE_HEADER);
    out.push('\n');
    let window_s = window_ms as f64 / 1000.0;
    let (mut during, mut during_s, mut after, mut after_s) = (0u64, 0.0, 0u64, 0.0);
    for i in 0..counts.ok.len() {
        let (start_ms, end_ms) = (i as f64 * window_ms as f64, (i + 1) as f64 * window_ms as f64);
        let (ok, errors) = (counts.ok[i], counts.errors[i]);
        let (p50, p99) = (counts.quantile_us(i, 0.5), counts.quantile_us(i, 0.99));
        let recovering = recovered_ms.is_nan() || recovered_ms > start_ms;
        out.push_str(&format!(
            "{:.3},{ok},{errors},{p50},{p99},{p50},{p99},{}\n",
            end_ms / 1000.0,
            u8::from(recovering)
        ));
        // Whole windows only: during = after the first reply and before recovery ended.
        if first_ms.is_finite() && start_ms >= first_ms && end_ms <= recovered_ms {
            during += ok;
            during_s += window_s;
        } else if recovered_ms.is_finite() && start_ms >= recovered_ms {
            after += ok;
            after_s += window_s;
        }
    }
    std::fs::write(path, out).map_err(io(format!("write {}", path.display())))?;
    let rate = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { f64::NAN };
    Ok((rate(during, during_s), rate(after, after_s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_the_preloaded_keys_and_their_values() {
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        encode_request(7, true, &mut scratch, &mut out);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$5\r\nkey:7\r\n");
        out.clear();
        encode_request(12, false, &mut scratch, &mut out);
        let value = format!("v12:{}", "x".repeat(VALUE_SIZE_BYTES - 4));
        assert_eq!(String::from_utf8(out).unwrap(), format!("*3\r\n$3\r\nSET\r\n$6\r\nkey:12\r\n$32\r\n{value}\r\n"));
    }
}
