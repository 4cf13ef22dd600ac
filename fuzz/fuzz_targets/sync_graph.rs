//! Random graph programs on `recycler::sync::Gc`, run on two or three
//! threads with handles passed between them, decoded from the input and
//! checked as `gc/tests/common/sync_model.rs` describes: nothing dropped
//! while reachable, every access checked against a per-node flag, and at
//! every phase boundary (threads waiting) the dropped nodes are exactly the
//! unreachable ones and every count is right. Interleavings are the
//! scheduler's: an input does not always run the same way. Replay:
//! `RECYCLER_FUZZ_INPUT=<file> cargo test -p recycler --test
//! sync_fuzz_inputs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../gc/tests/common/sync_model.rs"]
mod sync_model;

fuzz_target!(|data: &[u8]| {
    sync_model::quiet_injected_panics();
    let options = sync_model::Options {
        panics: true,
    };
    sync_model::run_input(data, options);
});
