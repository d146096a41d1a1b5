//! Property: on random well-typed programs, the closure compiler and the reference interpreter
//! agree — same returned values or same error (kind and message), and the same table contents
//! afterwards.
//!
//! Programs are generated from a byte string (each byte picks a production; an exhausted string
//! picks the simplest one), so proptest's shrinking of the bytes shrinks the program. Each side
//! runs in its own fresh database loaded identically.

use lazarus::proc::interp;
use lazarus::storage::{Direction, KeyRange, ParamValue, Value};
use lazarus::txn::Scan;
use lazarus::{Database, DatabaseConfig};
use proptest::prelude::*;

const TABLE: &str = "
table t (k int not null, v int, s text, primary key (k));
index t_by_v on t (v);
procedure ins(k int, v int, s text) { insert into t values (k, v, s); }
";

/// Builds procedure source from a byte string.
struct Gen {
    bytes: Vec<u8>,
    pos: usize,
    out: String,
    /// Scopes of int names: (name, assignable).
    scopes: Vec<Vec<(String, bool)>>,
    next_name: usize,
    stmts: usize,
}

impl Gen {
    fn pick(&mut self, n: usize) -> usize {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b as usize % n
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    fn readable(&self) -> Vec<String> {
        self.scopes.iter().flatten().map(|(n, _)| n.clone()).collect()
    }

    fn assignable(&self) -> Vec<String> {
        self.scopes.iter().flatten().filter(|(_, a)| *a).map(|(n, _)| n.clone()).collect()
    }

    fn bind(&mut self, name: &str, assignable: bool) {
        if let Some(s) = self.scopes.last_mut() {
            s.push((name.to_string(), assignable));
        }
    }

    fn int_expr(&mut self, depth: usize) -> String {
        let leaf = depth == 0;
        match self.pick(if leaf { 3 } else { 10 }) {
            0 => {
                let lits = ["0", "1", "2", "3", "-1", "7", "(1 + null)", "9223372036854775807"];
                lits[self.pick(lits.len())].to_string()
            }
            1 | 2 => {
                let vars = self.readable();
                if vars.is_empty() { "1".into() } else { vars[self.pick(vars.len())].clone() }
            }
            3..=5 => {
                let ops = ["+", "-", "*", "/", "%"];
                let op = ops[self.pick(ops.len())];
                format!("({} {op} {})", self.int_expr(depth - 1), self.int_expr(depth - 1))
            }
            6 => format!("abs({})", self.int_expr(depth - 1)),
            7 => {
                let f = if self.pick(2) == 0 { "min" } else { "max" };
                format!("{f}({}, {})", self.int_expr(depth - 1), self.int_expr(depth - 1))
            }
            8 => format!("-({})", self.int_expr(depth - 1)),
            _ => {
                if self.pick(2) == 0 {
                    format!("len(text({}))", self.int_expr(depth - 1))
                } else {
                    // A comparison as an int (the typed closures' `int(bool)`).
                    let ops = ["=", "<>", "<", "<=", ">", ">="];
                    let op = ops[self.pick(ops.len())];
                    format!("int({} {op} {})", self.int_expr(depth - 1), self.int_expr(depth - 1))
                }
            }
        }
    }

    fn bool_expr(&mut self, depth: usize) -> String {
        match self.pick(if depth == 0 { 2 } else { 6 }) {
            0 => {
                let ops = ["=", "<>", "<", "<=", ">", ">="];
                let op = ops[self.pick(ops.len())];
                format!("{} {op} {}", self.int_expr(1), self.int_expr(1))
            }
            1 => "found".into(),
            2 => format!("not ({})", self.bool_expr(depth - 1)),
            3 => format!("({}) and ({})", self.bool_expr(depth - 1), self.bool_expr(depth - 1)),
            4 => format!("({}) or ({})", self.bool_expr(depth - 1), self.bool_expr(depth - 1)),
            _ => format!("{} is null", self.int_expr(1)),
        }
    }

    fn block(&mut self, depth: usize) {
        self.out.push_str("{\n");
        self.scopes.push(Vec::new());
        let n = self.pick(4) + usize::from(depth == 0);
        for _ in 0..n {
            self.stmt(depth);
        }
        self.scopes.pop();
        self.out.push_str("}\n");
    }

    fn stmt(&mut self, depth: usize) {
        self.stmts += 1;
        let nested = depth < 3 && self.stmts < 40;
        let choice = self.pick(if nested { 14 } else { 9 });
        let e = self.int_expr(2);
        match choice {
            0 | 1 => {
                let name = self.fresh("x");
                self.out.push_str(&format!("let {name} = {e};\n"));
                self.bind(&name, true);
            }
            2 => match self.assignable().as_slice() {
                [] => {
                    let name = self.fresh("x");
                    self.out.push_str(&format!("let {name} = {e};\n"));
                    self.bind(&name, true);
                }
                vars => {
                    let v = vars[self.pick(vars.len())].clone();
                    self.out.push_str(&format!("{v} = {e};\n"));
                }
            },
            3 => {
                let name = self.fresh("g");
                self.out.push_str(&format!("select v into {name} from t where k = {e};\n"));
                self.bind(&name, true);
            }
            4 => {
                let set = match self.pick(2) {
                    0 => format!("v + {}", self.int_expr(1)),
                    // The old row's column inside operators inside operators (typed closures).
                    _ if self.pick(2) == 0 => {
                        format!("v - {} + 91 * int(v < {} + 10)", self.int_expr(1), self.int_expr(1))
                    }
                    _ => self.int_expr(1),
                };
                self.out.push_str(&format!("update t set v = {set}, s = s || 'u' where k = {e};\n"));
            }
            5 => {
                let v = self.int_expr(1);
                self.out.push_str(&format!("insert into t values ({e}, {v}, 'n');\n"));
            }
            6 => self.out.push_str(&format!("delete from t where k = {e};\n")),
            7 => {
                if self.pick(4) == 0 {
                    self.out.push_str("abort 'stop';\n");
                } else {
                    self.out.push_str(&format!("return {e}, found;\n"));
                }
            }
            8 => {
                let name = self.fresh("f");
                let dir = if self.pick(2) == 0 { "asc" } else { "desc" };
                if self.pick(2) == 0 {
                    self.out.push_str(&format!(
                        "select k into {name} from t index t_by_v where v >= {e} order by v {dir} limit 3;\n"
                    ));
                } else {
                    // Every row's key into a local array; an empty one makes the index -1, a
                    // run-time error both routes must report alike.
                    let (array, at) = (self.fresh("s"), self.int_expr(1));
                    self.out.push_str(&format!(
                        "select k into {array}[] from t index t_by_v where v >= {e} order by v {dir} limit 3;\n\
                         let {name} = len({array}) * 10 + {array}[min(max({at}, 0), len({array}) - 1)];\n"
                    ));
                }
                self.bind(&name, true);
            }
            9 | 10 => {
                let c = self.bool_expr(2);
                self.out.push_str(&format!("if {c} "));
                self.block(depth + 1);
                if self.pick(2) == 0 {
                    self.out.push_str("else ");
                    self.block(depth + 1);
                }
            }
            11 => {
                let i = self.fresh("i");
                let end = self.int_expr(1);
                self.out.push_str(&format!("for {i} in max({e}, -2) .. min({end}, 4) "));
                self.scopes.push(vec![(i, false)]);
                self.block(depth + 1);
                self.scopes.pop();
            }
            _ => self.scan_loop(depth, e),
        }
    }

    fn scan_loop(&mut self, depth: usize, e: String) {
        let r = self.fresh("r");
        let (head, dir, columns) = match self.pick(3) {
            0 => (format!("select k, v from t where k >= {e}"), "k", vec!["k", "v"]),
            1 => (format!("select k, v from t index t_by_v where v < {e}"), "v", vec!["k", "v"]),
            // Values of v repeat, so `distinct` drops rows.
            _ => (format!("select distinct v from t index t_by_v where v < {e}"), "v", vec!["v"]),
        };
        let order = if self.pick(2) == 0 { "desc" } else { "asc" };
        let limit = self.pick(4);
        self.out.push_str(&format!("for {r} in {head} order by {dir} {order} limit {limit} "));
        self.scopes.push(columns.iter().map(|c| (format!("{r}.{c}"), false)).collect());
        self.block(depth + 1);
        self.scopes.pop();
    }

    fn program(bytes: Vec<u8>) -> String {
        let mut g = Gen { bytes, pos: 0, out: String::new(), scopes: Vec::new(), next_name: 0, stmts: 0 };
        g.scopes.push(vec![("a".into(), false), ("b".into(), false)]);
        g.out.push_str("procedure p(a int, b int) {\n");
        g.scopes.push(Vec::new());
        let n = g.pick(6) + 1;
        for _ in 0..n {
            g.stmt(0);
        }
        let mut ret = g.readable();
        ret.push("found".into());
        g.out.push_str(&format!("return {};\n}}\n", ret.join(", ")));
        g.out
    }
}

/// What a run produced: its result (or error text) and the table afterwards.
type Outcome = (Result<Vec<Value>, String>, Vec<Vec<Value>>);

fn setup(program: &str, rows: &[(i64, Option<i64>)]) -> Database {
    let db = Database::open(DatabaseConfig::default()).expect("open");
    if let Err(e) = db.load_module("gen.proc", &format!("{TABLE}{program}")) {
        panic!("generated program does not check: {e}\n{program}");
    }
    let mut w = db.worker();
    for &(k, v) in rows {
        let v = v.map_or(Value::Null, Value::Int);
        let args = [Value::Int(k), v, Value::text("r")].map(ParamValue::Scalar);
        w.call("ins", &args).expect("load row");
    }
    db
}

fn contents(db: &Database) -> Vec<Vec<Value>> {
    let mut w = db.worker();
    let (rows, _) = w
        .run(1, |tx| {
            let table = tx.table_id("t")?;
            let scan =
                Scan { table, index: None, range: KeyRange::all(), direction: Direction::Forward, limit: 10_000 };
            tx.scan(&scan)
        })
        .expect("dump");
    rows.iter().map(|r| r.to_vec()).collect()
}

fn run_compiled(program: &str, rows: &[(i64, Option<i64>)], args: &[ParamValue]) -> Outcome {
    let db = setup(program, rows);
    let result = db.worker().call("p", args).map(|o| o.values).map_err(|e| e.to_string());
    (result, contents(&db))
}

fn run_interpreted(program: &str, rows: &[(i64, Option<i64>)], args: &[ParamValue]) -> Outcome {
    let db = setup(program, rows);
    let registry = db.procedures();
    let id = registry.id_of("p").expect("registered");
    let ir = std::sync::Arc::clone(registry.get(id).expect("procedure").ir());
    let result = db.worker().run(1, |tx| interp::run(&ir, tx, args)).map(|(v, _)| v).map_err(|e| e.to_string());
    (result, contents(&db))
}

fn rows_strategy() -> impl Strategy<Value = Vec<(i64, Option<i64>)>> {
    proptest::collection::btree_map(-2i64..8, proptest::option::of(-3i64..6), 0..6)
        .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn compiled_and_interpreted_agree(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        rows in rows_strategy(),
        a in proptest::option::of(-3i64..8),
        b in -3i64..8,
    ) {
        let program = Gen::program(bytes);
        let args = [ParamValue::Scalar(a.map_or(Value::Null, Value::Int)), ParamValue::Scalar(Value::Int(b))];
        let compiled = run_compiled(&program, &rows, &args);
        let interpreted = run_interpreted(&program, &rows, &args);
        prop_assert_eq!(compiled, interpreted, "program:\n{}", program);
    }
}

#[test]
fn generator_makes_varied_programs() {
    // Guards the generator itself: different bytes give different, valid programs.
    let a = Gen::program(vec![3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]);
    let b = Gen::program(vec![12, 13, 11, 10, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert_ne!(a, b);
    let rows = [(1, Some(2)), (3, None)];
    let args = [ParamValue::Scalar(Value::Int(1)), ParamValue::Scalar(Value::Int(2))];
    for p in [a, b] {
        assert_eq!(run_compiled(&p, &rows, &args), run_interpreted(&p, &rows, &args), "{p}");
    }
}
