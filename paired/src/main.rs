//! `paired`: runs two commands in alternating pairs and reports B against A
//! (see the library's docs for the statistics).
//!
//! ```sh
//! cargo build --release -p benches -p paired
//! target/release/paired --pairs 100 \
//!     --a 'target/release/sync_profile random arc 1 250000 6' \
//!     --b 'target/release/sync_profile random recycler-sync-gc 1 250000 6'
//! ```
//!
//! Each command runs through `sh -c`, one process per run; its measurement
//! is the first match of `--pattern` in its standard error and output (by
//! default the first time printed, such as `24.8 ms`). A command that
//! fails, or prints no measurement, stops the comparison with its output.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context as _};
use clap::Parser;
use serde::Serialize;

use paired::{human, machine, verdict, Machine, Measurement, Verdict, TIME};

/// Runs commands A and B in alternating pairs (A B, B A, …) and reports the
/// median of the pairs' ratios B/A with its distribution-free interval.
#[derive(Debug, Parser)]
#[command(name = "paired", version)]
struct Args {
    /// Command A, the reference (run with `sh -c`).
    #[arg(long)]
    a: String,
    /// Command B.
    #[arg(long)]
    b: String,
    /// Pairs to run.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..))]
    pairs: u32,
    /// Regular expression whose first match in a run's output is its
    /// measurement: capture group 1 the number, group 2 (optional) a unit
    /// of time (ns, µs, us, ms, s).
    #[arg(long, default_value = TIME, value_parser = Measurement::new)]
    pattern: Measurement,
    /// Confidence of the interval.
    #[arg(long, default_value_t = 0.95, value_parser = confidence)]
    confidence: f64,
    /// Also write every pair and the verdict to this JSON file.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A confidence level strictly between 0 and 1.
fn confidence(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        _ => Err(format!(
            "`{s}` is not a confidence strictly between 0 and 1"
        )),
    }
}

/// One pair, as measured.
#[derive(Debug, Serialize)]
struct Pair {
    a: f64,
    b: f64,
    /// Which command ran first.
    first: char,
}

/// The JSON record of a comparison.
#[derive(Debug, Serialize)]
struct Report<'a> {
    machine: Machine,
    /// When the comparison ended, seconds since the Unix epoch.
    finished_unix_s: u64,
    a: &'a str,
    b: &'a str,
    pattern: &'a str,
    pairs: &'a [Pair],
    verdict: &'a Verdict,
}

/// Runs `command` once and returns its measurement.
fn measure(label: char, command: &str, measurement: &Measurement) -> anyhow::Result<f64> {
    let output = Command::new("sh")
        .arg("-c")
        .arg(command)
        .output()
        .with_context(|| format!("could not start `sh -c` for {label}"))?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    if !output.status.success() {
        bail!(
            "{label} (`{command}`) failed ({}):\n{}",
            output.status,
            text.trim()
        );
    }
    measurement.find(&text).with_context(|| {
        format!(
            "no measurement in the output of {label} (`{command}`):\n{}",
            text.trim()
        )
    })
}

fn run(args: &Args) -> anyhow::Result<()> {
    let measurement = &args.pattern;
    let mut pairs = Vec::with_capacity(args.pairs as usize);
    for i in 0..args.pairs {
        let pair = if i % 2 == 0 {
            let a = measure('A', &args.a, measurement)?;
            let b = measure('B', &args.b, measurement)?;
            Pair { a, b, first: 'A' }
        } else {
            let b = measure('B', &args.b, measurement)?;
            let a = measure('A', &args.a, measurement)?;
            Pair { a, b, first: 'B' }
        };
        pairs.push(pair);
        if (i + 1) % 10 == 0 {
            eprintln!("{} of {} pairs", i + 1, args.pairs);
        }
    }
    let measured: Vec<(f64, f64)> = pairs.iter().map(|p| (p.a, p.b)).collect();
    let v = verdict(&measured, args.confidence);
    let interval = match v.interval {
        Some((lo, hi)) => format!("{:.0} % interval {lo:.3}–{hi:.3}", v.confidence * 100.0),
        None => format!("too few pairs for a {:.0} % interval", v.confidence * 100.0),
    };
    let time = measurement.is_time();
    println!(
        "A median {}, B median {}; B/A median of {} pairs {:.3} ({interval}); \
         B lower in {} (sign test p = {:.3})",
        human(v.a_median, time),
        human(v.b_median, time),
        v.pairs,
        v.ratio,
        v.b_lower,
        v.sign_test_p
    );
    if let Some(path) = &args.out {
        let report = Report {
            machine: machine(),
            finished_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            a: &args.a,
            b: &args.b,
            pattern: args.pattern.as_str(),
            pairs: &pairs,
            verdict: &v,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("could not write {}", path.display()))?;
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("paired: {e:#}");
        std::process::exit(1);
    }
}
