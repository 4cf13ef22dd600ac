//! Self-references in field types, for `MAY_CONTAIN_GC` of recursive types.
//!
//! `MAY_CONTAIN_GC` of `enum Expr { Num(i64), Add(Box<Expr>, Box<Expr>) }`
//! written naively refers to itself, and const evaluation reports a cycle.
//! The value wanted is the *least* fixed point of the equation
//! `may(Expr) = may(i64) || may(Box<Expr>) || ...`: a recursive type can own
//! a `Gc` only if some non-recursive part of it can. Because every field's
//! `MAY_CONTAIN_GC` is a monotone function of `may(Expr)` (an `||` of its
//! parts), the least fixed point is the value computed with `may(Expr) =
//! false`; so each self-reference is replaced by `RecursionMarker`, a leaf.
//!
//! Replacing a type that is *not* the one being derived would be wrong in the
//! unsafe direction (a type that owns a `Gc` would count as a leaf, and every
//! cycle through it would leak), and a derive sees tokens, not resolved
//! names. So only the two spellings that cannot name anything else are
//! replaced: `Self`, and the bare name with the type's own generic arguments
//! in order (`List<T>` inside `List<T>`; an item's own name always shadows
//! outer ones in its scope, unless a generic parameter has the same name).
//! Everything else that may or may not be the type makes its field count as
//! `true`: conservative, and free of const cycles.
//!
//! The monotonicity holds for the containers whose `Trace` the crate
//! provides (`Box`, `Vec`, `Option`, the cells and locks, the pointers...)
//! and for tuples, arrays and slices, but not for every generic type: a
//! user type whose field is a projection (`struct Holder<T: Pick>(T::Out)`)
//! can own a `Gc` for `Holder<Lying>` and none for `Holder<RecursionMarker>`
//! (a hostile review's program, whose cycles leaked). So a self-reference
//! is replaced only where it is reached through such containers; inside
//! the arguments of any other generic type the field counts as `true`.
//! (A user type named like one of those containers is taken for it: at
//! worst its cycles leak, which the contract allows.) That covers the type with
//! other arguments (`Nested<Vec<T>>` inside `Nested<T>`, polymorphic
//! recursion), a path that ends in the name (`self::List<T>` names the
//! enclosing *module's* `List` when the derive is on a type local to a
//! function body; `super::x::List`, `crate::List`, `other::List` may or may
//! not be this type), `Self::Assoc`, and the name inside a qualified path or
//! a macro.

use proc_macro2::{TokenStream, TokenTree};
use syn::visit_mut::VisitMut;
use syn::{Expr, GenericArgument, GenericParam, Generics, Ident, PathArguments, Type};

/// Replaces the self-references to the type `name<generics>` in `ty` by
/// `marker`; `None` if one could not be replaced (the field counts as `true`).
pub(crate) fn replace_self(
    ty: &Type,
    name: &Ident,
    generics: &Generics,
    marker: &Type,
) -> Option<Type> {
    let mut ty = ty.clone();
    let mut replacer = Replacer {
        name,
        generics,
        marker,
        qself_depth: 0,
        opaque_depth: 0,
        conservative: false,
    };
    replacer.visit_type_mut(&mut ty);
    (!replacer.conservative).then_some(ty)
}

struct Replacer<'a> {
    name: &'a Ident,
    generics: &'a Generics,
    marker: &'a Type,
    qself_depth: usize,
    /// How many generic types not known to be monotone enclose the type
    /// being visited.
    opaque_depth: usize,
    conservative: bool,
}

/// The generic types whose `MAY_CONTAIN_GC` is that of their arguments
/// (the crate's `Trace` impls): a self-reference inside them is replaced.
const MONOTONE: &[&str] = &[
    "Box",
    "Vec",
    "VecDeque",
    "LinkedList",
    "BinaryHeap",
    "BTreeMap",
    "BTreeSet",
    "HashMap",
    "HashSet",
    "Option",
    "Result",
    "Cell",
    "RefCell",
    "Mutex",
    "RwLock",
    "OnceCell",
    "Rc",
    "Arc",
    "Weak",
    "Gc",
    "PhantomData",
    "ManuallyDrop",
    "Reverse",
    "Wrapping",
    "Pin",
];

enum Reference {
    NotSelf,
    Identity,
    Other,
}

