//! A test node type with a hand-written `Trace` impl and a per-thread log of
//! drops, shared by the integration tests.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};

use recycler::{Gc, Trace, Tracer};

thread_local! {
    static DROPPED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<usize> = const { Cell::new(0) };
}

/// A graph node: an id and a list of edges. Its drop is logged.
pub struct Node {
    pub id: usize,
    pub edges: RefCell<Vec<Gc<Node>>>,
}

impl Node {
    pub fn new() -> Gc<Node> {
        let id = NEXT_ID.with(|n| n.replace(n.get() + 1));
        Gc::new(Node {
            id,
            edges: RefCell::new(Vec::new()),
        })
    }

    pub fn link(&self, to: &Gc<Node>) {
        self.edges.borrow_mut().push(to.clone());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        DROPPED.with(|d| d.borrow_mut().push(self.id));
    }
}

// SAFETY: reports each owned `Gc` once, through the `RefCell` impl.
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.edges.trace(tracer);
    }
}

/// Ids dropped on this thread so far, and clears the log.
pub fn take_dropped() -> Vec<usize> {
    DROPPED.with(|d| std::mem::take(&mut *d.borrow_mut()))
}

pub fn dropped_count() -> usize {
    DROPPED.with(|d| d.borrow().len())
}

/// Runs `f` on a thread with a small stack (to catch recursion).
pub fn on_small_stack<F: FnOnce() + Send + 'static>(stack: usize, f: F) {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

/// The payload of a caught panic, as text.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("")
}
