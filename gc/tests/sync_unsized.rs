//! Unsized values behind the thread-safe pointers: `str`, slices and
//! `dyn Trait + Send + Sync` behind `sync::Gc`, `sync::Rc` and their weak
//! handles; cycles through trait objects and through slice objects, built,
//! shared and dropped on several threads; dead handles after a collection;
//! and a randomized multi-threaded test whose oracle is reachability in the
//! real graph, walked single-threaded at the end (as in
//! `sync_differential.rs`).
//!
//! Every value that logs its drops belongs to a per-test [`World`]: each id
//! is dropped at most once (checked in `Drop`), never while reachable
//! (checked on every access), and the number of drops is counted, so the
//! tests do not depend on the process-wide statistics that the other tests
//! of this binary change concurrently.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::sync::{collect, collect_minor, Gc, Rc, Weak};
use recycler::unsize::DynTrace;
use recycler::{coerce, dyn_trace, Trace};

/// Held by every test of this binary: a collection is process-wide, so a
/// test's `collect()` would otherwise free (and drop, and re-raise the
/// panics of) another test's garbage while that test counts its drops.
/// The threads inside one test still run concurrently.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which ids are alive, and how many drops happened.
struct World {
    alive: Vec<AtomicBool>,
    next_id: AtomicUsize,
    dropped: AtomicUsize,
    /// Shared cells through which handles move between threads.
    cells: Vec<Mutex<Option<Obj>>>,
}

impl World {
    fn new(capacity: usize, cells: usize) -> Arc<World> {
        Arc::new(World {
            alive: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
            next_id: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
            cells: (0..cells).map(|_| Mutex::new(None)).collect(),
        })
    }

    fn tag(self: &Arc<Self>) -> Option<Tag> {
        let id = self.next_id.fetch_add(1, SeqCst);
        (id < self.alive.len()).then(|| {
            self.alive[id].store(true, SeqCst);
            Tag {
                id,
                world: self.clone(),
            }
        })
    }

    fn allocated(&self) -> usize {
        self.next_id.load(SeqCst).min(self.alive.len())
    }

    fn alive_ids(&self) -> Vec<usize> {
        (0..self.allocated())
            .filter(|&id| self.alive[id].load(SeqCst))
            .collect()
    }
}

/// Marks its id dead when dropped; a leaf.
#[derive(Trace)]
struct Tag {
    #[trace(skip)]
    id: usize,
    #[trace(skip)]
    world: Arc<World>,
}

impl Tag {
    /// Asserts that the value has not been dropped.
    fn check(&self) -> usize {
        assert!(
            self.world.alive[self.id].load(SeqCst),
            "{} accessed after its value was dropped",
            self.id
        );
        self.id
    }
}

impl Drop for Tag {
    fn drop(&mut self) {
        let was = self.world.alive[self.id].swap(false, SeqCst);
        assert!(was, "{} dropped twice", self.id);
        self.world.dropped.fetch_add(1, SeqCst);
    }
}

trait Shape: DynTrace {
    fn tag(&self) -> &Tag;
    /// Adds an edge; `false` for a shape that has none.
    fn link(&self, _to: &Obj) -> bool {
        false
    }
    /// Removes the last edge.
    fn unlink(&self) -> Option<Obj> {
        None
    }
    /// The edges, cloned.
    fn edges(&self) -> Vec<Obj> {
        Vec::new()
    }
    /// The slice object the edges are in, for a shape that has one.
    fn slice(&self) -> Option<Gc<[Obj]>> {
        None
    }
}
dyn_trace!(Shape);

/// A shape handle that can cross threads.
type Obj = Gc<dyn Shape + Send + Sync>;
type WeakObj = Weak<dyn Shape + Send + Sync>;

fn id(obj: &Obj) -> usize {
    obj.tag().check()
}

/// A leaf shape: never a cycle candidate as a type (though a handle to it
/// as `dyn Shape` is buffered conservatively).
#[derive(Trace)]
struct Dot {
    tag: Tag,
}

impl Shape for Dot {
    fn tag(&self) -> &Tag {
        &self.tag
    }
}

