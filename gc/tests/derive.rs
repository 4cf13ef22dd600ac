//! Tests of `#[derive(Trace)]`: classification (`MAY_CONTAIN_GC`) of
//! derived types, and tracing observed through real collections.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;

use recycler::{collect, Gc, Trace};

fn may<T: Trace + ?Sized>() -> bool {
    T::MAY_CONTAIN_GC
}

// ---------------------------------------------------------------------------
// Classification. Most of these types are only inspected, never built.

#[allow(dead_code)]
#[derive(Trace)]
struct Leaves {
    name: String,
    numbers: Vec<u64>,
    index: HashMap<String, u32>,
    flag: Cell<bool>,
}

#[allow(dead_code)]
#[derive(Trace)]
struct NestedLeaves {
    inner: Leaves,
    more: Option<Box<Leaves>>,
    pair: (u8, Leaves),
}

#[derive(Trace)]
struct Unit;

#[allow(dead_code)]
#[derive(Trace)]
struct Tuple(u8, String);

#[derive(Trace)]
enum Empty {}

#[allow(dead_code)]
#[derive(Trace)]
enum Expr {
    Num(i64),
    Neg(Box<Expr>),
    Add(Box<Expr>, Box<Self>),
    Call { name: String, args: Vec<Expr> },
}

#[allow(dead_code)]
#[derive(Trace)]
enum List<T> {
    Nil,
    Cons(T, Box<List<T>>),
}

/// A type that does not implement `Trace`.
struct Opaque;

#[derive(Trace)]
struct SkipsOpaque {
    #[trace(skip)]
    _opaque: Opaque,
    n: u8,
}

#[allow(dead_code)]
#[derive(Trace)]
struct Wrapper<T> {
    value: T,
}

#[derive(Trace)]
struct OnlySkipped<T> {
    #[trace(skip)]
    _value: T,
}

#[derive(Trace)]
struct OnlyPhantom<T> {
    _marker: PhantomData<T>,
    n: u32,
}

#[allow(dead_code)]
#[derive(Trace)]
struct Params<'a, T: Clone, const N: usize>
where
    T: Default,
{
    items: [T; N],
    label: &'static str,
    _borrow: PhantomData<&'a ()>,
}

#[derive(Trace)]
#[trace(may_contain_gc)]
struct Forced {
    _n: u8,
}

mod renamed {
    pub use recycler as gc_crate;
}

#[derive(Trace)]
#[trace(crate = "renamed::gc_crate")]
struct RenamedCrate {
    _n: u8,
}

/// Polymorphic recursion: `Nested<u8>` owns a `Nested<Vec<u8>>`, and so on.
/// The derive cannot compute this one and conservatively answers `true`.
#[allow(dead_code)]
#[derive(Trace)]
struct Nested<T> {
    value: T,
    deeper: Option<Box<Nested<Vec<T>>>>,
}

