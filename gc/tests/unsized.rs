//! Unsized values: `str`, slices and trait objects behind `Gc`, `Rc` and the
//! weak handles, including cycles through trait objects and candidate slices,
//! and a randomized comparison of collections through trait objects against
//! a model of reachability.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::unsize::DynTrace;
use recycler::{coerce, dyn_trace, Gc, Rc, Trace};

thread_local! {
    static DROPPED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    static NEXT: Cell<usize> = const { Cell::new(0) };
}

fn next_id() -> usize {
    NEXT.with(|n| n.replace(n.get() + 1))
}

fn dropped() -> Vec<usize> {
    DROPPED.with(|d| std::mem::take(&mut *d.borrow_mut()))
}

/// Logs its id when dropped.
#[derive(Debug)]
struct Tag(usize);

impl Drop for Tag {
    fn drop(&mut self) {
        DROPPED.with(|d| d.borrow_mut().push(self.0));
    }
}

// SAFETY: owns no pointer.
unsafe impl Trace for Tag {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut recycler::Tracer<'_>) {}
}

trait Shape: DynTrace {
    fn id(&self) -> usize;
    /// The shapes this one points to (none for leaves).
    fn links(&self) -> Option<&RefCell<Vec<Gc<dyn Shape>>>> {
        None
    }
}
dyn_trace!(Shape);

/// A leaf shape: never a cycle candidate.
#[derive(Trace)]
struct Dot {
    tag: Tag,
}

impl Shape for Dot {
    fn id(&self) -> usize {
        self.tag.0
    }
}

/// A shape that points to other shapes: a candidate.
#[derive(Trace)]
struct Group {
    tag: Tag,
    members: RefCell<Vec<Gc<dyn Shape>>>,
}

impl Shape for Group {
    fn id(&self) -> usize {
        self.tag.0
    }
    fn links(&self) -> Option<&RefCell<Vec<Gc<dyn Shape>>>> {
        Some(&self.members)
    }
}

fn dot() -> Gc<dyn Shape> {
    coerce!(Gc::new(Dot { tag: Tag(next_id()) }) => dyn Shape)
}

fn group() -> Gc<dyn Shape> {
    coerce!(Gc::new(Group { tag: Tag(next_id()), members: RefCell::new(Vec::new()) }) => dyn Shape)
}

fn link(from: &Gc<dyn Shape>, to: &Gc<dyn Shape>) {
    from.links().unwrap().borrow_mut().push(to.clone());
}

#[test]
fn strings() {
    let live = recycler::stats().live;
    let a: Gc<str> = Gc::from("hello");
    let b: Gc<str> = Gc::from(String::from("hello"));
    let c: Rc<str> = Rc::from(Box::<str>::from("héllo"));
    let e: Gc<str> = Gc::from("");
    assert_eq!(a, b);
    assert_eq!((&*a, &*c, &*e), ("hello", "héllo", ""));
    assert_eq!(format!("{a:?} {c}"), "\"hello\" héllo");
    let w = Gc::downgrade(&a);
    assert_eq!((Gc::strong_count(&a), Gc::weak_count(&a)), (1, 1));
    assert_eq!(recycler::stats().live, live + 4);
    drop(a);
    assert!(w.upgrade().is_none());
    drop((b, c, e, w));
    assert_eq!(recycler::stats().live, live);
}

#[test]
fn slices_of_leaves() {
    dropped();
    let tags: Gc<[Tag]> = (0..3).map(|_| Tag(next_id())).collect();
    let ids: Vec<usize> = tags.iter().map(|t| t.0).collect();
    let copy: Rc<[u64]> = Rc::from(&[1u64, 2, 3][..]);
    let boxed: Rc<[String]> = Rc::from(vec!["x".to_string()].into_boxed_slice());
    let empty: Gc<[Tag]> = Gc::from(Vec::new());
    let zst: Gc<[()]> = Gc::from(vec![(); 5]);
    assert_eq!(
        (&copy[..], boxed[0].as_str(), empty.len(), zst.len()),
        (&[1u64, 2, 3][..], "x", 0, 5)
    );
    let weak = Gc::downgrade(&tags);
    let again = weak.upgrade().unwrap();
    drop(tags);
    assert!(dropped().is_empty());
    drop(again);
    assert_eq!(dropped(), ids);
    assert!(weak.upgrade().is_none());
    assert_eq!(weak.strong_count(), 0);
}

