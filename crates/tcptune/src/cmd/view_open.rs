//! What `tcptune view FILE` opens, made into the page's updates so one page draws them all:
//! a recording of the page (`watch --web --record`), an experiment's results directory (each
//! trial a row, its sender's polled series and the runner's verdict), one trial's series file,
//! and a packet capture (each direction that carried data a row, with what the wire shows on
//! a time grid and the engine's verdict from the capture). A capture holds no congestion
//! window, ssthresh or kernel triage: those charts stay empty for it and the page's banner
//! says so.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use tcptune_analyze::series::DirSeries;
use tcptune_analyze::{analyze_reader, diagnose::direction_verdict, Finished, Options};
use tcptune_diagnose::{Limit, Negotiated};
use tcptune_experiment::record::{Measurement, SeriesSample, TrialRecord};
use tcptune_experiment::run::{load_plan, load_records};
use tcptune_web::record::replay;
use tcptune_web::store::{Bounds, Store};
use tcptune_web::update::{Detail, Event, EventKind, Point, Row, Source, Update};

/// What a capture's points are spread over at most (a grid of this many steps).
const CAPTURE_STEPS: f64 = 1500.0;

/// The store `view` serves for `path`, whichever kind of file it is.
pub fn open(path: &Path) -> anyhow::Result<Store> {
    let shown = path.display();
    if path.is_dir() {
        return results(path).with_context(|| format!("reading the experiment results {shown}"));
    }
    let mut head = [0u8; 4];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .with_context(|| format!("cannot open {shown}"))?;
    if n == 4 && is_capture_magic(head) {
        return capture(path).with_context(|| format!("reading the capture {shown}"));
    }
    let first = first_line(path).with_context(|| format!("cannot read {shown}"))?;
    let recording = first.contains("\"record\"") || first.contains("\"type\"");
    if !recording && serde_json::from_str::<SeriesSample>(&first).is_ok() {
        return trial_file(path).with_context(|| format!("reading the trial series {shown}"));
    }
    let f = File::open(path).with_context(|| format!("cannot open {shown}"))?;
    replay(BufReader::new(f), Bounds::default())
        .with_context(|| format!("reading the recording {shown}"))
}

/// pcap (either byte order, µs or ns) or pcapng's section header.
fn is_capture_magic(m: [u8; 4]) -> bool {
    let le = u32::from_le_bytes(m);
    matches!(
        le,
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 | 0x0a0d_0d0a
    )
}

fn first_line(path: &Path) -> std::io::Result<String> {
    for line in BufReader::new(File::open(path)?).lines() {
        let line = line?;
        if !line.trim().is_empty() {
            return Ok(line);
        }
    }
    Ok(String::new())
}

/// A store holding `updates`, with room for all of them.
fn store_of(updates: &[Update], source: Source) -> Store {
    let (mut points, mut events, mut last) = (0usize, 0usize, 0f64);
    let mut ids = std::collections::HashSet::new();
    for u in updates {
        match u {
            Update::Point { id, point } => {
                points += 1;
                last = last.max(point.t_s);
                ids.insert(id.clone());
            }
            Update::Event { .. } => events += 1,
            _ => {}
        }
    }
    let d = Bounds::default();
    let bounds = Bounds {
        span_s: (last + 1.0).max(d.span_s),
        points: points.max(d.points),
        events: events.max(d.events),
        conns: ids.len().max(d.conns),
        ..d
    };
    let mut store = Store::new(bounds, source);
    for u in updates {
        store.apply(u);
    }
    store
}

/// One series file: `SeriesSample` per line.
fn read_series(path: &Path) -> anyhow::Result<Vec<SeriesSample>> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in BufReader::new(f).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).with_context(|| {
            format!(
                "line {} of {} is not a trial series sample",
                n + 1,
                path.display()
            )
        })?);
    }
    Ok(out)
}

/// A trial's polled series as the page's points, and its retransmissions as events.
fn trial_updates(id: &str, samples: &[SeriesSample], out: &mut Vec<Update>) {
    let mut retrans: Option<u64> = None;
    for s in samples {
        out.push(Update::Point {
            id: id.to_string(),
            point: Point {
                t_s: s.t_s,
                goodput_bps: s.goodput_bps,
                delivery_rate_bps: None,
                app_limited: None,
                cwnd_bytes: s.snd_cwnd_bytes,
                snd_wnd_bytes: s.rwnd_bytes.map(|w| w.min(u64::from(u32::MAX)) as u32),
                ssthresh_bytes: None,
                inflight_bytes: None,
                srtt_ms: s.rtt_s.map(|r| r * 1e3),
                min_rtt_ms: None,
                rttvar_ms: None,
                acked_bytes: None,
                sent_bytes: None,
                shares: None,
            },
        });
        if let Some(r) = s.retransmits {
            let new = r.saturating_sub(retrans.unwrap_or(r));
            if new > 0 {
                out.push(event(id, s.t_s, EventKind::Retransmit, new));
            }
            retrans = Some(r);
        }
    }
}

