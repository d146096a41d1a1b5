//! Malformed procedure files: every error names the file, line and column and says what was
//! expected. Each case asserts the exact position and a message substring.

use lazarus::proc::{Diagnostic, check_file_report};

const TABLES: &str = "table account (id int not null, owner text, balance float not null, primary key (id));
table line (w int not null, o int not null, n int not null, qty int, primary key (w, o, n));
index by_owner on account (owner);
";

/// The diagnostics of `TABLES` followed by `body` (so the body starts on line 4).
fn diags(body: &str) -> Vec<Diagnostic> {
    check_file_report("bank.proc", &format!("{TABLES}{body}"))
}

/// Asserts that some diagnostic is at `line:col` and contains `message`.
#[track_caller]
fn expect(body: &str, line: u32, col: u32, message: &str) {
    let ds = diags(body);
    let all: Vec<String> = ds.iter().map(|d| d.to_string()).collect();
    assert!(
        ds.iter().any(|d| d.file == "bank.proc" && d.line == line && d.col == col && d.message.contains(message)),
        "wanted bank.proc:{line}:{col}: ...{message}...\ngot:\n{}",
        all.join("\n")
    );
}

#[test]
fn missing_semicolon_names_what_was_found() {
    expect(
        "procedure p() {\n    let x = 1\n    update account set balance = 0 where id = 1;\n}",
        6,
        5,
        "expected ';' after statement, found keyword 'update'",
    );
    let d = diags("procedure p() {\n    let x = 1\n    update account set balance = 0 where id = 1;\n}");
    assert_eq!(d[0].to_string(), "bank.proc:6:5: expected ';' after statement, found keyword 'update'");
}

#[test]
fn unknown_column() {
    expect(
        "procedure p(i int) {\n    select balanse into b from account where id = i;\n}",
        5,
        12,
        "unknown column 'balanse' in table account",
    );
}

#[test]
fn type_mismatch_in_arithmetic() {
    expect("procedure p() {\n    let s = 'a' + 1;\n}", 5, 17, "type mismatch: cannot add text and int");
}

#[test]
fn where_clause_must_name_the_whole_primary_key() {
    expect(
        "procedure p() {\n    update line set qty = 1 where w = 1 and o = 2;\n}",
        5,
        12,
        "where clause must name every primary-key column of line (missing: n)",
    );
}

#[test]
fn unknown_table_index_variable_and_function() {
    expect("procedure p() {\n    delete from acount where id = 1;\n}", 5, 17, "unknown table 'acount'");
    expect(
        "procedure p() {\n    for r in select id from account index by_name where owner = 'a' limit 3 { }\n}",
        5,
        43,
        "unknown index 'by_name' on table account",
    );
    expect("procedure p() {\n    return y + 1;\n}", 5, 12, "unknown variable 'y'");
    expect("procedure p() {\n    return sqrt(2);\n}", 5, 12, "unknown function 'sqrt'");
    expect("procedure p() {\n    return substr('abc', 1);\n}", 5, 12, "function substr takes 3 argument(s), got 2");
}

#[test]
fn duplicates_are_errors() {
    expect("table account (id int, primary key (id));", 4, 7, "table 'account' is already declared in this file");
    expect("procedure p() { }\nprocedure p() { }", 5, 11, "procedure 'p' is already declared at line 4");
    expect(
        "procedure p(a int) {\n    let b = 1;\n    let b = 2;\n}",
        6,
        9,
        "variable 'b' is already declared (line 5, column 9)",
    );
    expect("procedure p(a int, a text) { }", 4, 20, "duplicate parameter 'a'");
}

