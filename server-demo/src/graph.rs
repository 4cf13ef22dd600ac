//! The per-request object graph: what Nim's `asyncdispatch` and
//! `asynchttpserver` allocate for every request, built with the mode's
//! pointer family and used to produce the response.
//!
//! Objects allocated per request (L = request line + header lines, at most
//! [`MAX_LINES`]), each standing for a Nim structure:
//!
//! | object | Nim |
//! |---|---|
//! | [`Headers`] ×2 | `HttpHeaders` (`ref object`) of the request and the response |
//! | [`Request`] | `asynchttpserver.Request` |
//! | [`Future`] `processRequest` | the `retFuture` the async macro creates |
//! | [`Context`] | the environment of `processRequest`'s closure iterator |
//! | [`Env`] for the caller | the environment of `processClient`'s continuation, added with `addCallback` to `retFuture` |
//! | [`Future`] + [`Env`] per line | `recvLineInto` futures, each with the continuation callback of the iterator |
//! | [`Response`] | the response being written (status, headers, body) |
//! | [`Future`] + [`Env`] for `send` | `respond`'s `client.send` future and its continuation |
//!
//! That is 9 + 2·L objects (13 to 25 for ordinary clients). The links:
//! a future's callback list holds callbacks whose environment points back to
//! the future (future → callback → env → future); request ↔ context,
//! response ↔ context and request ↔ response; the context points to both
//! hubs ([`crate::hubs`]: per thread, or shared by the workers of the
//! work-stealing runtime); the dispatcher holds the request's
//! future while it is in flight, and a temporary handle to the dispatcher is
//! taken and dropped for every `callSoon` and every poll, as Nim's
//! `getGlobalDispatcher()` is. When the request is answered, everything here
//! is garbage, held only by its own cycles: `recycler::Rc` and
//! `recycler::sync::Rc` leak it (Nim's ARC), `recycler::Gc` and
//! `recycler::sync::Gc` collect it (Nim's ORC).
//!
//! Nim 1.6 clears a future's callback list once the callbacks have been
//! scheduled, and its cycles come instead from the continuation closure that
//! refers to itself; we keep the list, which gives the same shape
//! (a completed future that its own callback's environment still points to).
//!
//! The links that close a cycle are declared as back-edges
//! ([`Pointers::Back`]): an environment's link to its future, the request's
//! link to its context, the response's links to its request and context,
//! and a JSON node's parent. They are strong in every family but careful
//! ARC (`--mm arc-weak`), where they are `Weak` and the request path also
//! unlinks what a careful programmer would ([`Pointers::UNLINKS`]): a
//! completed future hands its callbacks to the ready queue instead of
//! keeping a copy. The remaining strong links then form no cycle once a
//! request is answered (the dispatcher's links to the request are removed
//! by deregistration and by running the ready callbacks), so every object is
//! freed by counting, the same objects as in the other modes.

use recycler::Trace;

use crate::family::{Family, Pointers};
use crate::hubs::{Hubs, RouteKind};
use crate::jsondoc::render;

/// Lines of the request (request line plus headers) for which a read future is
/// built; further header lines are stored but get no future of their own.
pub const MAX_LINES: usize = 8;

/// Nim: `FutureBase` (asyncfutures): a completion flag and a callback list.
#[derive(Trace)]
pub struct Future<F: Pointers> {
    /// Dispatcher-wide id.
    pub id: u64,
    /// The proc that created it (Nim's `fromProc`).
    pub from_proc: &'static str,
    /// Set by [`Future::complete`].
    pub finished: F::Cell<bool>,
    /// Nim: `callbacks: CallbackList`.
    pub callbacks: F::Cell<Vec<Callback<F>>>,
}

/// A continuation: Nim's closure, a function pointer plus an environment `ref`.
#[derive(Trace)]
pub struct Callback<F: Pointers> {
    /// The closure's code.
    #[trace(skip)]
    pub function: fn(&Hubs<F>, &Env<F>),
    /// The closure's environment.
    pub env: F::P<Env<F>>,
}

