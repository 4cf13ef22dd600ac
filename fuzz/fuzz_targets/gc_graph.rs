//! Random graph programs on the single-threaded `Gc`, decoded from the
//! input and checked after every step against the model of
//! `gc/tests/common/model.rs` (the same model and interpreter as the test
//! `differential.rs`): new, link, unlink, drop, clone, downgrade/upgrade,
//! borrows held across collections, collect, collect_minor, set_policy.
//! Each input runs on a fresh thread (fresh collector state), so a crash
//! replays exactly: `RECYCLER_FUZZ_INPUT=<file> cargo test -p recycler
//! --test differential fuzz_inputs` prints its last operations.
//!
//! No injected panics here (see `gc_panics`), so LeakSanitizer stays on.
//! Every `trace` also clones and drops the handles it reports (allowed by
//! the contract; issue 12, defect 5, fixed).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../gc/tests/common/model.rs"]
mod model;

fuzz_target!(|data: &[u8]| {
    // gc_graph injects no panics; any other panic still aborts the run.
    model::quiet_injected_panics();
    let options = model::Options {
        panics: false,
        trace_clones: true,
    };
    // A failed check panics on the case's thread; libFuzzer's panic hook
    // aborts there, with the message.
    model::run_input(data, options).expect("the case failed");
});