/// A shape whose edges are a vector behind a lock.
#[derive(Trace)]
struct Group {
    tag: Tag,
    members: Mutex<Vec<Obj>>,
}

impl Shape for Group {
    fn tag(&self) -> &Tag {
        &self.tag
    }
    fn link(&self, to: &Obj) -> bool {
        id(to);
        self.members.lock().unwrap().push(to.clone());
        true
    }
    fn unlink(&self) -> Option<Obj> {
        self.members.lock().unwrap().pop()
    }
    fn edges(&self) -> Vec<Obj> {
        self.members.lock().unwrap().clone()
    }
}

/// A shape whose edges are an immutable slice object, replaced on every
/// change: cycles through it go through a `sync::Gc<[Obj]>`.
#[derive(Trace)]
struct Fan {
    tag: Tag,
    edges: Mutex<Option<Gc<[Obj]>>>,
}

impl Shape for Fan {
    fn tag(&self) -> &Tag {
        &self.tag
    }
    fn link(&self, to: &Obj) -> bool {
        id(to);
        let mut edges = self.edges.lock().unwrap();
        let old: &[Obj] = edges.as_deref().unwrap_or(&[]);
        // The three constructors in turn: `FromIterator`, `From<Vec<_>>`
        // and `From<&[_]>` (cloning).
        let new: Gc<[Obj]> = match old.len() % 3 {
            0 => old.iter().cloned().chain([to.clone()]).collect(),
            1 => Gc::from([old, &[to.clone()][..]].concat()),
            _ => Gc::from(&[old, &[to.clone()][..]].concat()[..]),
        };
        *edges = Some(new);
        true
    }
    fn unlink(&self) -> Option<Obj> {
        let mut edges = self.edges.lock().unwrap();
        let (last, rest) = edges.as_deref()?.split_last()?;
        let last = last.clone();
        *edges = Some(Gc::from(rest.to_vec().into_boxed_slice()));
        Some(last)
    }
    fn edges(&self) -> Vec<Obj> {
        self.slice()
            .as_deref()
            .map_or_else(Vec::new, <[Obj]>::to_vec)
    }
    fn slice(&self) -> Option<Gc<[Obj]>> {
        self.edges.lock().unwrap().clone()
    }
}

fn dot(world: &Arc<World>) -> Option<Obj> {
    Some(coerce!(Gc::new(Dot { tag: world.tag()? }) => dyn Shape + Send + Sync))
}

fn group(world: &Arc<World>) -> Option<Obj> {
    let group = Gc::new(Group {
        tag: world.tag()?,
        members: Mutex::new(Vec::new()),
    });
    Some(coerce!(group => dyn Shape + Send + Sync))
}

fn fan(world: &Arc<World>) -> Option<Obj> {
    let fan = Gc::new(Fan {
        tag: world.tag()?,
        edges: Mutex::new(None),
    });
    Some(coerce!(fan => dyn Shape + Send + Sync))
}

#[test]
fn strings() {
    let _serial = serial();
    let a: Gc<str> = Gc::from("hello");
    let b: Gc<str> = Gc::from(String::from("hello"));
    let c: Rc<str> = Rc::from(Box::<str>::from("héllo"));
    let e: Gc<str> = Gc::from("");
    assert_eq!(a, b);
    assert!(!Gc::ptr_eq(&a, &b));
    assert_eq!((&*a, &*c, &*e), ("hello", "héllo", ""));
    assert_eq!(format!("{a:?} {c}"), "\"hello\" héllo");
    let w = Gc::downgrade(&a);
    assert_eq!((Gc::strong_count(&a), Gc::weak_count(&a)), (1, 1));
    // Sent to another thread, read and dropped there.
    let (a2, c2) = (a.clone(), c.clone());
    let len = std::thread::spawn(move || a2.len() + c2.len())
        .join()
        .unwrap();
    assert_eq!(len, 5 + "héllo".len());
    assert_eq!(Gc::strong_count(&a), 1);
    drop(a);
    assert!(w.upgrade().is_none());
    assert_eq!(w.strong_count(), 0);
    let rw = Rc::downgrade(&c);
    drop(c);
    assert!(rw.upgrade().is_none());
}

