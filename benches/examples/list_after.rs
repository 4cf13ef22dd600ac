//! Diagnostic for the linked-list workload's dependence on what ran before
//! it in the same process (in `cargo bench -p benches`, every pointer's
//! parent trees and `rc`'s lists run before `recycler-gc`'s lists).
//!
//! ```sh
//! cargo run --release -p benches --example list_after -- PRE RUNS [WHO]
//! ```
//!
//! `PRE` is a comma-separated list of warm-up steps, each run `REPS` times
//! (environment variable, default 20): the parent trees of a pointer (`rc`,
//! `gc`, `rrc` (recycler `Rc`), `cc` (rust-cc), `brc` (bacon_rajan_cc),
//! `dump`, `gcm` (gcmodule), `rgc` (the `gc` crate), `arc`, `dsync`
//! (dumpster sync), `sgc` (recycler `sync::Gc`)), or the lists of `rclist`,
//! `gclist` or `cclist`; or `none`. Then `RUNS` runs of the lists of `WHO`
//! (`gc`, `cc` or `rc`; default `gc`), timed in thread CPU time on Linux
//! (a busy machine's descheduling is not counted), or, with `WHO` = `addr`
//! (`addrcc`), `RUNS` lists of recycler `Gc` (rust-cc) built as the workload
//! builds them, reporting how their nodes are spread in memory. Under
//! `valgrind --tool=callgrind --toggle-collect='list_after::list'` only the
//! timed runs are counted.

use std::hint::black_box;

use benches::heap::Heap;
use benches::ptr::*;
use benches::suite::{LIST_LEN, TREE_DEPTH};
use benches::workloads::{linked_list, parent_trees};

#[inline(never)]
fn pre_trees<H: Heap>(reps: usize) {
    H::prepare();
    for _ in 0..reps {
        drop(black_box(parent_trees::parent_trees::<H>(TREE_DEPTH)));
    }
    H::collect();
}

#[inline(never)]
fn pre_list<H: Heap>(reps: usize) {
    H::prepare();
    for _ in 0..reps {
        drop(black_box(linked_list::large_linked_list::<H>(LIST_LEN)));
    }
    H::collect();
}

/// This thread's CPU time in ms.
#[cfg(target_os = "linux")]
fn now_ms() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid clock id and a `struct timespec` (64-bit Linux).
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.sec as f64 * 1e3 + ts.nsec as f64 / 1e6
}

/// Wall-clock time in ms since the first call.
#[cfg(not(target_os = "linux"))]
fn now_ms() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

#[inline(never)]
fn list<H: Heap>(runs: usize) -> Vec<f64> {
    H::prepare();
    let mut t = Vec::new();
    for _ in 0..runs {
        let start = now_ms();
        drop(black_box(linked_list::large_linked_list::<H>(LIST_LEN)));
        t.push(now_ms() - start);
    }
    H::collect();
    t
}

/// How the nodes of `lists` lists, built as `large_linked_list` builds them,
/// are spread in memory.
fn addresses<H: Heap>(lists: usize) {
    H::prepare();
    let (mut pages, mut near, mut total, mut descending) = (0, 0, 0, 0);
    for _ in 0..lists {
        let mut head = H::pair(None, None);
        for _ in 0..LIST_LEN {
            let cons = H::pair(Some(head.clone()), None);
            if H::left(&head).is_some() {
                H::set_back(&head, &cons);
            }
            head = cons;
        }
        // A node's `left` field lies inside the node: its address stands
        // for the node's.
        let mut addrs = Vec::new();
        let mut cur = &head;
        while let Some(next) = H::left(cur) {
            addrs.push(std::ptr::from_ref(next) as usize);
            cur = next;
        }
        for w in addrs.windows(2) {
            total += 1;
            near += usize::from(w[0].abs_diff(w[1]) <= 256);
            descending += usize::from(w[0] > w[1]);
        }
        let mut p: Vec<usize> = addrs.iter().map(|a| a >> 12).collect();
        p.sort_unstable();
        p.dedup();
        pages += p.len();
    }
    H::collect();
    println!(
        "per list: {:.0} distinct 4 KiB pages; consecutive nodes within 256 B: {:.1} %, at a lower address: {:.1} %",
        pages as f64 / lists as f64,
        100.0 * near as f64 / total as f64,
        100.0 * descending as f64 / total as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pre = args.get(1).cloned().unwrap_or_else(|| "none".into());
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20);
    let who = args.get(3).cloned().unwrap_or_else(|| "gc".into());
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    for p in pre.split(',') {
        match p {
            "rc" => pre_trees::<std_rc::StdRc>(reps),
            "gc" => pre_trees::<recycler_gc::RecyclerGcDefault>(reps),
            "rrc" => pre_trees::<recycler_rc::RecyclerRc>(reps),
            "cc" => pre_trees::<rust_cc::RustCc>(reps),
            "brc" => pre_trees::<bacon_rajan_cc::BaconRajanCc>(reps),
            "dump" => pre_trees::<dumpster_unsync::DumpsterUnsync>(reps),
            "gcm" => pre_trees::<gcmodule_cc::GcmoduleCc>(reps),
            "rgc" => pre_trees::<rust_gc::RustGc>(reps),
            "arc" => pre_trees::<std_arc::StdArc>(reps),
            "dsync" => pre_trees::<dumpster_sync::DumpsterSync>(reps),
            "sgc" => pre_trees::<recycler_sync_gc::RecyclerSyncGc>(reps),
            "rclist" => pre_list::<std_rc::StdRc>(reps),
            "gclist" => pre_list::<recycler_gc::RecyclerGcDefault>(reps),
            "cclist" => pre_list::<rust_cc::RustCc>(reps),
            "none" | "" => {}
            other => panic!("unknown warm-up step {other}"),
        }
    }
    let t = match who.as_str() {
        "gc" => list::<recycler_gc::RecyclerGcDefault>(runs),
        "cc" => list::<rust_cc::RustCc>(runs),
        "rc" => list::<std_rc::StdRc>(runs),
        "addr" => return addresses::<recycler_gc::RecyclerGcDefault>(runs),
        "addrcc" => return addresses::<rust_cc::RustCc>(runs),
        other => panic!("unknown pointer {other}"),
    };
    let mut sorted = t.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "after {pre}: {who} lists min {:.2} ms, median {:.2} ms; runs: {}",
        sorted[0],
        sorted[sorted.len() / 2],
        t.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}
