//! `sync::collect()` runs full collections until one frees nothing, at
//! most 8 in a row (its docs): a chain of cycles, each kept alive by the
//! previous one through a field the collector does not see (`#[trace(skip)]`),
//! needs one collection per link. The docs used to promise "until one frees
//! nothing" without the bound; a chain of 40 kept 32 cycles after one call.

use std::sync::Mutex;

use recycler::sync::{collect, Gc, Weak};
use recycler::Trace;

#[derive(Trace)]
struct Link {
    me: Mutex<Option<Gc<Link>>>,
    /// The next cycle of the chain, which only this value's drop releases.
    #[trace(skip)]
    _next: Option<Gc<Link>>,
}

/// A chain of `n` self-cycles, each holding the next; returns weak handles.
fn chain(n: usize) -> Vec<Weak<Link>> {
    let mut next = None;
    let mut weaks = Vec::new();
    for _ in 0..n {
        let link = Gc::new(Link {
            me: Mutex::new(None),
            _next: next.take(),
        });
        *link.me.lock().unwrap() = Some(link.clone());
        weaks.push(Gc::downgrade(&link));
        next = Some(link);
    }
    weaks
}

fn alive(weaks: &[Weak<Link>]) -> usize {
    weaks.iter().filter(|w| w.upgrade().is_some()).count()
}

#[test]
fn collect_frees_a_chain_of_eight_cycles_and_longer_chains_in_later_calls() {
    let weaks = chain(8);
    collect();
    assert_eq!(alive(&weaks), 0, "eight rounds free a chain of eight");

    let weaks = chain(20);
    collect();
    assert!(alive(&weaks) > 0, "the bound of the docs: at most 8 rounds");
    for _ in 0..3 {
        collect();
    }
    assert_eq!(alive(&weaks), 0);
}
