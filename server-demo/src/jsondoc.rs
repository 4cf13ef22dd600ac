//! The application's JSON document: a tree of reference-counted nodes with
//! parent links, allocated with the mode's pointer family.
//!
//! Nim's `json` module builds exactly this shape (`JsonNode = ref JsonNodeObj`,
//! objects as ordered tables of child refs); we add a parent link to every node,
//! as a DOM does, so the document is one big strongly connected structure of
//! more than [`MIN_NODES`] objects that lives as long as its thread. It is the
//! long-lived part of the heap that a cycle collector must not keep re-walking.
//!
//! The tree is built bottom-up (children first, then the parent, then the
//! children's parent links), so child lists never change after construction
//! and rendering walks them through plain borrows with an explicit stack: no
//! reference-count traffic and no recursion.

use std::fmt::Write as _;

use recycler::Trace;

use crate::family::{Family, Pointers};

/// The document has at least this many nodes.
pub const MIN_NODES: usize = 10_000;

/// Items in the catalogue array; each item is 8 nodes.
const CATALOGUE_ITEMS: usize = 1_300;

/// One JSON value. Nim: `JsonNodeObj` (a `ref object` with a kind tag).
#[derive(Trace)]
pub struct JsonNode<F: Pointers> {
    // Field order matters: the last field decides whether the struct is
    // sized, and if it were this cell the compiler would have to normalise
    // `F::Cell<.. JsonNode<F> ..>` to answer, which needs `JsonNode<F>` to be
    // sized first (E0275). An enum last is sized without looking inside.
    /// The enclosing array or object, set once the parent exists (a
    /// back-edge: weak in careful ARC).
    pub parent: F::Cell<Option<F::Back<JsonNode<F>>>>,
    /// The value; containers own their children.
    pub value: JsonValue<F>,
}

/// The payload of a [`JsonNode`]. Nim: the `case kind: JsonNodeKind` part.
#[derive(Trace)]
pub enum JsonValue<F: Pointers> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// An array of child nodes.
    Array(Vec<F::P<JsonNode<F>>>),
    /// An object: keys in insertion order (Nim's `OrderedTable`).
    Object(Vec<(String, F::P<JsonNode<F>>)>),
}

/// The document and the nodes the routes point at.
pub struct Document<F: Pointers> {
    /// The root object.
    pub root: F::P<JsonNode<F>>,
    /// `root.hello`: `{"message":"Hello, World!"}`, the body of `GET /`.
    pub hello: F::P<JsonNode<F>>,
    /// Number of nodes in the tree.
    pub nodes: usize,
}

/// Builds nodes and counts them.
struct Builder {
    nodes: usize,
}

impl Builder {
    fn leaf<F: Family>(&mut self, value: JsonValue<F>) -> F::P<JsonNode<F>> {
        self.nodes += 1;
        F::alloc(JsonNode {
            value,
            parent: F::cell(None),
        })
    }

    fn string<F: Family>(&mut self, s: impl Into<String>) -> F::P<JsonNode<F>> {
        self.leaf::<F>(JsonValue::Str(s.into()))
    }

    /// Allocates a container over `children` and links them back to it.
    fn array<F: Family>(&mut self, children: Vec<F::P<JsonNode<F>>>) -> F::P<JsonNode<F>> {
        let node = self.leaf::<F>(JsonValue::Array(children));
        if let JsonValue::Array(children) = &node.value {
            for child in children {
                F::write(&child.parent, |p| *p = Some(F::back(&node)));
            }
        }
        node
    }

    fn object<F: Family>(&mut self, fields: Vec<(&str, F::P<JsonNode<F>>)>) -> F::P<JsonNode<F>> {
        let fields = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let node = self.leaf::<F>(JsonValue::Object(fields));
        if let JsonValue::Object(fields) = &node.value {
            for (_, child) in fields {
                F::write(&child.parent, |p| *p = Some(F::back(&node)));
            }
        }
        node
    }
}

