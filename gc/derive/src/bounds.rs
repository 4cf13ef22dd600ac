//! Which type parameters need a `Trace` bound.
//!
//! A parameter gets `T: Trace` when it occurs in the type of at least one
//! traced (non-skipped) field, outside a `PhantomData<...>` (which is `Trace`
//! for every `T`). Bounding parameters rather than whole field types keeps
//! recursive types such as `List<T> { next: Option<Box<List<T>>> }` free of
//! trait-solver cycles. Leaving a bound out can only cause a compile error in
//! the generated impl, never an unsound one.

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;
use syn::{Ident, Path, Type, TypeMacro};

/// Marks the entries of `params` that occur in `ty`.
pub(crate) fn mark_params_in(ty: &Type, params: &[Ident], used: &mut [bool]) {
    let mut finder = ParamFinder { params, used };
    finder.visit_type(ty);
}

struct ParamFinder<'a> {
    params: &'a [Ident],
    used: &'a mut [bool],
}

impl ParamFinder<'_> {
    fn mark(&mut self, ident: &Ident) {
        if let Some(i) = self.params.iter().position(|p| p == ident) {
            self.used[i] = true;
        }
    }

    fn mark_tokens(&mut self, tokens: TokenStream) {
        for tree in tokens {
            match tree {
                TokenTree::Ident(ident) => self.mark(&ident),
                TokenTree::Group(group) => self.mark_tokens(group.stream()),
                TokenTree::Punct(_) | TokenTree::Literal(_) => {}
            }
        }
    }
}

fn is_phantom_data(ty: &Type) -> bool {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => tp
            .path
            .segments
            .last()
            .is_some_and(|seg| seg.ident == "PhantomData"),
        _ => false,
    }
}

impl<'ast> Visit<'ast> for ParamFinder<'_> {
    fn visit_type(&mut self, ty: &'ast Type) {
        if !is_phantom_data(ty) {
            syn::visit::visit_type(self, ty);
        }
    }

    fn visit_path(&mut self, path: &'ast Path) {
        // `T`, `T::Assoc`: a parameter can only be the first segment.
        if path.leading_colon.is_none() {
            if let Some(first) = path.segments.first() {
                self.mark(&first.ident);
            }
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_type_macro(&mut self, mac: &'ast TypeMacro) {
        // A macro's expansion is unknown: any parameter named in it counts.
        self.mark_tokens(mac.mac.tokens.clone());
    }
}