fn event(id: &str, t_s: f64, kind: EventKind, count: u64) -> Update {
    let text = match kind {
        EventKind::Retransmit => format!("{count} segment(s) retransmitted"),
        EventKind::ZeroWindow => "the receiver advertised a zero window".to_string(),
        EventKind::Rto => "retransmission timeout".to_string(),
        EventKind::CongState => "congestion state changed".to_string(),
    };
    Update::Event {
        id: id.to_string(),
        event: Event {
            t_s,
            kind,
            count,
            text,
        },
    }
}

/// The table row and detail of a trial, from its record when there is one.
fn trial_row(id: &str, label: String, m: Option<&Measurement>, out: &mut Vec<Update>) -> Row {
    let limit = m.and_then(|m| m.limit).unwrap_or(Limit::NotEnoughEvidence);
    let verdict = m
        .and_then(|m| m.verdict.clone())
        .unwrap_or_else(|| "no verdict recorded for this trial".to_string());
    out.push(Update::Detail {
        id: id.to_string(),
        detail: Detail {
            t_s: m.map(|m| m.duration_s).unwrap_or(0.0),
            limit,
            verdict: verdict.clone(),
            fixes: Vec::new(),
            negotiated: Negotiated::default(),
        },
    });
    // A trial's addresses are the lab's, not recorded with it: the label names the row.
    let unknown = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
    Row {
        id: id.to_string(),
        netns: None,
        label: Some(label),
        state_num: 1,
        state: "trial".into(),
        local: unknown,
        remote: unknown,
        congestion: None,
        rate_bps: m.map(|m| m.goodput_bps).unwrap_or(0.0),
        srtt_ms: m.and_then(|m| m.rtt_mean_s).map(|r| r * 1e3),
        limit,
        verdict,
    }
}

fn trials_source(what: String) -> Source {
    Source {
        per_ack: false,
        interval_s: 0.1,
        reason: Some(what),
    }
}

/// An experiment's results directory: every trial with a series.
fn results(dir: &Path) -> anyhow::Result<Store> {
    let records = load_records(dir)?;
    let plan = load_plan(dir).ok();
    let mut updates = Vec::new();
    let mut rows = Vec::new();
    for r in records.iter().filter(|r| !r.warmup) {
        let Some(m) = &r.result else { continue };
        // A committed results directory keeps its records, not its series: such a trial is a
        // row with its verdict and no points.
        let samples = match &m.series {
            Some(rel) if dir.join(rel).is_file() => read_series(&dir.join(rel))?,
            _ => Vec::new(),
        };
        let point = plan
            .as_ref()
            .and_then(|p| p.points.get(r.point))
            .map(|p| p.label())
            .unwrap_or_else(|| format!("point {}", r.point));
        trial_updates(&r.id, &samples, &mut updates);
        rows.push(trial_row(
            &r.id,
            format!("{} {point}", r.id),
            Some(m),
            &mut updates,
        ));
    }
    if rows.is_empty() {
        bail!("no measured trial is recorded there (trials.jsonl); run the spec with `tcptune lab run SPEC --out DIR`");
    }
    updates.push(Update::Rows { t_s: 0.0, rows });
    Ok(store_of(
        &updates,
        trials_source(format!(
            "an experiment's trials ({}): tcp_info of each trial's sender, polled by the runner",
            dir.display()
        )),
    ))
}

/// One trial's series file; its record, when the results directory around it has one.
fn trial_file(path: &Path) -> anyhow::Result<Store> {
    let samples = read_series(path)?;
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trial".into());
    let dir: Option<PathBuf> = path.parent().and_then(Path::parent).map(Path::to_path_buf);
    let record: Option<TrialRecord> = dir
        .as_deref()
        .and_then(|d| load_records(d).ok())
        .and_then(|rs| rs.into_iter().find(|r| r.id == id));
    let mut updates = Vec::new();
    trial_updates(&id, &samples, &mut updates);
    let m = record.as_ref().and_then(|r| r.result.as_ref());
    let row = trial_row(&id, id.clone(), m, &mut updates);
    updates.push(Update::Rows {
        t_s: 0.0,
        rows: vec![row],
    });
    Ok(store_of(
        &updates,
        trials_source(format!(
            "a trial's series ({}): tcp_info of its sender, polled by the runner",
            path.display()
        )),
    ))
}