#[test]
fn assignments_to_parameters_loop_variables_and_found() {
    expect("procedure p(a int) {\n    a = 2;\n}", 5, 5, "cannot assign to parameter 'a'");
    expect("procedure p() {\n    for i in 0 .. 3 { i = 1; }\n}", 5, 23, "cannot assign to loop variable 'i'");
    expect("procedure p() {\n    found = true;\n}", 5, 5, "cannot assign to 'found'");
    expect(
        "procedure p() {\n    let x = 1;\n    x = 2.5;\n}",
        6,
        9,
        "type mismatch: cannot assign float to int variable 'x' (use int())",
    );
}

#[test]
fn row_variable_outside_its_loop() {
    expect(
        "procedure p() {\n    for r in select id from account where id > 0 limit 5 { }\n    return r.id;\n}",
        6,
        12,
        "row variable 'r' is used outside its loop",
    );
    expect(
        "procedure p() {\n    for r in select id from account where id > 0 limit 5 { return r.owner; }\n}",
        5,
        69,
        "column 'owner' is not selected by the loop's select",
    );
}

#[test]
fn column_types_are_enforced() {
    expect(
        "procedure p() {\n    insert into line values (1, 2, 3.5, 4);\n}",
        5,
        36,
        "type mismatch: column n of line is int, found float",
    );
    expect(
        "procedure p() {\n    insert into account (id) values (1);\n}",
        5,
        17,
        "column balance of account is not null and needs a value",
    );
    expect(
        "procedure p() {\n    update account set id = 2 where id = 1;\n}",
        5,
        24,
        "cannot update primary-key column id of account",
    );
    expect(
        "table t (id int, flag bool, primary key (id));",
        4,
        23,
        "column 'flag' has type bool, which a table cannot store",
    );
}

#[test]
fn scans_need_limits_and_index_shaped_where_clauses() {
    expect("procedure p() {\n    for r in select n from line where w = 1 { }\n}", 5, 28, "a 'for' scan needs a limit");
    expect(
        "procedure p() {\n    for r in select n from line where w = 1 and n > 3 limit 5 { }\n}",
        5,
        28,
        "a range condition on n is not allowed: after the '=' prefix of the primary key of line, only o may have a range",
    );
    expect(
        "procedure p() {\n    for r in select n from line where w = 1 and o <> 3 limit 5 { }\n}",
        5,
        49,
        "'<>' cannot be used in a where clause",
    );
    expect(
        "procedure p() {\n    for r in select n from line where w = 1 order by n limit 5 { }\n}",
        5,
        54,
        "order by n does not follow the primary key of line; order by o (asc or desc) instead",
    );
    expect(
        "procedure p() {\n    for r in select n from line where w = 1 limit 100000 { }\n}",
        5,
        51,
        "limit must be between 0 and 65536",
    );
}

#[test]
fn lexical_errors_and_limits() {
    expect("procedure p() {\n    abort 'oops;\n}", 5, 11, "unterminated string literal");
    let long = "x".repeat(65);
    expect(
        &format!("procedure p() {{\n    let {long} = 1;\n}}"),
        5,
        9,
        "identifier is 65 characters long; the limit is 64",
    );
    let deep = format!("procedure p() {{\n    return {}1{};\n}}", "(".repeat(70), ")".repeat(70));
    let d = diags(&deep);
    assert!(d.iter().any(|d| d.line == 5 && d.message.contains("expression nests more than 64 deep")), "{d:?}");
    let blocks = format!("procedure p() {{\n{}{}\n}}", "if true { ".repeat(40), "}".repeat(40));
    let d = diags(&blocks);
    assert!(d.iter().any(|d| d.message.contains("blocks nest more than 32 deep")), "{d:?}");
}

#[test]
fn other_type_errors() {
    expect("procedure p() {\n    let x = null;\n}", 5, 13, "cannot infer the type of 'x' from null");
    expect("procedure p() {\n    if 1 { }\n}", 5, 8, "type mismatch: an if condition must be bool, found int");
    expect("procedure p() {\n    abort 42;\n}", 5, 11, "type mismatch: abort needs a text message, found int");
    expect(
        "procedure p() {\n    select * into a from account where id = 1;\n}",
        5,
        26,
        "select ... into needs a column list, not '*'",
    );
    expect(
        "procedure p(xs int[]) {\n    return xs + 1;\n}",
        5,
        12,
        "array 'xs' can only be indexed, looped over or passed to len()",
    );
    expect("procedure p() {\n    return 1 < 'a';\n}", 5, 14, "type mismatch: cannot compare int and text");
}

