//! Stored procedures end to end through `lazarus::Database`: gets, scans in both directions,
//! secondary-index scans, loops, abort, duplicate keys, `found`, nulls and run-time errors.

use lazarus::proc::ir::{Access, StmtKind, WriteKind};
use lazarus::storage::{ParamValue, Value};
use lazarus::txn::TxnError;
use lazarus::{Database, DatabaseConfig};

const SCHEMA: &str = "
table account (id int not null, owner text, balance float not null, primary key (id));
table line (w int not null, o int not null, n int not null, qty int, primary key (w, o, n));
index account_by_owner on account (owner);

procedure open(id int, owner text, balance float) {
    insert into account values (id, owner, balance);
}
procedure transfer(src int, dst int, amount float) {
    select balance into b from account where id = src;
    if not found { abort 'no such account'; }
    if b < amount { abort 'insufficient funds'; }
    update account set balance = balance - amount where id = src;
    update account set balance = balance + amount where id = dst;
    if not found { abort 'no such destination'; }
    return b - amount;
}
procedure balance_of(id int) {
    select balance, owner into b, o from account where id = id;
    return found, b, o;
}
procedure add_line(w int, o int, n int, qty int) {
    insert into line values (w, o, n, qty);
}
procedure add_line_partial(w int, o int, n int) {
    insert into line (n, o, w) values (n, o, w);
}
";

fn db(extra: &str) -> Database {
    let db = Database::open(DatabaseConfig::default()).expect("open");
    db.load_module("test.proc", &format!("{SCHEMA}\n{extra}")).unwrap_or_else(|e| panic!("{e}"));
    db
}

