//! `tcptune analyze FILE|-`: read a capture, analyse it, print the report, write graphs; or
//! `tcptune analyze A B`: join two captures of one path.

use std::fs::File;
use std::io::{self, Read};

use anyhow::Context;
use tcptune_analyze::join::{join_readers, Clock};
use tcptune_analyze::{analyze_reader, svg, Options};

use crate::cli::AnalyzeArgs;
use crate::outcome::Outcome;
use crate::output::emit;

pub fn run(args: AnalyzeArgs, json: bool) -> anyhow::Result<Outcome> {
    if let Some(second) = &args.second {
        return join(&args, second, json);
    }
    let opts = Options {
        packets: args.packets,
        series: args.graphs.is_some(),
    };
    let src: Box<dyn Read> = if args.file == "-" {
        Box::new(io::stdin().lock())
    } else {
        // The capture reader buffers itself (1 MiB), so the file is read directly.
        Box::new(open(&args.file)?)
    };
    let done = analyze_reader(src, &args.file, opts).map_err(|e| {
        anyhow::anyhow!(
            "cannot analyse {}: {e}; give a pcap or pcapng capture (tcpdump -w, dumpcap)",
            args.file
        )
    })?;
    if let Some(why) = done.report.unusable() {
        anyhow::bail!(
            "cannot analyse {}: {why}; give a capture of Ethernet, IP, PPP, SLL or another link \
             type listed in the README",
            args.file
        );
    }
    if let Some(dir) = &args.graphs {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the graph directory {}", dir.display()))?;
        let written = svg::write_graphs(dir, &done, args.graph_flows)
            .with_context(|| format!("cannot write graphs into {}", dir.display()))?;
        if !json {
            eprintln!("wrote {} graphs into {}", written.len(), dir.display());
        }
    }
    emit("analyze", &done.report, json)?;
    Ok(if done.report.found_problem() {
        Outcome::Problem
    } else {
        Outcome::Ok
    })
}

fn open(path: &str) -> anyhow::Result<File> {
    File::open(path).with_context(|| {
        format!("cannot open the capture {path}: give a readable pcap or pcapng file")
    })
}

/// Two captures of one path, joined.
fn join(args: &AnalyzeArgs, second: &str, json: bool) -> anyhow::Result<Outcome> {
    if args.packets || args.graphs.is_some() {
        anyhow::bail!(
            "--packets and --graphs describe one capture: run `tcptune analyze FILE` on each \
             of the two for them"
        );
    }
    if args.file == "-" || second == "-" {
        anyhow::bail!("joining needs two capture files (standard input cannot be one of them)");
    }
    let (a, b) = (open(&args.file)?, open(second)?);
    let clock = if args.same_clock {
        Clock::Same
    } else {
        Clock::Estimate
    };
    let report = join_readers(a, b, [&args.file, second], clock).map_err(|e| {
        anyhow::anyhow!(
            "cannot join {} and {second}: {e}; give two pcap or pcapng captures of the same \
             TCP traffic",
            args.file
        )
    })?;
    if report.totals.matched == 0 {
        anyhow::bail!(
            "cannot join {} and {second}: no packet was seen in both; give two captures of the \
             same TCP traffic taken at the same time",
            args.file
        );
    }
    emit("analyze", &report, json)?;
    Ok(if report.found_problem() {
        Outcome::Problem
    } else {
        Outcome::Ok
    })
}
