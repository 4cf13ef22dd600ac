//! Bytes per object, measured at glibc's malloc: one million objects of each
//! kind are allocated and held, and the growth of `mallinfo2().uordblks`
//! (bytes in use, chunk overhead included) is divided by their number.
//!
//! ```sh
//! cargo run --release -p benches --bin bytes_per_object
//! ```

use std::cell::RefCell;

use recycler::{Gc, Trace};

const N: usize = 1_000_000;

/// The fields of glibc's `struct mallinfo2`.
#[repr(C)]
struct MallInfo2 {
    arena: usize,
    ordblks: usize,
    smblks: usize,
    hblks: usize,
    hblkhd: usize,
    usmblks: usize,
    fsmblks: usize,
    uordblks: usize,
    fordblks: usize,
    keepcost: usize,
}

extern "C" {
    fn mallinfo2() -> MallInfo2;
}

/// Bytes in use in malloc's arenas and mmapped chunks.
fn in_use() -> usize {
    // SAFETY: glibc's `mallinfo2` takes no arguments and returns a plain
    // struct by value.
    let info = unsafe { mallinfo2() };
    info.uordblks + info.hblkhd
}

/// Allocates `N` objects with `make`, holds them, and returns the bytes each
/// one costs.
fn per_object<P>(make: impl Fn(u64) -> P) -> f64 {
    // The vector that holds them is allocated first and not counted.
    let mut held = Vec::with_capacity(N);
    let before = in_use();
    for i in 0..N {
        held.push(make(i as u64));
    }
    let after = in_use();
    drop(held);
    (after - before) as f64 / N as f64
}

/// A node that may point to another: a candidate for `Gc`.
#[derive(Trace)]
struct GcNode {
    next: RefCell<Option<Gc<GcNode>>>,
}

/// The same node for `recycler::Rc`.
#[derive(Trace)]
struct RcNode {
    next: RefCell<Option<recycler::Rc<RcNode>>>,
}

/// The same node for `std::rc::Rc`.
struct StdNode {
    _next: RefCell<Option<std::rc::Rc<StdNode>>>,
}

fn main() {
    let rows: [(&str, f64); 6] = [
        ("std::rc::Rc<u64>", per_object(std::rc::Rc::new)),
        ("recycler::Gc<u64> (leaf)", per_object(Gc::new)),
        ("recycler::Rc<u64>", per_object(recycler::Rc::new)),
        (
            "std::rc::Rc<node>",
            per_object(|_| {
                std::rc::Rc::new(StdNode {
                    _next: RefCell::new(None),
                })
            }),
        ),
        (
            "recycler::Gc<node> (candidate)",
            per_object(|_| {
                Gc::new(GcNode {
                    next: RefCell::new(None),
                })
            }),
        ),
        (
            "recycler::Rc<node>",
            per_object(|_| {
                recycler::Rc::new(RcNode {
                    next: RefCell::new(None),
                })
            }),
        ),
    ];
    println!("| object ({N} held) | bytes per object |");
    println!("|---|---:|");
    for (name, bytes) in rows {
        println!("| `{name}` | {bytes:.1} |");
    }
}
