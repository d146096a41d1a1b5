//! PACMAN's static analysis (src/pacman): the bank example against the paper's Figures 2-5, TPC-C's
//! global dependency graph pinned (compared with Figure 21 in docs/pacman.md), focused cases of
//! flow dependencies, the fallback errors, and properties over generated procedures.

mod pacman_gen;
use lazarus::pacman::{self, AnalysisError, BlockId, GlobalDependencyGraph, OpId, ProcedureAnalysis, StaticAnalysis};
use lazarus::proc::{Module, check_source};
use lazarus::storage::Catalog;
use pacman_gen::Gen;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const BANK: &str = include_str!("../workloads/examples/pacman_bank.proc");
const TPCC: &str = include_str!("../workloads/tpcc.proc");

fn module(name: &str, source: &str) -> Module {
    check_source(name, source, &Catalog::default()).unwrap_or_else(|d| panic!("{d:?}\n{source}"))
}

fn analyze(module: &Module) -> StaticAnalysis {
    let procs: Vec<_> = module.procedures.iter().collect();
    pacman::analyze(&procs, &[]).expect("analysis")
}

/// The 1-based line of the only line of `source` containing `text`.
fn line_of(source: &str, text: &str) -> u32 {
    let found: Vec<usize> = source.lines().enumerate().filter(|(_, l)| l.contains(text)).map(|(i, _)| i + 1).collect();
    assert_eq!(found.len(), 1, "{text:?} must appear on exactly one line");
    found[0] as u32
}

fn lines(source: &str, texts: &[&str]) -> BTreeSet<u32> {
    texts.iter().map(|t| line_of(source, t)).collect()
}

/// A procedure's slices as sets of source lines, in slice order.
fn slice_lines(a: &ProcedureAnalysis, slices: &[pacman::Slice]) -> Vec<BTreeSet<u32>> {
    slices.iter().map(|s| s.ops.iter().map(|o| a.ops[o.index()].line).collect()).collect()
}

fn line_pairs(a: &ProcedureAnalysis, pairs: &[(OpId, OpId)]) -> BTreeSet<(u32, u32)> {
    pairs.iter().map(|(p, q)| (a.ops[p.index()].line, a.ops[q.index()].line)).collect()
}

// Figure 2a / 3: the statements of Transfer, by slice.
const T1: &[&str] = &["select spouse into dst"];
const T2: &[&str] = &[
    "select balance into src_val",
    "set balance = src_val - amount",
    "select balance into dst_val",
    "set balance = dst_val + amount",
];
const T3: &[&str] = &["select balance into bonus from saving where name = src", "bonus + 1.0"];
// Figure 4: Deposit.
const D1: &[&str] = &["select balance into tmp", "set balance = tmp + amount"];
const D2: &[&str] = &["select balance into bonus from saving where name = name", "bonus + 0.02"];
const D3: &[&str] = &["select cnt into count", "set cnt = count + 1"];

#[test]
fn bank_flow_and_data_dependencies_match_figure_2b() {
    let a = analyze(&module("pacman_bank.proc", BANK));
    let (_, transfer) = a.graph.procedure("transfer").expect("transfer is logged");
    let t = &transfer.analysis;
    let l = |s| line_of(BANK, s);
    let read_dst = l(T1[0]);
    // Lines 4-9 of Figure 2a are flow-dependent on line 2 (control: `if dst is not null`); each
    // write on the read before it (define-use); nothing else.
    let mut flow: BTreeSet<(u32, u32)> = T2.iter().chain(T3).map(|s| (read_dst, l(s))).collect();
    flow.extend([(l(T2[0]), l(T2[1])), (l(T2[2]), l(T2[3])), (l(T3[0]), l(T3[1]))]);
    assert_eq!(line_pairs(t, &t.flow.pairs()), flow);
    // Dashed lines: same table, at least one write. Two reads of `current` are not dependent.
    let data: BTreeSet<(u32, u32)> = [(0, 1), (0, 3), (1, 2), (1, 3), (2, 3)]
        .into_iter()
        .map(|(i, j)| (l(T2[i]), l(T2[j])))
        .chain([(l(T3[0]), l(T3[1]))])
        .collect();
    assert_eq!(line_pairs(t, t.data.pairs()), data);
}

#[test]
fn bank_slices_match_figures_3_4_and_5ab() {
    let a = analyze(&module("pacman_bank.proc", BANK));
    let (_, transfer) = a.graph.procedure("transfer").expect("transfer");
    let (_, deposit) = a.graph.procedure("deposit").expect("deposit");
    let (t, d) = (&transfer.analysis, &deposit.analysis);
    assert_eq!(slice_lines(t, &t.local.slices), vec![lines(BANK, T1), lines(BANK, T2), lines(BANK, T3)]);
    assert_eq!(slice_lines(d, &d.local.slices), vec![lines(BANK, D1), lines(BANK, D2), lines(BANK, D3)]);
    // Figure 5a: T1 -> T2, T1 -> T3; Figure 5b: D1 -> D2, D1 -> D3 (slice i is S(i-1)).
    let id = |a: u32, b: u32| (pacman::SliceId(a), pacman::SliceId(b));
    assert_eq!(t.local.edges, vec![id(0, 1), id(0, 2)]);
    assert_eq!(d.local.edges, vec![id(0, 1), id(0, 2)]);
    // No block holds two slices of one procedure, so Algorithm 2 merges no slice.
    assert_eq!(transfer.slicing, t.local);
    assert_eq!(deposit.slicing, d.local);
    assert!(a.read_only.is_empty() && a.fallback.is_empty());
}

