//! What the `locked-alloc` switch costs when it is off, and when it is on
//! but uncontended: one allocation and free of 64 bytes through `System`
//! directly, through [`LockedAlloc`] with the lock switched off (every mode
//! but `orc-nim16-faithful`), and with it switched on.

// The server's module itself; its unit tests are stripped from this
// harness-less target, which leaves their imports unused.
#[path = "../src/locked_alloc.rs"]
#[allow(dead_code, unused_imports)]
mod locked_alloc;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use locked_alloc::{set_locked, LockedAlloc};

fn alloc_free(c: &mut Criterion) {
    let layout = Layout::from_size_align(64, 8).unwrap();
    let mut group = c.benchmark_group("alloc_free_64B");
    fn one(a: &impl GlobalAlloc, layout: Layout) {
        // SAFETY: a non-zero-sized layout; the block is freed once, with the
        // layout it was allocated with, by the allocator that returned it.
        unsafe {
            let p = a.alloc(black_box(layout));
            assert!(!p.is_null());
            a.dealloc(black_box(p), layout);
        }
    }
    group.bench_function("system", |b| b.iter(|| one(&System, layout)));
    set_locked(false);
    group.bench_function("wrapper_lock_off", |b| b.iter(|| one(&LockedAlloc, layout)));
    set_locked(true);
    group.bench_function("wrapper_lock_on", |b| b.iter(|| one(&LockedAlloc, layout)));
    set_locked(false);
    group.finish();
}

criterion_group!(benches, alloc_free);
criterion_main!(benches);
