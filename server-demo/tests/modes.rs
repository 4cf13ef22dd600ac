//! The baseline and the faithful Nim 1.6.12 mode end to end: `arc-weak`
//! answers and leaves nothing behind on both runtimes, `orc-nim16-faithful`
//! runs with each defect switch, bad switches are usage errors, and
//! `compare --ablation` apportions the collapse.

mod common;

use common::{stats, Conn, Server, EXE};
use std::process::Command;

const RUNTIMES: [&str; 2] = ["per-thread", "work-stealing"];

/// `requests` requests over 4 keep-alive connections; `/stats` before and
/// after.
fn load(server: &Server, requests: u64) -> (serde_json::Value, serde_json::Value) {
    let before = stats(server.addr);
    let mut conns: Vec<Conn> = (0..4).map(|_| Conn::open(server.addr)).collect();
    for i in 0..requests {
        let r = conns[i as usize % 4].get("/");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, r#"{"message":"Hello, World!"}"#);
    }
    (before, stats(server.addr))
}

#[test]
fn arc_weak_frees_every_request_by_counting() {
    const REQUESTS: u64 = 2000;
    for runtime in RUNTIMES {
        let server = Server::start_on("arc-weak", runtime);
        let (before, after) = load(&server, REQUESTS);
        assert_eq!(after["mode"], "arc-weak");
        assert_eq!(after["policy"], serde_json::Value::Null);
        let (b, a) = (&before["total"], &after["total"]);
        // Each request's graph is gone once it is answered (the /stats
        // request's too, before the statistics are read): live is exactly
        // the hubs, before and after.
        assert_eq!(a["live"], b["live"], "{runtime}: {a}");
        let freed = a["freed_by_rc"].as_u64().unwrap() - b["freed_by_rc"].as_u64().unwrap();
        // 13 objects per `/` (request line and one header), plus the /stats
        // request's graph.
        assert!(freed >= REQUESTS * 13, "{runtime}: freed {freed}");
        assert_eq!(a["freed_by_collector"].as_u64(), Some(0));
        assert_eq!(a["collections"].as_u64().unwrap_or(0), 0);
        assert!(server.terminate().success());
    }
}

#[test]
fn orc_nim16_faithful_runs_with_each_defect() {
    for (defects, pointer) in [
        ("all", "recycler::Gc (all types cyclic)"),
        ("none", "recycler::Gc"),
        ("shared-threshold,locked-alloc", "recycler::Gc"),
        ("all-cyclic", "recycler::Gc (all types cyclic)"),
    ] {
        let server = Server::start_with(
            "per-thread",
            &["--mm", "orc-nim16-faithful", "--nim16-defects", defects],
            |_| {},
        );
        let (before, after) = load(&server, 1500);
        assert_eq!(after["mode"], "orc-nim16-faithful");
        assert_eq!(after["policy"], "Nim16");
        assert_eq!(after["pointer"], pointer, "{defects}");
        let (b, a) = (&before["total"], &after["total"]);
        let freed =
            a["freed_by_collector"].as_u64().unwrap() - b["freed_by_collector"].as_u64().unwrap();
        // Nim16 collects while the load runs (from 128 roots on).
        assert!(freed > 1500, "{defects}: freed {freed}");
        assert!(server.terminate().success(), "{defects}");
    }
    let server = Server::start_with("work-stealing", &["--mm", "orc-nim16-faithful"], |_| {});
    let (_, after) = load(&server, 1500);
    assert_eq!(after["pointer"], "recycler::sync::Gc (all types cyclic)");
    assert!(server.terminate().success());
}

#[test]
fn unknown_defects_are_a_usage_error() {
    let out = Command::new(EXE)
        .args([
            "serve",
            "--mm",
            "orc-nim16-faithful",
            "--nim16-defects",
            "slow",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown defect \"slow\""), "{err}");
    assert!(err.contains("Usage:"), "{err}");
}

#[test]
fn compare_ablation_apportions_the_collapse() {
    let out_dir = tempfile::tempdir().unwrap();
    let table = common::run_compare(&["--ablation"], out_dir.path());
    for label in [
        "arc-weak",
        "orc-nim16",
        "orc-nim16+all-cyclic",
        "orc-nim16+shared-threshold",
        "orc-nim16+locked-alloc",
        "orc-nim16-faithful",
    ] {
        assert!(table.contains(&format!("| {label} |")), "{table}");
    }
    assert!(table.contains("The collapse by cause"), "{table}");
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(results["config"]["ablation"], true);
    let summary = results["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 6);
    assert_eq!(summary[0]["ratio_to_baseline"].as_f64(), Some(1.0));
    assert_eq!(summary[0]["freed_by_collector"].as_u64(), Some(0));
    for s in summary {
        assert_eq!(s["errors"].as_u64(), Some(0), "{s}");
        assert!(s["ratio_to_baseline"].as_f64().unwrap() > 0.0, "{s}");
    }
    let rows = results["ablation"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["defect"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "all-cyclic",
            "shared-threshold",
            "locked-alloc",
            "interaction",
            "all"
        ]
    );
    // The parts and the interaction add up to the whole.
    let loss = |r: &serde_json::Value| r["rps_loss"].as_f64().unwrap();
    let parts: f64 = rows[..4].iter().map(loss).sum();
    assert!((parts - loss(&rows[4])).abs() < 1e-9, "{rows:?}");
}

#[test]
fn load_refuses_more_connections_than_descriptors() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes an `rlimit` into the pointer, which points
    // to one.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(rc, 0);
    if limit.rlim_max >= 100_064 {
        eprintln!(
            "hard limit {} fits 100,000 connections: nothing to check",
            limit.rlim_max
        );
        return;
    }
    let out = Command::new(EXE)
        .args([
            "load",
            "--url",
            "http://127.0.0.1:9/",
            "-c",
            "100000",
            "-d",
            "1s",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RLIMIT_NOFILE can only be raised to"), "{err}");
    assert!(err.contains("100000 connections"), "{err}");
}

#[test]
fn the_allocator_comes_from_the_environment_and_collector_cpu_is_reported() {
    for (env, expected) in [(None, "system"), (Some("mimalloc"), "mimalloc")] {
        let server = Server::start_with("per-thread", &["--mm", "orc"], |c| {
            c.env_remove("SERVER_DEMO_ALLOCATOR");
            if let Some(value) = env {
                c.env("SERVER_DEMO_ALLOCATOR", value);
            }
        });
        let (before, after) = load(&server, 3000);
        assert_eq!(after["allocator"], expected);
        let (b, a) = (&before["total"], &after["total"]);
        let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
        assert!(
            a["freed_by_collector"].as_u64() > b["freed_by_collector"].as_u64(),
            "{expected}: {a}"
        );
        // Collector CPU time: positive once garbage was collected, never
        // more than the wall-clock pauses.
        assert!(f(a, "total_pause_cpu_s") > 0.0, "{expected}: {a}");
        assert!(
            f(a, "total_pause_cpu_s") <= f(a, "total_pause_s") + 1e-9,
            "{expected}: {a}"
        );
        assert!(server.terminate().success());
    }
}

#[test]
fn an_unknown_allocator_is_a_usage_error() {
    let out = Command::new(EXE)
        .args(["compare", "--allocator", "tcmalloc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allocator"), "{err}");
    assert!(err.contains("mimalloc"), "{err}");
}
