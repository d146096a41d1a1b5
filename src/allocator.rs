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
/// pages straight from an arena (and takes them back whole when it is freed), and a multiple of
/// every page size Linux uses (4 KiB to 64 KiB).
const PREFAULT_BLOCK_BYTES: usize = 8 << 20;

/// Why memory could not be faulted in ahead.
#[derive(Debug, thiserror::Error)]
pub enum PrefaultError {
    #[error("cannot allocate {size_bytes} bytes to fault in")]
    Allocate { size_bytes: usize },
    #[error("cannot fault in {size_bytes} bytes: the machine has {physical_bytes} bytes of memory")]
    MoreThanMemory { size_bytes: usize, physical_bytes: usize },
    #[error("the kernel does not say its page size or its memory size")]
    NoSystemSizes,
    #[error("the kernel would not fault in the memory (madvise MADV_POPULATE_WRITE): {0}")]
    Populate(std::io::Error),
}

/// Faults in `size_bytes` of heap now (rounded up to 8 MiB blocks) and hands it back to the
/// allocator. With mimalloc told to keep freed memory ([`keep_freed_memory`], as the `lazarus`
/// binary does) the database's later growth reuses these pages, which the kernel has already
/// zeroed and (on a VM) the host has already backed, instead of paying both at first touch while
/// serving; under an allocator that returns freed blocks to the kernel it is only a cost.
/// Returns the bytes faulted in.
pub fn prefault(size_bytes: usize) -> Result<usize, PrefaultError> {
    let (page_bytes, physical_bytes) = system_sizes().ok_or(PrefaultError::NoSystemSizes)?;
    if size_bytes > physical_bytes {
        return Err(PrefaultError::MoreThanMemory { size_bytes, physical_bytes });
    }
    // Page-aligned, so that madvise takes the block whole.
    let layout = std::alloc::Layout::from_size_align(PREFAULT_BLOCK_BYTES, page_bytes)
        .map_err(|_| PrefaultError::NoSystemSizes)?;
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
        if let Err(e) = populate(block, page_bytes) {
            result = Err(PrefaultError::Populate(e));
            break;
        }
    }
    for block in held {
        // SAFETY: allocated above with `layout` and not freed since.
        unsafe { std::alloc::dealloc(block, layout) };
    }
    result
}

/// Faults in the `PREFAULT_BLOCK_BYTES` at `block` (page-aligned): `MADV_POPULATE_WRITE`, or on a
/// kernel older than 5.14, which does not know it, a write to each page.
fn populate(block: *mut u8, page_bytes: usize) -> std::io::Result<()> {
    // SAFETY: `block` is a live, page-aligned allocation of `PREFAULT_BLOCK_BYTES`, a multiple of
    // the page size; populating it changes no byte.
    let rc = unsafe { libc::madvise(block.cast(), PREFAULT_BLOCK_BYTES, libc::MADV_POPULATE_WRITE) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) {
        return Err(e);
    }
    for offset in (0..PREFAULT_BLOCK_BYTES).step_by(page_bytes) {
        // SAFETY: `offset` lies inside the block, which this function may write (its bytes are
        // not read before the caller frees it).
        unsafe { block.add(offset).write_volatile(0) };
    }
    Ok(())
}

/// The kernel's page size and the machine's physical memory, in bytes.
fn system_sizes() -> Option<(usize, usize)> {
    // SAFETY: `sysconf` reads a system constant and takes no pointer.
    let (pages, page_bytes) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let (pages, page_bytes) = (usize::try_from(pages).ok()?, usize::try_from(page_bytes).ok()?);
    (pages > 0 && page_bytes.is_power_of_two() && PREFAULT_BLOCK_BYTES.is_multiple_of(page_bytes))
        .then(|| (page_bytes, pages.saturating_mul(page_bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's minor page faults so far (`getrusage`).
    fn minor_faults() -> i64 {
        // SAFETY: all-zero bytes are a valid `rusage` (integers and timevals).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid out pointer for the duration of the call.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0, "getrusage");
        usage.ru_minflt
    }

    #[test]
    fn prefault_faults_in_at_least_what_was_asked() {
        let asked_bytes = 3 * PREFAULT_BLOCK_BYTES + 1;
        let (page_bytes, _) = system_sizes().expect("the kernel's sizes");
        let faults_before = minor_faults();
        let faulted_bytes = prefault(asked_bytes).expect("prefault of 25 MiB");
        let faults = minor_faults() - faults_before;
        assert!(faulted_bytes >= asked_bytes, "faulted {faulted_bytes} < asked {asked_bytes}");
        // Fresh blocks of the test's (system) allocator come straight from mmap: every page of
        // them is faulted in by the prefault, one fault per page (or per huge page, 2 MiB).
        let huge_pages = (4 * PREFAULT_BLOCK_BYTES / (2 << 20)) as i64;
        assert!(faults >= huge_pages, "{faults} page faults for {faulted_bytes} bytes of {page_bytes}-byte pages");
        assert_eq!(prefault(0).expect("prefault of nothing"), 0);
    }

    #[test]
    fn prefault_of_more_than_the_machine_has_is_refused() {
        let (_, physical_bytes) = system_sizes().expect("the kernel's sizes");
        let too_much = physical_bytes.saturating_add(1);
        match prefault(too_much) {
            Err(PrefaultError::MoreThanMemory { size_bytes, .. }) => assert_eq!(size_bytes, too_much),
            other => panic!("expected MoreThanMemory, got {other:?}"),
        }
    }
}
