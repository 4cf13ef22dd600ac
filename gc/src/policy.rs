//! When the collector runs.

/// Which trigger decides when a collection runs; set per thread with
/// [`crate::set_policy`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The default: generational trial deletion with a trigger driven by
    /// amortised work (see the crate documentation).
    #[default]
    Adaptive,
    /// An exact port of Nim 1.6.12's ORC trigger, with no generations: collect
    /// when the buffered roots reach a threshold that starts at 128; after each
    /// collection, if `freed * 2 >= touched` the threshold becomes
    /// `max(threshold / 3 * 2, 16)`, otherwise `threshold * 3 / 2`.
    Nim16,
    /// Collect only when [`crate::collect`] is called.
    Manual,
}