/// An element type aligned beyond the header's eight bytes.
#[derive(Trace, Clone, Copy, Debug, PartialEq)]
#[repr(align(32))]
struct Wide(u8);

#[test]
fn slices_of_leaves() {
    let _serial = serial();
    let world = World::new(16, 0);
    let tags: Gc<[Tag]> = (0..3).map(|_| world.tag().unwrap()).collect();
    assert_eq!(tags.iter().map(Tag::check).collect::<Vec<_>>(), [0, 1, 2]);
    let copy: Rc<[u64]> = Rc::from(&[1u64, 2, 3][..]);
    let boxed: Rc<[String]> = Rc::from(vec!["x".to_string()].into_boxed_slice());
    let empty: Gc<[Tag]> = Gc::from(Vec::new());
    let zst: Gc<[()]> = Gc::from(vec![(); 5]);
    let wide: Gc<[Wide]> = Gc::from(vec![Wide(1), Wide(2), Wide(3)]);
    assert_eq!(Gc::as_ptr(&wide).cast::<Wide>() as usize % 32, 0);
    assert_eq!(
        (&copy[..], boxed[0].as_str(), empty.len(), zst.len()),
        (&[1u64, 2, 3][..], "x", 0, 5)
    );
    assert_eq!(&wide[..], &[Wide(1), Wide(2), Wide(3)]);
    let weak = Gc::downgrade(&tags);
    let again = weak.upgrade().unwrap();
    // The last handle goes on another thread.
    let handle = std::thread::spawn(move || drop(tags));
    handle.join().unwrap();
    assert_eq!(world.dropped.load(SeqCst), 0);
    drop(again);
    assert_eq!(world.dropped.load(SeqCst), 3);
    assert!(weak.upgrade().is_none());
    assert_eq!(weak.strong_count(), 0);
    drop((copy, boxed, empty, zst, wide));
}

#[test]
fn get_mut_on_slices() {
    let _serial = serial();
    let mut s: Gc<[u32]> = Gc::from(vec![1, 2, 3]);
    Gc::get_mut(&mut s).unwrap()[1] = 20;
    let t = s.clone();
    assert!(Gc::get_mut(&mut s).is_none());
    drop(t);
    let w = Gc::downgrade(&s);
    assert!(Gc::get_mut(&mut s).is_none());
    drop(w);
    Gc::get_mut(&mut s).unwrap()[2] = 30;
    assert_eq!(&s[..], &[1, 20, 30]);
    let mut r: Rc<str> = Rc::from("abc");
    Rc::get_mut(&mut r).unwrap().make_ascii_uppercase();
    assert_eq!(&*r, "ABC");
}

/// A node whose edges are a shared slice of handles to nodes.
#[derive(Trace)]
struct SliceNode {
    tag: Tag,
    edges: Mutex<Option<Gc<[Gc<SliceNode>]>>>,
}

#[test]
fn candidate_slices_are_collected() {
    let _serial = serial();
    let world = World::new(4, 0);
    let node = || {
        Gc::new(SliceNode {
            tag: world.tag().unwrap(),
            edges: Mutex::new(None),
        })
    };
    let (a, b) = (node(), node());
    // a -> [a, b], b -> [a]: cycles through two slice objects.
    *a.edges.lock().unwrap() = Some(Gc::from(vec![a.clone(), b.clone()]));
    *b.edges.lock().unwrap() = Some([a.clone()].into_iter().collect());
    let slice = a.edges.lock().unwrap().clone().unwrap();
    let weak_slice = Gc::downgrade(&slice);
    let weak_a = Gc::downgrade(&a);
    // Dropped on two other threads.
    let t1 = std::thread::spawn(move || drop((slice, a)));
    let t2 = std::thread::spawn(move || drop(b));
    t1.join().unwrap();
    t2.join().unwrap();
    assert_eq!(world.dropped.load(SeqCst), 0);
    collect();
    assert_eq!(world.dropped.load(SeqCst), 2);
    assert!(weak_slice.upgrade().is_none() && weak_a.upgrade().is_none());
    assert_eq!(weak_slice.strong_count(), 0);
}

