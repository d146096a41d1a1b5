//! Connection and server commands: PING, ECHO, SELECT, CLIENT, HELLO, QUIT, INFO, CONFIG,
//! COMMAND, TIME, SHUTDOWN.

use crate::server::command::{COMMANDS, CommandSpec, clip, lookup, syntax_error, unknown_subcommand, wrong_arity};
use crate::server::conn::Conn;
use crate::server::keyspace::glob_match;
use crate::server::resp::{Reply, parse_strict_i64};
use std::sync::atomic::Ordering;

/// The Redis version the server reports: the command set and error texts follow Redis 7.
pub const REDIS_VERSION: &str = "7.0.15";

/// `PING [message]`
pub fn ping(_conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    match args {
        [_] => Reply::Status("PONG".into()),
        [_, message] => Reply::Bulk(message.clone()),
        _ => wrong_arity("ping"),
    }
}

/// ECHO message
pub fn echo(_conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    Reply::Bulk(args[1].clone())
}

/// SELECT index (only database 0 exists)
pub fn select(_conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    match parse_strict_i64(&args[1]) {
        Some(0) => Reply::ok(),
        Some(_) => Reply::err("ERR DB index is out of range"),
        None => Reply::err("ERR value is not an integer or out of range"),
    }
}

/// CLIENT SETNAME name | GETNAME | ID | SETINFO attr value | INFO
pub fn client(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    match (args[1].to_ascii_uppercase().as_slice(), args.len()) {
        (b"SETNAME", 3) => {
            if args[2].iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
                return Reply::err("ERR Client names cannot contain spaces, newlines or special characters.");
            }
            conn.name = if args[2].is_empty() { None } else { Some(args[2].clone()) };
            Reply::ok()
        }
        (b"GETNAME", 2) => conn.name.clone().map_or(Reply::Nil, Reply::Bulk),
        (b"ID", 2) => Reply::Int(conn.id as i64),
        (b"SETINFO", 4) => Reply::ok(),
        (b"INFO", 2) => Reply::text(format!(
            "id={} name={} db=0 cmd=client|info\n",
            conn.id,
            conn.name.as_deref().map(|n| clip(n, 128)).unwrap_or_default()
        )),
        (b"SETNAME" | b"GETNAME" | b"ID" | b"SETINFO" | b"INFO", _) => {
            wrong_arity(&format!("client|{}", String::from_utf8_lossy(&args[1]).to_ascii_lowercase()))
        }
        _ => unknown_subcommand(&args[1], "client"),
    }
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]: RESP2 only.
pub fn hello(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    if let Some(version) = args.get(1) {
        match parse_strict_i64(version) {
            Some(2) => {}
            Some(_) => return Reply::err("NOPROTO unsupported protocol version"),
            None => return Reply::err("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"AUTH" if i + 2 < args.len() => i += 3,
            b"SETNAME" if i + 1 < args.len() => {
                conn.name = Some(args[i + 1].clone());
                i += 2;
            }
            _ => return Reply::Error(format!("ERR Syntax error in HELLO option '{}'", clip(&args[i], 128)).into()),
        }
    }
    let fields: Vec<(&str, Reply)> = vec![
        ("server", Reply::text("redis")),
        ("version", Reply::text(REDIS_VERSION)),
        ("proto", Reply::Int(2)),
        ("id", Reply::Int(conn.id as i64)),
        ("mode", Reply::text("standalone")),
        ("role", Reply::text("master")),
        ("modules", Reply::Array(Vec::new())),
    ];
    Reply::Array(fields.into_iter().flat_map(|(k, v)| [Reply::text(k), v]).collect())
}

/// QUIT: replies OK, then the connection closes.
pub fn quit(conn: &mut Conn, _args: &[Vec<u8>]) -> Reply {
    conn.closing = true;
    Reply::ok()
}

/// TIME
pub fn time(_conn: &mut Conn, _args: &[Vec<u8>]) -> Reply {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Reply::Array(vec![Reply::text(since.as_secs().to_string()), Reply::text(since.subsec_micros().to_string())])
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`: stops accepting, closes every connection and
/// returns from `Server::run`; whatever was acknowledged is durable already.
pub fn shutdown(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    for arg in &args[1..] {
        let word = arg.to_ascii_uppercase();
        if !matches!(word.as_slice(), b"NOSAVE" | b"SAVE" | b"NOW" | b"FORCE") {
            return syntax_error();
        }
    }
    conn.shared.request_shutdown();
    conn.closing = true;
    conn.silent_close = true;
    Reply::ok()
}

/// INFO [section ...]
pub fn info(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    let wanted: Vec<String> = args[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    let all = wanted.is_empty() || wanted.iter().any(|w| matches!(w.as_str(), "all" | "default" | "everything"));
    let mut out = String::new();
    for (name, body) in sections(conn) {
        if all || wanted.iter().any(|w| w == &name.to_ascii_lowercase()) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            out.push_str(&format!("# {name}\r\n{body}"));
        }
    }
    Reply::Bulk(out.into_bytes())
}

fn sections(conn: &Conn) -> Vec<(&'static str, String)> {
    let shared = &conn.shared;
    let uptime_s = shared.config.started.elapsed().as_secs();
    let durability = shared.db.scheme().name();
    let aof = u8::from(durability != "none");
    let recovery = shared.recovery.status();
    vec![
        (
            "Server",
            format!(
                "redis_version:{REDIS_VERSION}\r\nlazarus_version:{}\r\nredis_mode:standalone\r\nos:{}\r\n\
                 arch_bits:64\r\nmultiplexing_api:threads\r\nprocess_id:{}\r\ntcp_port:{}\r\n\
                 uptime_in_seconds:{uptime_s}\r\nuptime_in_days:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::process::id(),
                shared.addr.port(),
                uptime_s / 86_400
            ),
        ),
        (
            "Clients",
            format!(
                "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n",
                shared.connected.load(Ordering::Relaxed),
                shared.config.clients_max
            ),
        ),
        ("Memory", memory_section()),
        (
            "Persistence",
            format!(
                "loading:0\r\nlazarus_durability:{durability}\r\naof_enabled:{aof}\r\naof_rewrite_in_progress:0\r\n\
                 aof_last_write_status:ok\r\nrdb_bgsave_in_progress:0\r\nrdb_changes_since_last_save:0\r\n"
            ),
        ),
        (
            "Stats",
            format!(
                "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n",
                shared.connections_received.load(Ordering::Relaxed),
                shared.commands_processed.load(Ordering::Relaxed)
            ),
        ),
        (
            "Recovery",
            format!(
                "recovery_state:{}\r\nrecovery_percent:{:.1}\r\nrecovery_keys_restored:{}\r\n\
                 recovery_keys_restored_on_demand:{}\r\nrecovery_keys_read_ahead:{}\r\nrecovery_elapsed_ms:{:.1}\r\n\
                 recovery_walk_cpu_ms:{:.1}\r\nrecovery_process_cpu_ms:{:.1}\r\nrecovery_fetch_cpu_ms:{:.1}\r\n\
                 recovery_walk_share:{:.3}\r\nrecovery_walk_held_ms:{:.1}\r\nrecovery_walk_spare_ms:{:.1}\r\nrecovery_listening_ms:{:.1}\r\nrecovery_first_fetch_ms:{}\r\n\
                 recovery_unindexed_log_bytes:{}\r\n",
                recovery.state,
                recovery.percent,
                recovery.keys_restored,
                recovery.keys_restored_on_demand,
                recovery.keys_read_ahead,
                recovery.elapsed_ms,
                recovery.walk_cpu_ms,
                recovery.process_cpu_ms,
                shared.restore_fetch_cpu_ns.load(Ordering::Relaxed) as f64 / 1e6,
                recovery.walk_share,
                recovery.walk_held_ms,
                recovery.walk_spare_ms,
                shared.listening_us as f64 / 1e3,
                match shared.first_fetch_us.load(Ordering::Relaxed) {
                    u64::MAX => "-1".to_string(),
                    us => format!("{:.1}", us as f64 / 1e3),
                },
                recovery.unindexed_log_bytes
            ),
        ),
        ("Keyspace", format!("db0:keys={},expires=0,avg_ttl=0\r\n", shared.stored_rows())),
    ]
}

/// INFO's `memory` section, in Redis's field names (`redis-cli --stat` reads `used_memory`). A
/// release build keeps no allocator statistics, so `used_memory` is what the process has
/// resident, as `used_memory_rss` is, and the fragmentation ratio is 1; `used_memory_peak` is
/// the most it has had resident. Lazarus evicts nothing (`maxmemory` 0: no limit). A figure the
/// system does not give is 0.
fn memory_section() -> String {
    let (resident, peak) = (resident_bytes().unwrap_or(0), peak_resident_bytes().unwrap_or(0));
    format!(
        "used_memory:{resident}\r\nused_memory_human:{}\r\nused_memory_rss:{resident}\r\n\
         used_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\n\
         maxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\nmem_fragmentation_ratio:1.00\r\n",
        human_bytes(resident),
        human_bytes(resident),
        human_bytes(peak)
    )
}

/// The process's resident memory now, from `/proc/self/statm` (Linux).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page_bytes = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    pages.checked_mul(page_bytes)
}

/// The most memory the process has had resident (`getrusage`'s `ru_maxrss`, in KiB on Linux).
fn peak_resident_bytes() -> Option<u64> {
    // SAFETY: all-zero bytes are a valid `rusage`, which the call fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out pointer for the call's duration.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    u64::try_from(usage.ru_maxrss).ok()?.checked_mul(1024)
}

/// Bytes as Redis's `bytesToHuman` writes them: `512B`, `1.50K`, `20.00M`, `3.25G`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (size, unit) in UNITS {
        if bytes >= size {
            return format!("{:.2}{unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes}B")
}

/// The parameters CONFIG knows, with the value CONFIG GET reports.
fn config_params(conn: &Conn) -> Vec<(&'static str, String)> {
    let durable = conn.shared.db.scheme().name() != "none";
    let settable = conn.shared.settable.lock();
    vec![
        ("save", settable.save.clone()),
        ("appendonly", if durable { "yes" } else { "no" }.to_string()),
        ("appendfsync", if durable { "always" } else { "no" }.to_string()),
        ("databases", "1".to_string()),
        ("maxclients", conn.shared.config.clients_max.to_string()),
        ("maxmemory", "0".to_string()),
        ("proto-max-bulk-len", conn.shared.config.limits.bulk_bytes_max.to_string()),
        ("port", conn.shared.addr.port().to_string()),
        ("bind", conn.shared.addr.ip().to_string()),
    ]
}

/// CONFIG GET pattern [pattern ...] | CONFIG SET param value [param value ...] | CONFIG RESETSTAT
pub fn config(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    match args[1].to_ascii_uppercase().as_slice() {
        b"GET" if args.len() >= 3 => {
            let params = config_params(conn);
            let mut out = Vec::new();
            for (name, value) in params {
                if args[2..].iter().any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes())) {
                    out.extend([Reply::text(name), Reply::text(value)]);
                }
            }
            Reply::Array(out)
        }
        b"SET" if args.len() >= 4 && args.len().is_multiple_of(2) => config_set(conn, &args[2..]),
        b"RESETSTAT" if args.len() == 2 => Reply::ok(),
        b"GET" | b"SET" | b"RESETSTAT" => {
            wrong_arity(&format!("config|{}", String::from_utf8_lossy(&args[1]).to_ascii_lowercase()))
        }
        _ => unknown_subcommand(&args[1], "config"),
    }
}

/// CONFIG SET: `save` is accepted (there are no snapshots; it only changes what GET reports);
/// `appendonly` and `appendfsync` only to the values in force, because durability is chosen when
/// the server starts (`--durability`), and silently pretending otherwise would lose data.
fn config_set(conn: &mut Conn, pairs: &[Vec<u8>]) -> Reply {
    let current: Vec<(&str, String)> = config_params(conn);
    for pair in pairs.chunks_exact(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        let value = String::from_utf8_lossy(&pair[1]).to_string();
        let in_force = current.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
        match (name.as_str(), in_force) {
            ("save", _) => conn.shared.settable.lock().save = value,
            ("appendonly" | "appendfsync", Some(v)) if v.eq_ignore_ascii_case(&value) => {}
            ("appendonly" | "appendfsync", _) => {
                return Reply::Error(
                    format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - durability is fixed \
                         at start: restart lazarus serve with another --durability"
                    )
                    .into(),
                );
            }
            _ => {
                return Reply::Error(
                    format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'").into(),
                );
            }
        }
    }
    Reply::ok()
}

/// COMMAND | COMMAND COUNT | COMMAND DOCS [name ...] | COMMAND INFO [name ...] | COMMAND LIST
pub fn command(_conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    let Some(sub) = args.get(1) else { return Reply::Array(COMMANDS.iter().map(command_info).collect()) };
    let named = || -> Vec<Option<&'static CommandSpec>> { args[2..].iter().map(|n| lookup(n)).collect() };
    match sub.to_ascii_uppercase().as_slice() {
        b"COUNT" => Reply::Int(COMMANDS.len() as i64),
        b"LIST" => Reply::Array(COMMANDS.iter().map(|c| Reply::text(c.name)).collect()),
        b"INFO" if args.len() == 2 => Reply::Array(COMMANDS.iter().map(command_info).collect()),
        b"INFO" => Reply::Array(named().into_iter().map(|c| c.map_or(Reply::NilArray, command_info)).collect()),
        b"DOCS" => {
            let specs: Vec<&CommandSpec> =
                if args.len() == 2 { COMMANDS.iter().collect() } else { named().into_iter().flatten().collect() };
            Reply::Array(specs.into_iter().flat_map(|c| [Reply::text(c.name), command_docs(c)]).collect())
        }
        _ => unknown_subcommand(sub, "command"),
    }
}

/// COMMAND's ten fields for one command (Redis 7).
fn command_info(c: &CommandSpec) -> Reply {
    Reply::Array(vec![
        Reply::text(c.name),
        Reply::Int(i64::from(c.arity)),
        Reply::Array(c.flags.iter().map(|f| Reply::Status((*f).into())).collect()),
        Reply::Int(i64::from(c.first_key)),
        Reply::Int(i64::from(c.last_key)),
        Reply::Int(i64::from(c.key_step)),
        Reply::Array(vec![Reply::Status(format!("@{}", c.group).into())]),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

/// COMMAND DOCS's map for one command.
fn command_docs(c: &CommandSpec) -> Reply {
    Reply::Array(vec![
        Reply::text("summary"),
        Reply::text(c.summary),
        Reply::text("since"),
        Reply::text("1.0.0"),
        Reply::text("group"),
        Reply::text(c.group),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_as_redis_writes_them() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1536), "1.50K");
        assert_eq!(human_bytes(20 << 20), "20.00M");
        assert_eq!(human_bytes((13 << 30) / 4), "3.25G");
    }

    #[test]
    fn the_memory_section_reports_what_is_resident() {
        let resident = resident_bytes().expect("/proc/self/statm");
        // The peak is the most resident at any time, but the two are read from counters the
        // kernel keeps apart and updates in per-CPU batches (a CI run saw the peak below a
        // `statm` read): only a gross disagreement fails.
        assert!(resident > 0 && peak_resident_bytes().expect("getrusage") >= resident / 2);
        let section = memory_section();
        assert!(section.starts_with("used_memory:") && section.contains("\r\nused_memory_peak:"), "{section}");
    }
}
