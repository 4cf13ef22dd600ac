//! `gc_graph` with injected panics: some drops and collections run with
//! nodes whose `Drop` panics and a `trace` call that panics (see
//! `gc/tests/common/model.rs`). The model then expects what the README
//! guarantees: the panic reaches the caller, counts and buffers stay in
//! order, every other member of a garbage cycle is still dropped, and later
//! collections are exact. Replay: `RECYCLER_FUZZ_PANICS=1
//! RECYCLER_FUZZ_INPUT=<file> cargo test -p recycler --test differential
//! fuzz_inputs`.
//!
//! A value whose `Drop` panicked keeps its allocation (as with `std::rc`),
//! so run with `-detect_leaks=0` (`scripts/fuzz.sh` does).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../gc/tests/common/model.rs"]
mod model;

fuzz_target!(|data: &[u8]| {
    model::quiet_injected_panics();
    let options = model::Options {
        panics: true,
        trace_clones: false,
    };
    // A failed check panics on the case's thread; libFuzzer's panic hook
    // aborts there, with the message.
    model::run_input(data, options).expect("the case failed");
});
