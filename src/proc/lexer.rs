//! The lexer: source text to tokens, each with the line and column where it starts.
//!
//! Identifiers and keywords are case-insensitive; the lexer folds them to lower case so that every
//! later stage compares names with `==`. String literals keep their case. `--` starts a comment
//! that runs to the end of the line.

use super::limits::{IDENT_LEN_MAX, SOURCE_BYTES_MAX};
use std::fmt;

/// A place in the source: 1-based line and column (columns count characters, not bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// An identifier or keyword, folded to lower case.
    Ident(String),
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// A string literal `'...'` (`''` escapes a quote).
    Str(String),
    /// A bytes literal `x'00ff'`.
    Bytes(Vec<u8>),
    /// Punctuation or an operator, e.g. `(`, `<=`, `..`, `||`.
    Punct(&'static str),
    /// End of input.
    Eof,
}

impl fmt::Display for Tok {
    /// How a token is named in "found ..." error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "'{s}'"),
            Tok::Int(v) => write!(f, "'{v}'"),
            Tok::Float(v) => write!(f, "'{v:?}'"),
            Tok::Str(_) => f.write_str("a string literal"),
            Tok::Bytes(_) => f.write_str("a bytes literal"),
            Tok::Punct(p) => write!(f, "'{p}'"),
            Tok::Eof => f.write_str("end of file"),
        }
    }
}

/// A token and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Where it starts.
    pub span: Span,
}

/// A lexical error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    /// Where it happened.
    pub span: Span,
    /// What was wrong.
    pub message: String,
}

/// Operators and punctuation, longest first so that `<=` wins over `<`.
const PUNCTS: [&str; 24] = [
    "..", "<=", ">=", "<>", "!=", "||", "(", ")", "{", "}", "[", "]", ",", ";", ".", "+", "-", "*", "/", "%", "=", "<",
    ">", ":",
];

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    col: u32,
}

/// Splits `source` into tokens, ending with [`Tok::Eof`]. Stops at the first lexical error.
pub fn lex(source: &str) -> Result<Vec<Token>, LexError> {
    if source.len() > SOURCE_BYTES_MAX {
        return Err(LexError {
            span: Span { line: 1, col: 1 },
            message: format!("source is {} bytes; the limit is {SOURCE_BYTES_MAX}", source.len()),
        });
    }
    let mut lx = Lexer { chars: source.chars().collect(), pos: 0, line: 1, col: 1 };
    let mut out = Vec::new();
    loop {
        lx.skip_space_and_comments();
        let span = lx.span();
        let Some(c) = lx.peek(0) else {
            out.push(Token { tok: Tok::Eof, span });
            return Ok(out);
        };
        let tok = lx.token(c, span)?;
        out.push(Token { tok, span });
    }
}