impl<F: Pointers> Clone for Callback<F> {
    fn clone(&self) -> Self {
        Callback {
            function: self.function,
            env: self.env.clone(),
        }
    }
}

/// Nim: the environment of the callback closure the async macro's `createCb`
/// registers on an awaited future: it captures the future it waits on and the
/// iterator whose execution it resumes.
#[derive(Trace)]
pub struct Env<F: Pointers> {
    /// The future this callback is registered on (the back-link).
    pub future: F::Back<Future<F>>,
    /// The iterator environment to resume.
    pub context: F::P<Context<F>>,
}

/// Nim: `HttpHeaders`, a `ref` to a table of header fields. A leaf: it owns
/// no pointer, so it is no cycle candidate unless the family's marker
/// makes it one (Nim 1.6.12's `canFormAcycle` defect).
#[derive(Trace)]
pub struct Headers<F: Pointers> {
    /// Name/value pairs in arrival order.
    pub fields: Vec<(String, String)>,
    /// `()`, or [`crate::family::CycleCandidate`].
    pub candidate: F::Candidate,
}

/// Nim: `asynchttpserver.Request`.
#[derive(Trace)]
pub struct Request<F: Pointers> {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path of the URL.
    pub path: String,
    /// The request headers.
    pub headers: F::P<Headers<F>>,
    /// Back-link to the handler's context, set once the context exists.
    pub context: F::Cell<Option<F::Back<Context<F>>>>,
    /// The response answering it, once built (Nim's `respond` is called on
    /// the request).
    pub response: F::Cell<Option<F::P<Response<F>>>>,
}

/// The response being written.
#[derive(Trace)]
pub struct Response<F: Pointers> {
    /// HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: F::P<Headers<F>>,
    /// The rendered body.
    pub body: F::Cell<String>,
    /// The request it answers (a back-link: the request holds the response).
    pub request: F::Back<Request<F>>,
    /// The handler's context (a back-link: the context holds the response).
    pub context: F::Back<Context<F>>,
}

/// Nim: the environment of `processRequest`'s closure iterator: the async
/// proc's locals and captured variables.
#[derive(Trace)]
pub struct Context<F: Pointers> {
    /// The future `processRequest` returns (`retFuture`).
    pub ret_future: F::P<Future<F>>,
    /// The request being handled.
    pub request: F::P<Request<F>>,
    /// The response, once built.
    pub response: F::Cell<Option<F::P<Response<F>>>>,
    /// The matched route.
    pub route: F::Cell<Option<F::P<crate::hubs::Route<F>>>>,
    /// The future the iterator waits on right now (a local of the iterator).
    pub awaiting: F::Cell<Option<F::P<Future<F>>>>,
    /// Lines read so far.
    pub lines_read: F::Cell<u32>,
    /// The per-thread dispatcher hub.
    pub dispatcher: F::P<crate::hubs::Dispatcher<F>>,
    /// The per-thread application hub.
    pub app: F::P<crate::hubs::App<F>>,
}

impl<F: Family> Future<F> {
    /// Nim: `newFuture[T](fromProc)`; allocated with the family's pointer.
    pub fn new(hubs: &Hubs<F>, from_proc: &'static str) -> F::P<Self> {
        let id = hubs.dispatcher().next_id();
        F::alloc(Future {
            id,
            from_proc,
            finished: F::cell(false),
            callbacks: F::cell(Vec::new()),
        })
    }

    /// Nim: `addCallback`.
    pub fn add_callback(&self, callback: Callback<F>) {
        F::write(&self.callbacks, |c| c.push(callback));
    }

