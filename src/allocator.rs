//! The allocator the `lazarus` binary links (mimalloc, through [`Mimalloc`]) and how it is
//! tuned, shared with the benchmarks that link it too, so that they measure the allocation costs
//! the product has.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment every block of `mi_malloc` has when the block is at least this large
/// (`MI_MAX_ALIGN_SIZE` in mimalloc's `types.h`: its size classes from 16 bytes up are multiples
/// of 16, and each page's first block is 16-aligned); smaller blocks are aligned to their size
/// class, a multiple of 8.
const MI_MAX_ALIGN_BYTES: usize = 16;

/// mimalloc as Rust's global allocator, asking it for *unaligned* blocks whenever the layout's
/// alignment is one every block of that size has anyway, as Rust's own `System` allocator does
/// with `malloc`.
///
/// Why not `mimalloc::MiMalloc`: it passes every layout to `mi_malloc_aligned`, and mimalloc
/// v3's aligned path serves a size that is not a power of two from the size class's page only
/// while that page has a free block; once the page is full it over-allocates `size + align - 1`
/// from the *next* class (mimalloc issue #889), and since nothing then refills the exact class's
/// page, every later block of that size goes the same slow way. An 80-byte record took a
/// 96-byte block, a 96-byte row 112, a 160-byte node 192, each through the out-of-line generic
/// path: about twice the time per allocation and a sixth more memory, all of it zeroed by the
/// kernel at first touch (docs/PERFORMANCE.md, "The allocator's aligned path").
pub struct Mimalloc;