#[test]
fn several_errors_are_reported_at_once() {
    let d = diags(
        "procedure a() {\n    return 'x' * 2;\n}\nprocedure b() {\n    let y = nope;\n    delete from line where w = 1;\n}",
    );
    let at: Vec<(u32, u32)> = d.iter().map(|d| (d.line, d.col)).collect();
    assert_eq!(at, vec![(5, 16), (8, 13), (9, 17)], "{d:?}");
    // Parse errors recover at the next statement.
    let d = diags("procedure a() {\n    let = 1;\n    let x = ;\n    return x;\n}");
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0].to_string(), "bank.proc:5:9: expected a variable name after 'let', found '='");
    assert_eq!(d[1].to_string(), "bank.proc:6:13: expected an expression, found ';'");
}

#[test]
fn valid_file_has_no_diagnostics() {
    let d = diags("procedure ok(id int) {\n    select balance into b from account where id = id;\n    return b;\n}");
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn distinct_only_in_for_loops_and_still_a_column_name() {
    expect(
        "procedure p() {\n    select distinct qty into q from line where w = 1 and o = 2 and n = 3;\n}",
        5,
        37,
        "'distinct' is only allowed in a 'for' loop's select",
    );
    // Where no column list follows it, `distinct` is a column name.
    let ok = "table t (k int not null, distinct int, primary key (k));
procedure p() {
    select distinct into d from t where k = 1;
    for r in select distinct, k from t where k > 0 limit 5 { }
    for r in select distinct distinct from t where k > 0 limit 5 { }
}";
    assert_eq!(check_file_report("d.proc", ok), Vec::new());
}

#[test]
fn array_targets_are_single_local_arrays_of_the_columns_type_with_a_limit() {
    let scan = "from account index by_owner where owner = 'a'";
    expect(
        &format!("procedure p() {{\n    select id into ids[] {scan};\n}}"),
        5,
        31,
        "a select into an array needs a limit",
    );
    expect(
        &format!("procedure p() {{\n    select id, owner into ids[] {scan} limit 5;\n}}"),
        5,
        27,
        "select names 2 column(s) but 'into' names 1 variable(s)",
    );
    expect(
        &format!("procedure p() {{\n    select id into ids[], o {scan} limit 5;\n}}"),
        5,
        27,
        "an array target ('into name[]') must be the only target",
    );
    expect(
        &format!("procedure p() {{\n    let ids = 1;\n    select id into ids[] {scan} limit 5;\n}}"),
        6,
        20,
        "'ids' is not an array; 'into ids[]' needs a local array",
    );
    expect(
        &format!("procedure p(ids int[]) {{\n    select id into ids[] {scan} limit 5;\n}}"),
        5,
        20,
        "'ids' is an array parameter (read-only)",
    );
    expect(
        &format!(
            "procedure p() {{\n    select id into xs[] {scan} limit 5;\n    select owner into xs[] {scan} limit 5;\n}}"
        ),
        6,
        23,
        "type mismatch: column owner is text but array 'xs' is int[]",
    );
    expect(
        &format!("procedure p() {{\n    select id into xs[] {scan} limit 5;\n    xs = 3;\n}}"),
        6,
        5,
        "cannot assign a scalar to array 'xs'",
    );
    expect(
        &format!("procedure p() {{\n    select id into xs[] {scan} limit 5;\n    return xs + 1;\n}}"),
        6,
        12,
        "array 'xs' can only be indexed, looped over or passed to len()",
    );
}
