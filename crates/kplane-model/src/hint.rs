//! CPU hints shared by the hot paths (the collector's and the processor's flow tables).

/// Asks the CPU to start loading the cache line(s) holding `value`, which straddles two when
/// it crosses a line boundary. No effect on correctness: a prefetch never faults.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    let p: *const i8 = std::ptr::from_ref(value).cast();
    prefetch_line(p);
    prefetch_line(p.wrapping_add(size_of::<T>().saturating_sub(1)));
}

#[inline(always)]
fn prefetch_line(p: *const i8) {
    // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never faults, whatever the
    // address.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
