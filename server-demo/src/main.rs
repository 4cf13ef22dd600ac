//! `server-demo`: a multithreaded async HTTP server whose request path uses
//! `recycler::Rc` (`--mm arc`) or `recycler::Gc` (`--mm orc-nim16`, `--mm
//! orc`), a closed-loop load generator, and a side-by-side comparison of the
//! modes. It reproduces the ORC-versus-ARC trade-off Nim users measured with
//! async HTTP servers: plain reference counting is fast and leaks every cycle
//! a request builds; Nim 1.6's cycle collector reclaims them but keeps
//! re-walking the live async graph; a generational collector reclaims them
//! without that cost.

mod ab;
mod attack;
mod chart;
mod child;
mod compare;
mod conn;
mod family;
mod graph;
mod hubs;
mod jsondoc;
mod listen;
mod load;
mod locked_alloc;
mod log;
mod mode;
mod placement;
mod procfs;
mod server;
mod stats;
mod sys;
mod worksteal;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// `System`, behind one lock only when `--mm orc-nim16-faithful` asks for it.
#[global_allocator]
static GLOBAL: locked_alloc::LockedAlloc = locked_alloc::LockedAlloc;

/// Reproduces Nim's ORC-versus-ARC trade-off with recycler's pointers.
#[derive(Parser, Debug)]
#[command(version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve HTTP: N worker threads, one runtime and one SO_REUSEPORT listener each (or one work-stealing runtime).
    Serve(server::ServeArgs),
    /// Load a URL with keep-alive connections (closed loop) and report req/s and latency.
    Load(load::LoadArgs),
    /// Run every mode side by side; print a table, write results.json and an SVG chart.
    Compare(compare::CompareArgs),
    /// Two servers up at once, loaded in alternating short slices: B's CPU per request against A's, with a confidence interval.
    Ab(ab::AbArgs),
    /// How far apart the host put two CPUs: a cache line's round trip between them (which placement `ab` splits its verdict by).
    Pingpong(placement::PingpongArgs),
}

/// Parses durations like `10s`, `500ms`, `1m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 10s, 500ms, 1m)"))?;
    if d > MAX_DURATION {
        return Err(format!("{s} is longer than the longest allowed, 1 day"));
    }
    Ok(d)
}

/// Parses a duration of load or a timeout: at least 1 ms, at most a day.
fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(1) {
        return Err(format!("{s} is shorter than the shortest allowed, 1ms"));
    }
    Ok(d)
}

/// The longest duration a flag takes (deadlines are computed by adding it
/// to the clock, which overflowed for absurd values).
const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses the command line; on an error prints the message and, when clap's
/// message lacks one, the usage of the subcommand that was named.
fn parse_cli() -> Cli {
    use clap::CommandFactory;
    let e = match Cli::try_parse() {
        Ok(cli) => return cli,
        Err(e) => e,
    };
    let rendered = e.render().to_string();
    if !e.use_stderr() || rendered.contains("Usage:") {
        e.exit();
    }
    let mut cmd = Cli::command();
    cmd.build();
    let sub = std::env::args().nth(1).unwrap_or_default();
    let usage = match cmd.find_subcommand_mut(&sub) {
        Some(sub) => sub.render_usage(),
        None => cmd.render_usage(),
    };
    eprint!(
        "{}",
        rendered
            .trim_end_matches("For more information, try '--help'.\n")
            .trim_end()
    );
    eprintln!("\n\n{usage}\n\nFor more information, try '--help'.");
    std::process::exit(2);
}

fn main() -> ExitCode {
    let cli = parse_cli();
    let result = match &cli.command {
        Command::Serve(args) => server::run(args),
        Command::Load(args) => load::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Ab(args) => ab::run(args),
        Command::Pingpong(args) => placement::run(args),
    };
    log::flush(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Not `eprintln!`: with stderr a closed pipe it would panic
            // and turn the exit code 1 into 101.
            log::stderr_line(format_args!("error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}
