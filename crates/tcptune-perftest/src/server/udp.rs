//! The UDP side of a served test: the streams' "connect" datagrams on the server's port,
//! then the data phase until TEST_END, with iperf3's text or document and our results.

use super::*;

/// A UDP test's streams: each "connect" datagram from the client's host takes the current
/// UDP socket (connected to it) and a new one takes the port for the next.
fn udp_streams(
    ctl: &mut Control,
    s: &mut ServerSession,
    clock: &Clock,
    params: &tcptune_iperf3::Params,
    mut listener: std::net::UdpSocket,
    rx: &Receiver<Routed>,
) -> Result<Vec<crate::udp::UdpStream>, TestError> {
    use tcptune_iperf3::udp::CONNECT_REPLY;
    let client = ctl.sock.peer_addr().ok();
    let mut streams = Vec::new();
    while s.phase() == ServerPhase::Streams {
        // Stray TCP connections with this cookie have no place in a UDP test.
        while let Ok((mut c, _, _)) = rx.try_recv() {
            let _ = c.write_all(&DATA_DENIED_REPLY);
        }
        if tcptune_os::poll::wait_readable(ctl.sock.as_fd(), Duration::ZERO)
            .map_err(|e| TestError::io("waiting on the control connection", e))?
        {
            step(ctl, s, clock)?;
            continue;
        }
        let ready = tcptune_os::poll::wait_readable(listener.as_fd(), Duration::from_millis(20))
            .map_err(|e| TestError::io("waiting for UDP streams", e))?;
        if !ready {
            s.poll(clock.now()).map_err(TestError::Session)?;
            continue;
        }
        let mut msg = [0u8; 64];
        let (_, peer) = listener
            .recv_from(&mut msg)
            .map_err(|e| TestError::io("reading a UDP stream's connect datagram", e))?;
        // Only the client's own host may open its streams (a datagram from anyone else would
        // take a stream's place): the control connection's address, which --allow checked.
        if client.map(|c| unmapped(c).ip()) != Some(unmapped(peer).ip()) {
            continue;
        }
        listener
            .connect(peer)
            .map_err(|e| TestError::io("connecting a UDP stream", e))?;
        let local = listener
            .local_addr()
            .map_err(|e| TestError::io("reading the UDP port", e))?;
        let next = sock::bind_udp(&local)
            .map_err(|e| TestError::io("binding the UDP port for the next stream", e))?;
        let sock = std::mem::replace(&mut listener, next);
        if let Some(w) = params.window {
            let _ = sock::set_window(sock.as_fd(), w);
        }
        sock.send(&CONNECT_REPLY.to_ne_bytes())
            .map_err(|e| TestError::io("answering a UDP stream", e))?;
        if let Some(ds) = s.udp_stream(clock.now()) {
            streams.push(crate::udp::UdpStream {
                id: ds.id,
                sends: ds.server_sends,
                sock,
            });
        }
    }
    Ok(streams)
}