    /// Nim: `complete`: marks the future finished and schedules its callbacks
    /// on the dispatcher (`callSoon`, which takes a temporary dispatcher
    /// handle). A careful family ([`Pointers::UNLINKS`]) moves them out
    /// instead of copying them: the future no longer reaches its callbacks'
    /// environments. The others copy them straight into the ready queue, so
    /// that both ways allocate the same (no temporary list): the modes
    /// differ only in memory management.
    pub fn complete(&self, hubs: &Hubs<F>) {
        F::write(&self.finished, |f| *f = true);
        let dispatcher = hubs.dispatcher();
        if F::UNLINKS {
            let callbacks = F::write(&self.callbacks, std::mem::take);
            F::write(&dispatcher.ready, |r| r.extend(callbacks));
        } else {
            // Two different cells: the future's list, then the ready queue
            // (nothing takes them in the other order).
            F::read(&self.callbacks, |c| {
                F::write(&dispatcher.ready, |r| r.extend(c.iter().cloned()))
            });
        }
    }
}

/// Nim: `runOnce`'s `processPendingCallbacks`: runs ready callbacks (and those
/// they schedule) until none is left.
fn poll<F: Family>(hubs: &Hubs<F>) {
    let dispatcher = hubs.dispatcher();
    while let Some(callback) = F::write(&dispatcher.ready, |r| r.pop_front()) {
        (callback.function)(hubs, &callback.env);
    }
}

/// Continuation after a line was read: the iterator consumes it.
fn resume_after_line<F: Family>(_: &Hubs<F>, env: &Env<F>) {
    debug_assert!(F::with_back(&env.future, |f| F::read(&f.finished, |f| *f)) != Some(false));
    F::write(&env.context.lines_read, |n| *n += 1);
}

/// Continuation after the response was sent: `processRequest` returns,
/// completing its future.
fn resume_after_send<F: Family>(hubs: &Hubs<F>, env: &Env<F>) {
    env.context.ret_future.complete(hubs);
}

/// `processClient`'s continuation after `await processRequest(...)`: the
/// request is no longer in flight.
fn resume_client<F: Family>(hubs: &Hubs<F>, env: &Env<F>) {
    // The context holds the future, so even a weak back-link is alive here.
    let future = &env.context.ret_future;
    debug_assert_eq!(
        F::with_back(&env.future, |f| F::ptr_eq(f, future)),
        Some(true)
    );
    hubs.dispatcher().deregister(future.id);
}

/// What the HTTP layer sends back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Body (JSON); empty for [`Reply::stats`] replies, which the HTTP layer
    /// fills in.
    pub body: String,
    /// Whether the route asks for the server statistics.
    pub stats: bool,
}

