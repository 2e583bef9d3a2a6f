//! The trace module's tests: reasons as single sentences, and pages recorded on Linux 6.18
//! decoded against the kernel's own text rendering of the same events.

use std::collections::HashMap;

use super::*;

#[test]
fn every_reason_is_one_sentence() {
    let reasons = [
        TraceUnavailable::NotPermitted,
        TraceUnavailable::NoTracefs,
        TraceUnavailable::EventMissing {
            event: "tcp_probe".into(),
        },
        TraceUnavailable::BigEndian,
        TraceUnavailable::from_io(
            "setting trace_clock mono",
            &io::Error::from_raw_os_error(libc::EINVAL),
        ),
    ];
    for r in reasons {
        let s = r.to_string();
        assert!(s.starts_with("tracing unavailable: "), "{s}");
        assert!(!s.contains('\n') && !s.contains(". "), "one sentence: {s}");
        assert!(!s.ends_with('.'), "a caller continues the sentence: {s}");
    }
}

#[test]
fn io_errors_map_to_reasons() {
    let eperm = io::Error::from_raw_os_error(libc::EPERM);
    let eacces = io::Error::from_raw_os_error(libc::EACCES);
    let enodev = io::Error::from_raw_os_error(libc::ENODEV);
    assert_eq!(
        TraceUnavailable::from_io("mounting tracefs", &eperm),
        TraceUnavailable::NotPermitted
    );
    assert_eq!(
        TraceUnavailable::from_io("creating a trace instance", &eacces),
        TraceUnavailable::NotPermitted
    );
    assert_eq!(
        TraceUnavailable::from_io("mounting tracefs", &enodev),
        TraceUnavailable::NoTracefs
    );
    assert!(matches!(
        TraceUnavailable::from_io("enabling tcp:tcp_probe", &enodev),
        TraceUnavailable::Setup { .. }
    ));
}

/// The recorded pages of every CPU, decoded as `Tracer::read` does (in time order).
fn decode_recorded() -> (Vec<TraceEvent>, u64) {
    let header = PageHeader::parse(include_str!(
        "../../../../fixtures/kernel/6.18/trace/header_page"
    ))
    .unwrap();
    let mut d = Decoders::default();
    for f in [
        include_str!("../../../../fixtures/kernel/6.18/trace/tcp_probe.format"),
        include_str!("../../../../fixtures/kernel/6.18/trace/tcp_cong_state_set.format"),
    ] {
        d.add(&EventFormat::parse(f).unwrap()).unwrap();
    }
    let mut out = Vec::new();
    let mut missed = 0;
    for pages in [
        &include_bytes!("../../../../fixtures/kernel/6.18/trace/cpu0.pages")[..],
        &include_bytes!("../../../../fixtures/kernel/6.18/trace/cpu1.pages")[..],
    ] {
        for page in pages.chunks(header.page_size()) {
            let info = ring::parse_page(page, &header, |raw| {
                out.extend(d.decode(raw.ts, raw.data).map(|(e, _)| e));
            })
            .unwrap();
            missed += info.missed.unwrap_or(0) + u64::from(info.missed_unknown);
        }
    }
    out.sort_by_key(|e| e.t_ns);
    (out, missed)
}

/// One event as the kernel's `trace` file renders it: its time in µs, and its fields.
fn kernel_text() -> Vec<(u64, String, HashMap<String, String>)> {
    let text = include_str!("../../../../fixtures/kernel/6.18/trace/trace.txt");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (head, rest) = l.split_once(": tcp_")?;
            let stamp = head.split_whitespace().last()?;
            let (s, us) = stamp.split_once('.')?;
            let t_us = s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?;
            let (name, fields) = rest.split_once(": ")?;
            let map = fields
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Some((t_us, format!("tcp_{name}"), map))
        })
        .collect()
}

fn num(m: &HashMap<String, String>, k: &str) -> u64 {
    let v = &m[k];
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None if k == "sock_cookie" => u64::from_str_radix(v, 16).unwrap(),
        None => v.parse().unwrap(),
    }
}

#[test]
fn recorded_pages_decode_to_the_kernels_own_rendering() {
    let (events, missed) = decode_recorded();
    let text = kernel_text();
    assert_eq!(missed, 0);
    assert!(text.len() > 200, "the recording has {} events", text.len());
    assert_eq!(
        events.len(),
        text.len(),
        "one decoded event per rendered line"
    );
    let mut extends = 0;
    for (i, (e, (t_us, name, m))) in events.iter().zip(&text).enumerate() {
        // The kernel prints µs rounded to the nearest (ns2usecs adds 500 ns).
        assert_eq!((e.t_ns + 500) / 1000, *t_us, "event {i}: time");
        if i > 0 && e.t_ns - events[i - 1].t_ns >= 1 << 27 {
            extends += 1;
        }
        match (&e.kind, name.as_str()) {
            (
                TraceKind::Ack {
                    snd_una,
                    snd_nxt,
                    cwnd_segs,
                    ssthresh_segs,
                    snd_wnd_bytes,
                    srtt_us,
                    rcv_wnd_bytes,
                    data_len,
                },
                "tcp_probe",
            ) => {
                let got = [
                    u64::from(*snd_una),
                    u64::from(*snd_nxt),
                    u64::from(*cwnd_segs),
                    u64::from(*ssthresh_segs),
                    u64::from(*snd_wnd_bytes),
                    u64::from(*srtt_us),
                    u64::from(*rcv_wnd_bytes),
                    u64::from(*data_len),
                    e.cookie,
                ];
                let want = [
                    "snd_una",
                    "snd_nxt",
                    "snd_cwnd",
                    "ssthresh",
                    "snd_wnd",
                    "srtt",
                    "rcv_wnd",
                    "data_len",
                    "sock_cookie",
                ]
                .map(|k| num(m, k));
                assert_eq!(got, want, "event {i}");
            }
            (TraceKind::CongState { ca_state }, "tcp_cong_state_set") => {
                assert_eq!(u64::from(*ca_state), num(m, "cong_state"), "event {i}");
            }
            other => panic!("event {i}: decoded {other:?}, the kernel wrote {name}"),
        }
    }
    // More than 2^27 ns between two events needs a time extend (or a new page's stamp).
    assert!(extends >= 1, "the 0.3 s pause is in the recording");
}
