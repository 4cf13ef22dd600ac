//! `#[derive(Trace)]` for the `recycler` crate.
use proc_macro::TokenStream;

/// Derives `recycler::Trace`.
#[proc_macro_derive(Trace, attributes(trace))]
pub fn derive_trace(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
