//! Every limit the language enforces, in one place. Each is checked with an error that names it;
//! nothing input can make the checker or a procedure use unbounded memory or time.

/// Largest source file accepted, in bytes.
pub const SOURCE_BYTES_MAX: usize = 1 << 20;
/// Longest identifier, in characters.
pub const IDENT_LEN_MAX: usize = 64;
/// Deepest nesting of blocks (`if`, `for`) within a procedure.
pub const BLOCK_DEPTH_MAX: usize = 32;
/// Deepest nesting of expressions (parentheses, operators, calls).
pub const EXPR_DEPTH_MAX: usize = 64;
/// Most statements in one procedure (counting nested ones).
pub const STATEMENTS_MAX: usize = 10_000;
/// Most parameters of one procedure.
pub const PARAMS_MAX: usize = 64;
/// Most variables (including parameters and loop columns) of one procedure.
pub const VARS_MAX: usize = 4096;
/// Most values one `return` may return.
pub const RETURN_VALUES_MAX: usize = 256;
/// Most diagnostics reported for one file; the rest are dropped.
pub const DIAGNOSTICS_MAX: usize = 50;
/// Most loop iterations (all loops together) one procedure call may run.
pub const LOOP_ITERATIONS_MAX: u64 = 1_000_000;
/// Largest `limit` of a scan (the engine's default `scan_rows_max`; the engine enforces its own
/// configured limit as well).
pub const SCAN_LIMIT_MAX: i64 = 1 << 16;
/// Longest text or bytes value a procedure may build, in bytes.
pub const VALUE_BYTES_MAX: usize = 1 << 20;
