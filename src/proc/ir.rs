//! The IR: a checked procedure with every name resolved and every expression typed.
//!
//! The IR is built for two consumers: the closure compiler ([`super::compile`]) and the reference
//! interpreter ([`super::interp`]) execute it; PACMAN's static analysis reads it. For the analysis
//! each [`Stmt`] carries
//!
//! - a stable [`StmtId`] (pre-order position in the procedure, so ids follow program order),
//! - [`Stmt::defs`] and [`Stmt::uses`]: the variables the statement itself defines and reads
//!   (for `if`/`for`, only its header: the condition, bounds or scan; nested statements have their
//!   own), from which define-use flow dependencies follow,
//! - its nested blocks ([`Stmt::children`]), from which control dependencies follow (a nested
//!   statement is control-dependent on its `if`/`for`; a statement after one whose body may
//!   `return` or `abort` ([`Stmt::may_exit`]) is control-dependent on it too),
//! - [`Stmt::db_op`]: the database operation, with its table, whether it reads or writes
//!   ([`Access`]) and its key expressions ([`KeyShape`]), from which data dependencies (same table,
//!   at least one write) follow.
//!
//! The implicit `found` variable is an ordinary [`VarId`] that every `select`, `update`, `delete`
//! and `for ... in select` defines, so `if not found` is flow-dependent on the operation before it.
//! Each column of a `for r in select` row is its own variable (`r.col`) defined by the scan.

use crate::storage::{Direction, Value};
use std::fmt;

/// A variable's index in [`Procedure::vars`]. Dense, starting at 0; parameters come first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

impl VarId {
    /// The index as a `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A statement's id: its pre-order position in the procedure (0 is the first statement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StmtId(pub u32);

/// A scalar static type. `Null` is the type of the literal `null`, which fits every type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// 64-bit integer.
    Int,
    /// 64-bit float.
    Float,
    /// Text.
    Text,
    /// Bytes.
    Bytes,
    /// Boolean (not storable).
    Bool,
    /// The literal `null`.
    Null,
    /// Only inside the checker, after an error (never in a checked module).
    Error,
}