impl Replacer<'_> {
    fn classify(&self, ty: &Type) -> Reference {
        let Type::Path(tp) = ty else {
            return Reference::NotSelf;
        };
        if tp.qself.is_some() {
            return Reference::NotSelf;
        }
        if tp.path.leading_colon.is_some() {
            // `::x::N` (another crate's, or this crate's root in 2015): in
            // doubt if it ends in the name.
            return match tp.path.segments.last() {
                Some(last) if last.ident == *self.name => Reference::Other,
                _ => Reference::NotSelf,
            };
        }
        let segments: Vec<_> = tp.path.segments.iter().collect();
        let last = match segments.as_slice() {
            [only] if only.ident == "Self" => {
                return if only.arguments.is_none() {
                    Reference::Identity
                } else {
                    Reference::Other
                };
            }
            [only] if self.is_param(&only.ident) => return Reference::NotSelf,
            [only] => only,
            // `Self::Assoc`, or a path ending in the name: in doubt.
            [first, ..] if first.ident == "Self" => return Reference::Other,
            [.., last] if last.ident == *self.name => return Reference::Other,
            _ => return Reference::NotSelf,
        };
        if last.ident != *self.name {
            return Reference::NotSelf;
        }
        if self.is_identity(&last.arguments) {
            Reference::Identity
        } else {
            Reference::Other
        }
    }

    /// Whether `ident` names one of the type's generic parameters (which
    /// shadows the type's own name).
    fn is_param(&self, ident: &Ident) -> bool {
        self.generics.params.iter().any(|p| match p {
            GenericParam::Type(t) => t.ident == *ident,
            GenericParam::Const(c) => c.ident == *ident,
            GenericParam::Lifetime(_) => false,
        })
    }

    /// Whether `args` are exactly the type's own parameters, in order.
    fn is_identity(&self, args: &PathArguments) -> bool {
        let params = &self.generics.params;
        let args = match args {
            PathArguments::None => return params.is_empty(),
            PathArguments::AngleBracketed(a) => &a.args,
            PathArguments::Parenthesized(_) => return false,
        };
        args.len() == params.len()
            && params
                .iter()
                .zip(args)
                .all(|(param, arg)| match (param, arg) {
                    (GenericParam::Lifetime(p), GenericArgument::Lifetime(a)) => p.lifetime == *a,
                    (GenericParam::Type(p), GenericArgument::Type(a)) => is_ident_type(a, &p.ident),
                    (GenericParam::Const(p), GenericArgument::Type(a)) => {
                        is_ident_type(a, &p.ident)
                    }
                    (GenericParam::Const(p), GenericArgument::Const(a)) => {
                        is_ident_expr(a, &p.ident)
                    }
                    _ => false,
                })
    }

    /// Whether `path` names a type without generic arguments or one of the
    /// [`MONOTONE`] containers (not an associated type of a parameter, as
    /// `F::Cell<T>`, which may be anything).
    fn is_monotone(&self, path: &syn::Path) -> bool {
        let generic = path
            .segments
            .iter()
            .any(|s| !matches!(s.arguments, PathArguments::None));
        let projection = path.segments.len() > 1
            && (path.segments[0].ident == "Self" || self.is_param(&path.segments[0].ident));
        !generic
            || !projection
                && path
                    .segments
                    .last()
                    .is_some_and(|last| MONOTONE.iter().any(|m| last.ident == m))
    }

    fn mentions_self(&self, tokens: TokenStream) -> bool {
        tokens.into_iter().any(|tree| match tree {
            TokenTree::Ident(ident) => ident == *self.name || ident == "Self",
            TokenTree::Group(group) => self.mentions_self(group.stream()),
            TokenTree::Punct(_) | TokenTree::Literal(_) => false,
        })
    }
}

fn is_ident_type(ty: &Type, ident: &Ident) -> bool {
    matches!(ty, Type::Path(tp) if tp.qself.is_none() && tp.path.is_ident(ident))
}

fn is_ident_expr(expr: &Expr, ident: &Ident) -> bool {
    match expr {
        Expr::Path(p) => p.qself.is_none() && p.path.is_ident(ident),
        Expr::Block(b) => match b.block.stmts.as_slice() {
            [syn::Stmt::Expr(inner, None)] => is_ident_expr(inner, ident),
            _ => false,
        },
        _ => false,
    }
}

impl VisitMut for Replacer<'_> {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        match self.classify(ty) {
            Reference::Identity if self.qself_depth == 0 && self.opaque_depth == 0 => {
                *ty = self.marker.clone()
            }
            Reference::Identity | Reference::Other => self.conservative = true,
            Reference::NotSelf => match ty {
                Type::Macro(mac) => {
                    if self.mentions_self(mac.mac.tokens.clone()) {
                        self.conservative = true;
                    }
                }
                // `<A as Tr<B>>::X`: replacing `A` or `B` would name another
                // projection, so a self-reference in it is not replaced.
                Type::Path(tp) if tp.qself.is_some() => {
                    self.qself_depth += 1;
                    syn::visit_mut::visit_type_mut(self, ty);
                    self.qself_depth -= 1;
                }
                // A generic type that may not be monotone in its arguments.
                Type::Path(tp) if !self.is_monotone(&tp.path) => {
                    self.opaque_depth += 1;
                    syn::visit_mut::visit_type_mut(self, ty);
                    self.opaque_depth -= 1;
                }
                _ => syn::visit_mut::visit_type_mut(self, ty),
            },
        }
    }
}