#[test]
fn cycles_through_trait_objects_across_threads() {
    let _serial = serial();
    let world = World::new(8, 0);
    let (g1, g2, f, d) = (
        group(&world).unwrap(),
        group(&world).unwrap(),
        fan(&world).unwrap(),
        dot(&world).unwrap(),
    );
    // g1 -> g2 -> f -> {g1, d}: one cycle through a group and a slice.
    g1.link(&g2);
    g2.link(&f);
    f.link(&g1);
    f.link(&d);
    let weaks: Vec<WeakObj> = [&g1, &g2, &f, &d].map(Gc::downgrade).into();
    // A second thread keeps `g2` alive while the first drops its handles.
    let keep = g2.clone();
    let other = std::thread::spawn(move || {
        collect();
        id(&keep);
        assert_eq!(keep.edges().len(), 1);
        keep
    });
    drop((g1, g2, f, d));
    let keep = other.join().unwrap();
    collect();
    assert_eq!(world.dropped.load(SeqCst), 0);
    assert!(weaks.iter().all(|w| w.upgrade().is_some()));
    std::thread::spawn(move || drop(keep)).join().unwrap();
    collect();
    assert_eq!(world.dropped.load(SeqCst), 4);
    assert!(weaks.iter().all(|w| w.upgrade().is_none()));
}

#[test]
fn coerced_handles_share_counts_and_weak_handles_coerce() {
    let _serial = serial();
    let world = World::new(8, 0);
    let group = Gc::new(Group {
        tag: world.tag().unwrap(),
        members: Mutex::new(Vec::new()),
    });
    let shape: Obj = coerce!(group.clone() => dyn Shape + Send + Sync);
    assert_eq!(Gc::strong_count(&group), 2);
    assert_eq!(Gc::as_ptr(&shape) as *const Group, Gc::as_ptr(&group));
    let weak: WeakObj = coerce!(Gc::downgrade(&group) => dyn Shape + Send + Sync);
    assert_eq!((weak.strong_count(), weak.weak_count()), (2, 1));
    assert!(Gc::ptr_eq(&weak.upgrade().unwrap(), &shape));
    let none: WeakObj = coerce!(Weak::<Dot>::new() => dyn Shape + Send + Sync);
    assert!(none.upgrade().is_none());
    assert!(Weak::ptr_eq(
        &none,
        &coerce!(Weak::<Group>::new() => dyn Shape + Send + Sync)
    ));
    // Without `Send + Sync`: a handle for one thread.
    let local: Gc<dyn Shape> = coerce!(group.clone() => dyn Shape);
    assert_eq!(local.tag().check(), 0);
    drop((group, shape, local));
    assert!(weak.upgrade().is_none());
    assert_eq!(world.dropped.load(SeqCst), 1);
    // A leaf with a `dyn` handle, whose drops buffer it, and a sized one,
    // whose drops never do: the last drop (sized) leaves the buffer entry to
    // a collection, which finds the object dead.
    let leaf = Gc::new(Dot {
        tag: world.tag().unwrap(),
    });
    let as_dyn: Obj = coerce!(leaf.clone() => dyn Shape + Send + Sync);
    drop(as_dyn.clone());
    drop(as_dyn);
    let leaf_weak = Gc::downgrade(&leaf);
    drop(leaf);
    assert_eq!(world.dropped.load(SeqCst), 2);
    collect();
    assert!(leaf_weak.upgrade().is_none());
    // `sync::Rc` and its weak handle, through a trait object too.
    let dot = Rc::new(Dot {
        tag: world.tag().unwrap(),
    });
    let rc_weak: recycler::sync::rc::Weak<dyn Shape + Send + Sync> =
        coerce!(Rc::downgrade(&dot) => dyn Shape + Send + Sync);
    let rc: Rc<dyn Shape + Send + Sync> = coerce!(dot => dyn Shape + Send + Sync);
    assert_eq!(rc.tag().check(), 2);
    std::thread::spawn(move || drop(rc)).join().unwrap();
    assert!(rc_weak.upgrade().is_none());
    assert_eq!(world.dropped.load(SeqCst), 3);
}

