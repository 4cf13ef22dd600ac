//! rust-cc-benchmarks "large linked list": 30 times, build a doubly linked
//! list of `size` nodes by pushing at the head (each old head points back to
//! the new one: a cycle per link, `Weak` for the plain counters), measure its
//! length, drop it; collect once at the end.

use crate::heap::Heap;

/// Runs the workload; returns the 30 lengths (the checksum).
pub fn large_linked_list<H: Heap>(size: usize) -> Vec<usize> {
    let mut res = Vec::new();
    for _ in 0..30 {
        let mut head = H::pair(None, None); // the `Nil` terminator
        for _ in 0..size {
            let cons = H::pair(Some(head.clone()), None);
            if H::left(&head).is_some() {
                H::set_back(&head, &cons);
            }
            head = cons;
        }
        res.push(len::<H>(&head));
    }
    H::collect();
    res
}

/// Number of `Cons` nodes from `head` (iterative).
fn len<H: Heap>(head: &H::Pair) -> usize {
    let mut n = 0;
    let mut cur = head;
    while let Some(next) = H::left(cur) {
        n += 1;
        cur = next;
    }
    n
}