#[test]
fn leaf_types_are_not_candidates() {
    assert!(!may::<Leaves>());
    assert!(!may::<NestedLeaves>());
    assert!(!may::<Unit>());
    assert!(!may::<Tuple>());
    assert!(!may::<Empty>());
    assert!(!may::<Params<'static, u8, 4>>());
    assert!(!may::<RenamedCrate>());
}

#[test]
fn recursive_types_get_the_least_fixed_point() {
    assert!(!may::<Expr>());
    assert!(!may::<List<String>>());
}

#[test]
fn generic_parameters_decide() {
    assert!(!may::<Wrapper<u8>>());
    assert!(!may::<Wrapper<Leaves>>());
    assert!(may::<Wrapper<Forced>>());
    assert!(may::<List<Forced>>());
}

#[test]
fn skipped_and_phantom_parameters_need_no_trace() {
    assert!(!may::<SkipsOpaque>());
    assert!(!may::<OnlySkipped<Opaque>>());
    assert!(!may::<OnlyPhantom<Opaque>>());
}

#[test]
fn forced_and_polymorphic_recursion_are_candidates() {
    assert!(may::<Forced>());
    assert!(may::<Nested<u8>>());
}

#[test]
fn refcell_of_derived() {
    assert!(!may::<RefCell<Vec<Leaves>>>());
    assert!(may::<RefCell<Vec<Forced>>>());
}

#[allow(dead_code)]
#[derive(Trace)]
struct HoldsGc {
    name: String,
    target: Gc<String>,
}

#[allow(dead_code)]
#[derive(Trace)]
struct MaybeGc(Option<Gc<u8>>);

#[allow(dead_code)]
#[derive(Trace)]
struct CellOfGcs {
    items: RefCell<Vec<Gc<Leaves>>>,
}

#[allow(dead_code)]
#[derive(Trace)]
enum OneCandidateVariant {
    A(u8),
    B { text: String },
    C(Vec<(u8, Option<Gc<u8>>)>),
}

#[allow(dead_code)]
#[derive(Trace)]
enum RecursiveWithGc {
    Leaf(Gc<String>),
    Pair(Box<RecursiveWithGc>, Box<RecursiveWithGc>),
}

#[allow(dead_code)]
#[derive(Trace)]
struct SkippedGc {
    n: u8,
    #[trace(skip)]
    target: Gc<String>,
}

/// Mutual recursion through `Gc` needs no attribute: `Gc<T>` is always a
/// candidate, whatever `T` is.
#[allow(dead_code)]
#[derive(Trace)]
struct Parent {
    child: Option<Gc<Child>>,
}

#[allow(dead_code)]
#[derive(Trace)]
struct Child {
    parent: RefCell<Option<Gc<Parent>>>,
}

/// Mutual recursion through `Box` would be a const cycle without the forced
/// answer on one side.
#[allow(dead_code)]
#[derive(Trace)]
#[trace(may_contain_gc)]
struct BoxA {
    b: Option<Box<BoxB>>,
}

#[allow(dead_code)]
#[derive(Trace)]
struct BoxB {
    a: Vec<BoxA>,
}

/// Weak handles and `recycler::Rc` own no collected strong reference.
#[allow(dead_code)]
#[derive(Trace)]
struct WeakAndRc {
    parent: recycler::Weak<HoldsGc>,
    shared: recycler::Rc<HoldsGc>,
}

#[test]
fn weak_and_rc_fields_are_not_candidates() {
    assert!(!may::<WeakAndRc>());
    assert!(may::<Wrapper<(WeakAndRc, MaybeGc)>>());
}

#[test]
fn gc_fields_make_candidates() {
    assert!(may::<HoldsGc>());
    assert!(may::<MaybeGc>());
    assert!(may::<CellOfGcs>());
    assert!(may::<OneCandidateVariant>());
    assert!(may::<RecursiveWithGc>());
    assert!(may::<Wrapper<Gc<u8>>>());
    assert!(may::<Wrapper<Option<Gc<String>>>>());
    assert!(!may::<Wrapper<Option<String>>>());
    assert!(may::<List<Gc<u8>>>());
}

#[test]
fn skipped_gc_field_is_not_a_candidate() {
    assert!(!may::<SkippedGc>());
}

#[test]
fn mutual_recursion() {
    assert!(may::<Parent>());
    assert!(may::<Child>());
    assert!(may::<BoxA>());
    assert!(may::<BoxB>());
}

// ---------------------------------------------------------------------------
// Tracing, observed through real collections. Each test runs on its own
// thread, and both the collector and these drop counters are per thread.

thread_local! {
    static DROPS: Cell<usize> = const { Cell::new(0) };
}

fn drops() -> usize {
    DROPS.with(Cell::get)
}

/// A leaf with a user `Drop` impl that counts drops.
#[derive(Trace)]
struct Tally;

impl Drop for Tally {
    fn drop(&mut self) {
        DROPS.with(|d| d.set(d.get() + 1));
    }
}

type Link<T> = RefCell<Option<Gc<T>>>;

fn link<T: Trace + 'static>(from: &Link<T>, to: &Gc<T>) {
    *from.borrow_mut() = Some(to.clone());
}

#[derive(Trace)]
struct Node {
    name: String,
    next: Link<Node>,
    _tally: Tally,
}

fn node(name: &str) -> Gc<Node> {
    Gc::new(Node {
        name: name.to_owned(),
        next: RefCell::new(None),
        _tally: Tally,
    })
}

#[test]
fn derived_two_node_cycle_is_collected() {
    let a = node("a");
    let b = node("b");
    link(&a.next, &b);
    link(&b.next, &a);
    assert_eq!(a.next.borrow().as_ref().unwrap().name, "b");
    drop((a, b));
    assert_eq!(drops(), 0, "counting alone cannot free a cycle");
    collect();
    assert_eq!(drops(), 2);
}

