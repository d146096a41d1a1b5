// The microbenchmark behind `key::permuted_by_varying_bytes` (docs/PERFORMANCE.md, "Taurus",
// "Session 45"). Run: `cargo new radtest && cd radtest && cargo add radsort`, put this file in
// src/main.rs, `cargo run --release`. 1.8 M order-line keys (4 integer columns), shuffled: a
// comparison sort ("cmp"), a packed word beside each item ("packed-inline"), and (word, index)
// pairs sorted, then each item moved once ("packed-pdq", kept); with "headed" (the head-word sort) and
// "packed-radix" (radsort) added to the list of modes, the first run at the end of sort-microbench.txt.
use std::time::Instant;
type Item = ([u8; 40], u8, Box<u64>); // key bytes, len, payload pointer (48 bytes ~ Entry)
fn key(i: &Item) -> &[u8] { &i.0[..i.1 as usize] }
fn enc(cols: &[i64]) -> ([u8;40], u8) {
    let mut b = [0u8;40]; let mut n=0;
    for &c in cols { b[n]=2; b[n+1..n+9].copy_from_slice(&((c ^ i64::MIN) as u64).to_be_bytes()); n+=9; }
    (b, n as u8)
}
fn make() -> Vec<Item> {
    let mut v = Vec::new();
    for w in 1..=2 { for d in 1..=10 { for o in 1..=9000 { for ol in 1..=10 {
        let (k,l)=enc(&[w,d,o,ol]); v.push((k,l,Box::new(0u64)));
    }}}}
    // shuffle deterministically
    let mut s=0x9E3779B97F4A7C15u64; let n=v.len();
    for i in (1..n).rev() { s^=s<<13; s^=s>>7; s^=s<<17; let j=(s%(i as u64+1)) as usize; v.swap(i,j); }
    v
}
fn packed(items: &mut Vec<Item>, radix: bool) {
    let t0=Instant::now();
    let first = key(&items[0]).to_vec();
    let len = first.len();
    let mut diff = vec![0u8; len];
    for it in items.iter() { let k = key(it); assert_eq!(k.len(), len); for (d,(a,b)) in diff.iter_mut().zip(k.iter().zip(&first)) { *d |= a ^ b; } }
    let pos: Vec<usize> = (0..len).filter(|&i| diff[i]!=0).collect();
    assert!(pos.len() <= 8, "{}", pos.len());
    let mut order: Vec<(u64, u32)> = items.iter().enumerate().map(|(i, it)| { let k=key(it); (pos.iter().fold(0u64, |w,&p| w<<8 | k[p] as u64), i as u32) }).collect();
    let t1=Instant::now();
    if radix { radsort::sort_by_key(&mut order, |p| p.0); } else { order.sort_unstable_by_key(|p| p.0); }
    let t2=Instant::now();
    let mut slots: Vec<Option<Item>> = items.drain(..).map(Some).collect();
    let t3=Instant::now();
    items.extend(order.iter().map(|&(_, i)| slots[i as usize].take().unwrap()));
    println!("  scan+order {:.1} sort {:.1} slots {:.1} gather {:.1}", (t1-t0).as_secs_f64()*1e3,(t2-t1).as_secs_f64()*1e3,(t3-t2).as_secs_f64()*1e3,t3.elapsed().as_secs_f64()*1e3);
}
fn packed_inline(items: &mut Vec<Item>) {
    let first = key(&items[0]).to_vec();
    let len = first.len();
    let mut diff = vec![0u8; len];
    for it in items.iter() { let k = key(it); for (d,(a,b)) in diff.iter_mut().zip(k.iter().zip(&first)) { *d |= a ^ b; } }
    let pos: Vec<usize> = (0..len).filter(|&i| diff[i]!=0).collect();
    let mut h: Vec<(u64, Item)> = items.drain(..).map(|it| { let k=key(&it); (pos.iter().fold(0u64, |w,&p| w<<8 | k[p] as u64), it) }).collect();
    h.sort_unstable_by_key(|x| x.0);
    items.extend(h.into_iter().map(|(_,i)| i));
}
fn headed(items: &mut Vec<Item>) {
    let first = key(&items[0]).to_vec();
    let skip = items.iter().fold(first.len(), |s, it| s.min(first.iter().zip(key(it)).take_while(|(a,b)| a==b).count()));
    let head = |k: &[u8]| -> [u64;4] { std::array::from_fn(|w| { let mut word=[0u8;8]; let st=(skip+w*8).min(k.len()); let b=&k[st..(st+8).min(k.len())]; word[..b.len()].copy_from_slice(b); u64::from_be_bytes(word)}) };
    let mut h: Vec<([u64;4], Item)> = items.drain(..).map(|it| (head(key(&it)), it)).collect();
    h.sort_unstable_by(|a,b| a.0.cmp(&b.0).then_with(|| key(&a.1).cmp(key(&b.1))));
    items.extend(h.into_iter().map(|(_,i)| i));
}
fn main() {
    for round in 0..3 {
        for m in ["cmp","packed-inline","packed-pdq"] {
            let mut v = make();
            let t = Instant::now();
            match m { "cmp" => v.sort_unstable_by(|a,b| key(a).cmp(key(b))), "headed" => headed(&mut v), "packed-pdq" => packed(&mut v,false), "packed-inline" => packed_inline(&mut v), _ => packed(&mut v,true) }
            let e = t.elapsed();
            assert!(v.windows(2).all(|w| key(&w[0]) < key(&w[1])));
            println!("round {round} {m:14} {} items {:7.1} ms", v.len(), e.as_secs_f64()*1e3);
        }
    }
}