impl Lexer {
    fn span(&self) -> Span {
        Span { line: self.line, col: self.col }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn skip_space_and_comments(&mut self) {
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() {
                self.bump();
            } else if c == '-' && self.peek(1) == Some('-') {
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else {
                break;
            }
        }
    }

    fn token(&mut self, c: char, span: Span) -> Result<Tok, LexError> {
        if (c == 'x' || c == 'X') && self.peek(1) == Some('\'') {
            self.bump();
            return self.bytes_literal(span);
        }
        if c.is_ascii_alphabetic() || c == '_' {
            return self.ident(span);
        }
        if c.is_ascii_digit() {
            return self.number(span);
        }
        if c == '\'' {
            return self.string(span).map(Tok::Str);
        }
        for p in PUNCTS {
            if p.chars().enumerate().all(|(i, pc)| self.peek(i) == Some(pc)) {
                for _ in 0..p.len() {
                    self.bump();
                }
                return Ok(Tok::Punct(p));
            }
        }
        Err(LexError { span, message: format!("unexpected character '{c}'") })
    }

    fn ident(&mut self, span: Span) -> Result<Tok, LexError> {
        let mut s = String::new();
        while let Some(c) = self.peek(0).filter(|c| c.is_ascii_alphanumeric() || *c == '_') {
            s.push(c.to_ascii_lowercase());
            self.bump();
        }
        if s.len() > IDENT_LEN_MAX {
            return Err(LexError {
                span,
                message: format!("identifier is {} characters long; the limit is {IDENT_LEN_MAX}", s.len()),
            });
        }
        Ok(Tok::Ident(s))
    }

    fn number(&mut self, span: Span) -> Result<Tok, LexError> {
        let mut s = String::new();
        let mut is_float = false;
        self.digits(&mut s);
        // `1..5` is a range, not the float `1.` followed by `.5`.
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            is_float = true;
            s.push('.');
            self.bump();
            self.digits(&mut s);
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = matches!(self.peek(1), Some('+' | '-'));
            let digit_at = if sign { 2 } else { 1 };
            if self.peek(digit_at).is_some_and(|c| c.is_ascii_digit()) {
                is_float = true;
                for _ in 0..digit_at {
                    s.extend(self.bump());
                }
                self.digits(&mut s);
            }
        }
        if self.peek(0).is_some_and(|c| c.is_ascii_alphabetic() || c == '_') {
            return Err(LexError { span, message: format!("malformed number '{s}{}'", self.peek(0).unwrap_or(' ')) });
        }
        if is_float {
            return s
                .parse::<f64>()
                .map(Tok::Float)
                .map_err(|_| LexError { span, message: format!("malformed number '{s}'") });
        }
        s.parse::<i64>()
            .map(Tok::Int)
            .map_err(|_| LexError { span, message: format!("integer literal {s} does not fit in 64 bits") })
    }

    fn digits(&mut self, s: &mut String) {
        while let Some(c) = self.peek(0).filter(char::is_ascii_digit) {
            s.push(c);
            self.bump();
        }
    }

    /// A quoted string starting at the opening `'`; `''` is an escaped quote.
    fn string(&mut self, span: Span) -> Result<String, LexError> {
        self.bump();
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return Err(LexError { span, message: "unterminated string literal".into() }),
                Some('\'') if self.peek(0) == Some('\'') => {
                    self.bump();
                    s.push('\'');
                }
                Some('\'') => return Ok(s),
                Some(c) => s.push(c),
            }
        }
    }

    fn bytes_literal(&mut self, span: Span) -> Result<Tok, LexError> {
        let hex = self.string(span)?;
        let digits: Vec<char> = hex.chars().collect();
        if !digits.len().is_multiple_of(2) {
            return Err(LexError { span, message: "bytes literal needs an even number of hex digits".into() });
        }
        let mut out = Vec::with_capacity(digits.len() / 2);
        for pair in digits.chunks(2) {
            let byte = pair[0].to_digit(16).zip(pair[1].to_digit(16)).map(|(h, l)| (h * 16 + l) as u8);
            match byte {
                Some(b) => out.push(b),
                None => {
                    return Err(LexError { span, message: format!("bytes literal has a non-hex digit in '{hex}'") });
                }
            }
        }
        Ok(Tok::Bytes(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        lex(src).map(|v| v.into_iter().map(|t| t.tok).collect()).unwrap_or_default()
    }

    #[test]
    fn ranges_numbers_and_operators() {
        assert_eq!(
            toks("1..10 1.5 <= <>"),
            vec![
                Tok::Int(1),
                Tok::Punct(".."),
                Tok::Int(10),
                Tok::Float(1.5),
                Tok::Punct("<="),
                Tok::Punct("<>"),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn spans_strings_comments_and_case() {
        let t = lex("-- hi\n  SELECT 'it''s' x'0aFF'").unwrap_or_default();
        assert_eq!(t[0].tok, Tok::Ident("select".into()));
        assert_eq!(t[0].span, Span { line: 2, col: 3 });
        assert_eq!(t[1].tok, Tok::Str("it's".into()));
        assert_eq!(t[2].tok, Tok::Bytes(vec![0x0a, 0xff]));
    }

    #[test]
    fn errors() {
        assert!(lex("'abc").unwrap_err().message.contains("unterminated"));
        assert!(lex("99999999999999999999").unwrap_err().message.contains("64 bits"));
        assert_eq!(lex("a\n  #").unwrap_err().span, Span { line: 2, col: 3 });
    }
}