/// Each block as the set of (procedure, source lines of its slice).
fn block_contents(g: &GlobalDependencyGraph) -> Vec<BTreeSet<(String, BTreeSet<u32>)>> {
    g.blocks()
        .iter()
        .map(|b| {
            b.pieces
                .0
                .iter()
                .map(|r| {
                    let p = &g.procedures()[r.procedure.0 as usize];
                    let lines = slice_lines(&p.analysis, p.slices()).swap_remove(r.slice.index());
                    (p.name().to_string(), lines)
                })
                .collect()
        })
        .collect()
}

fn transitive_reduction(edges: &[(BlockId, BlockId)]) -> BTreeSet<(u32, u32)> {
    let set: BTreeSet<(u32, u32)> = edges.iter().map(|(a, b)| (a.0, b.0)).collect();
    let reaches = |from: u32, to: u32, skip: (u32, u32)| {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            for &(a, b) in &set {
                if a == n && (a, b) != skip && seen.insert(b) {
                    stack.push(b);
                }
            }
        }
        seen.contains(&to)
    };
    set.iter().copied().filter(|&(a, b)| !reaches(a, b, (a, b))).collect()
}

#[test]
fn bank_blocks_match_figure_5c() {
    let a = analyze(&module("pacman_bank.proc", BANK));
    let slice = |p: &str, texts: &[&str]| (p.to_string(), lines(BANK, texts));
    let expected = vec![
        BTreeSet::from([slice("transfer", T1)]),                       // B_alpha
        BTreeSet::from([slice("transfer", T2), slice("deposit", D1)]), // B_beta: both write current
        BTreeSet::from([slice("transfer", T3), slice("deposit", D2)]), // B_gamma: both write saving
        BTreeSet::from([slice("deposit", D3)]),                        // B_delta
    ];
    assert_eq!(block_contents(&a.graph), expected);
    let edges: Vec<(u32, u32)> = a.graph.edges().iter().map(|(x, y)| (x.0, y.0)).collect();
    // alpha -> beta (T1 -> T2), alpha -> gamma (T1 -> T3), beta -> gamma (D1 -> D2), beta -> delta.
    assert_eq!(edges, vec![(0, 1), (0, 2), (1, 2), (1, 3)]);
    // Figure 5c draws the transitive reduction: alpha -> gamma is implied by alpha -> beta -> gamma.
    assert_eq!(transitive_reduction(a.graph.edges()), BTreeSet::from([(0, 1), (1, 2), (1, 3)]));
    assert_eq!(a.graph.topological_order(), (0..4).map(BlockId).collect::<Vec<_>>());
}

#[test]
fn deposit_with_one_if_slices_as_figure_4() {
    // Figure 4 repeats the condition so that each slice is a segment of code; the analysis does
    // not need that: the original single `if` gives the same slices and edges.
    let tables: String = BANK.lines().filter(|l| l.starts_with("table ")).map(|l| format!("{l}\n")).collect();
    let source = format!(
        "{tables}procedure deposit(name text, amount float, nation text) {{
            select balance into tmp from current where name = name;
            update current set balance = tmp + amount where name = name;
            if tmp + amount > 10000.0 {{
                select balance into bonus from saving where name = name;
                update saving set balance = bonus + 0.02 * tmp where name = name;
                select cnt into count from stats where nation = nation;
                update stats set cnt = count + 1 where nation = nation;
            }}
        }}"
    );
    let a = analyze(&module("deposit.proc", &source));
    let (_, d) = a.graph.procedure("deposit").expect("deposit");
    let ops: Vec<Vec<u32>> = d.slices().iter().map(|s| s.ops.iter().map(|o| o.0).collect()).collect();
    assert_eq!(ops, vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
    assert_eq!(d.slicing.edges.len(), 2);
    assert!(d.slicing.edges.iter().all(|e| e.0 == pacman::SliceId(0)));
}

#[test]
fn bank_dot_output_names_every_block_and_edge() {
    let a = analyze(&module("pacman_bank.proc", BANK));
    let dot = pacman::dot::to_dot(&a.graph);
    for b in 0..4 {
        assert!(dot.contains(&format!("subgraph cluster_b{b} {{")), "{dot}");
    }
    assert_eq!(dot.matches(" -> ").count(), a.graph.edges().len());
    assert!(dot.contains("lhead=cluster_b3"));
    assert!(dot.starts_with("// lazarus global dependency graph, format 1\n"), "{dot}");
}

