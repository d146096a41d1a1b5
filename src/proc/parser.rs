//! Recursive-descent parser: tokens to [`super::ast::File`].
//!
//! Every error names what was expected and what was found, at the found token's position. After
//! an error inside a block the parser skips to the next `;` or `}` of that block and goes on, so
//! one run reports several independent mistakes; at the top level it skips to the next `table`,
//! `index` or `procedure`.

use super::ast::*;
use super::lexer::{Span, Tok, Token};
use super::limits::{BLOCK_DEPTH_MAX, EXPR_DEPTH_MAX, PARAMS_MAX};

/// Words that cannot name a table, column, variable or procedure.
const RESERVED: [&str; 28] = [
    "table",
    "index",
    "procedure",
    "select",
    "into",
    "from",
    "where",
    "and",
    "or",
    "not",
    "null",
    "true",
    "false",
    "is",
    "if",
    "else",
    "abort",
    "update",
    "set",
    "insert",
    "values",
    "delete",
    "return",
    "let",
    "for",
    "in",
    "limit",
    "order",
];

/// Whether `word` is reserved.
pub fn is_reserved(word: &str) -> bool {
    RESERVED.contains(&word)
}

/// A syntax error: where, and what was expected.
pub type ParseError = (Span, String);

type PResult<T> = Result<T, ParseError>;

/// Parses a token stream (ending in `Eof`). Returns the file, which is partial when errors were
/// found, and the errors.
pub fn parse(tokens: Vec<Token>) -> (File, Vec<ParseError>) {
    let mut p = Parser { tokens, pos: 0, errors: Vec::new(), block_depth: 0, expr_depth: 0 };
    let file = p.file();
    (file, p.errors)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    errors: Vec<ParseError>,
    block_depth: usize,
    expr_depth: usize,
}

impl Parser {
    // ---- token helpers ----

    fn tok(&self) -> &Tok {
        self.tok_at(0)
    }

    fn tok_at(&self, ahead: usize) -> &Tok {
        let i = (self.pos + ahead).min(self.tokens.len().saturating_sub(1));
        self.tokens.get(i).map_or(&Tok::Eof, |t| &t.tok)
    }

    fn span(&self) -> Span {
        let i = self.pos.min(self.tokens.len().saturating_sub(1));
        self.tokens.get(i).map_or(Span::default(), |t| t.span)
    }

