//! Unit tests of the expansion on parsed `DeriveInput`s: the error paths
//! (the messages and which input they point at) and the shape of the impl.

use quote::ToTokens;
use syn::{DeriveInput, ImplItem, ItemImpl};

use crate::expand::expand;

fn impl_of(input: DeriveInput) -> ItemImpl {
    let tokens = expand(input).expect("expansion succeeds");
    syn::parse2(tokens).expect("expansion is one impl item")
}

fn error_of(input: DeriveInput) -> Vec<String> {
    match expand(input) {
        Ok(tokens) => panic!("expected an error, got {tokens}"),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

fn text(tokens: impl ToTokens) -> String {
    tokens.to_token_stream().to_string()
}

/// The `MAY_CONTAIN_GC` expression, as text.
fn may_expr(item: &ItemImpl) -> String {
    item.items
        .iter()
        .find_map(|i| match i {
            ImplItem::Const(c) if c.ident == "MAY_CONTAIN_GC" => Some(text(&c.expr)),
            _ => None,
        })
        .expect("MAY_CONTAIN_GC is defined")
}

/// The `trace` method, as text.
fn trace_fn(item: &ItemImpl) -> String {
    item.items
        .iter()
        .find_map(|i| match i {
            ImplItem::Fn(f) if f.sig.ident == "trace" => Some(text(f)),
            _ => None,
        })
        .expect("trace is defined")
}

fn predicates(item: &ItemImpl) -> Vec<String> {
    item.generics
        .where_clause
        .iter()
        .flat_map(|w| &w.predicates)
        .map(text)
        .collect()
}

#[test]
fn union_is_rejected() {
    let errors = error_of(syn::parse_quote! { union U { a: u32, b: f32 } });
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("does not support unions"), "{errors:?}");
}

#[test]
fn packed_struct_is_rejected() {
    let errors = error_of(syn::parse_quote! { #[repr(C, packed(2))] struct P { a: u8, b: u32 } });
    assert!(errors[0].contains("`#[repr(packed)]`"), "{errors:?}");
    // Other reprs are fine.
    impl_of(syn::parse_quote! { #[repr(C, align(8))] struct P { a: u8, b: u32 } });
}

#[test]
fn unknown_options_are_rejected() {
    let errors = error_of(syn::parse_quote! {
        #[trace(collect_me)]
        struct S { a: u8 }
    });
    assert!(
        errors[0].contains("unknown trace option `collect_me`"),
        "{errors:?}"
    );

    let errors = error_of(syn::parse_quote! {
        struct S { #[trace(ignore)] a: u8 }
    });
    assert!(
        errors[0].contains("unknown trace option `ignore`"),
        "{errors:?}"
    );
    assert!(
        errors[0].contains("only field option is `skip`"),
        "{errors:?}"
    );
}

#[test]
fn misplaced_options_are_rejected() {
    let errors = error_of(syn::parse_quote! { #[trace(skip)] struct S { a: u8 } });
    assert!(errors[0].contains("goes on a field"), "{errors:?}");

    let errors = error_of(syn::parse_quote! { struct S { #[trace(may_contain_gc)] a: u8 } });
    assert!(
        errors[0].contains("`may_contain_gc` goes on the struct or enum"),
        "{errors:?}"
    );

    let errors = error_of(syn::parse_quote! { enum E { #[trace(skip)] A(u8) } });
    assert!(
        errors[0].contains("not supported on enum variants"),
        "{errors:?}"
    );
}

#[test]
fn malformed_options_are_rejected() {
    let errors = error_of(syn::parse_quote! { #[trace(crate = recycler)] struct S; });
    assert!(errors[0].contains("expected string literal"), "{errors:?}");

    let errors = error_of(syn::parse_quote! { #[trace(crate = "not a path")] struct S; });
    assert_eq!(errors.len(), 1, "{errors:?}");

    let errors = error_of(syn::parse_quote! { struct S { #[trace(skip, skip)] a: u8 } });
    assert!(errors[0].contains("duplicate `skip`"), "{errors:?}");

    let errors = error_of(syn::parse_quote! { struct S { #[trace] a: u8 } });
    assert_eq!(errors.len(), 1, "{errors:?}");
}

#[test]
fn every_bad_field_is_reported() {
    let errors = error_of(syn::parse_quote! {
        enum E {
            A { #[trace(nope)] a: u8 },
            B(#[trace(nada)] u8, #[trace(skip)] u8),
            #[trace(skip)] C,
        }
    });
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].contains("`nope`"));
    assert!(errors[1].contains("`nada`"));
    assert!(errors[2].contains("enum variants"));
}

#[test]
fn struct_traces_each_field_once() {
    let item = impl_of(syn::parse_quote! {
        struct S { a: String, #[trace(skip)] b: Opaque, c: Vec<u8> }
    });
    let trace = trace_fn(&item);
    assert_eq!(
        trace.matches(":: recycler :: Trace :: trace").count(),
        2,
        "{trace}"
    );
    assert!(trace.contains("a : __recycler_field_0"), "{trace}");
    assert!(trace.contains("c : __recycler_field_1"), "{trace}");
    assert!(!trace.contains("b :"), "{trace}");
    assert_eq!(
        may_expr(&item),
        "< String as :: recycler :: Trace > :: MAY_CONTAIN_GC || \
         < Vec < u8 > as :: recycler :: Trace > :: MAY_CONTAIN_GC"
    );
    assert!(item.unsafety.is_some());
}

#[test]
fn tuple_and_unit_shapes() {
    let item = impl_of(syn::parse_quote! { struct T(u8, #[trace(skip)] u16, u32); });
    let trace = trace_fn(&item);
    assert!(trace.contains("0 : __recycler_field_0"), "{trace}");
    assert!(trace.contains("2 : __recycler_field_1"), "{trace}");

    let item = impl_of(syn::parse_quote! { struct U; });
    assert_eq!(may_expr(&item), "false");
    assert!(
        trace_fn(&item).contains("_ : & mut"),
        "unused tracer is `_`"
    );

    let item = impl_of(syn::parse_quote! { enum Never {} });
    assert_eq!(may_expr(&item), "false");
    assert!(trace_fn(&item).contains("match * self { }"));
}

#[test]
fn enum_matches_every_variant() {
    let item = impl_of(syn::parse_quote! {
        enum E { A, B(u8, String), C { x: u16, #[trace(skip)] y: Opaque } }
    });
    let trace = trace_fn(&item);
    assert!(trace.contains("Self :: A { .. }"), "{trace}");
    assert!(trace.contains("Self :: B { 0 : __recycler_field_0 , 1 : __recycler_field_1 , .. }"));
    assert!(
        trace.contains("Self :: C { x : __recycler_field_0 , .. }"),
        "{trace}"
    );
    assert!(!may_expr(&item).contains("Opaque"));
}

#[test]
fn identical_field_types_are_counted_once() {
    let item = impl_of(syn::parse_quote! { struct S { a: String, b: String, c: String } });
    assert_eq!(
        may_expr(&item),
        "< String as :: recycler :: Trace > :: MAY_CONTAIN_GC"
    );
    assert_eq!(trace_fn(&item).matches("Trace :: trace").count(), 3);
}

#[test]
fn bounds_only_for_traced_parameters() {
    let item = impl_of(syn::parse_quote! {
        struct S<'a, A, B, C, D: ?Sized, E, const N: usize>
        where
            A: Clone,
        {
            a: Vec<A>,
            #[trace(skip)]
            b: B,
            c: PhantomData<C>,
            d: Box<D>,
            e: [<E as Iterator>::Item; N],
            r: &'a (),
        }
    });
    assert_eq!(
        predicates(&item),
        [
            "A : Clone",
            "A : :: recycler :: Trace",
            "D : :: recycler :: Trace",
            "E : :: recycler :: Trace"
        ]
    );
    assert_eq!(
        text(&item.self_ty),
        "S < 'a , A , B , C , D , E , N >",
        "all parameters are kept"
    );
}

#[test]
fn parameters_named_in_type_macros_are_bounded() {
    let item =
        impl_of(syn::parse_quote! { struct S<T, U> { a: my_type!(T), b: u8, u: PhantomData<U> } });
    assert_eq!(predicates(&item), ["T : :: recycler :: Trace"]);
}

#[test]
fn self_references_become_the_marker() {
    let item = impl_of(syn::parse_quote! {
        enum Expr { Num(i64), Add(Box<Expr>, Box<Expr>), Neg(Box<Self>), Many(Vec<(Expr, String)>) }
    });
    let may = may_expr(&item);
    assert!(!may.contains("Expr"), "{may}");
    assert!(!may.contains("Self"), "{may}");
    assert!(
        may.contains("< Box < :: recycler :: trace :: RecursionMarker > as"),
        "{may}"
    );
    assert!(may.contains(
        "< Vec < (:: recycler :: trace :: RecursionMarker , String) > as :: recycler :: Trace >"
    ));
    // `trace` still traces the real fields.
    assert_eq!(trace_fn(&item).matches("Trace :: trace").count(), 5);
}

#[test]
fn generic_self_references_with_own_arguments_become_the_marker() {
    let item = impl_of(syn::parse_quote! {
        struct L<'a, T, const N: usize> { v: [T; N], next: Option<Box<L<'a, T, N>>>, r: &'a () }
    });
    let may = may_expr(&item);
    assert!(
        may.contains("Option < Box < :: recycler :: trace :: RecursionMarker > >"),
        "{may}"
    );
    let item = impl_of(syn::parse_quote! {
        struct L<T, const N: usize> { next: Option<Box<L<T, { N }>>> }
    });
    assert!(may_expr(&item).contains("RecursionMarker"));
}

#[test]
fn other_self_references_are_conservative() {
    // Polymorphic recursion, a self-reference inside a qualified path and a
    // macro that names the type all make the whole constant `true`.
    for input in [
        syn::parse_quote! { struct N<T> { v: T, deeper: Option<Box<N<Vec<T>>>> } },
        syn::parse_quote! { struct N<T> { v: T, swapped: Box<N<u8>> } },
        syn::parse_quote! { struct N { a: u8, p: <N as Tr>::Out } },
        syn::parse_quote! { struct N { a: u8, m: boxed!(N) } },
    ] {
        let item = impl_of(input);
        assert_eq!(may_expr(&item), "true");
    }
    // A type with another name is not a self-reference.
    let item = impl_of(syn::parse_quote! { struct N { a: other::M } });
    assert_eq!(
        may_expr(&item),
        "< other :: M as :: recycler :: Trace > :: MAY_CONTAIN_GC"
    );
}

#[test]
fn paths_ending_in_the_name_are_conservative() {
    // Issue 12, item 6: in a function body, `self::N<T>` is the enclosing
    // module's `N`, not the local one being derived; replacing it by the
    // marker made a type that owns a `Gc` a leaf. Any path that ends in the
    // name may or may not be the type, so its field counts as `true`.
    for input in [
        syn::parse_quote! { struct N<T> { inner: self::N<T> } },
        syn::parse_quote! { struct N { inner: self::N } },
        syn::parse_quote! { struct N<T> { a: u8, inner: Option<Box<crate::N<T>>> } },
        syn::parse_quote! { struct N<T> { inner: super::m::N<T> } },
        syn::parse_quote! { struct N { inner: other::N } },
        syn::parse_quote! { struct N { inner: ::other::N } },
        syn::parse_quote! { struct N { inner: Vec<Self::Item> } },
        syn::parse_quote! { enum N { A(u8), B(Box<self::N>) } },
    ] {
        let item = impl_of(input);
        assert_eq!(may_expr(&item), "true", "{}", text(&item));
    }
}

#[test]
fn a_parameter_named_like_the_type_is_the_parameter() {
    let item = impl_of(syn::parse_quote! { struct N<N> { v: Vec<N> } });
    let may = may_expr(&item);
    assert!(!may.contains("RecursionMarker"), "{may}");
    assert!(may.contains("< Vec < N > as"), "{may}");
}

#[test]
fn container_options() {
    let item = impl_of(syn::parse_quote! {
        #[trace(may_contain_gc)]
        struct A { b: Box<B> }
    });
    assert_eq!(may_expr(&item), "true");
    assert_eq!(trace_fn(&item).matches("Trace :: trace").count(), 1);

    let item = impl_of(syn::parse_quote! {
        #[trace(crate = "crate::gc", may_contain_gc)]
        struct A<T> { b: Box<T> }
    });
    assert_eq!(
        text(item.trait_.as_ref().unwrap().1.clone()),
        "crate :: gc :: Trace"
    );
    assert_eq!(predicates(&item), ["T : crate :: gc :: Trace"]);
    assert!(trace_fn(&item).contains("crate :: gc :: Tracer"));
}

#[test]
fn skipped_fields_contribute_false() {
    let item = impl_of(syn::parse_quote! { struct S<T> { #[trace(skip)] a: Gc<T>, b: u8 } });
    assert_eq!(
        may_expr(&item),
        "< u8 as :: recycler :: Trace > :: MAY_CONTAIN_GC"
    );
    assert!(predicates(&item).is_empty());
}