/// TPC-C's global dependency graph, pinned. Each block is named by its table (every slice of a
/// logged TPC-C procedure touches one table); docs/pacman.md compares it with the paper's Figure 21.
#[test]
fn tpcc_global_graph_is_pinned() {
    let a = analyze(&module("tpcc.proc", TPCC));
    // order_status and stock_level write nothing: not logged, left out (the paper's Appendix C).
    let read_only: Vec<&str> = a.read_only.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(read_only, ["order_status", "stock_level"]);
    assert!(a.fallback.is_empty());
    let g = &a.graph;
    let mut name_of = BTreeMap::new();
    let mut contents = BTreeMap::new();
    for b in g.blocks() {
        let mut tables = BTreeSet::new();
        let mut pieces = BTreeSet::new();
        for r in &b.pieces.0 {
            let p = &g.procedures()[r.procedure.0 as usize];
            let s = &p.slices()[r.slice.index()];
            tables.extend(s.ops.iter().map(|o| p.analysis.ops[o.index()].table.clone()));
            pieces.insert(format!("{}:{}", p.name(), s.ops.len()));
        }
        assert_eq!(tables.len(), 1, "block {:?} spans tables {tables:?}", b.id);
        let table = tables.pop_first().unwrap_or_default();
        name_of.insert(b.id, table.clone());
        contents.insert(table, pieces.into_iter().collect::<Vec<_>>().join(" "));
    }
    // Per block: the slices it holds as procedure:number-of-operations.
    let expected: BTreeMap<&str, &str> = BTreeMap::from([
        // new_order reads w_tax, payment updates w_ytd: data-dependent, one block.
        ("warehouse", "new_order:1 payment:2"),
        // new_order's d_next_o_id update and the two reads (one per `inserts` branch); payment's
        // d_ytd update and read.
        ("district", "new_order:3 payment:2"),
        // The new-order queue: new_order inserts, delivery reads the oldest and deletes it.
        ("new_order", "delivery:2 new_order:1"),
        ("orders", "delivery:2 new_order:1"),
        // Only new_order reads items and nothing writes them: a block of its own.
        ("item", "new_order:1"),
        // The stock update and the ten s_dist_XX reads (one per district branch).
        ("stock", "new_order:11"),
        ("order_line", "delivery:2 new_order:1"),
        // new_order's read of c_discount, payment's four customer operations (the by-name scan,
        // the balance update, the read and the bad-credit update), delivery's balance update.
        ("customer", "delivery:1 new_order:1 payment:4"),
        ("history", "payment:1"),
    ]);
    let got: BTreeMap<&str, &str> = contents.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(got, expected);
    let edges: BTreeSet<(&str, &str)> =
        g.edges().iter().map(|(x, y)| (name_of[x].as_str(), name_of[y].as_str())).collect();
    let expected_edges = BTreeSet::from([
        // new_order: o_id comes from d_next_o_id and keys the orders, new_order and order_line
        // inserts; ol_amount needs i_price; ol_dist_info is the s_dist_XX read.
        ("district", "orders"),
        ("district", "new_order"),
        ("district", "order_line"),
        ("item", "order_line"),
        ("stock", "order_line"),
        // payment: the history row carries w_name, d_name and the customer found by name.
        ("warehouse", "history"),
        ("district", "history"),
        ("customer", "history"),
        // delivery: everything runs only if the district has a new order, and is keyed by its o_id;
        // the customer is o_c_id and the amount is the sum of ol_amount.
        ("new_order", "orders"),
        ("new_order", "order_line"),
        ("new_order", "customer"),
        ("orders", "customer"),
        ("order_line", "customer"),
    ]);
    assert_eq!(edges, expected_edges);
}

fn only(source: &str) -> ProcedureAnalysis {
    let m = module("case.proc", source);
    assert_eq!(m.procedures.len(), 1);
    ProcedureAnalysis::of(&m.procedures[0]).expect("analysis")
}

const AB: &str = "table a (k int not null, v int, primary key (k));
table b (k int not null, v int, primary key (k));
";

/// Flow dependencies of a procedure over tables a and b, as (p, q) operation indexes.
fn flow_of(body: &str) -> Vec<(u32, u32)> {
    let a = only(&format!("{AB}procedure p(k0 int) {{\n{body}\n}}"));
    a.flow.pairs().iter().map(|(p, q)| (p.0, q.0)).collect()
}

#[test]
fn return_guarded_by_a_read_is_a_control_dependency() {
    let f = flow_of("select v into x from a where k = k0; if x > 0 { return; } update b set v = 1 where k = k0;");
    assert_eq!(f, vec![(0, 1)]);
}

#[test]
fn abort_is_not_a_control_dependency() {
    // Only committed calls are replayed, and they took no abort.
    let f =
        flow_of("select v into x from a where k = k0; if x is null { abort 'no'; } update b set v = 1 where k = k0;");
    assert_eq!(f, vec![]);
}

#[test]
fn loop_carried_dependency_points_backwards_in_the_text() {
    let f = flow_of(
        "let x = k0;
         for i in 0 .. 3 { update b set v = 1 where k = x; select v into y from a where k = i; x = y; }",
    );
    assert_eq!(f, vec![(1, 0)]);
}

#[test]
fn assignment_under_a_condition_carries_the_condition() {
    let f =
        flow_of("let x = 0; select v into y from a where k = k0; if y > 1 { x = 1; } insert into b values (k0, x);");
    assert_eq!(f, vec![(0, 1)]);
}

#[test]
fn a_scan_controls_its_body_and_found_carries_a_dependency() {
    let f = flow_of("for r in select v from a where k >= k0 limit 5 { update b set v = 2 where k = k0; }");
    assert_eq!(f, vec![(0, 1)]);
    let f = flow_of("update a set v = 1 where k = k0; if not found { insert into b values (k0, 0); }");
    assert_eq!(f, vec![(0, 1)]);
}

