//! Randomized differential test: random graphs of `Gc` nodes under random
//! mutations and collections, checked after every step against a model kept
//! in plain collections. The model, its invariants and the interpreter of
//! operations are in `common/model.rs` (shared with the fuzz target
//! `fuzz/fuzz_targets/gc_graph.rs`); this file draws the cases.
//!
//! # Cases
//! Each test is a *family* of cases (policy, collector tuning, mix of
//! operations); each case runs on a fresh thread (fresh collector state) from
//! its own seed. Cross-generation cycles come from cases that promote their
//! first nodes with an early collection and then link new nodes to them.
//!
//! A failing case prints its family, seed and last operations. Replay it
//! alone with `RECYCLER_DIFF_SEED=<seed> cargo test -p recycler --test
//! differential <family>`; `RECYCLER_DIFF_SCALE=<n>` runs n times as many
//! cases (a soak run).
#[path = "common/model.rs"]
mod model;

use model::{Choose, Coverage, Mix, Options, Plan};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::{AdaptiveConfig, Policy};

impl Choose for SmallRng {
    fn below(&mut self, n: usize) -> usize {
        self.gen_range(0..n)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.gen_bool(p)
    }
}

fn random_mix(rng: &mut SmallRng) -> Mix {
    Mix {
        new: rng.gen_range(2..10),
        link: rng.gen_range(4..16),
        unlink: rng.gen_range(1..8),
        drop_root: rng.gen_range(2..10),
        clone_root: rng.gen_range(1..6),
        weak: rng.gen_range(0..4),
        ring: rng.gen_range(0..4),
        cross_link: rng.gen_range(0..3),
        buffer_roots: rng.gen_range(0..2),
        borrowed: rng.gen_range(0..3),
        collect: rng.gen_range(0..3),
        collect_minor: rng.gen_range(0..4),
        set_policy: 0,
        panics: 0,
        clones: [0.0, 0.5, 1.0][rng.gen_range(0..3)],
    }
}

/// A family of cases: a name (for replay) and how to draw a plan.
struct Family {
    name: &'static str,
    cases: usize,
    plan: fn(&mut SmallRng) -> Plan,
}

const MIRI: bool = cfg!(miri);

fn steps(rng: &mut SmallRng, native: std::ops::Range<usize>) -> usize {
    if MIRI {
        rng.gen_range(10..30)
    } else {
        rng.gen_range(native)
    }
}

fn max_nodes(rng: &mut SmallRng, native: std::ops::Range<usize>) -> usize {
    if MIRI {
        rng.gen_range(4..12)
    } else {
        rng.gen_range(native)
    }
}

/// SplitMix64: a case's seed from the family's and the case number.
fn mix_seed(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn family_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn parse_seed(text: &str) -> u64 {
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|_| {
        panic!("RECYCLER_DIFF_SEED must be a u64 (decimal or 0x hex), got {text:?}")
    })
}

/// Runs one case on a fresh thread (fresh collector state); on failure,
/// reports the seed and the last operations and fails the test.
fn run_case(family: &Family, seed: u64) -> Coverage {
    let name = family.name;
    let label = format!(
        "differential case failed: family `{name}`, seed {seed:#018x}\n\
         replay: RECYCLER_DIFF_SEED={seed:#x} cargo test -p recycler --test differential {name}"
    );
    match model::run_case(label, SmallRng::seed_from_u64(seed), family.plan) {
        Ok(coverage) => coverage,
        Err(_) => {
            panic!("differential case failed: family `{name}`, seed {seed:#018x} (see above)")
        }
    }
}