impl Ty {
    /// The type's name in the language.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Int => "int",
            Ty::Float => "float",
            Ty::Text => "text",
            Ty::Bytes => "bytes",
            Ty::Bool => "bool",
            Ty::Null => "null",
            Ty::Error => "<error>",
        }
    }

    /// The column type with this name.
    pub fn from_column(ty: crate::storage::ColumnType) -> Ty {
        use crate::storage::ColumnType as C;
        match ty {
            C::Int => Ty::Int,
            C::Float => Ty::Float,
            C::Text => Ty::Text,
            C::Bytes => Ty::Bytes,
            C::Bool => Ty::Bool,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of variable a [`Var`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VarKind {
    /// A procedure parameter (read-only).
    Param,
    /// A `let` or `select ... into` variable.
    Local,
    /// The variable of `for i in a .. b` or `for x in array` (read-only).
    LoopVar,
    /// Column `column` (a table position) of the row variable of a `for ... in select`.
    RowColumn {
        /// The table position of the column.
        column: usize,
    },
    /// The implicit `found`.
    Found,
}

/// A variable of a procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Var {
    /// Its name (`r.col` for a row column).
    pub name: String,
    /// Its scalar type (the element type for an array).
    pub ty: Ty,
    /// Whether it is an array (array parameters only).
    pub array: bool,
    /// What kind of variable it is.
    pub kind: VarKind,
}

/// A checked procedure: a parameterized transaction template (PACMAN §3).
#[derive(Clone, Debug)]
pub struct Procedure {
    /// The procedure's name (lower case).
    pub name: String,
    /// The source file it was declared in.
    pub file: String,
    /// The parameters, in order; `vars[0..params]` are their variables.
    pub params: usize,
    /// Every variable: parameters first, then `found`, then the rest in order of declaration.
    pub vars: Vec<Var>,
    /// The implicit `found` variable.
    pub found: VarId,
    /// The body.
    pub body: Vec<Stmt>,
    /// How many statements there are (ids are `0..stmt_count`).
    pub stmt_count: u32,
    /// Where the procedure is declared (line, column).
    pub line: u32,
    /// Column of the declaration.
    pub col: u32,
}

impl Procedure {
    /// The parameters' variables.
    pub fn param_vars(&self) -> &[Var] {
        &self.vars[..self.params]
    }

    /// Visits every statement in program (pre-)order, with its nesting depth.
    pub fn walk<'a>(&'a self, visit: &mut dyn FnMut(&'a Stmt, usize)) {
        fn go<'a>(block: &'a [Stmt], depth: usize, visit: &mut dyn FnMut(&'a Stmt, usize)) {
            for s in block {
                visit(s, depth);
                for child in s.children() {
                    go(child, depth + 1, visit);
                }
            }
        }
        go(&self.body, 0, visit);
    }

    /// Every database operation with the id of its statement, in program order.
    pub fn db_ops(&self) -> Vec<(StmtId, DbOp<'_>)> {
        let mut out = Vec::new();
        self.walk(&mut |s, _| {
            if let Some(op) = s.db_op() {
                out.push((s.id, op));
            }
        });
        out
    }
}

/// A statement with its id, position and the variables it defines and uses.
#[derive(Clone, Debug)]
pub struct Stmt {
    /// Stable id (pre-order position).
    pub id: StmtId,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What it does.
    pub kind: StmtKind,
    /// Variables this statement (its header, for `if`/`for`) assigns.
    pub defs: Vec<VarId>,
    /// Variables this statement (its header, for `if`/`for`) reads.
    pub uses: Vec<VarId>,
}

/// The statements.
#[derive(Clone, Debug)]
pub enum StmtKind {
    /// `let v = e` or `v = e`.
    Assign {
        /// The variable.
        var: VarId,
        /// The value (already of the variable's type).
        value: Expr,
    },
    /// `if cond { then } else { otherwise }`.
    If {
        /// A bool condition; null counts as false.
        cond: Expr,
        /// Runs when `cond` is true.
        then: Vec<Stmt>,
        /// Runs otherwise.
        otherwise: Vec<Stmt>,
    },
    /// `for var in start .. end { body }` (end exclusive, evaluated once).
    ForRange {
        /// The int loop variable.
        var: VarId,
        /// Inclusive start.
        start: Expr,
        /// Exclusive end.
        end: Expr,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `for var in array { body }`.
    ForArray {
        /// The element variable.
        var: VarId,
        /// The array parameter.
        array: VarId,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `for r in select ... { body }`: runs `body` once per row, with the row's columns in
    /// `scan.into`. Sets `found` to whether any row was returned.
    ForScan {
        /// The scan.
        scan: ScanOp,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `select ... into` by the full primary key: `var ← read(tbl, key)`.
    Get(GetOp),
    /// `select ... into` by anything else: the first row of a scan.
    ScanFirst(ScanOp),
    /// `select c into a[] ...`: the column of every row of a scan (up to its limit), in scan
    /// order, as the local array `scan.into[0]`. Sets `found` to whether any row was returned.
    /// What a procedure uses to pick among rows it must first count (TPC-C's customer by last
    /// name: the middle one of the matches), in one scan.
    ScanAll(ScanOp),
    /// `insert`: `write(tbl, key, row)` of a new key.
    Insert(InsertOp),
    /// `update`: read-modify-write of one row by its primary key.
    Update(UpdateOp),
    /// `delete` of one row by its primary key.
    Delete(DeleteOp),
    /// `return e, ...`.
    Return(Vec<Expr>),
    /// `abort e`: ends the transaction with [`crate::txn::TxnError::UserAbort`].
    Abort(Expr),
}

impl StmtKind {
    /// Calls `f` on every expression in a statement's header (not in nested blocks).
    pub fn header_exprs<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        match self {
            StmtKind::Assign { value, .. } => f(value),
            StmtKind::If { cond, .. } => f(cond),
            StmtKind::ForRange { start, end, .. } => {
                f(start);
                f(end);
            }
            StmtKind::ForArray { .. } => {}
            StmtKind::ForScan { scan, .. } | StmtKind::ScanFirst(scan) | StmtKind::ScanAll(scan) => {
                scan.prefix.iter().for_each(&mut *f);
                scan.lower.iter().chain(&scan.upper).for_each(|b| f(&b.value));
                f(&scan.limit);
            }
            StmtKind::Get(g) => g.key.iter().for_each(f),
            StmtKind::Insert(i) => i.values.iter().for_each(f),
            StmtKind::Update(u) => {
                u.key.iter().for_each(&mut *f);
                u.sets.iter().for_each(|(_, e)| f(e));
            }
            StmtKind::Delete(d) => d.key.iter().for_each(f),
            StmtKind::Return(values) => values.iter().for_each(f),
            StmtKind::Abort(e) => f(e),
        }
    }
}

impl Stmt {
    /// The nested blocks (`then` and `otherwise` of an `if`, the body of a `for`).
    pub fn children(&self) -> Vec<&[Stmt]> {
        match &self.kind {
            StmtKind::If { then, otherwise, .. } => vec![then, otherwise],
            StmtKind::ForRange { body, .. } | StmtKind::ForArray { body, .. } | StmtKind::ForScan { body, .. } => {
                vec![body]
            }
            _ => Vec::new(),
        }
    }

    /// Whether running this statement may end the procedure (`return` or `abort`, here or
    /// nested). Runtime errors can end any statement and are not counted.
    pub fn may_exit(&self) -> bool {
        matches!(self.kind, StmtKind::Return(_) | StmtKind::Abort(_))
            || self.children().iter().any(|b| b.iter().any(Stmt::may_exit))
    }

    /// The database operation this statement performs, if any.
    pub fn db_op(&self) -> Option<DbOp<'_>> {
        let (table, access, key) = match &self.kind {
            StmtKind::Get(g) => (&g.table, Access::Read, KeyShape::Point(g.key.iter().collect())),
            StmtKind::ScanFirst(s) | StmtKind::ScanAll(s) | StmtKind::ForScan { scan: s, .. } => {
                (&s.table, Access::Read, s.key_shape())
            }
            StmtKind::Insert(i) => {
                let key = i.table.primary_key.iter().map(|&p| &i.values[p]).collect();
                (&i.table, Access::Write(WriteKind::Insert), KeyShape::Point(key))
            }
            StmtKind::Update(u) => {
                (&u.table, Access::Write(WriteKind::Update), KeyShape::Point(u.key.iter().collect()))
            }
            StmtKind::Delete(d) => {
                (&d.table, Access::Write(WriteKind::Delete), KeyShape::Point(d.key.iter().collect()))
            }
            _ => return None,
        };
        Some(DbOp { table, access, key })
    }
}

/// A table as the IR names it: its name and primary-key positions. The compiler resolves the name
/// to a table id once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRef {
    /// The table's name (lower case).
    pub name: String,
    /// Positions of the primary-key columns, in key order.
    pub primary_key: Vec<usize>,
    /// Number of columns.
    pub columns: usize,
}

/// Whether an operation reads or writes (PACMAN's `read(tbl, key)` / `write(tbl, key, val)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A point read or a range scan.
    Read,
    /// A write; insert and delete are special writes.
    Write(WriteKind),
}

/// The kinds of write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// A new row.
    Insert,
    /// A read-modify-write of an existing row.
    Update,
    /// Removal of a row.
    Delete,
}