#[test]
fn independent_operations_have_no_flow_dependency() {
    let f = flow_of("select v into x from a where k = k0; update b set v = k0 where k = k0; return x;");
    assert_eq!(f, vec![]);
}

#[test]
fn too_many_operations_falls_back_to_data_logging() {
    let limit = pacman::limits::OPS_PER_PROCEDURE_MAX;
    let body = "update a set v = 1 where k = k0;\n".repeat(limit + 1);
    let src = format!(
        "{AB}procedure big(k0 int) {{\n{body}}}\nprocedure small(k0 int) {{ update b set v = 1 where k = k0; }}"
    );
    let a = analyze(&module("big.proc", &src));
    assert_eq!(a.fallback.len(), 1);
    assert_eq!(
        a.fallback[0],
        ("big".to_string(), AnalysisError::TooManyOperations { procedure: "big".into(), ops: limit + 1, limit })
    );
    assert!(a.graph.procedure("small").is_some() && a.graph.procedure("big").is_none());
}

/// x1 = x2; x2 = x3; ...; x_n = (a read of a) inside a loop, then an update of b keyed by x1.
fn chain_source(n: usize) -> String {
    let mut body: String = (1..=n).map(|i| format!("let x{i} = 0;\n")).collect();
    body.push_str("for i in 0 .. 2 {\n");
    body.extend((1..n).map(|i| format!("x{i} = x{};\n", i + 1)));
    body.push_str(&format!("select v into y from a where k = i; x{n} = y;\nupdate b set v = 1 where k = x1;\n}}\n"));
    format!("{AB}procedure chain(k0 int) {{\n{body}}}")
}

#[test]
fn a_long_loop_carried_chain_is_too_complex() {
    // Each round of the loop's fixed point moves the read's taint one assignment back: about
    // n * n statement visits.
    let m = module("chain.proc", &chain_source(1100));
    match ProcedureAnalysis::of(&m.procedures[0]) {
        Err(e @ AnalysisError::TooComplex { .. }) => assert_eq!(
            e.to_string(),
            format!(
                "procedure chain: flow analysis needs more than {} statement visits (loops re-run to a fixed point too often)",
                pacman::limits::FLOW_VISITS_MAX
            )
        ),
        other => panic!("expected TooComplex, got {other:?}"),
    }
    // Shorter, the same chain is analyzed, and the update depends on the read through all of it.
    let a = only(&chain_source(30));
    assert_eq!(a.flow.pairs(), vec![(OpId(0), OpId(1))]);
}

// ---- properties over generated procedures ----

/// Ops reachable from `from` along flow dependencies (p -> q when q depends on p), `from` excluded
/// unless on a cycle.
fn reachable(a: &ProcedureAnalysis, from: OpId) -> BTreeSet<OpId> {
    let pairs = a.flow.pairs();
    let mut seen = BTreeSet::new();
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        for &(p, q) in &pairs {
            if p == n && seen.insert(q) {
                stack.push(q);
            }
        }
    }
    seen
}

fn check_partition(a: &ProcedureAnalysis, slicing: &pacman::LocalDependencyGraph) {
    let mut owner = vec![None; a.ops.len()];
    for (s, slice) in slicing.slices.iter().enumerate() {
        assert!(!slice.ops.is_empty(), "empty slice");
        assert!(slice.ops.windows(2).all(|w| w[0] < w[1]), "slice ops in program order");
        for o in &slice.ops {
            assert!(owner[o.index()].replace(s).is_none(), "{}: op {o:?} in two slices", a.name);
            assert_eq!(slicing.slice_of[o.index()].index(), s);
        }
    }
    assert!(owner.iter().all(Option::is_some), "{}: an op in no slice", a.name);
}

/// Slices are closed under flow dependencies: if x and y share a slice and y is reachable from x,
/// every z with x ~> z ~> y shares it too; and the slice graph is acyclic. Returns how many
/// (x, z, y) paths were checked.
fn check_closed(a: &ProcedureAnalysis, slicing: &pacman::LocalDependencyGraph) -> usize {
    let reach: Vec<BTreeSet<OpId>> = (0..a.ops.len()).map(|i| reachable(a, OpId(i as u32))).collect();
    let mut checked = 0;
    for x in 0..a.ops.len() {
        for &y in &reach[x] {
            if slicing.slice_of[x] != slicing.slice_of[y.index()] {
                continue;
            }
            for &z in &reach[x] {
                if reach[z.index()].contains(&y) {
                    checked += 1;
                    assert_eq!(slicing.slice_of[z.index()], slicing.slice_of[x], "{}: o{x} ~> {z:?} ~> {y:?}", a.name);
                }
            }
        }
    }
    let n = slicing.slices.len();
    let order = pacman::slice::topological_order(n, slicing.edges.iter().map(|(s, t)| (s.index(), t.index())));
    assert!(order.is_some(), "{}: slice graph has a cycle", a.name);
    checked
}

#[derive(Default)]
struct Counts {
    cross_slice_data: usize,
    same_block_data: usize,
    cross_block_flow: usize,
    closure_paths: usize,
}

