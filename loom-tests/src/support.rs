//! Test objects and the model runner shared by the loom models.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use loom::sync::Mutex;
use recycler::sync::Gc;
use recycler::Trace;

/// Drop counts of the objects of one execution.
pub struct Book {
    drops: Vec<AtomicUsize>,
}

impl Book {
    /// A book for `n` objects.
    pub fn new(n: usize) -> Arc<Book> {
        Arc::new(Book {
            drops: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// Asserts that every object was dropped exactly once.
    pub fn assert_all_dropped_once(&self) {
        for (id, d) in self.drops.iter().enumerate() {
            assert_eq!(
                d.load(SeqCst),
                1,
                "object {id} dropped {} times",
                d.load(SeqCst)
            );
        }
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.drops.len()
    }

    /// Whether the book has no objects.
    pub fn is_empty(&self) -> bool {
        self.drops.is_empty()
    }

    /// How many objects have been dropped.
    pub fn dropped(&self) -> usize {
        self.drops.iter().filter(|d| d.load(SeqCst) > 0).count()
    }
}

/// A graph node: a lockable edge list and a probe that detects use after drop.
#[derive(Trace)]
pub struct Node {
    /// Outgoing edges.
    pub edges: Mutex<Vec<Gc<Node>>>,
    #[trace(skip)]
    id: usize,
    #[trace(skip)]
    book: Arc<Book>,
}

impl Node {
    /// A new node numbered `id` in `book`.
    pub fn new(book: &Arc<Book>, id: usize) -> Gc<Node> {
        Gc::new(Node {
            edges: Mutex::new(Vec::new()),
            id,
            book: book.clone(),
        })
    }

    /// Asserts that this node's value has not been dropped (it is reachable).
    pub fn check(&self) {
        assert_eq!(
            self.book.drops[self.id].load(SeqCst),
            0,
            "object {} used after its value was dropped",
            self.id
        );
    }

    /// Adds an edge to `to`.
    pub fn link(&self, to: &Gc<Node>) {
        self.check();
        self.edges.lock().unwrap().push(to.clone());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let before = self.book.drops[self.id].fetch_add(1, SeqCst);
        assert_eq!(before, 0, "object {} dropped twice", self.id);
    }
}

/// Runs `f` under loom, by default with at most five preemptions.
pub fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(5);
    }
    builder.max_branches = 100_000;
    builder.check(f);
}