/// Handles one request by building its object graph: reads the lines, routes
/// through the application hub, renders the body from the document, sends,
/// completes the futures. Returns the reply; the graph is dropped on return.
pub fn handle<'h, F: Family>(
    hubs: &Hubs<F>,
    method: &str,
    path: &str,
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
) -> Reply {
    let fields: Vec<(String, String)> = headers
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let lines = (1 + fields.len()).min(MAX_LINES);
    let request = F::alloc(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        headers: F::alloc(Headers {
            fields,
            candidate: F::Candidate::default(),
        }),
        context: F::cell(None),
        response: F::cell(None),
    });

    // `processRequest` starts: its future, its iterator environment, and the
    // caller's continuation on the future.
    let ret_future = Future::new(hubs, "processRequest");
    let context = {
        let dispatcher = hubs.dispatcher();
        F::alloc(Context {
            ret_future: ret_future.clone(),
            request: request.clone(),
            response: F::cell(None),
            route: F::cell(None),
            awaiting: F::cell(None),
            lines_read: F::cell(0),
            dispatcher: dispatcher.clone(),
            app: hubs.app.clone(),
        })
    };
    F::write(&request.context, |c| *c = Some(F::back(&context)));
    hubs.dispatcher().register(&ret_future);
    ret_future.add_callback(Callback {
        function: resume_client::<F>,
        env: F::alloc(Env {
            future: F::back(&ret_future),
            context: context.clone(),
        }),
    });

    // `await client.recvLineInto(...)` for the request line and each header.
    for _ in 0..lines {
        let line = Future::new(hubs, "recvLineInto");
        line.add_callback(Callback {
            function: resume_after_line::<F>,
            env: F::alloc(Env {
                future: F::back(&line),
                context: context.clone(),
            }),
        });
        let previous = F::write(&context.awaiting, |a| a.replace(line.clone()));
        drop(previous);
        line.complete(hubs);
        poll(hubs);
    }

    // Route through the application hub and render the body from the
    // document.
    let route = context.app.routes.get(path).cloned();
    let (status, stats) = match (&route, method) {
        (None, _) => (404, false),
        (Some(_), m) if m != "GET" && m != "HEAD" => (405, false),
        (Some(r), _) => (200, r.kind == RouteKind::Stats),
    };
    let mut body = String::new();
    match (&route, status) {
        (Some(r), 200) => {
            if let Some(node) = &r.node {
                render(node, &mut body);
            }
        }
        (_, 404) => body.push_str(r#"{"error":"not found"}"#),
        _ => body.push_str(r#"{"error":"method not allowed"}"#),
    }
    F::write(&context.route, |r| *r = route);
    let response = F::alloc(Response {
        status,
        headers: F::alloc(Headers {
            fields: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            candidate: F::Candidate::default(),
        }),
        body: F::cell(body),
        request: F::back(&request),
        context: F::back(&context),
    });
    F::write(&context.response, |r| *r = Some(response.clone()));
    F::write(&request.response, |r| *r = Some(response.clone()));

    // `await req.respond(...)`: the send future and its continuation, which
    // completes `processRequest`, whose caller then deregisters it.
    let send = Future::new(hubs, "send");
    send.add_callback(Callback {
        function: resume_after_send::<F>,
        env: F::alloc(Env {
            future: F::back(&send),
            context: context.clone(),
        }),
    });
    let previous = F::write(&context.awaiting, |a| a.replace(send.clone()));
    drop(previous);
    send.complete(hubs);
    poll(hubs);
    // With per-thread hubs this thread ran every callback itself. With shared
    // hubs another worker may have popped one of this request's callbacks
    // from the shared ready queue and still be running it; it finishes the
    // job (deregistration included) without us.
    if !F::SHARED_HUBS {
        debug_assert!(F::read(&ret_future.finished, |f| *f));
        debug_assert_eq!(F::read(&context.lines_read, |n| *n) as usize, lines);
    }

    Reply {
        status: response.status,
        body: F::read(&response.body, |b| b.clone()),
        stats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{GcAllCyclicFamily, GcFamily, RcFamily, WeakRcFamily};

    const HEADERS: [(&str, &str); 2] = [("host", "x"), ("accept", "*/*")];
    /// 9 fixed objects plus a future and an environment per line (request
    /// line and two headers).
    const PER_REQUEST: u64 = 9 + 2 * 3;

    #[test]
    fn rc_family_leaks_every_object_of_every_request() {
        let hubs = Hubs::<RcFamily>::new();
        let before = recycler::stats();
        for _ in 0..10 {
            let r = handle(&hubs, "GET", "/", HEADERS);
            assert_eq!(
                (r.status, r.body.as_str(), r.stats),
                (200, r#"{"message":"Hello, World!"}"#, false)
            );
        }
        let after = recycler::stats();
        assert_eq!(after.live - before.live, 10 * PER_REQUEST);
        assert_eq!(after.freed_by_rc, before.freed_by_rc);
        assert_eq!(hubs.in_flight(), 0);
    }

    #[test]
    fn weak_rc_family_builds_the_same_objects_and_frees_them_all_by_counting() {
        let before = recycler::stats();
        {
            let hubs = Hubs::<WeakRcFamily>::new();
            let built = recycler::stats();
            assert!(built.live - before.live > 10_000, "document and hubs");
            for path in ["/", "/stats", "/missing", "/"] {
                handle(&hubs, "GET", path, HEADERS);
                // Nothing of the request is left once it is answered.
                assert_eq!(recycler::stats().live, built.live, "{path}");
            }
            assert_eq!(handle(&hubs, "POST", "/", HEADERS).status, 405);
            let after = recycler::stats();
            assert_eq!(after.live, built.live);
            // As many objects per request as the other families build, all
            // freed by counting.
            assert_eq!(after.freed_by_rc - built.freed_by_rc, 5 * PER_REQUEST);
            assert_eq!(hubs.in_flight(), 0);
            let again = handle(&hubs, "GET", "/", HEADERS);
            assert_eq!(again.body, r#"{"message":"Hello, World!"}"#);
        }
        // The hubs go too: the document's parent links are weak.
        let end = recycler::stats();
        assert_eq!(end.live, before.live, "nothing leaks");
        assert_eq!(end.freed_by_collector, before.freed_by_collector);
    }

    #[test]
    fn all_cyclic_family_makes_the_leaves_collector_work() {
        recycler::set_policy(recycler::Policy::Manual);
        let hubs = Hubs::<GcAllCyclicFamily>::new();
        recycler::collect();
        let before = recycler::stats();
        for _ in 0..5 {
            handle(&hubs, "GET", "/", HEADERS);
        }
        assert_eq!(recycler::stats().live - before.live, 5 * PER_REQUEST);
        recycler::collect();
        let after = recycler::stats();
        assert_eq!(after.live, before.live);
        // The two `Headers` of each request are traced and freed with the
        // cycles, where `GcFamily` leaves them to counting.
        assert_eq!(
            after.freed_by_collector - before.freed_by_collector,
            5 * PER_REQUEST
        );
        assert_eq!(after.freed_by_rc, before.freed_by_rc);
        recycler::set_policy(recycler::Policy::Adaptive);
    }

    #[test]
    fn gc_family_frees_exactly_the_request_graphs() {
        recycler::set_policy(recycler::Policy::Manual);
        let hubs = Hubs::<GcFamily>::new();
        recycler::collect();
        let before = recycler::stats();
        for path in ["/", "/stats", "/missing", "/"] {
            handle(&hubs, "GET", path, HEADERS);
        }
        let r = handle(&hubs, "POST", "/", HEADERS);
        assert_eq!(r.status, 405);
        let mid = recycler::stats();
        assert_eq!(mid.live - before.live, 5 * PER_REQUEST);
        recycler::collect();
        let after = recycler::stats();
        assert_eq!(
            after.live, before.live,
            "everything a request built is freed"
        );
        // The collector frees the cycles; the two `Headers` of each request
        // cannot own a pointer, are never traced, and are freed by counting
        // when their owners go.
        assert_eq!(
            after.freed_by_collector - before.freed_by_collector,
            5 * (PER_REQUEST - 2)
        );
        assert_eq!(after.freed_by_rc - before.freed_by_rc, 5 * 2);
        // The hubs are intact.
        assert_eq!(hubs.in_flight(), 0);
        let again = handle(&hubs, "GET", "/", HEADERS);
        assert_eq!(again.body, r#"{"message":"Hello, World!"}"#);
        recycler::set_policy(recycler::Policy::Adaptive);
    }

    /// Two threads handle requests on one set of shared hubs, as the
    /// workers of the work-stealing runtime do. The only test in this binary
    /// that uses the `recycler::sync` pointers, whose statistics are
    /// process-wide.
    #[test]
    fn sync_families_share_hubs_across_threads() {
        use crate::family::{SyncGcFamily, SyncRcFamily};
        use recycler::sync;

        fn on_two_threads<F: Family>(hubs: &Hubs<F>, requests: usize)
        where
            Hubs<F>: Sync,
        {
            // Joined explicitly: the scope alone may return before a
            // thread's exit has folded its counters into `sync::stats()`,
            // which then reads them torn (reported with the sync work).
            std::thread::scope(|s| {
                let threads: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            sync::set_policy(recycler::Policy::Manual);
                            for i in 0..requests {
                                let path = if i % 5 == 4 { "/missing" } else { "/" };
                                let r = handle(hubs, "GET", path, HEADERS);
                                assert_eq!(r.status, if i % 5 == 4 { 404 } else { 200 });
                            }
                        })
                    })
                    .collect();
                for t in threads {
                    t.join().expect("request thread");
                }
            });
        }

        sync::set_policy(recycler::Policy::Manual);
        // Careful ARC: the same objects, all freed by counting, hubs included.
        let base = sync::stats();
        {
            let weak_hubs = Hubs::<crate::family::SyncWeakRcFamily>::new();
            let built = sync::stats();
            on_two_threads(&weak_hubs, 50);
            let after = sync::stats();
            assert_eq!(after.live, built.live, "arc-weak leaks nothing");
            assert_eq!(after.freed_by_rc - built.freed_by_rc, 100 * PER_REQUEST);
            assert_eq!(weak_hubs.in_flight(), 0);
        }
        let end = sync::stats();
        assert_eq!(end.live, base.live);
        assert_eq!(end.freed_by_collector, base.freed_by_collector);

        let rc_hubs = Hubs::<SyncRcFamily>::new();
        let before = sync::stats();
        on_two_threads(&rc_hubs, 50);
        let after = sync::stats();
        assert_eq!(after.live - before.live, 100 * PER_REQUEST, "arc leaks all");
        assert_eq!(after.freed_by_collector, before.freed_by_collector);
        assert_eq!(rc_hubs.in_flight(), 0);

        let gc_hubs = Hubs::<SyncGcFamily>::new();
        sync::collect();
        let before = sync::stats();
        on_two_threads(&gc_hubs, 50);
        assert_eq!(sync::stats().live - before.live, 100 * PER_REQUEST);
        sync::collect();
        let after = sync::stats();
        assert_eq!(after.live, before.live, "every request graph is freed");
        // The 13 cyclic objects of each request can only go by collection.
        // Unlike `recycler::Gc`, `sync::Gc<T>` reports its edge even when `T`
        // cannot own a pointer, so the collector also takes the two
        // `Headers` with the cycle instead of leaving them to counting.
        let by_collector = after.freed_by_collector - before.freed_by_collector;
        let by_rc = after.freed_by_rc - before.freed_by_rc;
        assert_eq!(by_collector + by_rc, 100 * PER_REQUEST);
        assert!(by_collector >= 100 * (PER_REQUEST - 2), "{by_collector}");
        assert_eq!(gc_hubs.in_flight(), 0);
        assert_eq!(
            handle(&gc_hubs, "GET", "/", HEADERS).body,
            r#"{"message":"Hello, World!"}"#
        );
        sync::set_policy(recycler::Policy::Adaptive);
    }

    #[test]
    fn routes_and_statuses() {
        let hubs = Hubs::<RcFamily>::new();
        assert!(handle(&hubs, "GET", "/stats", HEADERS).stats);
        assert_eq!(handle(&hubs, "GET", "/nope", HEADERS).status, 404);
        assert_eq!(handle(&hubs, "DELETE", "/stats", HEADERS).status, 405);
        // Many header lines: only MAX_LINES get a read future.
        let many: Vec<(String, String)> =
            (0..20).map(|i| (format!("h{i}"), "v".to_owned())).collect();
        let before = recycler::stats().live;
        handle(
            &hubs,
            "GET",
            "/",
            many.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        assert_eq!(recycler::stats().live - before, 9 + 2 * MAX_LINES as u64);
    }
}