/// Which rows an operation touches, as expressions over the procedure's variables.
#[derive(Clone, Debug)]
pub enum KeyShape<'a> {
    /// Exactly the row with this primary key (values in key order).
    Point(Vec<&'a Expr>),
    /// A range of the primary key (`index: None`) or a secondary index: equality on `prefix`,
    /// then optional bounds on the next column.
    Range {
        /// The index scanned.
        index: Option<usize>,
        /// Values of the leading index columns.
        prefix: Vec<&'a Expr>,
        /// Lower bound on the next column.
        lower: Option<&'a RangeBound>,
        /// Upper bound on the next column.
        upper: Option<&'a RangeBound>,
    },
}

/// One database operation, as PACMAN's analysis sees it.
#[derive(Clone, Debug)]
pub struct DbOp<'a> {
    /// The table.
    pub table: &'a TableRef,
    /// Read or write.
    pub access: Access,
    /// The key expressions.
    pub key: KeyShape<'a>,
}

impl DbOp<'_> {
    /// PACMAN's data dependency: same table and at least one write.
    pub fn data_dependent(&self, other: &DbOp<'_>) -> bool {
        self.table.name == other.table.name
            && (matches!(self.access, Access::Write(_)) || matches!(other.access, Access::Write(_)))
    }
}

