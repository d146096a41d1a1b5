//! How the allocator the `lazarus` binary links (mimalloc) is tuned, shared with the benchmarks
//! that link it too, so that they measure the allocation costs the product has.

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (include/mimalloc.h); the Rust bindings
/// do not name it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tells mimalloc never to give freed memory back to the kernel. By default it purges (decommits)
/// free pages after 10 ms, and the next allocation there faults in and zeroes a fresh 2 MiB huge
/// page: on TPC-C, whose scans and row copies free and reallocate all the time, that was 10–15 %
/// of a worker's time in `clear_page_erms` and 8x the page faults (docs/PERFORMANCE.md). A
/// database keeps its memory anyway. It only changes an option of mimalloc, so it is harmless
/// in a process that links another allocator.
///
/// # Safety
///
/// mimalloc reads its options without synchronization: call this before the process starts a
/// second thread (first thing in `main`), so that no allocation reads the option as it is set.
pub unsafe fn keep_freed_memory() {
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table and takes no pointer;
    // the caller guarantees no other thread exists to read it meanwhile.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}
