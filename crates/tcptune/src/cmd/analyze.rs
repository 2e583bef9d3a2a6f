//! `tcptune analyze FILE|-`: read a capture, analyse it, print the report, write graphs.

use std::fs::File;
use std::io::{self, Read};

use anyhow::Context;
use tcptune_analyze::{analyze_reader, svg, Options};

use crate::cli::AnalyzeArgs;
use crate::output::emit;
use crate::Outcome;

pub fn run(args: AnalyzeArgs, json: bool) -> anyhow::Result<Outcome> {
    let opts = Options {
        packets: args.packets,
        series: args.graphs.is_some(),
    };
    let src: Box<dyn Read> = if args.file == "-" {
        Box::new(io::stdin().lock())
    } else {
        let f = File::open(&args.file).with_context(|| {
            format!(
                "cannot open the capture {}: give a readable pcap or pcapng file",
                args.file
            )
        })?;
        // The capture reader buffers itself (1 MiB), so the file is read directly.
        Box::new(f)
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