/// Stores a clone of a member of its own garbage cycle while being dropped.
#[derive(Trace)]
struct Keeper {
    tag: Tag,
    other: Mutex<Option<Obj>>,
    #[trace(skip)]
    kept: Arc<Mutex<Option<Obj>>>,
}

impl Shape for Keeper {
    fn tag(&self) -> &Tag {
        &self.tag
    }
    fn link(&self, to: &Obj) -> bool {
        *self.other.lock().unwrap() = Some(to.clone());
        true
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(other) = self.other.lock().unwrap().clone() {
            *self.kept.lock().unwrap() = Some(other);
        }
    }
}

#[test]
fn dead_trait_object_handles_are_detected() {
    let _serial = serial();
    let world = World::new(4, 0);
    let kept = Arc::new(Mutex::new(None));
    let k: Obj = coerce!(Gc::new(Keeper {
        tag: world.tag().unwrap(),
        other: Mutex::new(None),
        kept: kept.clone(),
    }) => dyn Shape + Send + Sync);
    let f = fan(&world).unwrap();
    f.link(&k);
    k.link(&f);
    let weak = Gc::downgrade(&f);
    drop((k, f));
    collect();
    assert_eq!(world.dropped.load(SeqCst), 2);
    let kept = kept
        .lock()
        .unwrap()
        .take()
        .expect("Drop ran and kept a handle");
    assert!(Gc::try_deref(&kept).is_none());
    assert!(weak.upgrade().is_none());
    assert_eq!(format!("{kept:?}"), "(collected)");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kept.tag().id));
    assert!(panicked.is_err());
    // The dead handle can still be cloned, sent and dropped.
    let other = kept.clone();
    std::thread::spawn(move || drop(other)).join().unwrap();
    drop(kept);
}

impl std::fmt::Debug for dyn Shape + Send + Sync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shape {}", self.tag().id)
    }
}

const THREADS: &[usize] = if cfg!(miri) { &[2] } else { &[2, 3] };
const OPS: usize = if cfg!(miri) { 100 } else { 6_000 };
const CELLS: usize = if cfg!(miri) { 2 } else { 6 };
const MAX_OBJECTS: usize = if cfg!(miri) { 200 } else { 30_000 };

/// What a worker leaves: its roots, and the weak handles it made (to trait
/// objects, with their ids, and to slice objects).
#[derive(Default)]
struct Left {
    roots: Vec<Obj>,
    weaks: Vec<(usize, WeakObj)>,
    slices: Vec<Weak<[Obj]>>,
}

