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

/// Size of the blocks [`prefault`] allocates: large enough that mimalloc gives each its own
/// pages straight from an arena (and takes them back whole when it is freed).
const PREFAULT_BLOCK_BYTES: usize = 8 << 20;

/// Why memory could not be faulted in ahead.
#[derive(Debug, thiserror::Error)]
pub enum PrefaultError {
    #[error("cannot allocate {size_bytes} bytes to fault in")]
    Allocate { size_bytes: usize },
    #[error("cannot fault in {size_bytes} bytes: the machine has {physical_bytes} bytes of memory")]
    MoreThanMemory { size_bytes: usize, physical_bytes: usize },
    #[error("the kernel would not fault in the memory (madvise MADV_POPULATE_WRITE): {0}")]
    Populate(std::io::Error),
}

/// Faults in `size_bytes` of heap now and hands it back to the allocator, which (with
/// [`keep_freed_memory`]) keeps it: the database's later growth reuses pages the kernel has
/// already zeroed and (on a VM) the host has already backed, instead of paying both at first
/// touch while serving. Returns the bytes faulted in.
pub fn prefault(size_bytes: usize) -> Result<usize, PrefaultError> {
    let physical_bytes = physical_memory_bytes();
    if size_bytes > physical_bytes {
        return Err(PrefaultError::MoreThanMemory { size_bytes, physical_bytes });
    }
    let layout = std::alloc::Layout::from_size_align(PREFAULT_BLOCK_BYTES, 4096)
        .map_err(|_| PrefaultError::Allocate { size_bytes })?;
    let blocks = size_bytes.div_ceil(PREFAULT_BLOCK_BYTES);
    let mut held = Vec::with_capacity(blocks);
    let mut result = Ok(blocks * PREFAULT_BLOCK_BYTES);
    for _ in 0..blocks {
        // SAFETY: the layout has a non-zero size.
        let block = unsafe { std::alloc::alloc(layout) };
        if block.is_null() {
            result = Err(PrefaultError::Allocate { size_bytes });
            break;
        }
        held.push(block);
        // SAFETY: `block` is a live allocation of `PREFAULT_BLOCK_BYTES`, page-aligned; populating
        // it writes no byte the program reads.
        let rc = unsafe { libc::madvise(block.cast(), PREFAULT_BLOCK_BYTES, libc::MADV_POPULATE_WRITE) };
        if rc != 0 {
            result = Err(PrefaultError::Populate(std::io::Error::last_os_error()));
            break;
        }
    }
    for block in held {
        // SAFETY: allocated above with `layout` and not freed since.
        unsafe { std::alloc::dealloc(block, layout) };
    }
    result
}

/// The machine's physical memory (`usize::MAX` when the kernel does not say).
fn physical_memory_bytes() -> usize {
    // SAFETY: `sysconf` reads a system constant and takes no pointer.
    let (pages, page_bytes) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    match (usize::try_from(pages), usize::try_from(page_bytes)) {
        (Ok(pages), Ok(page_bytes)) if pages > 0 && page_bytes > 0 => pages.saturating_mul(page_bytes),
        _ => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefault_faults_in_at_least_what_was_asked() {
        let asked_bytes = 3 * PREFAULT_BLOCK_BYTES + 1;
        let faulted_bytes = prefault(asked_bytes).expect("prefault of 25 MiB");
        assert!(faulted_bytes >= asked_bytes, "faulted {faulted_bytes} < asked {asked_bytes}");
        assert_eq!(prefault(0).expect("prefault of nothing"), 0);
    }

    #[test]
    fn prefault_of_more_than_the_machine_has_is_refused() {
        let too_much = physical_memory_bytes().saturating_add(1);
        match prefault(too_much) {
            Err(PrefaultError::MoreThanMemory { size_bytes, .. }) => assert_eq!(size_bytes, too_much),
            other => panic!("expected MoreThanMemory, got {other:?}"),
        }
    }
}