fn check_graph(g: &GlobalDependencyGraph, counts: &mut Counts) {
    let blocks = g.blocks().len();
    assert!(g.edges().iter().all(|(a, b)| a < b), "edges follow the topological numbering");
    assert!(pacman::slice::topological_order(blocks, g.edges().iter().map(|(a, b)| (a.index(), b.index()))).is_some());
    // Every (procedure, final slice) in exactly one block, at most one slice per procedure and block.
    let mut seen = BTreeSet::new();
    for b in g.blocks() {
        let procs: BTreeSet<_> = b.pieces.0.iter().map(|r| r.procedure).collect();
        assert_eq!(procs.len(), b.pieces.0.len(), "two slices of one procedure in block {:?}", b.id);
        for r in &b.pieces.0 {
            assert!(seen.insert(*r));
            assert_eq!(g.block_of(*r), Some(b.id));
        }
    }
    let total: usize = g.procedures().iter().map(|p| p.slices().len()).sum();
    assert_eq!(seen.len(), total);
    // Every operation, with its block.
    let mut all = Vec::new();
    for (pi, p) in g.procedures().iter().enumerate() {
        for (o, op) in p.analysis.ops.iter().enumerate() {
            let slice = p.slicing.slice_of[o];
            all.push((pi, o, op, p.block_of[slice.index()]));
        }
        for (q, deps) in (0..p.analysis.ops.len()).map(|q| (q, p.analysis.flow.on(OpId(q as u32)))) {
            for &d in deps {
                let (bp, bq) =
                    (p.block_of[p.slicing.slice_of[d.index()].index()], p.block_of[p.slicing.slice_of[q].index()]);
                if bp != bq {
                    counts.cross_block_flow += 1;
                    assert!(g.edges().contains(&(bp, bq)), "flow o{} -> o{q} of {} not a block edge", d.0, p.name());
                }
            }
        }
    }
    // Data dependencies, within and across procedures: never between two blocks, so no block edge
    // is needed; PACMAN's rule (2) puts both sides in one block.
    for (i, x) in all.iter().enumerate() {
        for y in &all[i + 1..] {
            if pacman::data::data_dependent(x.2, y.2) {
                counts.same_block_data += 1;
                if x.0 == y.0 {
                    let p = &g.procedures()[x.0];
                    let (sx, sy) = (p.analysis.local.slice_of[x.1], p.analysis.local.slice_of[y.1]);
                    assert_eq!(sx, sy, "data-dependent ops of one procedure in two local slices");
                    counts.cross_slice_data += usize::from(sx != sy);
                }
                assert_eq!(x.3, y.3, "data-dependent operations in two blocks");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_procedures_satisfy_the_papers_properties(bytes in prop::collection::vec(any::<u8>(), 0..160)) {
        let source = Gen::procedures(bytes);
        let m = module("gen.proc", &source);
        let a = analyze(&m);
        prop_assert!(a.fallback.is_empty());
        let mut counts = Counts::default();
        for p in a.graph.procedures() {
            check_partition(&p.analysis, &p.analysis.local);
            check_partition(&p.analysis, &p.slicing);
            counts.closure_paths += check_closed(&p.analysis, &p.analysis.local);
            counts.closure_paths += check_closed(&p.analysis, &p.slicing);
        }
        for p in &a.read_only {
            check_partition(p, &p.local);
            check_closed(p, &p.local);
        }
        check_graph(&a.graph, &mut counts);
        prop_assert_eq!(counts.cross_slice_data, 0);
    }
}

/// The properties are not vacuous: over a fixed set of generated inputs, the checks meet
/// cross-block flow dependencies, data dependencies and flow paths inside slices.
#[test]
fn generated_procedures_exercise_every_property() {
    let mut counts = Counts::default();
    let mut rng_state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..200 {
        let bytes: Vec<u8> = (0..120)
            .map(|_| {
                rng_state ^= rng_state << 13;
                rng_state ^= rng_state >> 7;
                rng_state ^= rng_state << 17;
                (rng_state >> 24) as u8
            })
            .collect();
        let a = analyze(&module("gen.proc", &Gen::procedures(bytes)));
        for p in a.graph.procedures() {
            counts.closure_paths += check_closed(&p.analysis, &p.slicing);
        }
        check_graph(&a.graph, &mut counts);
    }
    assert!(counts.cross_block_flow > 50, "cross-block flow deps: {}", counts.cross_block_flow);
    assert!(counts.same_block_data > 50, "data deps: {}", counts.same_block_data);
    assert!(counts.closure_paths > 10, "closure paths: {}", counts.closure_paths);
}

/// A concrete run of a generated procedure over an in-memory table map that tracks, for every
/// value, the operations whose results reached it (dynamic taint), and for every operation run, the
/// operations its inputs and the conditions that led to it came from. Dynamic taint sees only the
/// paths taken, so it under-approximates the flow dependencies; the static analysis must cover it.
mod dynamic {
    use lazarus::proc::ir::{BinOp, Expr, ExprKind, Procedure, Stmt, StmtKind, UnOp};
    use lazarus::storage::Value;
    use std::collections::{BTreeMap, BTreeSet, HashMap};

    type Taint = BTreeSet<u32>;
    type Val = Option<i64>;
    /// An abort or a run-time error: the call would not commit, so it is never replayed.
    pub struct Stop;
    enum Flow {
        Next,
        Return,
    }

    pub struct Run<'a> {
        p: &'a Procedure,
        op_of: HashMap<u32, u32>,
        vars: Vec<(Val, Taint)>,
        pub db: BTreeMap<String, BTreeMap<i64, Val>>,
        exits: Taint,
        row: Option<(i64, Val)>,
        steps: usize,
        /// Per operation index: the operations its instances were seen to depend on.
        pub deps: BTreeMap<u32, Taint>,
    }

    impl<'a> Run<'a> {
        pub fn new(
            p: &'a Procedure,
            ops: &[lazarus::pacman::Operation],
            db: BTreeMap<String, BTreeMap<i64, Val>>,
        ) -> Self {
            let op_of = ops.iter().enumerate().map(|(i, o)| (o.stmt.0, i as u32)).collect();
            let vars = vec![(None, Taint::new()); p.vars.len()];
            Run { p, op_of, vars, db, exits: Taint::new(), row: None, steps: 0, deps: BTreeMap::new() }
        }

        pub fn call(&mut self, args: &[i64]) -> Result<(), Stop> {
            for (i, a) in args.iter().enumerate() {
                self.vars[i] = (Some(*a), Taint::new());
            }
            self.vars[self.p.found.index()] = (Some(0), Taint::new());
            let body = &self.p.body;
            self.block(body, &Taint::new()).map(|_| ())
        }

        fn block(&mut self, stmts: &'a [Stmt], ctrl: &Taint) -> Result<Flow, Stop> {
            for s in stmts {
                if let Flow::Return = self.stmt(s, ctrl)? {
                    return Ok(Flow::Return);
                }
            }
            Ok(Flow::Next)
        }

        fn record(&mut self, s: &Stmt, inputs: Taint) -> u32 {
            let q = self.op_of[&s.id.0];
            self.deps.entry(q).or_default().extend(inputs);
            q
        }

        fn set(&mut self, var: lazarus::proc::ir::VarId, v: Val, t: Taint) {
            self.vars[var.index()] = (v, t);
        }

        fn stmt(&mut self, s: &'a Stmt, ctrl: &Taint) -> Result<Flow, Stop> {
            self.steps += 1;
            if self.steps > 10_000 {
                return Err(Stop);
            }
            let mut ctrl: Taint = ctrl.union(&self.exits).copied().collect();
            let found = self.p.found;
            match &s.kind {
                StmtKind::Assign { var, value } => {
                    let (v, mut t) = self.eval(value)?;
                    t.extend(ctrl.iter().copied());
                    self.set(*var, v, t);
                }
                StmtKind::If { cond, then, otherwise } => {
                    let (c, t) = self.eval(cond)?;
                    ctrl.extend(t);
                    if [then, otherwise].iter().any(|b| b.iter().any(contains_return)) {
                        self.exits.extend(ctrl.iter().copied());
                    }
                    let branch = if c == Some(1) { then } else { otherwise };
                    return self.block(branch, &ctrl);
                }
                StmtKind::ForRange { var, start, end, body } => {
                    let ((a, ta), (b, tb)) = (self.eval(start)?, self.eval(end)?);
                    let (Some(a), Some(b)) = (a, b) else { return Err(Stop) };
                    ctrl.extend(ta.into_iter().chain(tb));
                    for i in a..b {
                        self.set(*var, Some(i), ctrl.clone());
                        if let Flow::Return = self.block(body, &ctrl)? {
                            return Ok(Flow::Return);
                        }
                    }
                }
                StmtKind::ForScan { scan, body } => {
                    let lower = scan.lower.as_ref().map(|b| self.eval(&b.value)).transpose()?;
                    let (lo, mut inputs) = lower.unwrap_or((Some(i64::MIN), Taint::new()));
                    let (limit, tl) = self.eval(&scan.limit)?;
                    inputs.extend(tl.into_iter().chain(ctrl.iter().copied()));
                    let q = self.record(s, inputs);
                    let (Some(lo), Some(limit)) = (lo, limit) else { return Err(Stop) };
                    let rows: Vec<(i64, Val)> = self.db[&scan.table.name]
                        .range(lo..)
                        .take(limit.max(0) as usize)
                        .map(|(k, v)| (*k, *v))
                        .collect();
                    self.set(found, Some(i64::from(!rows.is_empty())), Taint::from([q]));
                    ctrl.insert(q);
                    for (k, v) in rows {
                        for (pos, var) in scan.columns.iter().zip(&scan.into) {
                            self.set(*var, if *pos == 0 { Some(k) } else { v }, Taint::from([q]));
                        }
                        if let Flow::Return = self.block(body, &ctrl)? {
                            return Ok(Flow::Return);
                        }
                    }
                }
                StmtKind::Get(g) => {
                    let (k, mut t) = self.eval(&g.key[0])?;
                    t.extend(ctrl.iter().copied());
                    let q = self.record(s, t);
                    let k = k.ok_or(Stop)?;
                    let row = self.db[&g.table.name].get(&k).copied();
                    for (pos, var) in g.columns.iter().zip(&g.into) {
                        let v = row.and_then(|v| if *pos == 0 { Some(k) } else { v });
                        self.set(*var, v, Taint::from([q]));
                    }
                    self.set(found, Some(i64::from(row.is_some())), Taint::from([q]));
                }
                StmtKind::Insert(i) => {
                    let ((k, tk), (v, tv)) = (self.eval(&i.values[0])?, self.eval(&i.values[1])?);
                    self.record(s, tk.into_iter().chain(tv).chain(ctrl.iter().copied()).collect());
                    let k = k.ok_or(Stop)?;
                    let table = self.db.get_mut(&i.table.name).ok_or(Stop)?;
                    if table.insert(k, v).is_some() {
                        return Err(Stop); // duplicate key: the call aborts
                    }
                }
                StmtKind::Update(u) => {
                    let (k, mut t) = self.eval(&u.key[0])?;
                    let k = k.ok_or(Stop)?;
                    let old = self.db[&u.table.name].get(&k).copied();
                    self.row = old.map(|v| (k, v));
                    let (v, tv) = self.eval(&u.sets[0].1)?;
                    t.extend(tv.into_iter().chain(ctrl.iter().copied()));
                    let q = self.record(s, t);
                    if old.is_some() {
                        self.db.get_mut(&u.table.name).ok_or(Stop)?.insert(k, v);
                    }
                    self.set(found, Some(i64::from(old.is_some())), Taint::from([q]));
                }
                StmtKind::Delete(d) => {
                    let (k, mut t) = self.eval(&d.key[0])?;
                    t.extend(ctrl.iter().copied());
                    let q = self.record(s, t);
                    let gone = self.db.get_mut(&d.table.name).ok_or(Stop)?.remove(&k.ok_or(Stop)?);
                    self.set(found, Some(i64::from(gone.is_some())), Taint::from([q]));
                }
                StmtKind::Return(_) => return Ok(Flow::Return),
                StmtKind::Abort(_) => return Err(Stop),
                other => panic!("the generator does not emit {other:?}"),
            }
            Ok(Flow::Next)
        }

        fn eval(&self, e: &Expr) -> Result<(Val, Taint), Stop> {
            Ok(match &e.kind {
                ExprKind::Const(Value::Int(i)) => (Some(*i), Taint::new()),
                ExprKind::Const(Value::Bool(b)) => (Some(i64::from(*b)), Taint::new()),
                ExprKind::Const(Value::Null) => (None, Taint::new()),
                ExprKind::Var(v) => self.vars[v.index()].clone(),
                // The row an update reads belongs to the update itself.
                ExprKind::Column(pos) => {
                    (self.row.and_then(|(k, v)| if *pos == 0 { Some(k) } else { v }), Taint::new())
                }
                ExprKind::Unary(UnOp::Not, x) => {
                    let (v, t) = self.eval(x)?;
                    (v.map(|b| 1 - b), t)
                }
                ExprKind::Binary(op, a, b) => {
                    let ((x, mut t), (y, ty)) = (self.eval(a)?, self.eval(b)?);
                    t.extend(ty);
                    let v = match (x, y) {
                        (Some(x), Some(y)) => Some(match op {
                            BinOp::Add => x.checked_add(y).ok_or(Stop)?,
                            BinOp::Lt => i64::from(x < y),
                            BinOp::Gt => i64::from(x > y),
                            other => panic!("the generator does not emit {other:?}"),
                        }),
                        _ => None,
                    };
                    (v, t)
                }
                other => panic!("the generator does not emit {other:?}"),
            })
        }
    }

    fn contains_return(s: &Stmt) -> bool {
        matches!(s.kind, StmtKind::Return(_)) || s.children().iter().any(|b| b.iter().any(contains_return))
    }
}

/// Random table contents for t0..t3: keys 0..5, each present with probability 1/2.
fn random_tables(rng: &mut u64) -> BTreeMap<String, BTreeMap<i64, Option<i64>>> {
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng >> 32
    };
    let mut tables = BTreeMap::new();
    for t in 0..4 {
        let mut rows = BTreeMap::new();
        for k in 0..5 {
            if next() % 2 == 0 {
                let v = if next() % 6 == 0 { None } else { Some((next() % 5) as i64) };
                rows.insert(k, v);
            }
        }
        tables.insert(format!("t{t}"), rows);
    }
    tables
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Soundness against execution: every dependency a committed run shows (an operation's key or
    /// values, or whether it ran, came from another operation's result) is a static flow dependency.
    #[test]
    fn static_flow_dependencies_cover_every_run(bytes in prop::collection::vec(any::<u8>(), 0..160), seed in 1u64..) {
        let source = Gen::procedures(bytes);
        let m = module("gen.proc", &source);
        let mut rng = seed;
        for p in &m.procedures {
            let a = ProcedureAnalysis::of(p).expect("analysis");
            for round in 0..8 {
                let mut run = dynamic::Run::new(p, &a.ops, random_tables(&mut rng));
                let args = [(rng % 5) as i64, ((rng >> 8) % 5) as i64 + round % 2];
                if run.call(&args).is_err() {
                    continue; // aborted: never logged, never replayed
                }
                for (q, seen) in &run.deps {
                    let q = OpId(*q);
                    let allowed: BTreeSet<OpId> = a.flow.on(q).iter().copied().chain([q]).collect();
                    for d in seen {
                        prop_assert!(allowed.contains(&OpId(*d)), "{}: o{} depends on o{d} at run time\n{source}", p.name, q.0);
                    }
                }
            }
        }
    }
}

/// Why read-only procedures stay out of the graph (docs/pacman.md): with them, stock_level's
/// district -> order_line -> stock and order_status's customer -> orders -> order_line close cycles
/// with new_order's stock -> order_line and delivery's orders -> customer, and Algorithm 2 merges
/// four tables' blocks into one.
#[test]
fn tpcc_with_read_only_procedures_merges_blocks() {
    let m = module("tpcc.proc", TPCC);
    let all: Vec<ProcedureAnalysis> =
        m.procedures.iter().map(|p| ProcedureAnalysis::of(p).expect("analysis")).collect();
    let g = GlobalDependencyGraph::build(all, &[]).expect("graph");
    let tables_of = |b: &pacman::Block| -> BTreeSet<String> {
        b.pieces
            .0
            .iter()
            .flat_map(|r| {
                let p = &g.procedures()[r.procedure.0 as usize];
                p.slices()[r.slice.index()]
                    .ops
                    .iter()
                    .map(|o| p.analysis.ops[o.index()].table.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let blocks: BTreeSet<Vec<String>> = g.blocks().iter().map(|b| tables_of(b).into_iter().collect()).collect();
    let expected: BTreeSet<Vec<String>> = [
        vec!["customer", "order_line", "orders", "stock"],
        vec!["district"],
        vec!["history"],
        vec!["item"],
        vec!["new_order"],
        vec!["warehouse"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect();
    assert_eq!(blocks, expected);
}

#[test]
fn lazarus_analyze_prints_the_graph_and_writes_dot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dot_path = dir.path().join("tpcc.dot");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .args(["analyze", concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/tpcc.proc"), "--dot"])
        .arg(&dot_path)
        .output()
        .expect("run lazarus analyze");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "procedure new_order (20 operations, logged)",
        "procedure stock_level (3 operations, read-only",
        "global dependency graph (Algorithm 2): 9 blocks",
        "topological order: B0 B1 B2 B3 B4 B5 B6 B7 B8",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let dot = std::fs::read_to_string(&dot_path).expect("dot file");
    assert!(dot.starts_with(pacman::dot::HEADER));
    assert_eq!(dot.matches("subgraph cluster_b").count(), 9);
    assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    // A file that does not check is reported with its errors, and the command fails.
    let bad = dir.path().join("bad.proc");
    std::fs::write(&bad, "procedure p() { update nowhere set v = 1 where k = 1; }").expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lazarus")).arg("analyze").arg(&bad).output().expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("bad.proc:1:"), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Algorithm 2's "break cycles" and "merge slices": p reads a then writes b, q reads b then writes
/// a. The blocks {p.a, q.a} and {p.b, q.b} depend on each other, so they merge, and then each
/// procedure's two slices, now in one block, merge into one.
#[test]
fn mutually_dependent_blocks_merge_and_so_do_their_slices() {
    let src = format!(
        "{AB}procedure p(k0 int) {{ select v into x from a where k = k0; update b set v = x where k = k0; }}
        procedure q(k0 int) {{ select v into y from b where k = k0; update a set v = y where k = k0; }}
        procedure r(k0 int) {{ insert into b values (k0, 0); }}"
    );
    let a = analyze(&module("cycle.proc", &src));
    for name in ["p", "q"] {
        let (_, s) = a.graph.procedure(name).expect("logged");
        assert_eq!(s.analysis.local.slices.len(), 2, "{name}: Algorithm 1 gives two slices");
        assert_eq!(s.analysis.local.edges.len(), 1);
        assert_eq!(s.slices().len(), 1, "{name}: one slice after Algorithm 2");
        assert_eq!(s.slices()[0].ops, vec![OpId(0), OpId(1)]);
        assert!(s.slicing.edges.is_empty());
    }
    assert_eq!(a.graph.blocks().len(), 1);
    assert_eq!(a.graph.blocks()[0].pieces.0.len(), 3);
    assert!(a.graph.edges().is_empty());
    let text = pacman::text::describe(&a);
    assert!(text.contains("slices after Algorithm 2"), "{text}");
}

#[test]
fn ad_hoc_tables_join_the_blocks_of_their_readers() {
    // Two procedures only read table a, in independent slices; ad-hoc writes to a must be ordered
    // with both, so the three share a block.
    let src = format!(
        "{AB}procedure p(k0 int) {{ select v into x from a where k = k0; update b set v = x where k = k0; }}
        procedure q(k0 int) {{ select v into y from a where k = k0; insert into b values (k0 + 1, y); }}"
    );
    let m = module("adhoc.proc", &src);
    let procs: Vec<_> = m.procedures.iter().collect();
    let without = pacman::analyze(&procs, &[]).expect("analysis");
    assert_eq!(without.graph.blocks().len(), 3, "reads of a stay apart; b is one block");
    let with = pacman::analyze(&procs, &["a", "b"]).expect("analysis");
    assert_eq!(with.graph.blocks().len(), 2);
    let block_a = with.graph.block_of_ad_hoc_table("a").expect("a has a block");
    assert_eq!(with.graph.blocks()[block_a.index()].pieces.0.len(), 2);
    assert_eq!(with.graph.block_of_ad_hoc_table("b"), Some(BlockId(1)));
    assert_eq!(with.graph.edges(), &[(block_a, BlockId(1))]);
    assert_eq!(with.graph.block_of_ad_hoc_table("c"), None);
}
