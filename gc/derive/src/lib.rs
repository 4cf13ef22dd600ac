//! `#[derive(Trace)]` for the `recycler` crate.
//!
//! Use it through the re-export `recycler::Trace` (default `derive`
//! feature); the user documentation and examples are there.
//!
//! # What is generated
//!
//! For a struct or enum `Foo<...>` (any field and variant shapes, with type,
//! lifetime and const parameters; existing `where` clauses are kept):
//!
//! - `unsafe impl<...> ::recycler::Trace for Foo<...>`, with the bound
//!   `T: ::recycler::Trace` for every type parameter that occurs in a traced
//!   field type outside `PhantomData` (module `bounds`);
//! - `MAY_CONTAIN_GC`: `false || ...` over the traced field types, where
//!   self-references are replaced by `recycler::trace::RecursionMarker` so
//!   that recursive types get the least fixed point instead of a const
//!   cycle (module `recursion`); `true` with `#[trace(may_contain_gc)]`;
//! - `trace`: one `match` arm per struct/variant binding the traced fields by
//!   reference and calling `Trace::trace` on each exactly once (module `expand`).
//!
//! # Attributes
//!
//! - field: `#[trace(skip)]`: not traced, contributes `false`, no bound;
//! - container: `#[trace(may_contain_gc)]`, `#[trace(crate = "path")]`.
//!
//! Unions, `#[repr(packed)]` types, unknown options and misplaced options are compile errors
//! ([`syn::Error`] with the span of the offending tokens), never panics.

mod attrs;
mod bounds;
mod expand;
mod recursion;

use proc_macro::TokenStream;

/// Derives `recycler::Trace`; see the documentation of `recycler::Trace`.
#[proc_macro_derive(Trace, attributes(trace))]
pub fn derive_trace(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

#[cfg(test)]
mod tests;
