//! The adapters and workloads at small sizes: every workload returns its
//! checksum, the collectors free every node after the final collection, and
//! the plain counters free everything whose cycles go through `Weak` back
//! edges. (One test function: the node counter is process-wide.)

use benches::for_each_heap;
use benches::heap::{Heap, SyncHeap};
use benches::live;
use benches::ptr::dumpster_sync::DumpsterSync;
use benches::ptr::gcmodule_threaded::GcmoduleThreaded;
use benches::ptr::recycler_sync_gc::RecyclerSyncGc;
use benches::ptr::std_arc::StdArc;
use benches::workloads::hub::{self, Back};
use benches::workloads::{
    binary_trees, churn, linked_list, micro, parent_trees, random_ops, threaded,
};

fn alive_after<H: Heap, R>(f: impl FnOnce() -> R) -> (R, i64) {
    H::prepare();
    live::begin();
    let r = f();
    H::collect();
    (r, live::end())
}

fn check_heap<H: Heap>() {
    let name = H::NAME;
    // Depth 6: depths 4 only, 2^(6-4+4) = 64 trees of 31 nodes.
    let (res, alive) = alive_after::<H, _>(|| binary_trees::binary_trees::<H>(6));
    assert_eq!(res, vec![64 * 31], "{name}");
    assert_eq!(alive, 0, "{name}: binary trees");

    let (res, alive) = alive_after::<H, _>(|| parent_trees::parent_trees::<H>(6));
    assert_eq!(res, vec![64 * 31], "{name}");
    assert_eq!(alive, 0, "{name}: parent trees");

    let (res, alive) = alive_after::<H, _>(|| linked_list::large_linked_list::<H>(100));
    assert_eq!(res, vec![100; 30], "{name}");
    assert_eq!(alive, 0, "{name}: linked list");

    let (_, alive) =
        alive_after::<H, _>(|| random_ops::random_ops::<H>(5_000, &mut random_ops::ops_rng(0)));
    if H::COUNTING_ONLY {
        assert!(
            alive > 0,
            "{name}: random links make cycles that plain counting leaks"
        );
    } else {
        assert_eq!(alive, 0, "{name}: random ops");
    }

    let (_, alive) = alive_after::<H, _>(|| micro::cycles::<H>(100));
    assert_eq!(alive, 0, "{name}: 2-node cycles");

    assert_eq!(churn::churn::<H>(1000), 999 * 1000 / 2, "{name}");

    if H::unsupported(benches::heap::Workload::Hub).is_none() {
        let (_, alive) = alive_after::<H, _>(|| {
            let root = hub::build_tree::<H>(100);
            H::with_edges(&root, |e| {
                assert_eq!(e.len(), 2, "{name}: root has two children")
            });
            for _ in 0..1_000 {
                drop(hub::request::<H>(&root, Back::Strong));
            }
        });
        // Leaked contexts keep the root and so the 100-node tree alive.
        let expected = if H::COUNTING_ONLY { 2_100 } else { 0 };
        assert_eq!(alive, expected, "{name}: hub");
    }
}

fn check_sync<H: SyncHeap>(expect_no_leak: bool) {
    for threads in [1, 2] {
        live::begin();
        threaded::run::<H>(threaded::roots::<H>(threads), threads, 2_000);
        let alive = live::end();
        if expect_no_leak {
            assert_eq!(alive, 0, "{}: {threads} threads", H::NAME);
        } else {
            assert!(alive >= 0, "{}", H::NAME);
        }
    }
}

#[test]
fn workloads_check_out_on_every_pointer() {
    for_each_heap!(check_heap());
    // Rc leaking the hub's request cycles, released by `hub::release`.
    live::begin();
    let root = hub::build_tree::<benches::ptr::std_rc::StdRc>(10);
    let kept: Vec<_> = (0..10)
        .map(|_| hub::request::<benches::ptr::std_rc::StdRc>(&root, Back::Strong))
        .collect();
    assert_eq!(live::alive(), 10 + 20);
    kept.into_iter()
        .for_each(hub::release::<benches::ptr::std_rc::StdRc>);
    drop(root);
    assert_eq!(live::end(), 0, "release breaks the leaked cycles");

    check_sync::<StdArc>(false);
    check_sync::<GcmoduleThreaded>(true);
    check_sync::<RecyclerSyncGc>(true);
    check_sync::<DumpsterSync>(false);
}
