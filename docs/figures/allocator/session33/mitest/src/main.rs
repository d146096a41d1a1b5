use std::alloc::{GlobalAlloc, Layout};
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let n = 2_000_000;
    let size: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(80);
    let raw = std::env::args().nth(2).is_some();
    let layout = Layout::from_size_align(size, 8).unwrap();
    let mut v: Vec<*mut u8> = Vec::with_capacity(n);
    for round in 0..3 {
        let t = std::time::Instant::now();
        for _ in 0..n {
            let p = if raw { unsafe { libmimalloc_sys::mi_malloc(size) as *mut u8 } } else { unsafe { GLOBAL.alloc(layout) } };
            unsafe { *p = 1 };
            v.push(p);
        }
        let el = t.elapsed();
        let us = unsafe { libmimalloc_sys::mi_usable_size(v[n/2] as *const _) };
        println!("size {size} raw {raw} round {round}: usable {us}, {:.1} ns/alloc", el.as_nanos() as f64 / n as f64);
        for p in v.drain(..) { unsafe { libmimalloc_sys::mi_free(p as *mut _) } }
    }
}