/// A point read by the full primary key.
#[derive(Clone, Debug)]
pub struct GetOp {
    /// The table.
    pub table: TableRef,
    /// Primary-key values in key order.
    pub key: Vec<Expr>,
    /// Table positions of the columns read.
    pub columns: Vec<usize>,
    /// The variables receiving them (null when no row is found).
    pub into: Vec<VarId>,
}

/// A bound of a range scan.
#[derive(Clone, Debug)]
pub struct RangeBound {
    /// The bound's value.
    pub value: Expr,
    /// Whether the bound itself is in the range.
    pub inclusive: bool,
}

/// A bounded range scan of the primary key or a secondary index.
#[derive(Clone, Debug)]
pub struct ScanOp {
    /// The table.
    pub table: TableRef,
    /// `None` for the primary key, else the secondary index position.
    pub index: Option<usize>,
    /// Values of the leading index columns (equality).
    pub prefix: Vec<Expr>,
    /// Lower bound on the next index column.
    pub lower: Option<RangeBound>,
    /// Upper bound on the next index column.
    pub upper: Option<RangeBound>,
    /// Order of the rows.
    pub direction: Direction,
    /// Most rows (an int expression; `ScanFirst` scans at most one row whatever it says).
    /// `ScanAll`, like `ForScan`, reads up to this many (its `limit` clause is required).
    pub limit: Expr,
    /// `select distinct`: of the rows read (at most `limit`), those equal in every selected column
    /// to an earlier one are dropped ([`super::runtime::distinct_rows`]). `for` loops only.
    pub distinct: bool,
    /// Table positions of the columns read.
    pub columns: Vec<usize>,
    /// The variables receiving them.
    pub into: Vec<VarId>,
}

impl ScanOp {
    /// The range this scan reads.
    pub fn key_shape(&self) -> KeyShape<'_> {
        KeyShape::Range {
            index: self.index,
            prefix: self.prefix.iter().collect(),
            lower: self.lower.as_ref(),
            upper: self.upper.as_ref(),
        }
    }
}

/// An insert of a whole row.
#[derive(Clone, Debug)]
pub struct InsertOp {
    /// The table.
    pub table: TableRef,
    /// One value per column, in column order (omitted columns are `null`).
    pub values: Vec<Expr>,
}

/// An update of one row by primary key. The `sets` expressions may read the current row
/// ([`ExprKind::Column`]).
#[derive(Clone, Debug)]
pub struct UpdateOp {
    /// The table.
    pub table: TableRef,
    /// Primary-key values in key order.
    pub key: Vec<Expr>,
    /// (column position, new value), evaluated against the old row.
    pub sets: Vec<(usize, Expr)>,
}

/// A delete of one row by primary key.
#[derive(Clone, Debug)]
pub struct DeleteOp {
    /// The table.
    pub table: TableRef,
    /// Primary-key values in key order.
    pub key: Vec<Expr>,
}