/// A UDP test after CREATE_STREAMS: each stream's "connect" datagram connects the current UDP
/// socket to that client port and a new one takes the port for the next (iperf3's scheme),
/// then the streams run until TEST_END and our results carry loss and jitter.
pub(super) fn serve_udp(
    mut ctl: Control,
    mut s: ServerSession,
    clock: Clock,
    params: &tcptune_iperf3::Params,
    listener: std::net::UdpSocket,
    rx: Receiver<Routed>,
    text: Text<'_>,
) -> Result<String, TestError> {
    let (cfg_text, facts, say, kept) = (text.opts, text.facts, text.say, text.kept);
    let streams = udp_streams(&mut ctl, &mut s, &clock, params, listener, &rx)?;
    let conns: Vec<Conn> = streams.iter().map(Conn::of_udp).collect();
    let mut lines = cfg_text.map(|o| TestText::new(o, params, &conns, facts, say));
    let (u0, s0) = sock::cpu_times();
    // iperf3's client always sends a rate for UDP (1 Mbit/s by default); none or 0 is its
    // `-b 0`: unpaced.
    let rate = params.bandwidth_bps.unwrap_or(0);
    let data = crate::udp::UdpPhase::start(
        streams,
        params.len,
        rate,
        params.udp_counters_64bit,
        params.repeating_payload,
    )
    .map_err(|e| TestError::io("starting the UDP streams", e))?;
    ctl.write(&s.take_output())
        .map_err(|e| TestError::io("writing TEST_START", e))?;
    let mut t0 = Instant::now();
    // -O: what the streams counted when the omitted seconds ended, and time from then.
    let omit = Duration::from_secs(params.omit_s as u64);
    let mut at_omit_end: Option<Vec<tcptune_iperf3::udp::UdpReceiver>> = None;
    let mut ended = false;
    while !ended {
        while let Ok((mut c, _, _)) = rx.try_recv() {
            let _ = c.write_all(&DATA_DENIED_REPLY);
        }
        let omitting = !omit.is_zero() && at_omit_end.is_none();
        if omitting && t0.elapsed() >= omit {
            let at_end = data.counts();
            if let Some(t) = lines.as_mut() {
                t.omit_ended(t0.elapsed().as_secs_f64(), &Counts::udp(&at_end), say);
            }
            at_omit_end = Some(at_end);
            t0 += omit;
        }
        let mut wait = if !omit.is_zero() && at_omit_end.is_none() {
            omit.saturating_sub(t0.elapsed())
        } else {
            Duration::from_secs(1)
        };
        if let Some(t) = lines.as_mut() {
            let now = t0.elapsed().as_secs_f64();
            wait = wait.min(t.tick(now, omitting, || Counts::udp(&data.counts()), say));
        }
        ended = step_within(&mut ctl, &mut s, &clock, wait)?.contains(&ServerEvent::TestEnd);
    }
    let secs = t0.elapsed().as_secs_f64();
    if let Some(t) = lines.as_mut() {
        let omitting = !omit.is_zero() && at_omit_end.is_none();
        t.last(secs, omitting, &Counts::udp(&data.counts()), say);
    }
    let outcomes = data.finish();
    if let Some(t) = lines.as_mut() {
        let cpu = crate::data::cpu_percent((u0, s0), secs);
        say(t.finish_udp(&outcomes, at_omit_end.as_deref(), secs, cpu));
    }
    let (u1, s1) = sock::cpu_times();
    let (cu, cs) = ((u1 - u0) / secs * 100.0, (s1 - s0) / secs * 100.0);
    let mut text = String::from("tcptune serve: the server's side of the test\n");
    for o in &outcomes {
        let c = &o.counts;
        text += &format!(
            "[{:>3}] 0.00-{secs:.2} sec {:>10} {:>14} {} datagrams, {} lost, jitter {:.3} ms {}\n",
            o.id,
            tcptune_diagnose::size(c.bytes),
            crate::test_report::rate(c.bytes as f64 * 8.0 / secs.max(1e-9)),
            c.packet_count,
            c.cnt_error,
            c.jitter * 1000.0,
            if o.sends { "sender" } else { "receiver" }
        );
    }
    let own = Results {
        cpu_util_total: cu + cs,
        cpu_util_user: cu,
        cpu_util_system: cs,
        sender_has_retransmits: -1,
        congestion_used: None,
        streams: outcomes
            .iter()
            .enumerate()
            .map(|(k, o)| o.result(secs, at_omit_end.as_ref().and_then(|v| v.get(k))))
            .collect(),
        // Under -J the server's report is its document (iperf3's `server_output_json`).
        server_output_json: lines
            .as_ref()
            .and_then(|t| t.document().cloned())
            .filter(|_| params.get_server_output),
        server_output_text: params
            .get_server_output
            .then(|| {
                if cfg_text.is_some() {
                    kept.borrow().join("\n") + "\n"
                } else {
                    text.clone()
                }
            })
            .filter(|_| !cfg_text.is_some_and(|o| o.json)),
        extension: None,
    };
    s.finish(own, clock.now()).map_err(TestError::Session)?;
    while s.phase() != ServerPhase::Done {
        step(&mut ctl, &mut s, &clock)?;
    }
    let _ = ctl.write(&s.take_output());
    let bytes: u64 = outcomes.iter().map(|o| o.counts.bytes).sum();
    let lost: u64 = outcomes.iter().map(|o| o.counts.cnt_error).sum();
    Ok(format!(
        "UDP, {} stream(s), {:?}, {} in {:.1} s, {} datagrams lost",
        outcomes.len(),
        params.direction,
        tcptune_diagnose::size(bytes),
        secs,
        lost
    ))
}