/// A node whose edges are a shared, immutable slice of handles.
#[derive(Trace)]
struct SliceNode {
    tag: Tag,
    edges: RefCell<Option<Gc<[Gc<SliceNode>]>>>,
}

#[test]
fn candidate_slices_are_collected() {
    dropped();
    let live = recycler::stats().live;
    let a = Gc::new(SliceNode {
        tag: Tag(next_id()),
        edges: RefCell::new(None),
    });
    let b = Gc::new(SliceNode {
        tag: Tag(next_id()),
        edges: RefCell::new(None),
    });
    let ids = BTreeSet::from([a.tag.0, b.tag.0]);
    // a -> [a, b], b -> [a]: cycles through two slice objects.
    *a.edges.borrow_mut() = Some(Gc::from(vec![a.clone(), b.clone()]));
    *b.edges.borrow_mut() = Some([a.clone()].into_iter().collect());
    let slice = a.edges.borrow().clone().unwrap();
    let weak_slice = Gc::downgrade(&slice);
    drop(slice);
    drop((a, b));
    recycler::collect();
    assert_eq!(dropped().into_iter().collect::<BTreeSet<_>>(), ids);
    assert!(weak_slice.upgrade().is_none());
    assert_eq!(recycler::stats().live, live);
}

#[test]
fn cycles_through_trait_objects() {
    dropped();
    let live = recycler::stats().live;
    let g1 = group();
    let g2 = group();
    let d = dot();
    link(&g1, &g2);
    link(&g2, &g1);
    link(&g2, &d);
    let ids = BTreeSet::from([g1.id(), g2.id(), d.id()]);
    let weak = Gc::downgrade(&g1);
    let dot_weak = Gc::downgrade(&d);
    drop((g1, g2, d));
    assert!(dropped().is_empty());
    recycler::collect();
    assert_eq!(dropped().into_iter().collect::<BTreeSet<_>>(), ids);
    assert!(weak.upgrade().is_none() && dot_weak.upgrade().is_none());
    assert_eq!(recycler::stats().live, live);
}

#[test]
fn live_trait_objects_are_kept() {
    dropped();
    let g1 = group();
    let g2 = group();
    link(&g1, &g2);
    link(&g2, &g1);
    drop(g2);
    recycler::collect();
    assert!(dropped().is_empty());
    assert_eq!(
        g1.links().unwrap().borrow()[0].links().unwrap().borrow()[0].id(),
        g1.id()
    );
    g1.links().unwrap().borrow_mut().clear();
    assert_eq!(dropped().len(), 1);
    drop(g1);
    assert_eq!(dropped().len(), 1);
}

#[test]
fn coerced_handles_share_counts_and_weak_handles_coerce() {
    let group = Gc::new(Group {
        tag: Tag(next_id()),
        members: RefCell::new(Vec::new()),
    });
    let shape: Gc<dyn Shape> = coerce!(group.clone() => dyn Shape);
    assert_eq!(Gc::strong_count(&group), 2);
    assert_eq!(shape.id(), group.tag.0);
    let weak: recycler::Weak<dyn Shape> = coerce!(Gc::downgrade(&group) => dyn Shape);
    assert_eq!(weak.strong_count(), 2);
    assert!(Gc::ptr_eq(&weak.upgrade().unwrap(), &shape));
    let none: recycler::Weak<dyn Shape> = coerce!(recycler::Weak::<Dot>::new() => dyn Shape);
    assert!(none.upgrade().is_none());
    drop((group, shape));
    assert!(weak.upgrade().is_none());
    // `Rc` of any type is a leaf, through a trait object too.
    let rc: Rc<dyn Shape> = coerce!(Rc::new(Dot { tag: Tag(next_id()) }) => dyn Shape);
    let rc_weak = Rc::downgrade(&rc);
    drop(rc);
    assert!(rc_weak.upgrade().is_none());
}

/// Stores a clone of a member of its own garbage cycle while being dropped.
#[derive(Trace)]
struct Keeper {
    other: RefCell<Option<Gc<dyn Shape>>>,
}

impl Shape for Keeper {
    fn id(&self) -> usize {
        usize::MAX
    }
}

