//! The expansion of `#[derive(Trace)]`, as a function of the parsed input.
//!
//! Generated shape (for `struct Foo<T> { a: A, b: B }`):
//!
//! ```text
//! unsafe impl<T> ::recycler::Trace for Foo<T> where T: ::recycler::Trace {
//!     const MAY_CONTAIN_GC: bool = <A' as Trace>::MAY_CONTAIN_GC || <B' as Trace>::MAY_CONTAIN_GC;
//!     fn trace(&self, tracer: &mut Tracer<'_>) {
//!         match self { Self { a: f0, b: f1, .. } => { Trace::trace(f0, tracer); Trace::trace(f1, tracer); } }
//!     }
//! }
//! ```
//!
//! where `A'` is `A` with self-references replaced (see [`crate::recursion`]).
//! `trace` binds every non-skipped field by reference through one pattern per
//! struct or variant and traces each binding once, so each owned pointer is
//! reported exactly once; it never moves out of `self`, so a user `Drop` impl
//! on the type does not conflict.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Ident, Member, Type};

use crate::attrs::{self, ContainerAttrs};
use crate::bounds;
use crate::recursion;

/// One field of the struct or of a variant.
struct FieldInfo {
    member: Member,
    ty: Type,
    skip: bool,
}

/// The fields of the struct, or of each variant (`None` for a struct).
struct Arm {
    variant: Option<Ident>,
    fields: Vec<FieldInfo>,
}

/// Expands `#[derive(Trace)]` on `input` into the `unsafe impl Trace`.
pub fn expand(mut input: DeriveInput) -> syn::Result<TokenStream> {
    let ContainerAttrs {
        krate,
        may_contain_gc,
    } = attrs::container(&input.attrs)?;
    attrs::reject_packed(&input.attrs)?;
    let arms = collect_arms(&input.data)?;
    let fields = || arms.iter().flat_map(|arm| &arm.fields).filter(|f| !f.skip);

    let params: Vec<Ident> = input
        .generics
        .type_params()
        .map(|p| p.ident.clone())
        .collect();
    let mut used = vec![false; params.len()];
    for field in fields() {
        bounds::mark_params_in(&field.ty, &params, &mut used);
    }
    {
        let where_clause = input.generics.make_where_clause();
        for (param, used) in params.iter().zip(used) {
            if used {
                where_clause
                    .predicates
                    .push(syn::parse_quote!(#param: #krate::Trace));
            }
        }
    }

    let may = if may_contain_gc {
        quote!(true)
    } else {
        may_contain_gc_expr(&input, &krate, fields())
    };
    let (body, uses_tracer) = trace_body(&arms, &krate);
    let tracer = if uses_tracer {
        quote!(__recycler_tracer)
    } else {
        quote!(_)
    };

    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        // SAFETY: `trace` reports exactly the fields the value owns, each
        // once, through a shared borrow, and neither creates, drops nor moves
        // a pointer; skipped fields are not reported, which can only leak.
        // `MAY_CONTAIN_GC` is the `||` of the traced fields' constants (the
        // least fixed point for recursive types), or `true` when forced.
        #[automatically_derived]
        #[allow(unsafe_code)]
        unsafe impl #impl_generics #krate::Trace for #name #ty_generics #where_clause {
            const MAY_CONTAIN_GC: bool = #may;

            #[inline]
            fn trace(&self, #tracer: &mut #krate::Tracer<'_>) {
                #body
            }
        }
    })
}

fn collect_arms(data: &Data) -> syn::Result<Vec<Arm>> {
    match data {
        Data::Struct(s) => Ok(vec![Arm {
            variant: None,
            fields: collect_fields(&s.fields)?,
        }]),
        Data::Enum(e) => {
            let mut arms = Vec::with_capacity(e.variants.len());
            let mut errors: Option<syn::Error> = None;
            for variant in &e.variants {
                let result = attrs::reject_on_variant(&variant.attrs)
                    .and_then(|()| collect_fields(&variant.fields));
                match result {
                    Ok(fields) => arms.push(Arm {
                        variant: Some(variant.ident.clone()),
                        fields,
                    }),
                    Err(e) => combine(&mut errors, e),
                }
            }
            errors.map_or(Ok(arms), Err)
        }
        Data::Union(u) => Err(syn::Error::new(
            u.union_token.span,
            "#[derive(Trace)] does not support unions: which field is live is unknown, \
             so the pointers a union owns cannot be reported; implement `Trace` by hand",
        )),
    }
}

fn collect_fields(fields: &Fields) -> syn::Result<Vec<FieldInfo>> {
    let mut out = Vec::with_capacity(fields.len());
    let mut errors: Option<syn::Error> = None;
    for (index, field) in fields.iter().enumerate() {
        match attrs::field_skipped(&field.attrs) {
            Ok(skip) => out.push(FieldInfo {
                member: match &field.ident {
                    Some(ident) => Member::Named(ident.clone()),
                    None => Member::Unnamed(index.into()),
                },
                ty: field.ty.clone(),
                skip,
            }),
            Err(e) => combine(&mut errors, e),
        }
    }
    errors.map_or(Ok(out), Err)
}

fn combine(errors: &mut Option<syn::Error>, error: syn::Error) {
    match errors {
        Some(errors) => errors.combine(error),
        None => *errors = Some(error),
    }
}

/// `false`, or the `||` of the distinct traced field types' constants, with
/// self-references replaced by the recursion marker.
fn may_contain_gc_expr<'a>(
    input: &DeriveInput,
    krate: &syn::Path,
    fields: impl Iterator<Item = &'a FieldInfo>,
) -> TokenStream {
    let marker: Type = syn::parse_quote!(#krate::trace::RecursionMarker);
    let mut terms: Vec<TokenStream> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for field in fields {
        let Some(ty) = recursion::replace_self(&field.ty, &input.ident, &input.generics, &marker)
        else {
            return quote!(true);
        };
        let term = quote!(<#ty as #krate::Trace>::MAY_CONTAIN_GC);
        let key = term.to_string();
        if !seen.contains(&key) {
            seen.push(key);
            terms.push(term);
        }
    }
    if terms.is_empty() {
        quote!(false)
    } else {
        quote!(#(#terms)||*)
    }
}

/// The body of `trace`, and whether it uses the tracer parameter.
fn trace_body(arms: &[Arm], krate: &syn::Path) -> (TokenStream, bool) {
    let tracer = Ident::new("__recycler_tracer", Span::call_site());
    let mut uses_tracer = false;
    let mut match_arms = Vec::with_capacity(arms.len());
    for arm in arms {
        let path = match &arm.variant {
            Some(variant) => quote!(Self::#variant),
            None => quote!(Self),
        };
        let traced: Vec<&FieldInfo> = arm.fields.iter().filter(|f| !f.skip).collect();
        uses_tracer |= !traced.is_empty();
        let members = traced.iter().map(|f| &f.member);
        let bindings: Vec<Ident> = (0..traced.len())
            .map(|i| format_ident!("__recycler_field_{}", i))
            .collect();
        match_arms.push(quote! {
            #path { #(#members: #bindings,)* .. } => {
                #(#krate::Trace::trace(#bindings, #tracer);)*
            }
        });
    }
    let body = if arms.is_empty() {
        // An enum without variants has no values.
        quote!(match *self {})
    } else {
        quote!(match self { #(#match_arms)* })
    };
    (body, uses_tracer)
}
