//! Software prefetch: recovery knows which records and values it will touch a few steps before
//! it touches them, and each is a cache miss on a table far larger than the cache. A prefetch
//! issued early lets those misses overlap the work in between (`docs/PERFORMANCE.md`,
//! "Taurus", "Session 18").

/// Asks the CPU to bring the cache line holding `address` into cache. A hint only: it reads
/// nothing the program sees, and an address that is not mapped is ignored, not a fault.
#[inline(always)]
pub fn prefetch_line<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch cannot fault and has no effect the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