/// Random operations on shapes of all three kinds: links (through groups and
/// through slice objects), unlinks, handles moved between threads through
/// shared cells, walks, weak upgrades and collections. Returns the roots
/// and the weak handles it made (to trait objects and to slice objects).
fn worker(world: Arc<World>, seed: u64) -> Left {
    let mut rng = SmallRng::seed_from_u64(seed);
    let Left {
        mut roots,
        mut weaks,
        mut slices,
    } = Left::default();
    let pick = |rng: &mut SmallRng, n: usize| {
        if rng.gen_bool(0.5) {
            n - 1 - rng.gen_range(0..n.min(8))
        } else {
            rng.gen_range(0..n)
        }
    };
    for _ in 0..OPS {
        let n = roots.len();
        match rng.gen_range(0..100) {
            0..=19 => {
                let made = match rng.gen_range(0..5) {
                    0 => dot(&world),
                    1 | 2 => group(&world),
                    _ => fan(&world),
                };
                if let Some(made) = made {
                    weaks.push((id(&made), Gc::downgrade(&made)));
                    roots.push(made);
                }
            }
            20..=44 if n > 0 => {
                let (a, b) = (pick(&mut rng, n), pick(&mut rng, n));
                roots[a].link(&roots[b]);
            }
            45..=52 if n > 0 => {
                let a = pick(&mut rng, n);
                if let Some(e) = roots[a].unlink() {
                    id(&e);
                    if rng.gen_bool(0.4) {
                        roots.push(e);
                    }
                }
            }
            53..=62 if n > 0 => {
                roots.swap_remove(pick(&mut rng, n));
            }
            63..=70 => {
                let cell = &world.cells[rng.gen_range(0..world.cells.len())];
                let mine =
                    (n > 0 && rng.gen_bool(0.6)).then(|| roots.swap_remove(pick(&mut rng, n)));
                let theirs = std::mem::replace(&mut *cell.lock().unwrap(), mine);
                if let Some(h) = theirs {
                    id(&h);
                    roots.push(h);
                }
            }
            71..=78 if n > 0 => {
                // Walk along edges.
                let mut cur = roots[pick(&mut rng, n)].clone();
                for _ in 0..4 {
                    let edges = cur.edges();
                    if edges.is_empty() {
                        break;
                    }
                    cur = edges[rng.gen_range(0..edges.len())].clone();
                    id(&cur);
                }
                if rng.gen_bool(0.2) {
                    roots.push(cur);
                }
            }
            79..=82 if n > 0 => {
                // A weak handle to a fan's current slice object.
                if let Some(slice) = roots[pick(&mut rng, n)].slice() {
                    slices.push(Gc::downgrade(&slice));
                }
            }
            83..=88 if !weaks.is_empty() => {
                let (wid, w) = &weaks[rng.gen_range(0..weaks.len())];
                if let Some(h) = w.upgrade() {
                    assert_eq!(id(&h), *wid);
                    if rng.gen_bool(0.3) {
                        roots.push(h);
                    }
                }
            }
            89..=92 => collect_minor(),
            93 => collect(),
            _ => {}
        }
    }
    Left {
        roots,
        weaks,
        slices,
    }
}

fn run(threads: usize, seed: u64) {
    let world = World::new(MAX_OBJECTS, CELLS);
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let world = world.clone();
            std::thread::spawn(move || worker(world, seed + t as u64))
        })
        .collect();
    let Left {
        mut roots,
        mut weaks,
        mut slices,
    } = Left::default();
    for w in workers {
        let left = w.join().unwrap();
        roots.extend(left.roots);
        weaks.extend(left.weaks);
        slices.extend(left.slices);
    }
    for cell in &world.cells {
        roots.extend(cell.lock().unwrap().take());
    }
    let mut i = 0;
    roots.retain(|_| {
        i += 1;
        i % 3 == 0
    });
    // What the dropped roots freed by counting is gone now; the rest of the
    // garbage is on cycles, through trait objects and slices.
    let by_counting = world.dropped.load(SeqCst);
    collect();
    let by_collector = world.dropped.load(SeqCst) - by_counting;
    assert!(by_collector > 0, "no garbage cycle to collect");

    // The oracle: reachability from the kept roots in the real graph.
    let allocated = world.allocated();
    let mut reachable = vec![false; allocated];
    let mut stack: Vec<Obj> = roots.clone();
    while let Some(s) = stack.pop() {
        if !std::mem::replace(&mut reachable[id(&s)], true) {
            stack.extend(s.edges());
        }
    }
    for (i, &r) in reachable.iter().enumerate() {
        let alive = world.alive[i].load(SeqCst);
        assert_eq!(alive, r, "{i}: reachable {r}, alive {alive}");
    }
    for (wid, w) in &weaks {
        assert_eq!(
            w.upgrade().is_some(),
            reachable[*wid],
            "weak handle to {wid}"
        );
    }
    let live = reachable.iter().filter(|&&r| r).count();
    assert_eq!(world.dropped.load(SeqCst), allocated - live);
    eprintln!(
        "{threads} threads: {allocated} shapes, {live} reachable, {by_collector} freed by the \
         final collection, {} weak handles, {} to slices",
        weaks.len(),
        slices.len()
    );
    drop(roots);
    collect();
    assert_eq!(world.alive_ids(), Vec::<usize>::new());
    assert_eq!(world.dropped.load(SeqCst), allocated);
    assert!(weaks.iter().all(|(_, w)| w.upgrade().is_none()));
    assert!(slices.iter().all(|w| w.upgrade().is_none()));
}

