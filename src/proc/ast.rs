//! The syntax tree the parser builds: names are unresolved and nothing is typed. The checker
//! ([`super::check`]) turns it into the IR ([`super::ir`]).

use super::lexer::Span;

/// A name and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    /// The name, lower case.
    pub text: String,
    /// Where it was written.
    pub span: Span,
}

/// A parsed file.
#[derive(Clone, Debug, Default)]
pub struct File {
    /// Table declarations.
    pub tables: Vec<TableDecl>,
    /// Index declarations.
    pub indexes: Vec<IndexDecl>,
    /// Procedure declarations.
    pub procedures: Vec<ProcDecl>,
}

/// `table name (col type [not null], ..., primary key (a, ...));`
#[derive(Clone, Debug)]
pub struct TableDecl {
    /// The table's name.
    pub name: Name,
    /// Columns in order.
    pub columns: Vec<ColumnDecl>,
    /// Primary-key columns in key order (empty if the clause is missing).
    pub primary_key: Vec<Name>,
}

/// One column of a table declaration.
#[derive(Clone, Debug)]
pub struct ColumnDecl {
    /// The column's name.
    pub name: Name,
    /// Its type's name as written.
    pub ty: Name,
    /// Whether `not null` was absent.
    pub nullable: bool,
}

/// `index name on table (col, ...);`
#[derive(Clone, Debug)]
pub struct IndexDecl {
    /// The index's name.
    pub name: Name,
    /// The table it indexes.
    pub table: Name,
    /// The indexed columns in order.
    pub columns: Vec<Name>,
}

/// A type as written: a scalar type name, optionally followed by `[]`.
#[derive(Clone, Debug)]
pub struct TypeName {
    /// The scalar type's name.
    pub name: Name,
    /// Whether `[]` followed.
    pub array: bool,
}

/// `procedure name(p type, ...) { ... }`
#[derive(Clone, Debug)]
pub struct ProcDecl {
    /// The procedure's name.
    pub name: Name,
    /// Parameters in order.
    pub params: Vec<(Name, TypeName)>,
    /// The body.
    pub body: Vec<Stmt>,
}

/// A statement and where it starts.
#[derive(Clone, Debug)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
    /// Where it starts.
    pub span: Span,
}

/// The statements of the language.
#[derive(Clone, Debug)]
pub enum StmtKind {
    /// `let x [type] = e;`
    Let {
        /// The new variable.
        name: Name,
        /// An optional declared type.
        ty: Option<TypeName>,
        /// Its initial value.
        value: Expr,
    },
    /// `x = e;`
    Assign {
        /// The variable assigned.
        name: Name,
        /// The new value.
        value: Expr,
    },
    /// `if c { ... } [else if ... | else { ... }]`
    If {
        /// The condition.
        cond: Expr,
        /// Runs when the condition is true.
        then: Vec<Stmt>,
        /// Runs otherwise (an `else if` is a nested `if` here).
        otherwise: Vec<Stmt>,
    },
    /// `for i in a .. b { ... }`
    ForRange {
        /// The loop variable.
        var: Name,
        /// Inclusive start.
        start: Expr,
        /// Exclusive end.
        end: Expr,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `for x in arr { ... }`
    ForArray {
        /// The element variable.
        var: Name,
        /// The array parameter.
        array: Name,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `for r in select ... { ... }`
    ForSelect {
        /// The row variable.
        var: Name,
        /// The scan.
        select: Select,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `select a, b into x, y from ...;`, or `select a into x[] from ...;`
    SelectInto {
        /// The query.
        select: Select,
        /// Variables receiving the columns.
        targets: Vec<Name>,
        /// `into x[]`: the one target is a local array receiving the column of every row read.
        into_array: bool,
    },
    /// `insert into t [(cols)] values (...);`
    Insert {
        /// The table.
        table: Name,
        /// The named columns, if a column list was given.
        columns: Option<Vec<Name>>,
        /// The values.
        values: Vec<Expr>,
    },
    /// `update t set c = e, ... where ...;`
    Update {
        /// The table.
        table: Name,
        /// Assignments to columns.
        sets: Vec<(Name, Expr)>,
        /// The where clause.
        conds: Vec<Cond>,
    },
    /// `delete from t where ...;`
    Delete {
        /// The table.
        table: Name,
        /// The where clause.
        conds: Vec<Cond>,
    },
    /// `return e, ...;`
    Return(Vec<Expr>),
    /// `abort e;`
    Abort(Expr),
}

/// The query part shared by `select ... into` and `for ... in select`.
#[derive(Clone, Debug)]
pub struct Select {
    /// `select distinct`: repeated rows (equal in every selected column) are dropped.
    pub distinct: bool,
    /// Selected columns; `None` for `*`.
    pub columns: Option<Vec<Name>>,
    /// The table.
    pub table: Name,
    /// `index name`, if given.
    pub index: Option<Name>,
    /// The where clause's conjuncts.
    pub conds: Vec<Cond>,
    /// `order by col [desc]`: the column and whether descending.
    pub order: Option<(Name, bool)>,
    /// `limit e`.
    pub limit: Option<Expr>,
}

/// One conjunct of a where clause: `column op expr`.
#[derive(Clone, Debug)]
pub struct Cond {
    /// The column (always a column of the table).
    pub column: Name,
    /// The comparison.
    pub op: CmpOp,
    /// The value (an expression over variables and parameters).
    pub value: Expr,
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>` or `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// An expression and where it starts.
#[derive(Clone, Debug)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it starts.
    pub span: Span,
}

/// Binary operators other than comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOp {
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
    /// `and`
    And,
    /// `or`
    Or,
}

/// The expressions of the language.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// A string literal.
    Str(String),
    /// A bytes literal.
    Bytes(Vec<u8>),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// A variable, parameter, `found`, or (in `update ... set`) a column.
    Name(Name),
    /// `r.col`.
    Field(Name, Name),
    /// `a[i]`.
    Index(Box<Expr>, Box<Expr>),
    /// `-e`.
    Neg(Box<Expr>),
    /// `not e`.
    Not(Box<Expr>),
    /// An arithmetic, concatenation or logical operator.
    Binary(ArithOp, Box<Expr>, Box<Expr>),
    /// A comparison.
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    /// `e is [not] null`; the flag is true for `is not null`.
    IsNull(Box<Expr>, bool),
    /// `f(args)`.
    Call(Name, Vec<Expr>),
}