/// A typed expression.
#[derive(Clone, Debug)]
pub struct Expr {
    /// The static type; the value at run time is of this type or null.
    pub ty: Ty,
    /// What it computes.
    pub kind: ExprKind,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// Arithmetic negation (int or float).
    Neg,
    /// Logical not (three-valued).
    Not,
}

/// Binary operators. Operands of arithmetic and comparisons have the same type (the checker
/// inserts int-to-float conversions), or one of them is the literal `null`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
    /// `||`
    Concat,
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `and` (three-valued, short-circuit)
    And,
    /// `or` (three-valued, short-circuit)
    Or,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Concat => "||",
            BinOp::Eq => "=",
            BinOp::Ne => "<>",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

/// Built-in functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// `len(text | bytes)`: characters or bytes. (`len(array)` is [`ExprKind::ArrayLen`].)
    Len,
    /// `abs(n)`.
    Abs,
    /// `min(a, b, ...)`.
    Min,
    /// `max(a, b, ...)`.
    Max,
    /// `int(x)`: float (truncates), text (parses), bool, int.
    ToInt,
    /// `float(x)`: int, text (parses), float.
    ToFloat,
    /// `text(x)`: int, float, bool, text.
    ToText,
    /// `substr(s, start, len)`: 0-based, in characters, clamped to the string.
    Substr,
}

impl Func {
    /// The function's name.
    pub fn name(self) -> &'static str {
        match self {
            Func::Len => "len",
            Func::Abs => "abs",
            Func::Min => "min",
            Func::Max => "max",
            Func::ToInt => "int",
            Func::ToFloat => "float",
            Func::ToText => "text",
            Func::Substr => "substr",
        }
    }
}

/// What an expression computes.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// A constant.
    Const(Value),
    /// A scalar variable.
    Var(VarId),
    /// A column of the row being updated (only inside [`UpdateOp::sets`]).
    Column(usize),
    /// `len(array)`.
    ArrayLen(VarId),
    /// `array[index]` (0-based; out of range is a runtime error; a null index gives null).
    ArrayGet(VarId, Box<Expr>),
    /// A unary operator.
    Unary(UnOp, Box<Expr>),
    /// A binary operator.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `e is null` (`negated`: `is not null`).
    IsNull {
        /// The operand.
        expr: Box<Expr>,
        /// `is not null`.
        negated: bool,
    },
    /// A built-in function.
    Call(Func, Vec<Expr>),
}

impl Expr {
    /// Appends every variable the expression reads (arrays included) to `out`.
    pub fn collect_vars(&self, out: &mut Vec<VarId>) {
        match &self.kind {
            ExprKind::Const(_) | ExprKind::Column(_) => {}
            ExprKind::Var(v) | ExprKind::ArrayLen(v) => out.push(*v),
            ExprKind::ArrayGet(v, i) => {
                out.push(*v);
                i.collect_vars(out);
            }
            ExprKind::Unary(_, e) | ExprKind::IsNull { expr: e, .. } => e.collect_vars(out),
            ExprKind::Binary(_, a, b) => {
                a.collect_vars(out);
                b.collect_vars(out);
            }
            ExprKind::Call(_, args) => args.iter().for_each(|a| a.collect_vars(out)),
        }
    }

    /// Whether the expression reads the current row of an update.
    pub fn reads_row(&self) -> bool {
        match &self.kind {
            ExprKind::Column(_) => true,
            ExprKind::Const(_) | ExprKind::Var(_) | ExprKind::ArrayLen(_) => false,
            ExprKind::ArrayGet(_, e) | ExprKind::Unary(_, e) | ExprKind::IsNull { expr: e, .. } => e.reads_row(),
            ExprKind::Binary(_, a, b) => a.reads_row() || b.reads_row(),
            ExprKind::Call(_, args) => args.iter().any(Expr::reads_row),
        }
    }
}