#[test]
fn reachable_derived_cycle_is_kept() {
    let a = node("a");
    let b = node("b");
    link(&a.next, &b);
    link(&b.next, &a);
    drop(b);
    collect();
    assert_eq!(drops(), 0);
    let next = a.next.borrow().clone().unwrap();
    assert_eq!(next.name, "b");
    assert_eq!(next.next.borrow().as_ref().unwrap().name, "a");
    drop((a, next));
    collect();
    assert_eq!(drops(), 2);
}

#[derive(Trace)]
struct SkipNode {
    #[trace(skip)]
    next: Link<SkipNode>,
    _tally: Tally,
}

#[test]
fn skipped_link_makes_the_cycle_leak() {
    let new = || {
        Gc::new(SkipNode {
            next: RefCell::new(None),
            _tally: Tally,
        })
    };
    let a = new();
    let b = new();
    link(&a.next, &b);
    link(&b.next, &a);
    let weak = Gc::downgrade(&a);
    drop((a, b));
    collect();
    assert_eq!(drops(), 0, "an untraced cycle is never collected");
    // Still alive and intact: break the cycle by hand to clean up.
    let a = weak.upgrade().expect("the leaked cycle is still alive");
    let b = a.next.borrow_mut().take().unwrap();
    drop(b.next.borrow_mut().take());
    drop((a, b));
    assert_eq!(drops(), 2);
}

#[derive(Trace)]
enum Shape {
    Circle(Tally),
    Group {
        members: RefCell<Vec<Gc<Shape>>>,
        _tally: Tally,
    },
    Alias(Tally, Link<Shape>),
}

#[test]
fn enum_variant_cycle_is_collected() {
    let group = Gc::new(Shape::Group {
        members: RefCell::new(vec![Gc::new(Shape::Circle(Tally))]),
        _tally: Tally,
    });
    let alias = Gc::new(Shape::Alias(Tally, RefCell::new(Some(group.clone()))));
    let Shape::Group { members, .. } = &*group else {
        unreachable!()
    };
    members.borrow_mut().push(alias.clone());
    drop((group, alias));
    assert_eq!(drops(), 0);
    collect();
    // The two cycle members (one tally each) and the circle only they owned.
    assert_eq!(drops(), 3);
}

/// `Gc<T>` requires `T: Trace` in its definition, so a generic type that
/// holds a `Gc` of itself states the bound too.
#[derive(Trace)]
struct GNode<T: Trace> {
    value: T,
    next: Link<GNode<T>>,
}

#[test]
fn generic_struct_cycle_is_collected() {
    let a = Gc::new(GNode {
        value: (Tally, String::from("a")),
        next: RefCell::new(None),
    });
    let b = Gc::new(GNode {
        value: (Tally, String::from("b")),
        next: RefCell::new(None),
    });
    link(&a.next, &b);
    link(&b.next, &a);
    assert_eq!(b.next.borrow().as_ref().unwrap().value.1, "a");
    drop((a, b));
    assert_eq!(drops(), 0);
    collect();
    assert_eq!(drops(), 2);
}

/// Links in fields 0 and 2 only: the cycle closes only if both are traced.
#[derive(Trace)]
struct Tri(Link<Tri>, String, Link<Tri>, Tally);

#[test]
fn every_traced_field_is_reported() {
    let new = |name: &str| {
        Gc::new(Tri(
            RefCell::new(None),
            name.to_owned(),
            RefCell::new(None),
            Tally,
        ))
    };
    let (a, b, c) = (new("a"), new("b"), new("c"));
    link(&a.0, &b);
    link(&b.2, &c);
    link(&c.0, &a);
    link(&c.2, &a); // two handles from `c` to `a`, in two fields
    drop((a, b));
    collect();
    assert_eq!(drops(), 0, "`c` is still held");
    assert_eq!(c.0.borrow().as_ref().unwrap().1, "a");
    drop(c);
    collect();
    assert_eq!(drops(), 3);
}

#[derive(Trace)]
struct Inner {
    back: Link<Outer>,
}

#[derive(Trace)]
struct Outer {
    inner: Inner,
    _tally: Tally,
}