/// A capture: each direction that carried data, on a time grid.
fn capture(path: &Path) -> anyhow::Result<Store> {
    let f = File::open(path)?;
    let name = path.display().to_string();
    let opts = Options {
        packets: false,
        series: true,
    };
    let done = analyze_reader(f, &name, opts)
        .map_err(|e| anyhow::anyhow!("{e}; give a pcap or pcapng capture (tcpdump -w, dumpcap)"))?;
    if let Some(why) = done.report.unusable() {
        bail!("{why}");
    }
    let step = capture_step(&done);
    let (updates, rows) = capture_updates(&done, step);
    if rows == 0 {
        bail!("no TCP flow in it carried data; capture the transfer itself (tcpdump -w FILE tcp)");
    }
    Ok(store_of(
        &updates,
        Source {
            per_ack: false,
            interval_s: step,
            reason: Some(format!(
                "a capture ({name}): what the wire shows, on a {:.3} s grid; a capture holds \
                 no congestion window, ssthresh or kernel triage",
                step
            )),
        },
    ))
}

/// The grid: the capture's length over [`CAPTURE_STEPS`], at least a millisecond.
fn capture_step(done: &Finished) -> f64 {
    (done.report.duration_s.secs() / CAPTURE_STEPS).max(1e-3)
}