thread_local! {
    static KEPT: RefCell<Option<Gc<dyn Shape>>> = const { RefCell::new(None) };
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(other) = self.other.borrow().clone() {
            KEPT.with(|k| *k.borrow_mut() = Some(other));
        }
    }
}

#[test]
fn dead_trait_object_handles_are_detected() {
    let live = recycler::stats().live;
    let k = coerce!(Gc::new(Keeper { other: RefCell::new(None) }) => dyn Shape);
    let g = group();
    link(&g, &k);
    let keeper: &Keeper = {
        let p = Gc::as_ptr(&k) as *const Keeper;
        // SAFETY: `k` was made from a `Keeper` and outlives the reference.
        unsafe { &*p }
    };
    *keeper.other.borrow_mut() = Some(g.clone());
    drop((k, g));
    recycler::collect();
    let kept = KEPT
        .with(|k| k.borrow_mut().take())
        .expect("Drop ran and kept a handle");
    assert!(Gc::try_deref(&kept).is_none());
    drop(kept);
    assert_eq!(recycler::stats().live, live);
}

/// Random graphs of trait objects (leaf dots and candidate groups), checked
/// after every collection against reachability from the roots in a model.
#[test]
fn randomized_against_a_model() {
    let rounds = if cfg!(miri) { 3 } else { 40 };
    let steps = if cfg!(miri) { 60 } else { 400 };
    for seed in 0..rounds {
        dropped();
        let live = recycler::stats().live;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut roots: Vec<Gc<dyn Shape>> = Vec::new();
        // The model: edges by id, roots by id, and which ids are alive.
        let mut edges: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut alive: BTreeSet<usize> = BTreeSet::new();
        let mut objects: HashMap<usize, recycler::Weak<dyn Shape>> = HashMap::new();
        for _ in 0..steps {
            match rng.gen_range(0..10) {
                0..=2 => {
                    let s = if rng.gen_bool(0.3) { dot() } else { group() };
                    edges.insert(s.id(), Vec::new());
                    alive.insert(s.id());
                    objects.insert(s.id(), Gc::downgrade(&s));
                    roots.push(s);
                }
                3..=5 if roots.len() >= 2 => {
                    let from = rng.gen_range(0..roots.len());
                    let to = rng.gen_range(0..roots.len());
                    if roots[from].links().is_some() {
                        link(&roots[from], &roots[to]);
                        edges
                            .get_mut(&roots[from].id())
                            .unwrap()
                            .push(roots[to].id());
                    }
                }
                6 if !roots.is_empty() => {
                    // Follow an edge: a new root reached through the heap.
                    let r = rng.gen_range(0..roots.len());
                    let next = roots[r].links().and_then(|l| l.borrow().first().cloned());
                    if let Some(next) = next {
                        roots.push(next);
                    }
                }
                7 if !roots.is_empty() => {
                    let r = rng.gen_range(0..roots.len());
                    if let Some(links) = roots[r].links() {
                        let removed = links.borrow_mut().pop();
                        if removed.is_some() {
                            edges.get_mut(&roots[r].id()).unwrap().pop();
                        }
                        drop(removed);
                    }
                }
                8 if !roots.is_empty() => {
                    let r = rng.gen_range(0..roots.len());
                    roots.swap_remove(r);
                }
                9 => {
                    if rng.gen_bool(0.5) {
                        recycler::collect();
                    } else {
                        recycler::collect_minor();
                    }
                }
                _ => {}
            }
            for id in dropped() {
                assert!(alive.remove(&id), "seed {seed}: {id} dropped twice");
            }
            // Whatever was dropped must be unreachable in the model.
            let reachable = reachable(&roots, &edges);
            for id in &reachable {
                assert!(alive.contains(id), "seed {seed}: reachable {id} was freed");
                let strong = objects[id].upgrade().expect("reachable objects upgrade");
                assert_eq!(strong.id(), *id);
            }
        }
        // A full collection frees exactly the unreachable objects.
        recycler::collect();
        for id in dropped() {
            assert!(alive.remove(&id), "seed {seed}: {id} dropped twice");
        }
        assert_eq!(alive, reachable(&roots, &edges), "seed {seed}");
        drop(roots);
        recycler::collect();
        for id in dropped() {
            assert!(alive.remove(&id));
        }
        assert!(alive.is_empty(), "seed {seed}: leaked {alive:?}");
        drop(objects);
        assert_eq!(recycler::stats().live, live, "seed {seed}");
    }
}

