//! Replays the fuzz target `sync_graph`'s seed corpus and the inputs that
//! once crashed it (`fuzz/corpus/sync_graph/`, `fuzz/regressions/sync_graph/`),
//! or only the file `RECYCLER_FUZZ_INPUT`: programs of graph operations on
//! `recycler::sync::Gc` run on two or three threads (see
//! `common/sync_model.rs`), with injected panics in `Drop` and `trace` as
//! the fuzz target runs them (issue 12, defects 3 and 4, fixed).
#[path = "common/sync_model.rs"]
mod sync_model;

use sync_model::Options;

#[test]
#[cfg_attr(
    miri,
    ignore = "reads files; sync_stress covers the same code under Miri"
)]
fn sync_fuzz_inputs() {
    sync_model::quiet_injected_panics();
    let files: Vec<std::path::PathBuf> = match std::env::var_os("RECYCLER_FUZZ_INPUT") {
        Some(path) => vec![path.into()],
        None => {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
            ["corpus/sync_graph", "regressions/sync_graph"]
                .iter()
                .filter_map(|dir| std::fs::read_dir(root.join(dir)).ok())
                .flatten()
                .map(|entry| entry.unwrap().path())
                .collect()
        }
    };
    assert!(!files.is_empty(), "no fuzz inputs found");
    for path in &files {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("{}", path.display());
        sync_model::run_input(&data, Options { panics: true });
    }
}
