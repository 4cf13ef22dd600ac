//! Parsing of the `#[trace(...)]` helper attribute.
//!
//! Container (struct/enum) options: `may_contain_gc`, `crate = "path"`.
//! Field options: `skip`. Anything else, and any `#[trace]` on an enum
//! variant, is a compile error pointing at the offending tokens.

use syn::{Attribute, LitStr, Path};

/// Options given on the struct or enum itself.
pub(crate) struct ContainerAttrs {
    /// Path of the `recycler` crate (`::recycler` unless `crate = "..."`).
    pub(crate) krate: Path,
    /// `#[trace(may_contain_gc)]`: `MAY_CONTAIN_GC` is `true` without
    /// looking at the fields.
    pub(crate) may_contain_gc: bool,
}

fn is_trace(attr: &Attribute) -> bool {
    attr.path().is_ident("trace")
}

/// Parses the container options, rejecting field-only or unknown ones.
pub(crate) fn container(attrs: &[Attribute]) -> syn::Result<ContainerAttrs> {
    let mut krate: Option<Path> = None;
    let mut may_contain_gc = false;
    for attr in attrs.iter().filter(|a| is_trace(a)) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("may_contain_gc") {
                if may_contain_gc {
                    return Err(meta.error("duplicate `may_contain_gc`"));
                }
                may_contain_gc = true;
                Ok(())
            } else if meta.path.is_ident("crate") {
                if krate.is_some() {
                    return Err(meta.error("duplicate `crate = \"...\"`"));
                }
                let lit: LitStr = meta.value()?.parse()?;
                krate = Some(lit.parse()?);
                Ok(())
            } else if meta.path.is_ident("skip") {
                Err(meta.error("`#[trace(skip)]` goes on a field, not on the struct or enum"))
            } else {
                Err(meta.error(format!(
                    "unknown trace option `{}`; expected `may_contain_gc` or `crate = \"path\"`",
                    path_text(&meta.path)
                )))
            }
        })?;
    }
    Ok(ContainerAttrs {
        krate: krate.unwrap_or_else(|| syn::parse_quote!(::recycler)),
        may_contain_gc,
    })
}

/// Whether a field carries `#[trace(skip)]`; rejects any other option.
pub(crate) fn field_skipped(attrs: &[Attribute]) -> syn::Result<bool> {
    let mut skip = false;
    for attr in attrs.iter().filter(|a| is_trace(a)) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                if skip {
                    return Err(meta.error("duplicate `skip`"));
                }
                skip = true;
                Ok(())
            } else if meta.path.is_ident("may_contain_gc") || meta.path.is_ident("crate") {
                Err(meta.error(format!(
                    "`{}` goes on the struct or enum, not on a field",
                    path_text(&meta.path)
                )))
            } else {
                Err(meta.error(format!(
                    "unknown trace option `{}`; the only field option is `skip`",
                    path_text(&meta.path)
                )))
            }
        })?;
    }
    Ok(skip)
}

/// Rejects `#[trace]` on an enum variant (options go on fields or the enum).
pub(crate) fn reject_on_variant(attrs: &[Attribute]) -> syn::Result<()> {
    match attrs.iter().find(|a| is_trace(a)) {
        Some(attr) => Err(syn::Error::new_spanned(
            attr,
            "`#[trace(...)]` is not supported on enum variants; put `#[trace(skip)]` on its fields",
        )),
        None => Ok(()),
    }
}

/// Rejects `#[repr(packed)]`: `trace` borrows every field, and fields of a
/// packed struct may be unaligned, so they cannot be borrowed.
pub(crate) fn reject_packed(attrs: &[Attribute]) -> syn::Result<()> {
    for attr in attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let tokens = match &attr.meta {
            syn::Meta::List(list) => list.tokens.clone(),
            _ => continue,
        };
        let packed = tokens
            .into_iter()
            .any(|t| matches!(t, proc_macro2::TokenTree::Ident(i) if i == "packed"));
        if packed {
            return Err(syn::Error::new_spanned(
                attr,
                "#[derive(Trace)] does not support `#[repr(packed)]`: `trace` borrows \
                 each field, and packed fields may be unaligned",
            ));
        }
    }
    Ok(())
}

fn path_text(path: &Path) -> String {
    let mut text = String::new();
    for (i, seg) in path.segments.iter().enumerate() {
        if i > 0 || path.leading_colon.is_some() {
            text.push_str("::");
        }
        text.push_str(&seg.ident.to_string());
    }
    text
}
