//! Lexical scopes of a procedure: each block opens one. Names may not be shadowed: a name
//! declared while another binding of it is visible is an error, which keeps every use of a name
//! in a procedure pointing at one variable (simpler for readers and for dependency analysis).

use super::super::ir::VarId;
use super::super::lexer::Span;
use std::collections::HashSet;

/// What a name is bound to.
#[derive(Clone, Debug)]
pub(crate) enum Binding {
    /// A scalar or array variable.
    Var(VarId),
    /// The row variable of a `for ... in select`: its selected columns by name.
    Row {
        /// The table scanned.
        table: String,
        /// (column name, variable holding it).
        columns: Vec<(String, VarId)>,
    },
}

/// The stack of open scopes.
#[derive(Default)]
pub(crate) struct Scopes {
    frames: Vec<Vec<(String, Binding, Span)>>,
    /// Row variables whose loop has ended, for a precise error when one is used afterwards.
    retired_rows: HashSet<String>,
}

impl Scopes {
    pub(crate) fn push(&mut self) {
        self.frames.push(Vec::new());
    }

    pub(crate) fn pop(&mut self) {
        for (name, binding, _) in self.frames.pop().unwrap_or_default() {
            if matches!(binding, Binding::Row { .. }) {
                self.retired_rows.insert(name);
            }
        }
    }

    /// The visible binding of `name` and where it was declared.
    pub(crate) fn lookup(&self, name: &str) -> Option<(&Binding, Span)> {
        self.frames.iter().rev().flat_map(|f| f.iter().rev()).find(|(n, _, _)| n == name).map(|(_, b, s)| (b, *s))
    }

    /// Whether `name` was a row variable of a loop that has ended.
    pub(crate) fn is_retired_row(&self, name: &str) -> bool {
        self.retired_rows.contains(name)
    }

    pub(crate) fn bind_var(&mut self, name: &str, id: VarId, span: Span) {
        self.bind(name, Binding::Var(id), span);
    }

    pub(crate) fn bind(&mut self, name: &str, binding: Binding, span: Span) {
        if let Some(frame) = self.frames.last_mut() {
            frame.push((name.to_string(), binding, span));
        }
    }
}