    fn advance(&mut self) {
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.tok(), Tok::Ident(s) if s == kw)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.tok(), Tok::Punct(q) if *q == p)
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        let hit = self.is_kw(kw);
        if hit {
            self.advance();
        }
        hit
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.is_punct(p);
        if hit {
            self.advance();
        }
        hit
    }

    fn found(&self) -> String {
        match self.tok() {
            Tok::Ident(s) if is_reserved(s) => format!("keyword '{s}'"),
            t => t.to_string(),
        }
    }

    fn error<T>(&self, expected: &str) -> PResult<T> {
        Err((self.span(), format!("expected {expected}, found {}", self.found())))
    }

    fn expect_kw(&mut self, kw: &str, context: &str) -> PResult<()> {
        if self.eat_kw(kw) { Ok(()) } else { self.error(&format!("'{kw}' {context}")) }
    }

    fn expect_punct(&mut self, p: &str, context: &str) -> PResult<()> {
        if self.eat_punct(p) { Ok(()) } else { self.error(&format!("'{p}' {context}")) }
    }

    /// An identifier that is not a reserved word.
    fn name(&mut self, what: &str) -> PResult<Name> {
        match self.tok() {
            Tok::Ident(s) if !is_reserved(s) => {
                let name = Name { text: s.clone(), span: self.span() };
                self.advance();
                Ok(name)
            }
            _ => self.error(what),
        }
    }

    /// `name (, name)*` inside parentheses.
    fn name_list(&mut self, what: &str, context: &str) -> PResult<Vec<Name>> {
        self.expect_punct("(", context)?;
        let mut names = vec![self.name(what)?];
        while self.eat_punct(",") {
            names.push(self.name(what)?);
        }
        self.expect_punct(")", &format!("after the {what}s"))?;
        Ok(names)
    }

    // ---- items ----

    fn file(&mut self) -> File {
        let mut file = File::default();
        while *self.tok() != Tok::Eof {
            let result = if self.eat_kw("table") {
                self.table().map(|t| file.tables.push(t))
            } else if self.eat_kw("index") {
                self.index().map(|i| file.indexes.push(i))
            } else if self.eat_kw("procedure") {
                self.procedure().map(|p| file.procedures.push(p))
            } else {
                self.error("'table', 'index' or 'procedure'")
            };
            if let Err(e) = result {
                self.errors.push(e);
                self.skip_to_item();
            }
        }
        file
    }

    /// Skips to the next top-level `table`, `index` or `procedure` outside any braces.
    fn skip_to_item(&mut self) {
        let start = self.pos;
        let mut depth = 0usize;
        while *self.tok() != Tok::Eof {
            if depth == 0 && self.pos > start && ["table", "index", "procedure"].iter().any(|k| self.is_kw(k)) {
                return;
            }
            if self.is_punct("{") {
                depth += 1;
            } else if self.is_punct("}") {
                depth = depth.saturating_sub(1);
            }
            self.advance();
        }
    }

    fn table(&mut self) -> PResult<TableDecl> {
        let name = self.name("a table name")?;
        self.expect_punct("(", "after the table name")?;
        let mut columns = Vec::new();
        let mut primary_key = Vec::new();
        loop {
            if self.eat_kw("primary") {
                if !self.eat_kw("key") {
                    return self.error("'key' after 'primary'");
                }
                primary_key = self.name_list("column name", "after 'primary key'")?;
            } else {
                columns.push(self.column()?);
            }
            if self.eat_punct(")") {
                break;
            }
            self.expect_punct(",", "or ')' after a column")?;
        }
        self.expect_punct(";", "after a table declaration")?;
        Ok(TableDecl { name, columns, primary_key })
    }

    fn column(&mut self) -> PResult<ColumnDecl> {
        let name = self.name("a column name or 'primary key'")?;
        let ty = self.name("a column type")?;
        let mut nullable = true;
        if self.eat_kw("not") {
            self.expect_kw("null", "after 'not'")?;
            nullable = false;
        } else {
            self.eat_kw("null");
        }
        Ok(ColumnDecl { name, ty, nullable })
    }

    fn index(&mut self) -> PResult<IndexDecl> {
        let name = self.name("an index name")?;
        if !self.eat_kw("on") {
            return self.error("'on' after the index name");
        }
        let table = self.name("a table name")?;
        let columns = self.name_list("column name", "after the table name")?;
        self.expect_punct(";", "after an index declaration")?;
        Ok(IndexDecl { name, table, columns })
    }

    fn procedure(&mut self) -> PResult<ProcDecl> {
        let name = self.name("a procedure name")?;
        self.expect_punct("(", "after the procedure name")?;
        let mut params = Vec::new();
        if !self.eat_punct(")") {
            loop {
                if params.len() >= PARAMS_MAX {
                    return Err((self.span(), format!("a procedure has at most {PARAMS_MAX} parameters")));
                }
                let p = self.name("a parameter name")?;
                let ty = self.type_name()?;
                params.push((p, ty));
                if self.eat_punct(")") {
                    break;
                }
                self.expect_punct(",", "or ')' after a parameter")?;
            }
        }
        let body = self.block()?;
        Ok(ProcDecl { name, params, body })
    }

    fn type_name(&mut self) -> PResult<TypeName> {
        let name = self.name("a type")?;
        let array = self.eat_punct("[");
        if array {
            self.expect_punct("]", "after '[' in an array type")?;
        }
        Ok(TypeName { name, array })
    }

    // ---- statements ----

    /// `{ stmt* }`, recovering from errors inside it.
    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.expect_punct("{", "to start a block")?;
        if self.block_depth >= BLOCK_DEPTH_MAX {
            return Err((self.span(), format!("blocks nest more than {BLOCK_DEPTH_MAX} deep")));
        }
        self.block_depth += 1;
        let mut stmts = Vec::new();
        while !self.is_punct("}") {
            if *self.tok() == Tok::Eof {
                self.block_depth -= 1;
                return self.error("'}' to close the block");
            }
            match self.statement() {
                Ok(s) => stmts.push(s),
                Err(e) => {
                    self.errors.push(e);
                    self.skip_statement();
                }
            }
        }
        self.advance();
        self.block_depth -= 1;
        Ok(stmts)
    }

    /// Skips past the next `;` of this block, or up to (not past) its closing `}`.
    fn skip_statement(&mut self) {
        let mut depth = 0usize;
        while *self.tok() != Tok::Eof {
            if self.is_punct("{") {
                depth += 1;
            } else if self.is_punct("}") {
                if depth == 0 {
                    return;
                }
                depth -= 1;
            } else if self.is_punct(";") && depth == 0 {
                self.advance();
                return;
            }
            self.advance();
        }
    }

    fn statement(&mut self) -> PResult<Stmt> {
        let span = self.span();
        self.expr_depth = 0;
        let kind = match self.tok() {
            Tok::Ident(k) => match k.as_str() {
                "let" => self.let_stmt()?,
                "if" => return self.if_stmt(),
                "for" => return self.for_stmt(),
                "select" => self.select_into()?,
                "insert" => self.insert()?,
                "update" => self.update()?,
                "delete" => self.delete()?,
                "return" => self.return_stmt()?,
                "abort" => {
                    self.advance();
                    StmtKind::Abort(self.expr()?)
                }
                _ if matches!(self.tok_at(1), Tok::Punct("=")) => {
                    let name = self.name("a variable")?;
                    self.advance();
                    StmtKind::Assign { name, value: self.expr()? }
                }
                _ => return self.error("a statement"),
            },
            _ => return self.error("a statement"),
        };
        self.expect_punct(";", "after statement")?;
        Ok(Stmt { kind, span })
    }

    fn let_stmt(&mut self) -> PResult<StmtKind> {
        self.advance();
        let name = self.name("a variable name after 'let'")?;
        let ty = if self.is_punct("=") { None } else { Some(self.type_name()?) };
        self.expect_punct("=", "after the variable name")?;
        Ok(StmtKind::Let { name, ty, value: self.expr()? })
    }

    fn if_stmt(&mut self) -> PResult<Stmt> {
        let span = self.span();
        self.advance();
        let cond = self.expr()?;
        let then = self.block()?;
        let otherwise = if self.eat_kw("else") {
            if self.is_kw("if") { self.else_if()? } else { self.block()? }
        } else {
            Vec::new()
        };
        Ok(Stmt { kind: StmtKind::If { cond, then, otherwise }, span })
    }

    /// `else if` nests an `if` in the else branch: it counts as a block level.
    fn else_if(&mut self) -> PResult<Vec<Stmt>> {
        if self.block_depth >= BLOCK_DEPTH_MAX {
            return Err((self.span(), format!("blocks nest more than {BLOCK_DEPTH_MAX} deep")));
        }
        self.block_depth += 1;
        let out = self.if_stmt();
        self.block_depth -= 1;
        Ok(vec![out?])
    }

    fn for_stmt(&mut self) -> PResult<Stmt> {
        let span = self.span();
        self.advance();
        let var = self.name("a loop variable after 'for'")?;
        self.expect_kw("in", "after the loop variable")?;
        let kind = if self.is_kw("select") {
            let select = self.select(false)?.0;
            StmtKind::ForSelect { var, select, body: self.block()? }
        } else {
            let start = self.concat()?;
            if self.eat_punct("..") {
                let end = self.concat()?;
                StmtKind::ForRange { var, start, end, body: self.block()? }
            } else if let ExprKind::Name(array) = start.kind {
                StmtKind::ForArray { var, array, body: self.block()? }
            } else {
                return Err((start.span, "expected 'select', 'a .. b' or an array parameter after 'in'".into()));
            }
        };
        Ok(Stmt { kind, span })
    }

    fn select_into(&mut self) -> PResult<StmtKind> {
        let span = self.span();
        let (select, targets, into_array) = self.select(true)?;
        match targets {
            Some(targets) => Ok(StmtKind::SelectInto { select, targets, into_array }),
            None => Err((span, "a select statement needs 'into' variables (or use 'for row in select ...')".into())),
        }
    }

    /// `select [distinct] cols [into vars | into var[]] from t [index i] [where ...] [order by c [asc|desc]]
    /// [limit e]`; the flag is whether the target is an array (`into var[]`).
    fn select(&mut self, into_allowed: bool) -> PResult<(Select, Option<Vec<Name>>, bool)> {
        self.expect_kw("select", "")?;
        // `distinct` is a keyword only here, and only when a column list follows it (so a column
        // called `distinct` still works: `select distinct from t`, `select distinct, x ...`).
        let distinct = self.is_kw("distinct")
            && match self.tok_at(1) {
                Tok::Ident(next) => !is_reserved(next),
                Tok::Punct(p) => *p == "*",
                _ => false,
            };
        if distinct {
            self.advance();
        }
        let columns = if self.eat_punct("*") {
            None
        } else {
            let mut cols = vec![self.name("a column name or '*' after 'select'")?];
            while self.eat_punct(",") {
                cols.push(self.name("a column name")?);
            }
            Some(cols)
        };
        let (mut targets, mut into_array) = (None, false);
        if self.is_kw("into") {
            if !into_allowed {
                return Err((self.span(), "a 'for' loop's select cannot have 'into'; use the row variable".into()));
            }
            self.advance();
            let mut t = vec![self.name("a variable after 'into'")?];
            if self.eat_punct("[") {
                self.expect_punct("]", "after '[' in an array target ('into name[]')")?;
                into_array = true;
            }
            while self.eat_punct(",") {
                if into_array {
                    return Err((self.span(), "an array target ('into name[]') must be the only target".into()));
                }
                t.push(self.name("a variable")?);
            }
            targets = Some(t);
        }
        self.expect_kw("from", "after the selected columns")?;
        let table = self.name("a table name after 'from'")?;
        let index = if self.eat_kw("index") { Some(self.name("an index name after 'index'")?) } else { None };
        let conds = self.where_clause()?;
        let order = self.order_by()?;
        let limit = if self.eat_kw("limit") { Some(self.concat()?) } else { None };
        Ok((Select { distinct, columns, table, index, conds, order, limit }, targets, into_array))
    }

    fn order_by(&mut self) -> PResult<Option<(Name, bool)>> {
        if !self.eat_kw("order") {
            return Ok(None);
        }
        if !self.eat_kw("by") {
            return self.error("'by' after 'order'");
        }
        let column = self.name("a column name after 'order by'")?;
        let desc = if self.eat_kw("desc") {
            true
        } else {
            self.eat_kw("asc");
            false
        };
        Ok(Some((column, desc)))
    }

    /// `[where col op expr (and col op expr)*]`. The right side is parsed below the comparison
    /// level, so `and` separates conjuncts instead of being part of an expression.
    fn where_clause(&mut self) -> PResult<Vec<Cond>> {
        let mut conds = Vec::new();
        if !self.eat_kw("where") {
            return Ok(conds);
        }
        loop {
            let column = self.name("a column name in the where clause")?;
            let op = match self.cmp_op() {
                Some(op) => op,
                None => return self.error("a comparison operator after the column"),
            };
            let value = self.concat()?;
            conds.push(Cond { column, op, value });
            if !self.eat_kw("and") {
                return Ok(conds);
            }
        }
    }

    fn insert(&mut self) -> PResult<StmtKind> {
        self.advance();
        self.expect_kw("into", "after 'insert'")?;
        let table = self.name("a table name after 'insert into'")?;
        let columns = if self.is_punct("(") { Some(self.name_list("column name", "")?) } else { None };
        self.expect_kw("values", "after the table name")?;
        self.expect_punct("(", "after 'values'")?;
        let values = self.expr_list(")")?;
        Ok(StmtKind::Insert { table, columns, values })
    }

    fn update(&mut self) -> PResult<StmtKind> {
        self.advance();
        let table = self.name("a table name after 'update'")?;
        self.expect_kw("set", "after the table name")?;
        let mut sets = Vec::new();
        loop {
            let col = self.name("a column name after 'set'")?;
            self.expect_punct("=", "after the column name")?;
            sets.push((col, self.expr()?));
            if !self.eat_punct(",") {
                break;
            }
        }
        let conds = self.where_clause()?;
        Ok(StmtKind::Update { table, sets, conds })
    }

    fn delete(&mut self) -> PResult<StmtKind> {
        self.advance();
        self.expect_kw("from", "after 'delete'")?;
        let table = self.name("a table name after 'delete from'")?;
        let conds = self.where_clause()?;
        Ok(StmtKind::Delete { table, conds })
    }

    fn return_stmt(&mut self) -> PResult<StmtKind> {
        self.advance();
        let mut values = Vec::new();
        if !self.is_punct(";") {
            values.push(self.expr()?);
            while self.eat_punct(",") {
                values.push(self.expr()?);
            }
        }
        Ok(StmtKind::Return(values))
    }

    // ---- expressions, lowest precedence first ----

    /// Expressions separated by commas up to the closing `close` (consumed).
    fn expr_list(&mut self, close: &str) -> PResult<Vec<Expr>> {
        let mut out = Vec::new();
        if self.eat_punct(close) {
            return Ok(out);
        }
        loop {
            out.push(self.expr()?);
            if self.eat_punct(close) {
                return Ok(out);
            }
            self.expect_punct(",", &format!("or '{close}' in a list"))?;
        }
    }

    /// Guards recursion so that deeply nested input cannot overflow the stack.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.expr_depth >= EXPR_DEPTH_MAX {
            return Err((self.span(), format!("expression nests more than {EXPR_DEPTH_MAX} deep")));
        }
        self.expr_depth += 1;
        let out = f(self);
        self.expr_depth -= 1;
        out
    }

    /// A full expression (`or` level).
    pub(crate) fn expr(&mut self) -> PResult<Expr> {
        self.nested(|p| p.binary_level(0))
    }

    /// Counts one more link of an operator chain as one level of depth, so that `1 + 1 + ...`
    /// cannot build a tree deeper than the limit (deep trees would overflow the stack of every
    /// later recursive pass, and of `Drop`).
    fn deeper(&mut self) -> PResult<()> {
        if self.expr_depth >= EXPR_DEPTH_MAX {
            return Err((self.span(), format!("expression nests more than {EXPR_DEPTH_MAX} deep")));
        }
        self.expr_depth += 1;
        Ok(())
    }

    /// Runs `f` and restores the expression depth afterwards, error or not.
    fn restoring_depth<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        let base = self.expr_depth;
        let out = f(self);
        self.expr_depth = base;
        out
    }

    /// Left-associative binary levels: 0 = `or`, 1 = `and`.
    fn binary_level(&mut self, level: u8) -> PResult<Expr> {
        self.restoring_depth(|p| p.binary_chain(level))
    }

    fn binary_chain(&mut self, level: u8) -> PResult<Expr> {
        let (kw, op) = if level == 0 { ("or", ArithOp::Or) } else { ("and", ArithOp::And) };
        let next = |p: &mut Self| if level == 0 { p.binary_level(1) } else { p.not_level() };
        let mut left = next(self)?;
        while self.is_kw(kw) {
            let span = self.span();
            self.deeper()?;
            self.advance();
            let right = next(self)?;
            left = Expr { kind: ExprKind::Binary(op, Box::new(left), Box::new(right)), span };
        }
        Ok(left)
    }

    fn not_level(&mut self) -> PResult<Expr> {
        if self.is_kw("not") {
            let span = self.span();
            self.advance();
            let inner = self.nested(|p| p.not_level())?;
            return Ok(Expr { kind: ExprKind::Not(Box::new(inner)), span });
        }
        self.comparison()
    }

    fn cmp_op(&mut self) -> Option<CmpOp> {
        let op = match self.tok() {
            Tok::Punct("=") => CmpOp::Eq,
            Tok::Punct("<>" | "!=") => CmpOp::Ne,
            Tok::Punct("<") => CmpOp::Lt,
            Tok::Punct("<=") => CmpOp::Le,
            Tok::Punct(">") => CmpOp::Gt,
            Tok::Punct(">=") => CmpOp::Ge,
            _ => return None,
        };
        self.advance();
        Some(op)
    }

    /// `a op b` or `a is [not] null`; comparisons do not chain.
    fn comparison(&mut self) -> PResult<Expr> {
        let left = self.concat()?;
        let span = self.span();
        if self.eat_kw("is") {
            let negated = self.eat_kw("not");
            self.expect_kw("null", "after 'is'")?;
            return Ok(Expr { kind: ExprKind::IsNull(Box::new(left), negated), span });
        }
        match self.cmp_op() {
            Some(op) => {
                let right = self.concat()?;
                Ok(Expr { kind: ExprKind::Compare(op, Box::new(left), Box::new(right)), span })
            }
            None => Ok(left),
        }
    }

    /// `||`, then `+ -`, then `* / %`.
    fn concat(&mut self) -> PResult<Expr> {
        self.nested(|p| p.arith(0))
    }

    fn arith(&mut self, level: u8) -> PResult<Expr> {
        self.restoring_depth(|p| p.arith_chain(level))
    }

    fn arith_chain(&mut self, level: u8) -> PResult<Expr> {
        let ops: &[(&str, ArithOp)] = match level {
            0 => &[("||", ArithOp::Concat)],
            1 => &[("+", ArithOp::Add), ("-", ArithOp::Sub)],
            _ => &[("*", ArithOp::Mul), ("/", ArithOp::Div), ("%", ArithOp::Rem)],
        };
        let next = |p: &mut Self| if level < 2 { p.arith(level + 1) } else { p.unary() };
        let mut left = next(self)?;
        while let Some(&(_, op)) = ops.iter().find(|(sym, _)| self.is_punct(sym)) {
            let span = self.span();
            self.deeper()?;
            self.advance();
            let right = next(self)?;
            left = Expr { kind: ExprKind::Binary(op, Box::new(left), Box::new(right)), span };
        }
        Ok(left)
    }

    fn unary(&mut self) -> PResult<Expr> {
        if self.is_punct("-") {
            let span = self.span();
            self.advance();
            // Fold `-literal` so that i64::MIN can be written.
            if let Tok::Int(_) | Tok::Float(_) = self.tok() {
                return self.negative_literal(span);
            }
            let inner = self.nested(|p| p.unary())?;
            return Ok(Expr { kind: ExprKind::Neg(Box::new(inner)), span });
        }
        self.postfix()
    }

    fn negative_literal(&mut self, span: Span) -> PResult<Expr> {
        let kind = match self.tok().clone() {
            Tok::Int(v) => ExprKind::Int(-v),
            Tok::Float(v) => ExprKind::Float(-v),
            _ => return self.error("a number"),
        };
        self.advance();
        self.postfix_rest(Expr { kind, span })
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let base = self.primary()?;
        self.postfix_rest(base)
    }

    fn postfix_rest(&mut self, e: Expr) -> PResult<Expr> {
        self.restoring_depth(|p| p.postfix_chain(e))
    }

    fn postfix_chain(&mut self, mut e: Expr) -> PResult<Expr> {
        loop {
            if self.is_punct("[") || self.is_punct(".") {
                self.deeper()?;
            }
            if self.is_punct("[") {
                let span = self.span();
                self.advance();
                let index = self.expr()?;
                self.expect_punct("]", "after the array index")?;
                e = Expr { kind: ExprKind::Index(Box::new(e), Box::new(index)), span };
            } else if self.is_punct(".") {
                let ExprKind::Name(base) = &e.kind else {
                    return Err((self.span(), "only a row variable can be followed by '.column'".into()));
                };
                let base = base.clone();
                self.advance();
                let field = self.name("a column name after '.'")?;
                e = Expr { kind: ExprKind::Field(base, field), span: e.span };
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        let span = self.span();
        let kind = match self.tok().clone() {
            Tok::Int(v) => ExprKind::Int(v),
            Tok::Float(v) => ExprKind::Float(v),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Bytes(b) => ExprKind::Bytes(b),
            Tok::Punct("(") => {
                self.advance();
                let inner = self.expr()?;
                self.expect_punct(")", "to close '('")?;
                return Ok(inner);
            }
            Tok::Ident(w) => match w.as_str() {
                "null" => ExprKind::Null,
                "true" => ExprKind::Bool(true),
                "false" => ExprKind::Bool(false),
                _ if is_reserved(&w) => return self.error("an expression"),
                _ => return self.name_or_call(),
            },
            _ => return self.error("an expression"),
        };
        self.advance();
        Ok(Expr { kind, span })
    }

    fn name_or_call(&mut self) -> PResult<Expr> {
        let name = self.name("a name")?;
        let span = name.span;
        if self.eat_punct("(") {
            let args = self.expr_list(")")?;
            return Ok(Expr { kind: ExprKind::Call(name, args), span });
        }
        Ok(Expr { kind: ExprKind::Name(name), span })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::lexer::lex;

    fn parse_src(src: &str) -> (File, Vec<ParseError>) {
        parse(lex(src).unwrap_or_default())
    }

    #[test]
    fn parses_a_procedure() {
        let (f, errs) = parse_src(
            "table t (a int not null, b text, primary key (a));
             procedure p(x int, xs int[]) {
                 let y = x + 1 * 2;
                 select b into v from t where a = x;
                 for r in select * from t where a >= 1 and a < 5 order by a desc limit 3 { y = y + r.a; }
                 for i in 0 .. len(xs) { y = y + xs[i]; }
                 if not found { abort 'no'; } else if y > 3 { return y; } else { return; }
             }",
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(f.tables.len(), 1);
        assert_eq!(f.procedures[0].body.len(), 5);
    }

    #[test]
    fn long_operator_chains_are_bounded() {
        let ok = format!("procedure p() {{ return {}; }}", vec!["1"; 40].join(" + "));
        assert!(parse_src(&ok).1.is_empty());
        let chain = format!("procedure p() {{ return {}; let x = 1; }}", vec!["1"; 100_000].join(" + "));
        let errs = parse_src(&chain).1;
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].1.contains("nests more than"));
        let elifs = format!("procedure p() {{ if true {{ }} {} }}", "else if true { } ".repeat(10_000));
        assert!(parse_src(&elifs).1.iter().any(|e| e.1.contains("blocks nest more than")));
    }

    #[test]
    fn recovers_and_reports_several_errors() {
        let (_, errs) = parse_src("procedure p() { let x = ; let y = 1 let z = 2; }");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].1.contains("expected an expression, found ';'"));
        assert!(errs[1].1.contains("expected ';' after statement, found keyword 'let'"));
    }
}