/// Builds the application document: `{"hello": {"message": "Hello, World!"},
/// "catalogue": {"name": ..., "items": [...]}}` with [`CATALOGUE_ITEMS`]
/// items of eight nodes each.
pub fn build_document<F: Family>() -> Document<F> {
    let mut b = Builder { nodes: 0 };
    let message = b.string::<F>("Hello, World!");
    let hello = b.object::<F>(vec![("message", message)]);

    let mut items = Vec::with_capacity(CATALOGUE_ITEMS);
    for i in 0..CATALOGUE_ITEMS {
        let id = b.leaf::<F>(JsonValue::Int(i as i64));
        let name = b.string::<F>(format!("item {i}"));
        let price = b.leaf::<F>(JsonValue::Int((i as i64 * 37) % 1000));
        let in_stock = b.leaf::<F>(JsonValue::Bool(i % 3 != 0));
        let tag1 = b.string::<F>(format!("t{}", i % 7));
        let tag2 = b.string::<F>(format!("u{}", i % 11));
        let tags = b.array::<F>(vec![tag1, tag2]);
        items.push(b.object::<F>(vec![
            ("id", id),
            ("name", name),
            ("price_cents", price),
            ("in_stock", in_stock),
            ("tags", tags),
        ]));
    }
    let items = b.array::<F>(items);
    let title = b.string::<F>("catalogue");
    let note = b.leaf::<F>(JsonValue::Null);
    let catalogue = b.object::<F>(vec![("name", title), ("note", note), ("items", items)]);
    let root = b.object::<F>(vec![("hello", hello.clone()), ("catalogue", catalogue)]);
    Document {
        root,
        hello,
        nodes: b.nodes,
    }
}

/// Appends `s` as a JSON string literal.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends the compact JSON text of `node` (Nim's `toUgly`), walking the tree
/// with an explicit stack.
pub fn render<F: Family>(node: &JsonNode<F>, out: &mut String) {
    enum Step<'a, F: Pointers> {
        Node(&'a JsonNode<F>),
        Key(&'a str),
        Text(&'static str),
    }
    let mut stack = vec![Step::Node(node)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(t) => out.push_str(t),
            Step::Key(k) => {
                write_string(out, k);
                out.push(':');
            }
            Step::Node(n) => match &n.value {
                JsonValue::Null => out.push_str("null"),
                JsonValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                JsonValue::Int(i) => {
                    let _ = write!(out, "{i}");
                }
                JsonValue::Str(s) => write_string(out, s),
                JsonValue::Array(items) => {
                    out.push('[');
                    stack.push(Step::Text("]"));
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Node(item));
                        if i > 0 {
                            stack.push(Step::Text(","));
                        }
                    }
                }
                JsonValue::Object(fields) => {
                    out.push('{');
                    stack.push(Step::Text("}"));
                    for (i, (key, value)) in fields.iter().enumerate().rev() {
                        stack.push(Step::Node(value));
                        stack.push(Step::Key(key));
                        if i > 0 {
                            stack.push(Step::Text(","));
                        }
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{GcFamily, RcFamily};

    fn check<F: Family>() {
        let doc = build_document::<F>();
        assert!(doc.nodes >= MIN_NODES, "{} nodes", doc.nodes);
        let mut hello = String::new();
        render(&doc.hello, &mut hello);
        assert_eq!(hello, r#"{"message":"Hello, World!"}"#);

        let mut all = String::new();
        render(&doc.root, &mut all);
        let parsed: serde_json::Value = serde_json::from_str(&all).expect("valid JSON");
        let items = parsed["catalogue"]["items"].as_array().unwrap();
        assert_eq!(items.len(), CATALOGUE_ITEMS);
        assert_eq!(items[5]["name"], "item 5");
        assert_eq!(items[5]["tags"][1], "u5");

        // Every child links back to its container; the root has no parent.
        assert!(F::read(&doc.root.parent, |p| p.is_none()));
        let mut stack = vec![doc.root.clone()];
        let mut seen = 0;
        while let Some(node) = stack.pop() {
            seen += 1;
            let children: Vec<F::P<JsonNode<F>>> = match &node.value {
                JsonValue::Array(c) => c.clone(),
                JsonValue::Object(f) => f.iter().map(|(_, v)| v.clone()).collect(),
                _ => Vec::new(),
            };
            for child in children {
                assert!(F::read(&child.parent, |p| p
                    .as_ref()
                    .and_then(|p| F::with_back(p, |p| F::ptr_eq(p, &node)))
                    .unwrap_or(false)));
                stack.push(child);
            }
        }
        assert_eq!(seen, doc.nodes);
    }

    #[test]
    fn document_shape_rc() {
        check::<RcFamily>();
    }

    #[test]
    fn document_shape_gc() {
        check::<GcFamily>();
    }

    #[test]
    fn document_shape_weak_rc() {
        check::<crate::family::WeakRcFamily>();
    }

    #[test]
    fn strings_are_escaped() {
        let mut out = String::new();
        write_string(&mut out, "a\"b\\c\nd\u{1}");
        assert_eq!(out, r#""a\"b\\c\nd\u0001""#);
        let parsed: String = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed, "a\"b\\c\nd\u{1}");
    }
}