#[test]
fn nested_derived_fields_are_traced() {
    assert!(may::<Outer>());
    let outer = Gc::new(Outer {
        inner: Inner {
            back: RefCell::new(None),
        },
        _tally: Tally,
    });
    link(&outer.inner.back, &outer);
    drop(outer);
    assert_eq!(drops(), 0);
    collect();
    assert_eq!(drops(), 1);
}

/// A cycle member with its own `Drop` impl.
#[derive(Trace)]
struct Dropper {
    next: Link<Dropper>,
    label: &'static str,
}

impl Drop for Dropper {
    fn drop(&mut self) {
        assert!(!self.label.is_empty());
        DROPS.with(|d| d.set(d.get() + 1));
    }
}

#[test]
fn derived_type_with_drop_impl_is_collected() {
    let new = |label| {
        Gc::new(Dropper {
            next: RefCell::new(None),
            label,
        })
    };
    let (a, b) = (new("a"), new("b"));
    link(&a.next, &b);
    link(&b.next, &a);
    drop((a, b));
    assert_eq!(drops(), 0);
    collect();
    assert_eq!(drops(), 2);
}

/// A module-level type that owns a `Gc`. The test below derives a local type
/// of the same name that holds it as `self::Shadowed<T>`.
#[derive(Trace)]
struct Shadowed<T: Trace + 'static> {
    link: Link<T>,
}

/// Issue 12, item 6: `self::Shadowed<T>` inside a function body names the
/// module's type, not the local one; it was taken for a self-reference, the
/// local type became a leaf (`MAY_CONTAIN_GC = false`), and every cycle
/// through it leaked.
#[test]
fn a_local_type_named_like_a_module_type_is_not_a_self_reference() {
    #[derive(Trace)]
    struct Shadowed<T: Trace + 'static> {
        inner: self::Shadowed<T>,
        _tally: Tally,
    }

    #[derive(Trace)]
    struct Owner {
        next: Link<Shadowed<Owner>>,
        _tally: Tally,
    }

    assert!(may::<Shadowed<u8>>());
    assert!(may::<Shadowed<Owner>>());
    // owner → local Shadowed → module Shadowed → owner: a cycle.
    let owner = Gc::new(Owner {
        next: RefCell::new(None),
        _tally: Tally,
    });
    let local = Gc::new(Shadowed {
        inner: self::Shadowed {
            link: RefCell::new(Some(owner.clone())),
        },
        _tally: Tally,
    });
    link(&owner.next, &local);
    let before = drops();
    drop((owner, local));
    collect();
    assert_eq!(drops() - before, 2);
}

/// A generic type whose `MAY_CONTAIN_GC` is not monotone in its argument (a
/// field that is a projection): the least fixed point computed with the
/// recursion marker said `false` for a type that owns a `Gc`, and its
/// cycles leaked (a hostile review's program). A self-reference inside a
/// generic type the derive does not know to be monotone now counts as
/// `true`.
pub trait Pick {
    type Out: Trace;
}

impl<T: Copy> Pick for T {
    type Out = ();
}

impl Pick for Lying {
    type Out = RefCell<Option<Gc<Lying>>>;
}

#[derive(Trace)]
pub struct Holder<T: Pick> {
    out: T::Out,
}

#[derive(Trace)]
pub struct Lying {
    inner: Box<Holder<Lying>>,
}

/// Recursion through a user wrapper (monotone or not, the derive cannot
/// tell): a candidate.
#[derive(Trace)]
pub struct UserVec<T>(Vec<T>);

#[derive(Trace)]
pub struct WrappedTree {
    _kids: UserVec<WrappedTree>,
}

#[test]
fn recursion_through_a_user_generic_type_is_a_candidate() {
    assert!(may::<Lying>());
    assert!(may::<WrappedTree>());
    // Through the crate's containers, still the least fixed point.
    assert!(!may::<Expr>());
    let before = drops_of_lying();
    let a = Gc::new(Lying {
        inner: Box::new(Holder {
            out: RefCell::new(None),
        }),
    });
    *a.inner.out.borrow_mut() = Some(a.clone());
    drop(a);
    collect();
    assert_eq!(drops_of_lying() - before, 1, "its self-cycle is collected");
}

thread_local! {
    static LYING_DROPS: Cell<usize> = const { Cell::new(0) };
}

fn drops_of_lying() -> usize {
    LYING_DROPS.with(Cell::get)
}

impl Drop for Lying {
    fn drop(&mut self) {
        LYING_DROPS.with(|d| d.set(d.get() + 1));
    }
}