fn reachable(roots: &[Gc<dyn Shape>], edges: &HashMap<usize, Vec<usize>>) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut work: Vec<usize> = roots.iter().map(|r| r.id()).collect();
    while let Some(id) = work.pop() {
        if seen.insert(id) {
            work.extend(edges[&id].iter().copied());
        }
    }
    seen
}

#[cfg(feature = "nightly")]
#[test]
fn implicit_coercion_on_nightly() {
    let live = recycler::stats().live;
    let a: Gc<dyn Shape> = Gc::new(Group {
        tag: Tag(next_id()),
        members: RefCell::new(Vec::new()),
    });
    let b: Gc<dyn Shape> = Gc::new(Dot {
        tag: Tag(next_id()),
    });
    link(&a, &b);
    link(&a, &a);
    let c: Gc<dyn Shape> = Gc::new(Dot {
        tag: Tag(next_id()),
    });
    let w = Gc::downgrade(&c);
    drop(c);
    let never: recycler::Weak<dyn Shape> = recycler::Weak::<Dot>::new();
    assert!(never.upgrade().is_none());
    let g = Gc::new(Dot {
        tag: Tag(next_id()),
    });
    let gw: recycler::Weak<Dot> = Gc::downgrade(&g);
    let gw: recycler::Weak<dyn Shape> = gw;
    assert_eq!(gw.upgrade().unwrap().id(), g.tag.0);
    drop(g);
    assert!(gw.upgrade().is_none());
    assert!(w.upgrade().is_none());
    let r: Rc<dyn Shape> = Rc::new(Dot {
        tag: Tag(next_id()),
    });
    drop((a, b, r));
    recycler::collect();
    assert_eq!(recycler::stats().live, live);
}

/// Holds handles to itself, which its destructor uses while the value is
/// being dropped.
#[derive(Trace)]
struct SelfRef {
    me: RefCell<Option<recycler::Weak<dyn Shape>>>,
    strong: RefCell<Option<Gc<dyn Shape>>>,
    saw_dead: Cell<bool>,
}

impl Shape for SelfRef {
    fn id(&self) -> usize {
        0
    }
}

impl Drop for SelfRef {
    fn drop(&mut self) {
        if let Some(me) = self.strong.borrow().as_ref() {
            self.saw_dead.set(Gc::try_deref(me).is_none());
            SAW_DEAD.with(|s| s.set(self.saw_dead.get()));
        }
        if let Some(me) = self.me.borrow().as_ref() {
            assert!(me.upgrade().is_none());
        }
    }
}

#[test]
fn handles_to_itself_dropped_inside_its_own_drop() {
    let live = recycler::stats().live;
    // Freed by counting: its own weak handle goes while the value drops.
    let a = Gc::new(SelfRef {
        me: RefCell::new(None),
        strong: RefCell::new(None),
        saw_dead: Cell::new(false),
    });
    let a: Gc<dyn Shape> = coerce!(a => dyn Shape);
    let weak = Gc::downgrade(&a);
    let keeper = Gc::as_ptr(&a) as *const SelfRef;
    // SAFETY: `a` was made from a `SelfRef` and is alive here.
    unsafe { &*keeper }.me.replace(Some(weak));
    drop(a);
    // Freed by the collector: a self-cycle through a trait object, whose
    // destructor sees its own handle dead.
    let b = Gc::new(SelfRef {
        me: RefCell::new(None),
        strong: RefCell::new(None),
        saw_dead: Cell::new(false),
    });
    let b: Gc<dyn Shape> = coerce!(b => dyn Shape);
    let inner = Gc::as_ptr(&b) as *const SelfRef;
    // SAFETY: as above.
    unsafe { &*inner }.strong.replace(Some(b.clone()));
    // SAFETY: as above.
    unsafe { &*inner }.me.replace(Some(Gc::downgrade(&b)));
    drop(b);
    recycler::collect();
    assert_eq!(recycler::stats().live, live);
    assert!(SAW_DEAD.with(Cell::get));
}

thread_local! {
    static SAW_DEAD: Cell<bool> = const { Cell::new(false) };
}