/// Runs a family's cases (or only `RECYCLER_DIFF_SEED`) and returns what they
/// covered.
fn run_family(family: Family) -> Coverage {
    let mut total = Coverage::default();
    if let Ok(seed) = std::env::var("RECYCLER_DIFF_SEED") {
        total += run_case(&family, parse_seed(&seed));
        return total;
    }
    let scale = std::env::var("RECYCLER_DIFF_SCALE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1);
    let base = family_seed(family.name);
    let cases = if MIRI { 8 } else { family.cases * scale };
    for i in 0..cases {
        total += run_case(&family, mix_seed(base ^ i as u64));
    }
    eprintln!("{}: {total:?}", family.name);
    total
}

/// Whether the run is big enough to insist on coverage (not a single
/// replayed seed, not the few cases run under Miri).
fn full_run(coverage: &Coverage) -> bool {
    coverage.cases >= 50
}

#[test]
fn adaptive_default() {
    let coverage = run_family(Family {
        name: "adaptive_default",
        cases: 1000,
        plan: |rng| Plan {
            policy: Policy::Adaptive,
            adaptive: None,
            mix: random_mix(rng),
            steps: steps(rng, 20..150),
            max_nodes: max_nodes(rng, 4..60),
            promote_first: rng.gen_bool(0.3),
            across_generations: false,
            trace_clones: false,
        },
    });
    if full_run(&coverage) {
        assert!(coverage.freed_by_collector > 0, "{coverage:?}");
        assert!(coverage.old_freed_by_full > 0, "{coverage:?}");
    }
}

#[test]
fn adaptive_eager() {
    // Tiny thresholds: automatic minor and full collections all the time.
    let coverage = run_family(Family {
        name: "adaptive_eager",
        cases: 1200,
        plan: |rng| {
            let fractions = [0.0, 0.25, 1.0, 4.0];
            let config = AdaptiveConfig::default()
                .min_roots(rng.gen_range(1..=8))
                .full_fraction(fractions[rng.gen_range(0..fractions.len())]);
            Plan {
                policy: Policy::Adaptive,
                adaptive: Some(config),
                mix: random_mix(rng),
                steps: steps(rng, 20..150),
                max_nodes: max_nodes(rng, 4..60),
                promote_first: rng.gen_bool(0.3),
                across_generations: false,
                trace_clones: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.automatic_collections > 0, "{coverage:?}");
        assert!(coverage.borrowed_collections > 0, "{coverage:?}");
        assert!(coverage.old_freed_by_full > 0, "{coverage:?}");
    }
}

#[test]
fn cross_generation() {
    // Nodes promoted first, then linked into cycles with young nodes and
    // dropped, with minor collections in between.
    let coverage = run_family(Family {
        name: "cross_generation",
        cases: 1200,
        plan: |rng| {
            let mut mix = random_mix(rng);
            mix.cross_link = rng.gen_range(4..10);
            mix.collect_minor = rng.gen_range(2..8);
            mix.collect = rng.gen_range(1..4);
            let config = rng
                .gen_bool(0.5)
                .then(|| AdaptiveConfig::default().min_roots(rng.gen_range(1..=16)));
            Plan {
                policy: Policy::Adaptive,
                adaptive: config,
                mix,
                steps: steps(rng, 10..100),
                max_nodes: max_nodes(rng, 8..60),
                promote_first: true,
                across_generations: true,
                trace_clones: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.old_freed_by_full > 0, "{coverage:?}");
    }
}

#[test]
fn nim16() {
    // Rings of garbage pile up roots until Nim's threshold (128, down to 16)
    // triggers collections.
    let coverage = run_family(Family {
        name: "nim16",
        cases: 500,
        plan: |rng| {
            let mut mix = random_mix(rng);
            mix.ring = rng.gen_range(4..12);
            if rng.gen_bool(0.5) {
                mix.collect = 0;
                mix.collect_minor = 0;
            }
            Plan {
                policy: Policy::Nim16,
                adaptive: None,
                mix,
                steps: steps(rng, 50..250),
                max_nodes: max_nodes(rng, 100..400),
                promote_first: rng.gen_bool(0.2),
                across_generations: false,
                trace_clones: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.automatic_collections > 0, "{coverage:?}");
    }
}

#[test]
fn manual() {
    let coverage = run_family(Family {
        name: "manual",
        cases: 800,
        plan: |rng| Plan {
            policy: Policy::Manual,
            adaptive: None,
            mix: random_mix(rng),
            steps: steps(rng, 20..150),
            max_nodes: max_nodes(rng, 4..60),
            promote_first: rng.gen_bool(0.2),
            across_generations: false,
            trace_clones: false,
        },
    });
    assert_eq!(
        coverage.automatic_collections, 0,
        "Manual never collects by itself"
    );
    if full_run(&coverage) {
        assert!(coverage.freed_by_collector > 0, "{coverage:?}");
    }
}

#[test]
fn policy_switches() {
    // The policy changes at random points, with old objects around.
    let coverage = run_family(Family {
        name: "policy_switches",
        cases: 800,
        plan: |rng| {
            let mut mix = random_mix(rng);
            mix.set_policy = rng.gen_range(1..4);
            Plan {
                policy: Policy::Adaptive,
                adaptive: Some(AdaptiveConfig::default().min_roots(rng.gen_range(1..=32))),
                mix,
                steps: steps(rng, 20..150),
                max_nodes: max_nodes(rng, 4..80),
                promote_first: rng.gen_bool(0.5),
                across_generations: false,
                trace_clones: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.automatic_collections > 0, "{coverage:?}");
    }
}

#[test]
fn injected_panics() {
    // Panicking `Drop`s and `trace`s during drops and collections (see
    // `common/model.rs`): the panic comes out, counts and buffers stay in
    // order, and later collections are exact.
    model::quiet_injected_panics();
    let coverage = run_family(Family {
        name: "injected_panics",
        cases: 400,
        plan: |rng| {
            let mut mix = random_mix(rng);
            mix.panics = rng.gen_range(1..6);
            let policy = [Policy::Adaptive, Policy::Nim16, Policy::Manual][rng.gen_range(0..3)];
            let config = rng
                .gen_bool(0.5)
                .then(|| AdaptiveConfig::default().min_roots(rng.gen_range(1..=16)));
            Plan {
                policy,
                adaptive: config,
                mix,
                steps: steps(rng, 20..150),
                max_nodes: max_nodes(rng, 4..60),
                promote_first: rng.gen_bool(0.3),
                across_generations: false,
                trace_clones: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.injected_panics > 0, "{coverage:?}");
    }
}

/// Replays the seed corpora of the fuzz targets `gc_graph` and `gc_panics`
/// and the inputs that once crashed them (`fuzz/corpus/<target>/`,
/// `fuzz/regressions/<target>/`), or only the file `RECYCLER_FUZZ_INPUT`
/// (with injected panics if `RECYCLER_FUZZ_PANICS` is set), printing the
/// failing operations.
#[test]
#[cfg_attr(miri, ignore = "reads files; the families cover the same code")]
fn fuzz_inputs() {
    model::quiet_injected_panics();
    // gc_graph inputs run with `trace` cloning what it reports, as the
    // fuzz target does; gc_panics inputs with injected panics.
    let options = |panics| Options {
        panics,
        trace_clones: !panics,
    };
    let inputs: Vec<(std::path::PathBuf, Options)> = match std::env::var_os("RECYCLER_FUZZ_INPUT") {
        Some(path) => {
            let panics = std::env::var_os("RECYCLER_FUZZ_PANICS").is_some();
            vec![(path.into(), options(panics))]
        }
        None => {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
            let mut inputs = Vec::new();
            for (target, panics) in [("gc_graph", false), ("gc_panics", true)] {
                for dir in ["corpus", "regressions"] {
                    let Ok(files) = std::fs::read_dir(root.join(dir).join(target)) else {
                        continue;
                    };
                    for file in files {
                        inputs.push((file.unwrap().path(), options(panics)));
                    }
                }
            }
            inputs
        }
    };
    assert!(!inputs.is_empty(), "no fuzz inputs found");
    for (path, options) in &inputs {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if model::run_input(&data, *options).is_err() {
            panic!("fuzz input {} failed (see above)", path.display());
        }
    }
}