/// Whether a block of `layout.size()` bytes from `mi_malloc` is always aligned as `layout` asks.
#[inline(always)]
fn plain_block_fits(layout: &Layout) -> bool {
    layout.align() <= MI_MAX_ALIGN_BYTES && layout.align() <= layout.size()
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes blocks of both
// the plain and the aligned API); a plain block is used only when its alignment is guaranteed
// ([`plain_block_fits`]), else the aligned API is asked.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions take any size and alignment.
        unsafe {
            if plain_block_fits(&layout) {
                libmimalloc_sys::mi_malloc(layout.size()).cast()
            } else {
                libmimalloc_sys::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            if plain_block_fits(&layout) {
                libmimalloc_sys::mi_zalloc(layout.size()).cast()
            } else {
                libmimalloc_sys::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller passes a block this allocator returned and has not freed.
        unsafe { libmimalloc_sys::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // The new block must have the old alignment at the new size.
        let fits = layout.align() <= MI_MAX_ALIGN_BYTES && layout.align() <= new_size;
        // SAFETY: the caller passes a live block of this allocator and a non-zero `new_size`;
        // mimalloc copies the contents and frees the old block.
        unsafe {
            if fits {
                libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast()
            } else {
                libmimalloc_sys::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (include/mimalloc.h); the Rust bindings
/// do not name it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tells mimalloc never to give freed memory back to the kernel. By default it purges (decommits)
/// free pages after `purge_delay` (1 s in the mimalloc linked now; `MIMALLOC_VERBOSE=1` lists the
/// options), and the next allocation there faults in and zeroes a fresh 2 MiB huge page: on
/// TPC-C, whose scans and row copies free and reallocate all the time, that was 10–15 % of a
/// worker's time in `clear_page_erms` and 8x the page faults (docs/PERFORMANCE.md). A
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

/// While one lives, memory the process touches for the first time comes in small (4 KiB) pages,
/// not transparent huge pages (`prctl(PR_SET_THP_DISABLE)`, which the kernel checks at each
/// fault, whatever `madvise` asked); when the last one drops, the setting is what it was before
/// the first. Recovery holds one ([`crate::DatabaseConfig::recovery_small_pages`]).
///
/// Why: recovery fills the memory the database will hold, and on this project's VMs a fresh
/// 2 MiB page costs several times what its 512 small pages do (the host backs guest memory at
/// first touch: 2,000 MiB faulted in 0.75 s in small pages, 3.3–4.7 s in huge ones,
/// docs/PERFORMANCE.md, "Instant recovery", "Session 31"). A `taurus-data` TPC-C recovery in
/// small pages spent half the system time and was 8 % shorter (median of 5 rounds; "Taurus",
/// "Session 45"). The price is paid after: what recovery filled stays in small pages until the
/// kernel collapses them, and TPC-C on the recovered database ran 9–17 % slower (more TLB
/// misses), so it is an option, off by default. A hint: where the kernel refuses it (not Linux,
/// or older than 3.15), memory comes as it would have.
pub struct SmallPages(());

/// How many [`SmallPages`] live, and the process's setting before the first.
static SMALL_PAGES: std::sync::Mutex<(usize, bool)> = std::sync::Mutex::new((0, false));

impl SmallPages {
    /// Whether a guard lives now (in this process: the setting is the process's).
    pub fn held() -> bool {
        SMALL_PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0 > 0
    }

    /// Small pages from now until the guard (and every other one) drops.
    pub fn hold() -> SmallPages {
        let mut held = SMALL_PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.0 == 0 {
            held.1 = huge_pages_disabled();
            set_huge_pages_disabled(true);
        }
        held.0 += 1;
        SmallPages(())
    }
}

impl Drop for SmallPages {
    fn drop(&mut self) {
        let mut held = SMALL_PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        assert!(held.0 > 0, "a small-pages guard drops that was not counted");
        held.0 -= 1;
        if held.0 == 0 {
            set_huge_pages_disabled(held.1);
        }
    }
}

/// Whether the process has transparent huge pages disabled (`PR_GET_THP_DISABLE`); false where
/// the kernel does not say.
fn huge_pages_disabled() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `PR_GET_THP_DISABLE` takes no pointer and only reads the process's flag.
        (unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }) == 1
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Sets the process's transparent-huge-pages flag; a kernel that refuses leaves it (a hint).
fn set_huge_pages_disabled(disabled: bool) {
    #[cfg(target_os = "linux")]
    {
        let flag = libc::c_ulong::from(disabled);
        // SAFETY: `PR_SET_THP_DISABLE` takes no pointer and only sets the process's flag.
        let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, flag, 0, 0, 0) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = disabled;
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

    /// A scheme with nothing to recover that notes whether huge pages were off as it recovered.
    struct Noting {
        none: crate::durability::none::NoLogging,
        small_pages: std::sync::atomic::AtomicBool,
    }

    impl crate::durability::LogScheme for Noting {
        fn name(&self) -> &'static str {
            "noting"
        }
        fn worker(&self, worker_id: usize) -> Box<dyn crate::durability::WorkerLog> {
            self.none.worker(worker_id)
        }
        fn is_durable(&self, ticket: &crate::durability::DurabilityTicket) -> bool {
            self.none.is_durable(ticket)
        }
        fn wait_durable(
            &self,
            ticket: &crate::durability::DurabilityTicket,
        ) -> Result<(), crate::durability::DurabilityError> {
            self.none.wait_durable(ticket)
        }
        fn wait_committed_durable(&self) -> Result<(), crate::durability::DurabilityError> {
            Ok(())
        }
        fn shutdown(&self) -> Result<(), crate::durability::DurabilityError> {
            Ok(())
        }
        fn recover(&self, _db: &crate::db::Database) -> Result<u64, crate::durability::DurabilityError> {
            self.small_pages.store(huge_pages_disabled(), std::sync::atomic::Ordering::SeqCst);
            Ok(0)
        }
    }

    /// One test for the process-wide setting, so that no other test's guard overlaps its checks:
    /// guards nest, the last to drop restores the setting, and `Database::open` holds one while
    /// it recovers only when asked.
    #[cfg(target_os = "linux")]
    #[test]
    fn small_pages_last_while_a_guard_lives_and_recovery_holds_one_when_asked() {
        let before = huge_pages_disabled();
        if before {
            eprintln!("skipped: this process inherited huge pages off, so a guard cannot be seen to turn them off");
            return;
        }
        set_huge_pages_disabled(true);
        let supported = huge_pages_disabled();
        set_huge_pages_disabled(false);
        if !supported {
            eprintln!("skipped: the kernel refuses PR_SET_THP_DISABLE (older than 3.15, or a filter)");
            return;
        }
        let outer = SmallPages::hold();
        assert!(huge_pages_disabled(), "a guard turns huge pages off");
        let inner = SmallPages::hold();
        drop(outer);
        assert!(huge_pages_disabled(), "the second guard still holds");
        drop(inner);
        assert_eq!(huge_pages_disabled(), before, "the last guard restores the setting");
        for asked in [true, false] {
            let scheme = std::sync::Arc::new(Noting {
                none: crate::durability::none::NoLogging,
                small_pages: std::sync::atomic::AtomicBool::new(!asked),
            });
            let config = crate::DatabaseConfig {
                scheme: scheme.clone(),
                recovery_small_pages: asked,
                ..crate::DatabaseConfig::default()
            };
            let db = crate::Database::open(config).expect("open");
            assert_eq!(scheme.small_pages.load(std::sync::atomic::Ordering::SeqCst), asked, "asked: {asked}");
            assert!(!huge_pages_disabled(), "huge pages are back once the database is open");
            db.close().expect("close");
        }
    }

    /// Allocates `count` blocks of `layout` from [`Mimalloc`], checks each one's alignment and
    /// that it holds `layout.size()` bytes, and returns the usable size mimalloc gave the last.
    fn usable_after(layout: Layout, count: usize) -> usize {
        let mut blocks = Vec::with_capacity(count);
        for i in 0..count {
            // SAFETY: every layout the tests pass has a non-zero size.
            let block = unsafe { Mimalloc.alloc(layout) };
            assert!(!block.is_null(), "allocation {i} of {layout:?} failed");
            assert!(block.align_offset(layout.align()) == 0, "{block:p} is not aligned for {layout:?}");
            // SAFETY: the block holds at least `layout.size()` bytes.
            unsafe { block.write_bytes(0xA5, layout.size()) };
            blocks.push(block);
        }
        let last = *blocks.last().expect("count > 0");
        // SAFETY: `last` is a live block of mimalloc.
        let usable = unsafe { libmimalloc_sys::mi_usable_size(last.cast()) };
        for block in blocks {
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { Mimalloc.dealloc(block, layout) };
        }
        usable
    }

    #[test]
    fn blocks_of_ordinary_layouts_come_from_their_own_size_class() {
        // More blocks than one mimalloc page holds, so that the size class's first page fills:
        // on mimalloc's aligned path every later block then came from the next class.
        for size in [24, 80, 96, 160, 200, 1000] {
            let layout = Layout::from_size_align(size, 8).expect("layout");
            let usable = usable_after(layout, 20_000);
            // SAFETY: `mi_good_size` computes a size class and takes no pointer.
            let class = unsafe { libmimalloc_sys::mi_good_size(size) };
            assert_eq!(usable, class, "{size} bytes took a {usable}-byte block, not one of their class");
        }
    }

    #[test]
    fn every_layout_gets_its_alignment() {
        for align in [1, 2, 8, 16, 32, 64, 4096] {
            for size in [1, 7, 8, 15, 16, 24, 48, 80, 100, 4096, 5000] {
                let layout = Layout::from_size_align(size, align).expect("layout");
                usable_after(layout, 100);
                // Grown and shrunk in place or moved: still aligned, contents kept.
                // SAFETY: a non-zero size; the block is reallocated to non-zero sizes and freed once.
                unsafe {
                    let block = Mimalloc.alloc_zeroed(layout);
                    assert!(!block.is_null() && block.align_offset(align) == 0, "zeroed {layout:?}");
                    assert!((0..size).all(|i| *block.add(i) == 0), "alloc_zeroed of {layout:?} is not zeroed");
                    block.write_bytes(7, size);
                    let grown = Mimalloc.realloc(block, layout, size * 3);
                    assert!(!grown.is_null() && grown.align_offset(align) == 0, "grown {layout:?}");
                    assert!((0..size).all(|i| *grown.add(i) == 7), "realloc of {layout:?} lost bytes");
                    let grown_layout = Layout::from_size_align(size * 3, align).expect("layout");
                    let shrunk = Mimalloc.realloc(grown, grown_layout, 1);
                    assert!(!shrunk.is_null() && shrunk.align_offset(align) == 0, "shrunk {layout:?}");
                    assert_eq!(*shrunk, 7, "realloc of {layout:?} lost its first byte");
                    Mimalloc.dealloc(shrunk, Layout::from_size_align(1, align).expect("layout"));
                }
            }
        }
    }

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
