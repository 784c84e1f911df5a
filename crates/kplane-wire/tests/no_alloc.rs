//! The hot path allocates nothing: once the decoder's record has grown its hop buffer,
//! decoding more reports performs zero heap allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kplane_wire::{Decoder, RecordMeta, samples};

struct Counting;

thread_local! {
    // Per thread: the test harness's own threads allocate too.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decoding_reports_allocates_nothing_after_warm_up() {
    let payloads = [
        samples::tr_v20_5hop_payload(),
        samples::tr_v05_local_payload(),
        samples::tr_v10_6hop_payload(),
    ];
    let mut decoder = Decoder::new(samples::options());
    let mut hops = 0usize;
    for p in &payloads {
        decoder.decode_report(p, RecordMeta::default(), |r| hops += r.hops.len());
    }
    let before = ALLOCATIONS.with(Cell::get);
    for _ in 0..1000 {
        for p in &payloads {
            let o = decoder.decode_report(p, RecordMeta::default(), |r| hops += r.hops.len());
            assert!(o.error.is_none());
        }
    }
    let after = ALLOCATIONS.with(Cell::get);
    assert_eq!(after - before, 0, "allocations on the hot path");
    assert!(hops > 3000);
}
