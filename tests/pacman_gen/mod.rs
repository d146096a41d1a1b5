//! The generator of random procedures that `pacman_analysis` and `pacman_replay` share.

pub const TABLES: &str = "table t0 (k int not null, v int, primary key (k));
table t1 (k int not null, v int, primary key (k));
table t2 (k int not null, v int, primary key (k));
table t3 (k int not null, v int, primary key (k));
";

/// Builds procedure source from a byte string (each byte picks a production; an exhausted string
/// picks the simplest), so shrinking the bytes shrinks the procedures.
pub struct Gen {
    bytes: Vec<u8>,
    pos: usize,
    out: String,
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

    fn var(&mut self, assignable_only: bool) -> Option<String> {
        let vars: Vec<String> =
            self.scopes.iter().flatten().filter(|(_, a)| *a || !assignable_only).map(|(n, _)| n.clone()).collect();
        if vars.is_empty() { None } else { Some(vars[self.pick(vars.len())].clone()) }
    }

    fn bind(&mut self, name: &str, assignable: bool) {
        if let Some(s) = self.scopes.last_mut() {
            s.push((name.to_string(), assignable));
        }
    }

    fn expr(&mut self) -> String {
        match self.pick(4) {
            0 => format!("{}", self.pick(5)),
            1 => match (self.var(false), self.var(false)) {
                (Some(a), Some(b)) => format!("{a} + {b}"),
                _ => "1".into(),
            },
            _ => self.var(false).unwrap_or_else(|| "2".into()),
        }
    }

    fn table(&mut self) -> String {
        format!("t{}", self.pick(4))
    }

    fn block(&mut self, depth: usize) {
        self.out.push_str("{\n");
        self.scopes.push(Vec::new());
        for _ in 0..self.pick(4) + 1 {
            self.stmt(depth);
        }
        self.scopes.pop();
        self.out.push_str("}\n");
    }

    fn stmt(&mut self, depth: usize) {
        self.stmts += 1;
        let nested = depth < 3 && self.stmts < 30;
        let (e, t) = (self.expr(), self.table());
        let line = match self.pick(if nested { 13 } else { 9 }) {
            0 => {
                let name = self.fresh("x");
                self.bind(&name, true);
                format!("let {name} = {e};\n")
            }
            1 => match self.var(true) {
                Some(v) => format!("{v} = {e};\n"),
                None => "let unused_ = 0;\n".replace("unused_", &self.fresh("u")),
            },
            2 | 3 => {
                let name = self.fresh("g");
                self.bind(&name, true);
                format!("select v into {name} from {t} where k = {e};\n")
            }
            4 => format!("update {t} set v = v + {} where k = {e};\n", self.expr()),
            5 => format!("insert into {t} values ({e}, {});\n", self.expr()),
            6 => format!("delete from {t} where k = {e};\n"),
            7 => "if found { return; }\n".to_string(),
            8 => format!("if {e} < {} {{ abort 'a'; }}\n", self.expr()),
            9 | 10 => {
                let rhs = self.expr();
                self.out.push_str(&format!("if {e} > {rhs} "));
                self.block(depth + 1);
                if self.pick(2) == 0 {
                    self.out.push_str("else ");
                    self.block(depth + 1);
                }
                return;
            }
            11 => {
                let i = self.fresh("i");
                let end = 1 + self.pick(3);
                self.out.push_str(&format!("for {i} in 0 .. {end} "));
                self.scopes.push(vec![(i, false)]);
                self.block(depth + 1);
                self.scopes.pop();
                return;
            }
            _ => {
                let r = self.fresh("r");
                self.out.push_str(&format!("for {r} in select k, v from {t} where k >= {e} limit 3 "));
                self.scopes.push(vec![(format!("{r}.k"), false), (format!("{r}.v"), false)]);
                self.block(depth + 1);
                self.scopes.pop();
                return;
            }
        };
        self.out.push_str(&line);
    }

    pub fn procedures(bytes: Vec<u8>) -> String {
        let mut g = Gen { bytes, pos: 0, out: TABLES.to_string(), scopes: Vec::new(), next_name: 0, stmts: 0 };
        let count = 1 + g.pick(3);
        for p in 0..count {
            g.stmts = 0;
            g.scopes = vec![vec![("a".into(), false), ("b".into(), false)]];
            g.out.push_str(&format!("procedure p{p}(a int, b int) "));
            g.block(0);
        }
        g.out
    }
}