/// The runs share the process-wide collector; they run one after the other.
#[test]
fn threads_collect_exactly_the_unreachable_trait_objects_and_slices() {
    let _serial = serial();
    for (k, &threads) in THREADS.iter().enumerate() {
        run(threads, 0x5157 + 100 * k as u64);
    }
}

#[cfg(feature = "nightly")]
#[test]
fn implicit_coercion_on_nightly() {
    let _serial = serial();
    let world = World::new(8, 0);
    let a: Obj = Gc::new(Group {
        tag: world.tag().unwrap(),
        members: Mutex::new(Vec::new()),
    });
    a.link(&a);
    let b: Rc<dyn Shape + Send + Sync> = Rc::new(Dot {
        tag: world.tag().unwrap(),
    });
    // Arrays to slices: the object keeps the array's vtable.
    let s: Gc<[Obj]> = Gc::new([a.clone(), a.clone()]);
    let r: Rc<[u16]> = Rc::new([1u16, 2, 3]);
    assert_eq!((s.len(), &r[..]), (2, &[1u16, 2, 3][..]));
    let w = Gc::downgrade(&a);
    // Weak handles too, `new()`'s included.
    let never: WeakObj = Weak::<Dot>::new();
    assert!(never.upgrade().is_none());
    let dot = Gc::new(Dot {
        tag: world.tag().unwrap(),
    });
    let dot_weak: Weak<Dot> = Gc::downgrade(&dot);
    let dot_weak: WeakObj = dot_weak;
    assert_eq!(id(&dot_weak.upgrade().unwrap()), 2);
    let rc = Rc::new(Dot {
        tag: world.tag().unwrap(),
    });
    let rc_weak: recycler::sync::rc::Weak<Dot> = Rc::downgrade(&rc);
    let rc_weak: recycler::sync::rc::Weak<dyn Shape + Send + Sync> = rc_weak;
    drop(rc);
    assert!(rc_weak.upgrade().is_none());
    drop((a, b, s, r, dot));
    collect();
    assert!(w.upgrade().is_none() && dot_weak.upgrade().is_none());
    assert_eq!(world.dropped.load(SeqCst), 4);
}

/// Panics when dropped if `armed`; logs its drop either way. A candidate
/// (it may point to a slice of bombs), though never buffered here.
#[derive(Trace)]
struct Bomb {
    tag: Tag,
    #[trace(skip)]
    armed: bool,
    next: Mutex<Option<Gc<[Bomb]>>>,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.armed {
            panic!("bomb {}", self.tag.id);
        }
    }
}

#[test]
fn panicking_element_drops_free_the_rest() {
    let _serial = serial();
    let world = World::new(8, 0);
    let bomb = |armed| Bomb {
        tag: world.tag().unwrap(),
        armed,
        next: Mutex::new(None),
    };
    // Freed by counting: the panic reaches the last handle's owner, after
    // every element was dropped, and the memory is freed (Miri checks).
    let slice: Gc<[Bomb]> = Gc::from(vec![bomb(false), bomb(true), bomb(false)]);
    let weak = Gc::downgrade(&slice);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(slice)));
    assert!(dropped.is_err());
    assert_eq!(world.dropped.load(SeqCst), 3);
    assert!(weak.upgrade().is_none());
    // Freed by the collector: a slice whose element points back to it. The
    // panic is re-raised by the collection (possibly an automatic one,
    // while the last handle is dropped).
    let slice: Gc<[Bomb]> = Gc::from(vec![bomb(true), bomb(false)]);
    *slice[1].next.lock().unwrap() = Some(slice.clone());
    let weak = Gc::downgrade(&slice);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(slice)));
    let collected = std::panic::catch_unwind(collect);
    assert!(dropped.is_err() || collected.is_err());
    assert_eq!(world.dropped.load(SeqCst), 5);
    assert!(weak.upgrade().is_none());
}
