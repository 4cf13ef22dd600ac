//! The two hubs every request links to: the dispatcher and the application.
//!
//! With the per-thread runtime each worker thread builds its own pair, as
//! each Nim thread has its own dispatcher and `AsyncHttpServer`. With the
//! work-stealing runtime one pair is built at start and shared by all
//! workers through the family's thread-safe pointer (`sync::Rc` or
//! `sync::Gc`, like an `Arc`): a request may move between workers at every
//! `.await`, so a per-thread hub would not be "its" hub. The shape is the
//! same (one dispatcher, one application, the same links and the same
//! per-request traffic on them); what differs is that the dispatcher's
//! cells are `Mutex`es contended by all workers, that a worker polling the
//! shared ready queue may run callbacks another worker's request scheduled,
//! and that there is one document for the process instead of one per thread.
//!
//! The hubs live as long as the server and are reachable from every
//! request in flight. In Nim 1.6 each request dropped a temporary copy of the
//! dispatcher (`getGlobalDispatcher()` returns the thread's `ref`), which
//! registered the dispatcher as a possible cycle root; every collection then
//! walked the dispatcher, every pending future, and through the request
//! contexts the application and its whole document. The graph here keeps
//! exactly those links, so a collector without generations pays O(live graph)
//! per collection, and a generational one does not.

use std::collections::{HashMap, VecDeque};

use recycler::Trace;

use crate::family::{Family, Pointers};
use crate::graph::{Callback, Future};
use crate::jsondoc::{build_document, JsonNode, MIN_NODES};

/// Nim: `PDispatcher` (asyncdispatch), the per-thread event loop object
/// (shared by the workers of the work-stealing runtime).
#[derive(Trace)]
pub struct Dispatcher<F: Pointers> {
    /// Futures of the requests in flight on this thread (on the server, for
    /// shared hubs). Nim's dispatcher
    /// reaches them through the selector's per-descriptor callbacks, whose
    /// closures capture the futures waiting on I/O.
    pub pending: F::Cell<HashMap<u64, F::P<Future<F>>>>,
    /// Callbacks ready to run. Nim: `callbacks: Deque[proc ()]`, filled by
    /// `callSoon` when a future completes and drained by `runOnce`.
    pub ready: F::Cell<VecDeque<Callback<F>>>,
    /// Next future id.
    pub next_id: F::Cell<u64>,
}

impl<F: Family> Dispatcher<F> {
    fn new() -> Self {
        Dispatcher {
            pending: F::cell(HashMap::new()),
            ready: F::cell(VecDeque::new()),
            next_id: F::cell(0),
        }
    }

    /// A fresh future id.
    pub fn next_id(&self) -> u64 {
        F::write(&self.next_id, |n| {
            *n += 1;
            *n
        })
    }

    /// Records `future` as in flight.
    pub fn register(&self, future: &F::P<Future<F>>) {
        let previous = F::write(&self.pending, |p| p.insert(future.id, future.clone()));
        debug_assert!(previous.is_none(), "future ids are unique");
    }

    /// Forgets the in-flight future `id`.
    pub fn deregister(&self, id: u64) {
        // Drop the removed pointer after the cell's borrow has ended: its
        // drop may run the collector, which traces this cell.
        let removed = F::write(&self.pending, |p| p.remove(&id));
        drop(removed);
    }

    /// Number of futures in flight.
    pub fn in_flight(&self) -> usize {
        F::read(&self.pending, |p| p.len())
    }
}

/// What a route answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Trace)]
pub enum RouteKind {
    /// Render a node of the application document as the body.
    Document,
    /// The server's statistics (assembled by the HTTP layer, which asks every
    /// worker thread).
    Stats,
}

/// Nim: one entry of a router's table (e.g. a Jester route), a `ref` holding
/// the handler's data.
#[derive(Trace)]
pub struct Route<F: Pointers> {
    /// The path it matches.
    pub path: String,
    /// How it answers.
    pub kind: RouteKind,
    /// For [`RouteKind::Document`], the node rendered as the body.
    pub node: Option<F::P<JsonNode<F>>>,
}

/// Nim: the application object a handler closure captures (the
/// `AsyncHttpServer` plus the user's routes and data).
#[derive(Trace)]
pub struct App<F: Pointers> {
    /// Routes by exact path.
    pub routes: HashMap<String, F::P<Route<F>>>,
    /// The root of the application's JSON document.
    pub document: F::P<JsonNode<F>>,
    /// Nodes in the document.
    pub document_nodes: usize,
}

/// One worker thread's hubs (the whole server's, for shared hubs).
pub struct Hubs<F: Pointers> {
    dispatcher: F::P<Dispatcher<F>>,
    /// The application.
    pub app: F::P<App<F>>,
}

impl<F: Family> Hubs<F> {
    /// Builds the dispatcher and the application (routes and document).
    pub fn new() -> Self {
        let doc = build_document::<F>();
        debug_assert!(doc.nodes >= MIN_NODES);
        let mut routes = HashMap::new();
        routes.insert(
            "/".to_owned(),
            F::alloc(Route {
                path: "/".to_owned(),
                kind: RouteKind::Document,
                node: Some(doc.hello.clone()),
            }),
        );
        routes.insert(
            "/stats".to_owned(),
            F::alloc(Route {
                path: "/stats".to_owned(),
                kind: RouteKind::Stats,
                node: None,
            }),
        );
        let app = F::alloc(App {
            routes,
            document: doc.root,
            document_nodes: doc.nodes,
        });
        Hubs {
            dispatcher: F::alloc(Dispatcher::new()),
            app,
        }
    }

    /// A temporary handle to the dispatcher. Nim: `getGlobalDispatcher()`,
    /// which returns a copy of the thread's dispatcher `ref`; dropping the copy
    /// decrements a count that stays above zero, which is exactly the event
    /// that makes a cycle collector consider the dispatcher a possible root.
    pub fn dispatcher(&self) -> F::P<Dispatcher<F>> {
        self.dispatcher.clone()
    }

    /// Futures in flight on this thread (on the server, for shared hubs).
    pub fn in_flight(&self) -> usize {
        self.dispatcher.in_flight()
    }
}

impl<F: Family> Default for Hubs<F> {
    fn default() -> Self {
        Self::new()
    }
}
