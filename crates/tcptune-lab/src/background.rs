//! The lab's background processes: the link emulator (`tcptune lab _emulator`), which owns the
//! TUN devices and removes its lab when a stop signal arrives or an owner dies, and the CPU hog
//! (`tcptune lab _hog`). Each is the OS edge itself (TUN devices, signals, pidfds), run on the
//! machine; the lab's logic they rely on (is the lab alive, teardown) is tested on the fake.

use std::fmt;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use tcptune_emu::sys;

use crate::effects::Live;
use crate::leftovers::{is_alive, teardown};
use crate::names::{lab_dir, netns_name, DEV};
use crate::os;
use crate::state::read_state;
use crate::LabError;

/// The CPU hog process: spins on one CPU until killed, or until its lab is no longer alive
/// (its emulator, the `lab up` building it or the process it is tied to died, even by
/// `kill -9`), which it checks five times a second: a hog never outlives its lab.
pub fn run_hog(lab: &str, cpu: u32) -> Result<(), LabError> {
    os::pin_to_cpu(cpu).map_err(|e| LabError::Input(format!("cannot pin to CPU {cpu}: {e}")))?;
    let mut x: u64 = 0;
    let mut next_check = Instant::now();
    loop {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        if Instant::now() >= next_check {
            if !is_alive(&mut Live, lab) {
                return Ok(());
            }
            next_check = Instant::now() + Duration::from_millis(200);
        }
    }
}

/// The emulator process (`tcptune lab _emulator --name LAB`): opens the two TUN devices in the
/// hosts' namespaces, says "ready" on stdout, forwards until a stop signal, then removes the
/// lab (so SIGTERM or SIGINT to the emulator takes the whole lab down cleanly).
pub fn run_emulator(lab: &str) -> Result<(), LabError> {
    let env = |what: &str, e: &dyn fmt::Display| LabError::Environment(format!("{what}: {e}"));
    let signals = sys::stop_signals().map_err(|e| env("cannot block signals", &e))?;
    // Packets wait on this process's wakeups. The emulator is the network: a packet due now
    // must not wait behind a host's CPU hog, a busy receiver or a build, so it runs at a low
    // real-time priority (SCHED_FIFO 10), which wakes it at once. Measured with bench/lab at
    // 80% of 1 Gbit/s, TCP's delay-error p99 fell from 47–404 µs (nice −10) to ~45 µs. It
    // sleeps in ppoll whenever nothing is due, and the kernel's RT throttling
    // (sched_rt_runtime_us) leaves other tasks 5% of a CPU even under a flood. Where
    // real-time priority is not allowed, nice −10.
    tcptune_os::process::prefer_realtime(10);
    let st = read_state(&mut Live, lab).ok_or_else(|| LabError::NoSuchLab(lab.into()))?;
    let open = |h: &str| {
        sys::tun::Tun::create_in(&Path::new("/run/netns").join(netns_name(lab, h)), DEV)
            .map_err(|e| env(&format!("cannot create the {h}'s TUN device"), &e))
    };
    let (ct, stn) = (open("client")?, open("server")?);
    let sock = lab_dir(lab).join("control.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = std::os::unix::net::UnixListener::bind(&sock)
        .map_err(|e| env(&format!("cannot listen on {}", sock.display()), &e))?;
    let mut emu = sys::Emulator::new(
        sys::Port::new(ct, st.spec.client.line_rate_bps),
        sys::Port::new(stn, st.spec.server.line_rate_bps),
        st.spec.link.clone(),
    )
    .map_err(|e| LabError::Input(e.to_string()))?;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready").and_then(|()| out.flush());
    }
    // Nobody reads stdout any more; point it at /dev/null so a stray write cannot fail.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = tcptune_os::process::redirect_stdout(null.as_fd());
    }
    let started = Instant::now();
    // The loop stops when its stop descriptor is readable: an epoll set of the signals and
    // of the processes whose end ends the lab (the process it is tied to; the `lab up`
    // building it, until the lab is ready), so a `kill -9` of either removes the lab at once.
    let mut stop = StopSet::new(signals.as_fd())
        .map_err(|e| env("cannot watch for the end of the lab's owners", &e))?;
    let tied = st.tied_to.and_then(|p| stop.watch(p));
    let mut owner = (st.owner_start != 0)
        .then(|| {
            stop.watch(os::ProcessRef {
                pid: st.owner_pid,
                start: st.owner_start,
            })
        })
        .flatten();
    let result = loop {
        let r = emu.run(Some(&listener), stop.epoll.as_fd());
        if !matches!(r, Ok(sys::Exit::Signal)) || os::readable(signals.as_fd()) {
            break r;
        }
        if tied.as_ref().is_some_and(|t| os::readable(t.as_fd())) {
            eprintln!("the process lab '{lab}' was tied to has ended");
            break r;
        }
        match owner.take() {
            // `lab up` ended: normally once the lab is ready, which leaves it running.
            Some(o) if os::readable(o.as_fd()) => {
                if !read_state(&mut Live, lab).is_some_and(|s| s.ready) {
                    eprintln!("`lab up` of lab '{lab}' ended before the lab was ready");
                    break r;
                }
                stop.unwatch(&o);
            }
            o => owner = o,
        }
    };
    drop(emu); // closes the TUN devices, releasing the namespaces
    drop(listener);
    eprintln!(
        "emulator of lab '{lab}' stopping after {:.1} s: {result:?}",
        started.elapsed().as_secs_f64()
    );
    teardown(&mut Live, lab);
    result
        .map(|_| ())
        .map_err(|e| env("emulator loop failed", &e))
}

/// An epoll set that is readable when a stop signal arrived or a watched process ended (it
/// stands in for the emulator loop's signal descriptor).
struct StopSet {
    epoll: tcptune_os::poll::Epoll,
}

impl StopSet {
    fn new(signals: BorrowedFd<'_>) -> std::io::Result<StopSet> {
        let set = StopSet {
            epoll: tcptune_os::poll::Epoll::new()?,
        };
        set.epoll.add(signals)?;
        Ok(set)
    }

    /// Watches `p`; None if it cannot be watched. A process already gone (or whose PID now
    /// belongs to another) is watched as a descriptor that is readable at once.
    fn watch(&mut self, p: os::ProcessRef) -> Option<std::os::fd::OwnedFd> {
        let fd = os::pidfd(p)?;
        self.epoll.add(fd.as_fd()).ok()?;
        Some(fd)
    }

    fn unwatch(&mut self, fd: &std::os::fd::OwnedFd) {
        let _ = self.epoll.remove(fd.as_fd());
    }
}