/// The 1-based line of the first line of the loaded source containing `needle`.
fn line_of(extra: &str, needle: &str) -> usize {
    let full = format!("{SCHEMA}\n{extra}");
    full.lines().position(|l| l.contains(needle)).map_or(0, |i| i + 1)
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

fn float(v: f64) -> ParamValue {
    ParamValue::Scalar(Value::Float(v))
}

fn text(s: &str) -> ParamValue {
    ParamValue::Scalar(Value::text(s))
}

fn call(db: &Database, name: &str, args: &[ParamValue]) -> Result<Vec<Value>, TxnError> {
    db.worker().call(name, args).map(|o| o.values)
}

fn ok(db: &Database, name: &str, args: &[ParamValue]) -> Vec<Value> {
    call(db, name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn err(db: &Database, name: &str, args: &[ParamValue]) -> TxnError {
    match call(db, name, args) {
        Ok(v) => panic!("{name} should fail, returned {v:?}"),
        Err(e) => e,
    }
}

fn lines(db: &Database, w: i64, o: i64, count: i64) {
    for n in 1..=count {
        ok(db, "add_line", &[int(w), int(o), int(n), int(n * 10)]);
    }
}

#[test]
fn transfer_gets_updates_and_aborts() {
    let db = db("");
    ok(&db, "open", &[int(1), text("ann"), float(100.0)]);
    ok(&db, "open", &[int(2), text("bob"), int(5)]); // int argument widens to a float parameter
    assert_eq!(ok(&db, "transfer", &[int(1), int(2), float(30.0)]), vec![Value::Float(70.0)]);
    assert_eq!(ok(&db, "balance_of", &[int(2)]), vec![Value::Bool(true), Value::Float(35.0), Value::text("bob")]);
    match err(&db, "transfer", &[int(1), int(2), float(1000.0)]) {
        TxnError::UserAbort(m) => assert_eq!(m, "insufficient funds"),
        e => panic!("{e}"),
    }
    match err(&db, "transfer", &[int(9), int(2), float(1.0)]) {
        TxnError::UserAbort(m) => assert_eq!(m, "no such account"),
        e => panic!("{e}"),
    }
    // The abort after the first update rolls the whole call back.
    assert!(matches!(err(&db, "transfer", &[int(1), int(9), float(1.0)]), TxnError::UserAbort(_)));
    assert_eq!(ok(&db, "balance_of", &[int(1)])[1], Value::Float(70.0));
}

#[test]
fn missing_row_sets_found_false_and_targets_null() {
    let db = db("");
    assert_eq!(ok(&db, "balance_of", &[int(42)]), vec![Value::Bool(false), Value::Null, Value::Null]);
}

#[test]
fn duplicate_key_is_the_engines_error() {
    let db = db("");
    ok(&db, "open", &[int(1), text("ann"), float(1.0)]);
    assert!(matches!(err(&db, "open", &[int(1), text("x"), float(2.0)]), TxnError::DuplicateKey { .. }));
}

#[test]
fn scans_with_ranges_in_both_directions() {
    let db = db("
        procedure seq(w int, o int, lo int, hi int, desc_order bool) {
            let s = '';
            if desc_order {
                for r in select n from line where w = w and o = o and n >= lo and n < hi order by n desc limit 15 {
                    s = s || text(r.n) || ',';
                }
            } else {
                for r in select n, qty from line where w = w and o = o and n > lo and n <= hi order by n limit 15 {
                    s = s || text(r.n) || ':' || text(r.qty) || ',';
                }
            }
            return s, found;
        }
        procedure last(w int, o int) {
            select n into last_n from line where w = w and o = o order by n desc limit 1;
            select n into first_n from line where w = w and o = o;
            return first_n, last_n;
        }
        procedure upto(w int, o int, k int) {
            let total = 0;
            for r in select qty from line where w = w and o = o limit k { total = total + r.qty; }
            return total;
        }
    ");
    lines(&db, 1, 1, 10);
    lines(&db, 1, 2, 3);
    lines(&db, 2, 1, 4);
    let t = |s: &str| Value::text(s);
    let tf = ParamValue::Scalar(Value::Bool(true));
    let ff = ParamValue::Scalar(Value::Bool(false));
    assert_eq!(ok(&db, "seq", &[int(1), int(1), int(3), int(7), tf.clone()]), vec![t("6,5,4,3,"), Value::Bool(true)]);
    assert_eq!(ok(&db, "seq", &[int(1), int(1), int(3), int(5), ff.clone()]), vec![t("4:40,5:50,"), Value::Bool(true)]);
    assert_eq!(ok(&db, "seq", &[int(1), int(1), int(20), int(30), ff]), vec![t(""), Value::Bool(false)]);
    assert_eq!(ok(&db, "seq", &[int(1), int(3), int(0), int(99), tf]), vec![t(""), Value::Bool(false)]);
    assert_eq!(ok(&db, "last", &[int(1), int(2)]), vec![Value::Int(1), Value::Int(3)]);
    assert_eq!(ok(&db, "upto", &[int(1), int(1), int(3)]), vec![Value::Int(60)]);
    assert_eq!(ok(&db, "upto", &[int(2), int(1), int(100)]), vec![Value::Int(100)]);
    let e = err(&db, "upto", &[int(1), int(1), int(-1)]).to_string();
    assert!(e.contains("limit must be an int between 0 and 65536, got -1"), "{e}");
}

#[test]
fn secondary_index_scans() {
    let db = db("
        procedure of_owner(owner text) {
            let ids = '';
            for r in select id, balance from account index account_by_owner where owner = owner limit 10 {
                ids = ids || text(r.id) || ' ';
            }
            return ids;
        }
        procedure richest_prefix(owner text) {
            select id into top from account index account_by_owner where owner = owner order by owner desc;
            return top;
        }
    ");
    for (id, owner) in [(5, "ann"), (2, "bob"), (3, "ann"), (9, "ann"), (1, "cy")] {
        ok(&db, "open", &[int(id), text(owner), float(1.0)]);
    }
    assert_eq!(ok(&db, "of_owner", &[text("ann")]), vec![Value::text("3 5 9 ")]);
    assert_eq!(ok(&db, "of_owner", &[text("zed")]), vec![Value::text("")]);
    // Descending over one owner: ties are in primary-key order, reversed.
    assert_eq!(ok(&db, "richest_prefix", &[text("ann")]), vec![Value::Int(9)]);
}

#[test]
fn loops_over_ranges_and_arrays() {
    let src = "
        procedure sums(items int[]) {
            let a = 0;
            for i in 1 .. 10 { a = a + i; }
            let b = 0;
            for x in items { b = b + x; }
            let c = 0;
            for i in 0 .. len(items) { c = c * 10 + items[i]; }
            for i in 5 .. 2 { a = 0; }
            return a, b, c, len(items);
        }
        procedure at(items text[], i int) { return items[i]; }
        procedure forever() { let n = 0; for i in 0 .. 2000000 { n = n + 1; } return n; }
    ";
    let db = db(src);
    let items = ParamValue::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3)].into());
    assert_eq!(ok(&db, "sums", &[items]), vec![Value::Int(45), Value::Int(6), Value::Int(123), Value::Int(3)]);
    let names = ParamValue::Array(vec![Value::text("x"), Value::text("y")].into());
    assert_eq!(ok(&db, "at", &[names.clone(), int(1)]), vec![Value::text("y")]);
    let e = err(&db, "at", &[names, int(2)]).to_string();
    let line = line_of(src, "return items[i]");
    assert!(e.contains(&format!("array index 2 out of range (length 2) (line {line}, column 45)")), "{e}");
    let e = err(&db, "forever", &[]).to_string();
    assert!(e.contains("more than 1000000 loop iterations"), "{e}");
}

#[test]
fn null_semantics() {
    let db = db("
        procedure nulls(x int) {
            let a = x + 1;
            let branch = 'else';
            if x > 0 { branch = 'then'; }
            let also = 'no';
            if not (x > 0) { also = 'yes'; }
            return a, branch, also, x is null, x is not null, (x > 0) or true, (x > 0) and false, x = null;
        }
    ");
    let out = ok(&db, "nulls", &[ParamValue::Scalar(Value::Null)]);
    let expect = vec![
        Value::Null,
        Value::text("else"),
        Value::text("no"),
        Value::Bool(true),
        Value::Bool(false),
        Value::Bool(true),
        Value::Bool(false),
        Value::Null,
    ];
    assert_eq!(out, expect);
    let out = ok(&db, "nulls", &[int(3)]);
    assert_eq!(out[..3], [Value::Int(4), Value::text("then"), Value::text("no")]);
}

#[test]
fn null_keys_find_nothing_and_nullable_columns_default_to_null() {
    let db = db("
        procedure get_line(w int, o int, n int) {
            select qty into q from line where w = w and o = o and n = n;
            return found, q;
        }
    ");
    ok(&db, "add_line_partial", &[int(1), int(1), int(1)]);
    assert_eq!(ok(&db, "get_line", &[int(1), int(1), int(1)]), vec![Value::Bool(true), Value::Null]);
    let null = ParamValue::Scalar(Value::Null);
    assert_eq!(ok(&db, "get_line", &[int(1), null, int(1)]), vec![Value::Bool(false), Value::Null]);
    // A null in a not-null column is the engine's schema error.
    assert!(matches!(err(&db, "open", &[int(1), text("a"), ParamValue::Scalar(Value::Null)]), TxnError::Schema(_)));
}

#[test]
fn update_and_delete_set_found_and_columns_shadow_variables() {
    let db = db("
        procedure bump(id int, amount float) {
            let balance = 1000.0;
            update account set balance = balance + amount, owner = owner || '!' where id = id;
            return found;
        }
        procedure remove(id int) {
            delete from account where id = id;
            let first = found;
            delete from account where id = id;
            return first, found;
        }
    ");
    ok(&db, "open", &[int(1), text("ann"), float(10.0)]);
    assert_eq!(ok(&db, "bump", &[int(1), float(2.5)]), vec![Value::Bool(true)]);
    assert_eq!(ok(&db, "balance_of", &[int(1)]), vec![Value::Bool(true), Value::Float(12.5), Value::text("ann!")]);
    assert_eq!(ok(&db, "bump", &[int(7), float(2.5)]), vec![Value::Bool(false)]);
    assert_eq!(ok(&db, "remove", &[int(1)]), vec![Value::Bool(true), Value::Bool(false)]);
    assert_eq!(ok(&db, "balance_of", &[int(1)])[0], Value::Bool(false));
}

#[test]
fn runtime_errors_name_the_procedure_and_line() {
    let src = "
        procedure div(a int, b int) { return a / b; }
        procedure big(a int) {
            return a * a;
        }
        procedure conv(s text) { return int(s), float(s), substr(s, 1, 2); }
    ";
    let db = db(src);
    assert_eq!(ok(&db, "div", &[int(7), int(2)]), vec![Value::Int(3)]);
    match err(&db, "div", &[int(7), int(0)]) {
        TxnError::Procedure { procedure, message } => {
            assert_eq!(procedure, "div");
            let line = line_of(src, "return a / b");
            assert!(message.ends_with(&format!("division by zero (line {line}, column 39)")), "{message}");
        }
        e => panic!("{e}"),
    }
    let e = err(&db, "big", &[int(i64::MAX)]).to_string();
    let line = line_of(src, "return a * a");
    assert!(e.contains("integer overflow") && e.contains(&format!("(line {line}, column 13)")), "{e}");
    assert_eq!(ok(&db, "conv", &[text("42")]), vec![Value::Int(42), Value::Float(42.0), Value::text("2")]);
    assert!(err(&db, "conv", &[text("x")]).to_string().contains("cannot convert 'x' to int"));
}

#[test]
fn arguments_are_checked() {
    let db = db("");
    let e = err(&db, "open", &[int(1)]).to_string();
    assert!(e.contains("expects 3 argument(s), got 1"), "{e}");
    let e = err(&db, "open", &[text("1"), text("a"), float(1.0)]).to_string();
    assert!(e.contains("parameter id is int, got '1'"), "{e}");
    let arr = ParamValue::Array(vec![Value::Int(1)].into());
    let e = err(&db, "open", &[arr, text("a"), float(1.0)]).to_string();
    assert!(e.contains("must be a scalar int"), "{e}");
    assert!(matches!(err(&db, "nope", &[]), TxnError::NoSuchProcedure(_)));
}

#[test]
fn text_functions_and_numbers() {
    let db = db("
        procedure f(s text, x float) {
            return s || '-' || text(len(s)), abs(-3), max(1, 2.5, -1), min('b', 'a'), int(x), x % 2, 7 % -3, -2 * 3;
        }
    ");
    let out = ok(&db, "f", &[text("héllo"), float(5.75)]);
    let expect = vec![
        Value::text("héllo-5"),
        Value::Int(3),
        Value::Float(2.5),
        Value::text("a"),
        Value::Int(5),
        Value::Float(1.75),
        Value::Int(1),
        Value::Int(-6),
    ];
    assert_eq!(out, expect);
}

#[test]
fn ir_exposes_operations_for_static_analysis() {
    let db = db("");
    let registry = db.procedures();
    let transfer = registry.all().iter().find(|p| p.name() == "transfer").expect("transfer");
    let ir = transfer.ir();
    let ops = ir.db_ops();
    let kinds: Vec<(u32, &str, Access)> =
        ops.iter().map(|(id, op)| (id.0, op.table.name.as_str(), op.access)).collect();
    assert_eq!(
        kinds,
        vec![
            (0, "account", Access::Read),
            (5, "account", Access::Write(WriteKind::Update)),
            (6, "account", Access::Write(WriteKind::Update)),
        ]
    );
    assert!(ops[0].1.data_dependent(&ops[1].1));
    assert!(!ops[0].1.data_dependent(&ops[0].1));
    // Statement 0 defines `b` and `found`; statement 1 (`if not found`) uses `found`.
    let mut stmts = Vec::new();
    ir.walk(&mut |s, depth| stmts.push((s.id.0, depth, s.defs.clone(), s.uses.clone(), s.may_exit())));
    assert_eq!(stmts.len(), ir.stmt_count as usize);
    assert!(stmts.iter().enumerate().all(|(i, s)| s.0 as usize == i), "ids are pre-order");
    assert!(stmts[0].2.contains(&ir.found));
    assert_eq!(stmts[1].3, vec![ir.found]);
    assert!(stmts[1].4, "the if holds an abort");
    assert!(matches!(ir.body[0].kind, StmtKind::Get(_)));
    let params: Vec<&str> = transfer.params().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(params, ["src", "dst", "amount"]);
}

#[test]
fn bank_example_runs() {
    let db = Database::open(DatabaseConfig::default()).expect("open");
    let src = include_str!("../workloads/examples/bank.proc");
    db.load_module("bank.proc", src).unwrap_or_else(|e| panic!("{e}"));
    ok(&db, "open_account", &[int(1), text("ann"), float(100.0)]);
    ok(&db, "open_account", &[int(2), text("bob"), float(0.0)]);
    ok(&db, "open_account", &[int(3), text("ann"), float(5.0)]);
    assert_eq!(ok(&db, "transfer", &[int(1), int(2), float(40.0)]), vec![Value::Float(60.0), Value::Float(40.0)]);
    assert_eq!(ok(&db, "record", &[int(1), float(-40.0), text("to bob")]), vec![Value::Int(1)]);
    assert_eq!(ok(&db, "total_for", &[text("ann")]), vec![Value::Int(2), Value::Float(65.0)]);
    assert_eq!(ok(&db, "recent", &[int(1), int(5)]), vec![Value::text("1:-40.0 (to bob); 0:100.0 (opened); ")]);
    let ids = ParamValue::Array(vec![Value::Int(2), Value::Int(9), Value::Int(3)].into());
    assert_eq!(ok(&db, "pay_interest", &[ids, float(0.5)]), vec![Value::Int(2)]);
    match err(&db, "transfer", &[int(2), int(7), float(1.0)]) {
        TxnError::UserAbort(m) => assert_eq!(m, "no such account: 7"),
        e => panic!("{e}"),
    }
    assert!(matches!(err(&db, "close_account", &[int(2)]), TxnError::UserAbort(_)));
    ok(&db, "transfer", &[int(3), int(1), float(7.5)]);
    ok(&db, "close_account", &[int(3)]);
    assert_eq!(ok(&db, "total_for", &[text("ann")]), vec![Value::Int(1), Value::Float(67.5)]);
}

#[test]
fn select_distinct_drops_repeated_rows_in_order() {
    let db = db("procedure distinct_qty(w int) {
        let n = 0;
        let sum = 0;
        let firsts = '';
        for r in select distinct qty from line where w = w limit 100 {
            n = n + 1;
            if r.qty is not null {
                sum = sum + r.qty;
                firsts = firsts || text(r.qty) || ',';
            }
        }
        return n, sum, firsts, found;
    }
    procedure distinct_limited(w int) {
        let n = 0;
        for r in select distinct qty from line where w = w limit 3 { n = n + 1; }
        return n;
    }");
    let mut w = db.worker();
    for (o, n, qty) in [(1, 1, Some(5)), (1, 2, Some(7)), (1, 3, Some(5)), (2, 1, None), (2, 2, Some(7)), (3, 1, None)]
    {
        let qty = qty.map_or(ParamValue::Scalar(Value::Null), int);
        w.call("add_line", &[int(1), int(o), int(n), qty]).unwrap();
    }
    // Rows in key order: 5, 7, 5, null, 7, null → 5, 7, null (nulls are not distinct).
    let out = w.call("distinct_qty", &[int(1)]).unwrap().values;
    assert_eq!(out, vec![Value::Int(3), Value::Int(12), Value::text("5,7,"), Value::Bool(true)]);
    // The limit bounds the rows read (5, 7, 5), before repeats are dropped.
    assert_eq!(w.call("distinct_limited", &[int(1)]).unwrap().values, vec![Value::Int(2)]);
    let none = w.call("distinct_qty", &[int(9)]).unwrap().values;
    assert_eq!(none, vec![Value::Int(0), Value::Int(0), Value::text(""), Value::Bool(false)]);
}

/// `select c into a[] ...` collects the column of every row read, in scan order, into a local
/// array that `len`, indexing and `for` read; a second select replaces it; `found` says whether
/// any row came back. Run compiled and by the reference interpreter, which must agree.
#[test]
fn select_into_an_array_collects_every_row_in_scan_order() {
    let db = db("
    procedure owned(o text, cap int) {
        select id into ids[] from account index account_by_owner where owner = o limit cap;
        if not found { return 0, -1, 0, len(ids); }
        let sum = 0;
        for x in ids { sum = sum + x; }
        return len(ids), ids[(len(ids) + 1) / 2 - 1], sum, ids[len(ids) - 1];
    }
    procedure replaced() {
        select id into ids[] from account index account_by_owner where owner = 'ann' order by owner desc limit 10;
        let first = ids[0];
        select id into ids[] from account index account_by_owner where owner = 'bob' limit 10;
        return first, len(ids), ids[0];
    }
    procedure out_of_range() {
        select id into ids[] from account index account_by_owner where owner = 'ann' limit 10;
        return ids[len(ids)];
    }");
    for (id, owner) in [(5, "ann"), (3, "ann"), (9, "ann"), (7, "ann"), (1, "bob"), (4, "cy")] {
        ok(&db, "open", &[int(id), text(owner), float(0.0)]);
    }
    let registry = db.procedures();
    let interpreted = |name: &str, args: &[ParamValue]| {
        let ir = std::sync::Arc::clone(registry.get(registry.id_of(name).unwrap()).unwrap().ir());
        db.worker().run(1, |tx| lazarus::proc::interp::run(&ir, tx, args)).map(|(v, _)| v)
    };
    let ints = |v: &[i64]| v.iter().map(|&x| Value::Int(x)).collect::<Vec<_>>();
    let cases: [(&str, Vec<ParamValue>, Vec<Value>); 5] = [
        // Ann's accounts in index order (owner, then id): 3, 5, 7, 9; the middle is the 2nd.
        ("owned", vec![text("ann"), int(10)], ints(&[4, 5, 24, 9])),
        // The limit bounds the rows read: 3, 5, 7.
        ("owned", vec![text("ann"), int(3)], ints(&[3, 5, 15, 7])),
        ("owned", vec![text("cy"), int(10)], ints(&[1, 4, 4, 4])),
        ("owned", vec![text("zed"), int(10)], ints(&[0, -1, 0, 0])),
        ("replaced", vec![], ints(&[9, 1, 1])),
    ];
    for (name, args, want) in cases {
        assert_eq!(ok(&db, name, &args), want, "{name}{args:?} compiled");
        assert_eq!(interpreted(name, &args).unwrap(), want, "{name}{args:?} interpreted");
    }
    let message = err(&db, "out_of_range", &[]).to_string();
    assert!(message.contains("out of range"), "{message}");
    assert!(interpreted("out_of_range", &[]).unwrap_err().to_string().contains("out of range"));
}

/// An `update` that sets every non-key column from variables read nowhere else (a replay plan of
/// an after-image is one) is compiled to build the new row by moving them, as an insert does,
/// and replace the old row without reading it. It must behave as any update: `found` says
/// whether the key had a row, a missing or null key changes nothing, a value its column does not
/// admit fails the call, and columns land in their places whatever the order of the `set`.
/// Run compiled and by the reference interpreter, which must agree.
#[test]
fn an_update_of_every_non_key_column_from_variables_replaces_the_row() {
    let db = db("
    procedure reset(id int, o text, b float) {
        update account set balance = b, owner = o where id = id;
        return found;
    }");
    ok(&db, "open", &[int(1), text("ann"), float(10.0)]);
    let registry = db.procedures();
    let interpreted = |args: &[ParamValue]| {
        let ir = std::sync::Arc::clone(registry.get(registry.id_of("reset").unwrap()).unwrap().ir());
        db.worker().run(1, |tx| lazarus::proc::interp::run(&ir, tx, args)).map(|(v, _)| v)
    };
    let row = |id: i64| ok(&db, "balance_of", &[int(id)]);
    let null = || ParamValue::Scalar(Value::Null);
    let present = |owner: &str, balance: f64| vec![Value::Bool(true), Value::Float(balance), Value::text(owner)];
    let absent = vec![Value::Bool(false), Value::Null, Value::Null];
    for (compiled, round) in [(true, 0.0), (false, 100.0)] {
        let run = |args: &[ParamValue]| if compiled { call(&db, "reset", args) } else { interpreted(args) };
        let how = if compiled { "compiled" } else { "interpreted" };
        assert_eq!(run(&[int(1), text("bob"), float(20.0 + round)]).unwrap(), vec![Value::Bool(true)], "{how}");
        assert_eq!(row(1), present("bob", 20.0 + round), "{how}");
        // A nullable column takes a null.
        assert_eq!(run(&[int(1), null(), float(30.0 + round)]).unwrap(), vec![Value::Bool(true)], "{how}");
        assert_eq!(ok(&db, "balance_of", &[int(1)])[1], Value::Float(30.0 + round), "{how}");
        assert_eq!(ok(&db, "balance_of", &[int(1)])[2], Value::Null, "{how}");
        // No row, or a null key: nothing changes, nothing is created.
        assert_eq!(run(&[int(2), text("cy"), float(1.0)]).unwrap(), vec![Value::Bool(false)], "{how}");
        assert_eq!(row(2), absent, "{how}");
        assert_eq!(run(&[null(), text("cy"), float(1.0)]).unwrap(), vec![Value::Bool(false)], "{how}");
        // A null in the not-null balance is the engine's schema error, and the row stays.
        assert!(matches!(run(&[int(1), text("dan"), null()]), Err(TxnError::Schema(_))), "{how}");
        assert_eq!(ok(&db, "balance_of", &[int(1)])[1], Value::Float(30.0 + round), "{how}");
    }
}

/// An `update` that sets some columns has its new row checked at those columns alone
/// (`Transaction::update_columns_with`): whether its `set`s read the old row or not, and whether
/// the key's row is the transaction's own write or a stored one, a value its column does not
/// admit still fails the call with the engine's schema error and leaves the row as it was, and a
/// nullable column still takes a null.
#[test]
fn a_partial_update_checks_the_columns_it_sets() {
    let db = db("
    procedure add_to(id int, x float) {
        update account set balance = balance + x where id = id;
        return found;
    }
    procedure set_balance(id int, b float) {
        update account set balance = b where id = id;
        return found;
    }
    procedure set_owner(id int, o text) {
        update account set owner = o where id = id;
        return found;
    }
    procedure set_then_add(id int, b float, x float) {
        update account set balance = b where id = id;
        update account set balance = balance + x where id = id;
        return found;
    }");
    ok(&db, "open", &[int(1), text("ann"), float(10.0)]);
    let null = || ParamValue::Scalar(Value::Null);
    let balance = || ok(&db, "balance_of", &[int(1)]);
    assert_eq!(ok(&db, "add_to", &[int(1), float(5.0)]), vec![Value::Bool(true)]);
    assert_eq!(ok(&db, "set_then_add", &[int(1), float(20.0), float(1.0)]), vec![Value::Bool(true)]);
    assert_eq!(balance()[1], Value::Float(21.0));
    for (name, args) in [
        ("add_to", vec![int(1), null()]),
        ("set_balance", vec![int(1), null()]),
        ("set_then_add", vec![int(1), float(30.0), null()]),
        ("set_then_add", vec![int(1), null(), float(1.0)]),
    ] {
        let error = call(&db, name, &args).expect_err(name);
        assert!(matches!(error, TxnError::Schema(_)), "{name}: {error}");
        assert!(error.to_string().contains("balance"), "{name}: {error}");
        assert_eq!(balance()[1], Value::Float(21.0), "{name} left the row");
    }
    assert_eq!(ok(&db, "set_owner", &[int(1), null()]), vec![Value::Bool(true)]);
    assert_eq!(balance(), vec![Value::Bool(true), Value::Float(21.0), Value::Null]);
    assert_eq!(ok(&db, "add_to", &[int(2), float(1.0)]), vec![Value::Bool(false)]);
}

/// An `if` / `else if` chain comparing one int variable with int constants is compiled to a
/// table of its arms (`proc::compile::switch`). Compiled and interpreted, every value picks the
/// same arm: each constant its own, anything else (and null) the final `else` or nothing;
/// constants far apart, on either side of `=`, a repeated constant (the first arm wins), and a
/// chain broken by another variable's test.
#[test]
fn an_if_chain_on_one_int_variable_picks_the_arm_the_ifs_pick() {
    let db = db("
    procedure pick(d int) {
        let out = 0;
        if d = 1 { out = 10; } else if d = 2 { out = 20; } else if 3 = d { out = 30; }
        else if d = 5 { out = 50; } else { out = -1; }
        return out;
    }
    procedure pick_sparse(d int) {
        let out = 0;
        if d = -1000 { out = 1; } else if d = 0 { out = 2; } else if d = 1000000 { out = 3; }
        else if d = 9223372036854775807 { out = 4; }
        return out;
    }
    procedure pick_repeated(d int) {
        let out = 0;
        if d = 1 { out = 1; } else if d = 2 { out = 2; } else if d = 1 { out = 3; } else { out = 4; }
        return out;
    }
    procedure pick_broken(d int, e int) {
        let out = 0;
        if d = 1 { out = 1; } else if d = 2 { out = 2; } else if e = 3 { out = 3; }
        else if d = 4 { out = 4; } else if d = 5 { out = 5; } else if d = 6 { out = 6; }
        return out;
    }");
    let registry = db.procedures();
    let interpreted = |name: &str, args: &[ParamValue]| {
        let ir = std::sync::Arc::clone(registry.get(registry.id_of(name).unwrap()).unwrap().ir());
        db.worker().run(1, |tx| lazarus::proc::interp::run(&ir, tx, args)).map(|(v, _)| v).unwrap()
    };
    let null = ParamValue::Scalar(Value::Null);
    let mut values: Vec<ParamValue> =
        [-1001, -1000, -1, 0, 1, 2, 3, 4, 5, 6, 7, 999_999, 1_000_000, i64::MAX, i64::MIN]
            .into_iter()
            .map(int)
            .collect();
    values.push(null.clone());
    for d in &values {
        for (name, args) in [
            ("pick", vec![d.clone()]),
            ("pick_sparse", vec![d.clone()]),
            ("pick_repeated", vec![d.clone()]),
            ("pick_broken", vec![d.clone(), int(3)]),
            ("pick_broken", vec![d.clone(), null.clone()]),
        ] {
            assert_eq!(ok(&db, name, &args), interpreted(name, &args), "{name}({args:?})");
        }
    }
    let one = |name: &str, d: ParamValue| ok(&db, name, &[d]);
    assert_eq!(one("pick", int(3)), vec![Value::Int(30)]);
    assert_eq!(one("pick", int(4)), vec![Value::Int(-1)]);
    assert_eq!(one("pick", null.clone()), vec![Value::Int(-1)]);
    assert_eq!(one("pick_sparse", int(i64::MAX)), vec![Value::Int(4)]);
    assert_eq!(one("pick_sparse", int(1)), vec![Value::Int(0)]);
    assert_eq!(one("pick_repeated", int(1)), vec![Value::Int(1)]);
    assert_eq!(ok(&db, "pick_broken", &[int(5), int(3)]), vec![Value::Int(3)]);
    assert_eq!(ok(&db, "pick_broken", &[int(5), int(0)]), vec![Value::Int(5)]);
}

/// An update's `column op variable` and `column op constant`, and `variable op variable`, read
/// their operands where they lie (`proc::compile::expr`): for every operator, order matters
/// (`qty - x`, not `x - qty`), a null column or variable makes null, and a division by zero is the
/// interpreter's error. Run compiled and by the reference interpreter, which must agree.
#[test]
fn column_and_variable_operands_keep_their_order_and_nulls() {
    let ops = ["+", "-", "*", "/", "%", "<", ">="];
    let procs: String = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let set = |e: &str| if matches!(*op, "<" | ">=") { format!("int({e})") } else { e.to_string() };
            format!(
                "procedure col_var{i}(n int, x int) {{ update line set qty = {} where w = 1 and o = 1 and n = n; return found; }}
                procedure col_const{i}(n int) {{ update line set qty = {} where w = 1 and o = 1 and n = n; return found; }}
                procedure var_var{i}(x int, y int) {{ return {}; }}\n",
                set(&format!("qty {op} x")),
                set(&format!("qty {op} 7")),
                set(&format!("x {op} y")),
            )
        })
        .collect();
    let db = db(&format!(
        "{procs}
        procedure get_line(n int) {{ select qty into q from line where w = 1 and o = 1 and n = n; return found, q; }}
        procedure set_qty(n int, q int) {{ update line set qty = q where w = 1 and o = 1 and n = n; }}"
    ));
    ok(&db, "add_line", &[int(1), int(1), int(1), int(0)]);
    let registry = db.procedures();
    let interpreted = |name: &str, args: &[ParamValue]| {
        let ir = std::sync::Arc::clone(registry.get(registry.id_of(name).unwrap()).unwrap().ir());
        db.worker().run(1, |tx| lazarus::proc::interp::run(&ir, tx, args)).map(|(v, _)| v)
    };
    let qty = |n: i64| ok(&db, "get_line", &[int(n)]);
    let null = ParamValue::Scalar(Value::Null);
    let reset = |n: i64, q: Option<i64>| {
        ok(&db, "set_qty", &[int(n), q.map_or(null.clone(), int)]);
    };
    for (i, op) in ops.iter().enumerate() {
        for (q, x) in [
            (Some(50), Some(3)),
            (Some(3), Some(50)),
            (Some(-7), Some(2)),
            (None, Some(3)),
            (Some(9), None),
            (Some(9), Some(0)),
        ] {
            let x = x.map_or(null.clone(), int);
            for (name, args) in
                [(format!("col_var{i}"), vec![int(1), x.clone()]), (format!("col_const{i}"), vec![int(1)])]
            {
                reset(1, q);
                let compiled = call(&db, &name, &args).map(|_| qty(1));
                reset(1, q);
                let reference = interpreted(&name, &args).map(|_| qty(1));
                match (&compiled, &reference) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{name} {op} q={q:?} {args:?}"),
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name} {op}"),
                    _ => panic!("{name} {op} q={q:?} {args:?}: {compiled:?} against {reference:?}"),
                }
            }
            let (y, name) = (q.map_or(null.clone(), int), format!("var_var{i}"));
            let compiled = call(&db, &name, &[x.clone(), y.clone()]).map_err(|e| e.to_string());
            let reference = interpreted(&name, &[x.clone(), y.clone()]).map_err(|e| e.to_string());
            assert_eq!(compiled, reference, "{name} {op} {x:?} {y:?}");
        }
    }
    reset(1, Some(50));
    ok(&db, "col_var1", &[int(1), int(3)]);
    assert_eq!(qty(1)[1], Value::Int(47), "qty - x, not x - qty");
}

/// Ints and comparisons of ints nested in operators run as typed closures (`proc::compile::typed`):
/// the same values, nulls and first errors as the reference interpreter, with an updated row's
/// column inside (TPC-C's stock update), both operands failing (the left one's error wins), and
/// a variable that holds null.
#[test]
fn nested_int_expressions_give_the_interpreters_values_nulls_and_first_error() {
    let db = db("
        procedure stock(n int, x int) {
            update line set qty = qty - x + 91 * int(qty < x + 10) where w = 1 and o = 1 and n = n;
            select qty into q from line where w = 1 and o = 1 and n = n;
            return found, q;
        }
        procedure both_fail(x int, y int) { return (x + 9223372036854775807) * (1 / y); }
        procedure nested(x int, y int) { return abs(x - y) * -(y + 1), int(x * 2 < y - 1) + 1, (x % y) >= (y - x); }
        procedure set_qty(n int, q int) { update line set qty = q where w = 1 and o = 1 and n = n; }");
    ok(&db, "add_line", &[int(1), int(1), int(1), int(0)]);
    let registry = db.procedures();
    let interpreted = |name: &str, args: &[ParamValue]| {
        let ir = std::sync::Arc::clone(registry.get(registry.id_of(name).unwrap()).unwrap().ir());
        db.worker().run(1, |tx| lazarus::proc::interp::run(&ir, tx, args)).map(|(v, _)| v).map_err(|e| e.to_string())
    };
    let null = ParamValue::Scalar(Value::Null);
    let values = [Some(0), Some(1), Some(-3), Some(12), Some(i64::MIN), Some(i64::MAX), None];
    for x in values {
        for y in values {
            let (x, y) = (x.map_or(null.clone(), int), y.map_or(null.clone(), int));
            for name in ["both_fail", "nested"] {
                let args = [x.clone(), y.clone()];
                let compiled = call(&db, name, &args).map_err(|e| e.to_string());
                assert_eq!(compiled, interpreted(name, &args), "{name}({x:?}, {y:?})");
            }
        }
    }
    // The update: each starting qty, each x; the row read back after each run.
    let reset = |q: &ParamValue| ok(&db, "set_qty", &[int(1), q.clone()]);
    for q in values {
        for x in values {
            let (q, args) = (q.map_or(null.clone(), int), [int(1), x.map_or(null.clone(), int)]);
            reset(&q);
            let compiled = call(&db, "stock", &args).map_err(|e| e.to_string());
            reset(&q);
            assert_eq!(compiled, interpreted("stock", &args), "stock with qty {q:?}, {args:?}");
        }
    }
    let err = call(&db, "both_fail", &[int(1), int(0)]).unwrap_err().to_string();
    assert!(err.contains("integer overflow"), "the left operand's error comes first: {err}");
}

/// A key whose parts are typed int expressions is evaluated as ints and encoded from them
/// (`proc::compile::typed::IntKey`, `Storage::get_row_ints`): the same rows, `found`, nulls and
/// first errors as the reference interpreter, for a `select`, an `update` that reads its row and
/// one that does not (`Storage::update_row_in_place_ints`), with parts that are variables,
/// constants, operators, a null and an overflow.
#[test]
fn keys_of_int_expressions_read_and_update_the_interpreters_rows() {
    let db = db("
        procedure key_get(w int, d int) {
            select qty into q from line where w = w and o = d * 2 and n = abs(d) - 1;
            return found, q;
        }
        procedure key_update(w int, d int) {
            update line set qty = qty + d where w = w + 0 and o = d * 2 and n = abs(d) - 1;
            let updated = found;
            select qty into q from line where w = w and o = d * 2 and n = abs(d) - 1;
            return updated, found, q;
        }
        procedure key_set(w int, d int) {
            update line set qty = d where w = w + 0 and o = d * 2 and n = abs(d) - 1;
            let updated = found;
            select qty into q from line where w = w and o = d * 2 and n = abs(d) - 1;
            return updated, found, q;
        }
        procedure set_qty(w int, o int, n int, q int) { update line set qty = q where w = w and o = o and n = n; }");
    for (o, n) in [(2, 0), (4, 1), (-4, 1)] {
        ok(&db, "add_line", &[int(1), int(o), int(n), int(10 * o)]);
    }
    let registry = db.procedures();
    let interpreted = |name: &str, args: &[ParamValue]| {
        let ir = std::sync::Arc::clone(registry.get(registry.id_of(name).unwrap()).unwrap().ir());
        db.worker().run(1, |tx| lazarus::proc::interp::run(&ir, tx, args)).map(|(v, _)| v).map_err(|e| e.to_string())
    };
    let reset = || {
        for o in [2, 4, -4] {
            ok(&db, "set_qty", &[int(1), int(o), int(o.abs() / 2 - 1), int(10 * o)]);
        }
    };
    let null = ParamValue::Scalar(Value::Null);
    let ws = [Some(1), Some(2), None];
    let ds = [Some(1), Some(2), Some(-2), Some(3), Some(i64::MAX), Some(i64::MIN), None];
    let mut found = 0;
    for w in ws {
        for d in ds {
            let args = [w.map_or(null.clone(), int), d.map_or(null.clone(), int)];
            for name in ["key_get", "key_update", "key_set"] {
                reset();
                let compiled = call(&db, name, &args).map_err(|e| e.to_string());
                let after_compiled = call(&db, "key_get", &args).map_err(|e| e.to_string());
                reset();
                assert_eq!(compiled, interpreted(name, &args), "{name}({args:?})");
                let after_interpreted = call(&db, "key_get", &args).map_err(|e| e.to_string());
                assert_eq!(after_compiled, after_interpreted, "{name}({args:?}): the row after");
                found += usize::from(compiled.as_ref().is_ok_and(|v| v[0] == Value::Bool(true)));
            }
        }
    }
    // Rows were found and updated (w = 1, d = 1, 2, -2), and the overflows are errors.
    assert_eq!(found, 9, "three keys found by each procedure");
    assert!(call(&db, "key_get", &[int(1), int(i64::MAX)]).unwrap_err().to_string().contains("integer overflow"));
}

/// An insert whose key columns hold ints hands the storage its key as ints
/// (`Storage::insert_row_with_key_ints`), with the values in any column order: the same
/// results, duplicate-key and null-key errors, and rows as the reference interpreter, whose
/// inserts read the key back from the row.
#[test]
fn inserts_keyed_by_ints_store_what_the_interpreter_stores() {
    let extra = "
        procedure key_insert(w int, o int, n int) {
            insert into line values (w, o * 2, n + 1, o);
            select qty into q from line where w = w and o = o * 2 and n = n + 1;
            return found, q;
        }
        procedure key_get(w int, o int, n int) {
            select qty into q from line where w = w and o = o and n = n;
            return found, q;
        }";
    let (compiled_db, interpreted_db) = (db(extra), db(extra));
    let registry = interpreted_db.procedures();
    let interpreted = |name: &str, args: &[ParamValue]| {
        let ir = std::sync::Arc::clone(registry.get(registry.id_of(name).unwrap()).unwrap().ir());
        let mut w = interpreted_db.worker();
        w.run(1, |tx| lazarus::proc::interp::run(&ir, tx, args)).map(|(v, _)| v).map_err(|e| e.to_string())
    };
    let null = ParamValue::Scalar(Value::Null);
    let calls: Vec<(&str, Vec<ParamValue>)> = vec![
        ("key_insert", vec![int(1), int(3), int(0)]),
        ("key_insert", vec![int(1), int(3), int(0)]),
        ("key_insert", vec![int(1), int(-3), int(4)]),
        ("key_insert", vec![null.clone(), int(3), int(0)]),
        ("key_insert", vec![int(1), int(i64::MAX), int(0)]),
        ("add_line", vec![int(2), int(6), int(1), int(7)]),
        ("add_line", vec![int(2), int(6), int(1), int(8)]),
        ("add_line_partial", vec![int(3), int(5), int(4)]),
        ("add_line_partial", vec![int(3), int(5), int(4)]),
        ("add_line_partial", vec![int(3), null.clone(), int(4)]),
    ];
    let mut inserted = 0;
    for (name, args) in &calls {
        let compiled = call(&compiled_db, name, args).map_err(|e| e.to_string());
        assert_eq!(compiled, interpreted(name, args), "{name}({args:?})");
        inserted += usize::from(compiled.is_ok());
    }
    assert_eq!(inserted, 4, "one insert of each new key succeeds");
    for key in [[1, 6, 1], [1, -6, 5], [2, 6, 1], [3, 5, 4], [1, 3, 0]] {
        let args: Vec<ParamValue> = key.iter().map(|&v| int(v)).collect();
        let stored = call(&compiled_db, "key_get", &args).map_err(|e| e.to_string());
        assert_eq!(stored, interpreted("key_get", &args), "the row under {key:?}");
    }
    assert_eq!(ok(&compiled_db, "key_get", &[int(2), int(6), int(1)]), [Value::Bool(true), Value::Int(7)]);
}