/// Rows, details, points and events of every data-carrying direction; and how many rows.
fn capture_updates(done: &Finished, step: f64) -> (Vec<Update>, usize) {
    let mut updates = Vec::new();
    let mut rows = Vec::new();
    for (stream, series) in &done.series {
        let Some(flow) = done.report.flows.iter().find(|f| f.stream == *stream) else {
            continue;
        };
        for (dir, (from, to)) in [(&flow.a, &flow.b), (&flow.b, &flow.a)]
            .into_iter()
            .enumerate()
        {
            let Some(v) = direction_verdict(flow, dir) else {
                continue;
            };
            let id = format!("s{stream}-{}", if dir == 0 { "ab" } else { "ba" });
            grid(
                &id,
                &series.dirs[dir],
                done.capture_start_ns,
                step,
                &mut updates,
            );
            let stats = if dir == 0 { &flow.a_to_b } else { &flow.b_to_a };
            let back = if dir == 0 { &flow.b_to_a } else { &flow.a_to_b };
            updates.push(Update::Detail {
                id: id.clone(),
                detail: Detail {
                    t_s: flow.start_s.secs() + flow.duration_s.secs(),
                    limit: v.limit,
                    verdict: v.text.clone(),
                    fixes: Vec::new(),
                    negotiated: negotiated(stats, back),
                },
            });
            let addr = |s: &str| {
                s.parse()
                    .unwrap_or(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
            };
            rows.push(Row {
                id,
                netns: None,
                label: None,
                state_num: 1,
                state: "captured".into(),
                local: addr(from),
                remote: addr(to),
                congestion: None,
                rate_bps: stats.throughput_bps.bps(),
                srtt_ms: stats.rtt.as_ref().map(|r| r.mean_s.secs() * 1e3),
                limit: v.limit,
                verdict: v.text,
            });
        }
    }
    let n = rows.len();
    updates.push(Update::Rows { t_s: 0.0, rows });
    (updates, n)
}

/// The options both SYNs carried, as the sender of `d` has them in effect.
fn negotiated(
    d: &tcptune_analyze::analysis::DirStats,
    back: &tcptune_analyze::analysis::DirStats,
) -> Negotiated {
    let (Some(me), Some(peer)) = (&d.syn_options, &back.syn_options) else {
        return Negotiated::default();
    };
    let scaling = me.window_scale.is_some() && peer.window_scale.is_some();
    Negotiated {
        sack: Some(me.sack_permitted && peer.sack_permitted),
        timestamps: Some(me.timestamps && peer.timestamps),
        window_scaling: Some(scaling),
        ecn: None,
        snd_wscale: if scaling { peer.window_scale } else { None },
        rcv_wscale: if scaling { me.window_scale } else { None },
        snd_mss: peer.mss.map(u32::from),
        advmss: me.mss.map(u32::from),
    }
}

/// One direction's series on a grid of `step` seconds: per step the bytes acknowledged (and
/// their rate), the highest sequence sent, the advertised window and bytes in flight last
/// seen, the mean RTT sample; retransmissions and zero windows as events.
fn grid(id: &str, d: &DirSeries, start_ns: i64, step: f64, out: &mut Vec<Update>) {
    let t = |ns: i64| (ns - start_ns) as f64 / 1e9;
    let slot = |ns: i64| (t(ns) / step).floor().max(0.0) as usize;
    let segs = d.segments.points();
    let acks = d.acks.points();
    let rtts = d.rtt.points();
    let flight = d.in_flight.points();
    let last_ns = [
        segs.last().map(|p| p.t_ns),
        acks.last().map(|p| p.t_ns),
        rtts.last().map(|p| p.0),
    ]
    .into_iter()
    .flatten()
    .max();
    let Some(last_ns) = last_ns else { return };
    let slots = slot(last_ns) + 1;
    let (mut si, mut ai, mut ri, mut fi, mut xi) = (0, 0, 0, 0, 0);
    let (mut sent, mut acked, mut window, mut inflight) = (None, None, None, None);
    let mut prev_acked: Option<u64> = None;
    let mut zero = false;
    let retrans = d.retransmissions.points();
    for k in 0..slots {
        while si < segs.len() && slot(segs[si].t_ns) <= k {
            sent = Some(sent.unwrap_or(0).max(segs[si].end));
            si += 1;
        }
        while ai < acks.len() && slot(acks[ai].t_ns) <= k {
            let a = &acks[ai];
            acked = Some(acked.unwrap_or(0).max(a.ack.max(0) as u64));
            window = Some(a.window.min(u64::from(u32::MAX)) as u32);
            if a.window == 0 && !zero {
                out.push(event(id, t(a.t_ns), EventKind::ZeroWindow, 1));
            }
            zero = a.window == 0;
            ai += 1;
        }
        while fi < flight.len() && slot(flight[fi].0) <= k {
            inflight = Some(flight[fi].1);
            fi += 1;
        }
        let (mut rsum, mut rn) = (0.0, 0u32);
        while ri < rtts.len() && slot(rtts[ri].0) <= k {
            rsum += rtts[ri].1;
            rn += 1;
            ri += 1;
        }
        let mut n_retrans = 0u64;
        let mut first_retrans = None;
        while xi < retrans.len() && slot(retrans[xi].t_ns) <= k {
            first_retrans.get_or_insert(retrans[xi].t_ns);
            n_retrans += 1;
            xi += 1;
        }
        if let Some(ns) = first_retrans {
            out.push(event(id, t(ns), EventKind::Retransmit, n_retrans));
        }
        let goodput = match (acked, prev_acked) {
            (Some(a), Some(p)) => Some(a.saturating_sub(p) as f64 * 8.0 / step),
            _ => None,
        };
        prev_acked = acked.or(prev_acked);
        out.push(Update::Point {
            id: id.to_string(),
            point: Point {
                t_s: (k + 1) as f64 * step,
                goodput_bps: goodput,
                delivery_rate_bps: None,
                app_limited: None,
                cwnd_bytes: None,
                snd_wnd_bytes: window,
                ssthresh_bytes: None,
                inflight_bytes: inflight,
                srtt_ms: (rn > 0).then(|| rsum / f64::from(rn) * 1e3),
                min_rtt_ms: None,
                rttvar_ms: None,
                acked_bytes: acked,
                sent_bytes: sent,
                shares: None,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trials_retransmissions_become_events_at_their_sample() {
        let s = |t_s: f64, r: u64| SeriesSample {
            t_s,
            goodput_bps: Some(1e6),
            snd_cwnd_bytes: Some(14480),
            rwnd_bytes: Some(65536),
            rtt_s: Some(0.02),
            retransmits: Some(r),
            ..SeriesSample::default()
        };
        let mut out = Vec::new();
        trial_updates("p000-r01", &[s(0.1, 2), s(0.2, 2), s(0.3, 7)], &mut out);
        let events: Vec<(f64, u64)> = out
            .iter()
            .filter_map(|u| match u {
                Update::Event { event, .. } => Some((event.t_s, event.count)),
                _ => None,
            })
            .collect();
        // The first sample's count is the baseline, not an event.
        assert_eq!(events, vec![(0.3, 5)]);
        let store = store_of(&out, trials_source("test".into()));
        let v = store.view("p000-r01").unwrap();
        assert_eq!(v.points.len(), 3);
        assert_eq!(v.points[2].srtt_ms, Some(20.0));
        assert_eq!(v.points[0].snd_wnd_bytes, Some(65536));
    }

    #[test]
    fn capture_magic_numbers_are_recognised_and_text_is_not() {
        for m in [
            [0xd4, 0xc3, 0xb2, 0xa1],
            [0xa1, 0xb2, 0xc3, 0xd4],
            [0x4d, 0x3c, 0xb2, 0xa1],
            [0x0a, 0x0d, 0x0d, 0x0a],
        ] {
            assert!(is_capture_magic(m), "{m:?}");
        }
        assert!(!is_capture_magic(*b"{\"re"));
    }
}
