//! Allocator tuning for every process that runs a stream processor (`kplane stream-processor`,
//! `kplane-stream-processor`, `kplane up`, the benchmarks): applied when a
//! [`Processor`](crate::processor::Processor) is made, so every entry point behaves the same.
//!
//! Every window allocates its input tables and frees them once its queries are done —
//! hundreds of MB a second. glibc by default returns large freed blocks to the kernel and
//! the next window faults the pages in again; keeping them measured 2–4 % faster on
//! `kplane bench processor` (interleaved runs). The cost: resident memory stays at its peak.

/// Keeps freed memory in the process: blocks up to 32 MiB come from the heap (not their
/// own mappings) and the heap is not trimmed below 1 GiB of free space. glibc only; a no-op
/// elsewhere.
pub(crate) fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets allocator parameters; it is called at start-up, and glibc
    // serialises it with allocations anyway.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}
