//! Privileged: two namespaces joined through the emulator running in a thread.

use super::*;
use crate::config::LinkConfig;
use std::os::unix::net::UnixListener;
use std::path::Path;
use tcptune_testkit::{privileged, Netns};

fn addr(ns: &Netns, dev: &str, local: &str, peer: &str) {
    ns.exec(&["ip", "addr", "add", local, "peer", peer, "dev", dev]);
    ns.exec(&["ip", "link", "set", dev, "up"]);
}

#[test]
fn ping_crosses_the_emulator_with_the_configured_delay_and_status_counts_it() {
    if !privileged("ping_crosses_the_emulator_with_the_configured_delay") {
        return;
    }
    let (c, s) = (Netns::new("emuc"), Netns::new("emus"));
    let run = Path::new("/run/netns");
    let ct = Tun::create_in(&run.join(c.name()), "tt0").unwrap();
    let st = Tun::create_in(&run.join(s.name()), "tt0").unwrap();
    addr(&c, "tt0", "198.18.7.1", "198.18.7.2");
    addr(&s, "tt0", "198.18.7.2", "198.18.7.1");
    let delay = LinkConfig {
        delay_s: Dur::from_millis(10),
        ..Default::default()
    };
    let spec = LinkSpec {
        up: delay.clone(),
        down: delay,
        seed: 1,
    };
    let mut emu = Emulator::new(Port::new(ct, None), Port::new(st, None), spec).unwrap();
    let dir = std::env::temp_dir().join(format!("tt-emu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("control.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).unwrap();
    let (stop_rx, stopper) = tcptune_os::fs::pipe().unwrap();
    let t = std::thread::spawn(move || emu.run(Some(&listener), stop_rx.as_fd()));

    let out = c.exec(&["ping", "-c", "5", "-i", "0.05", "-q", "198.18.7.2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    // rtt min/avg/max/mdev = 20.1/20.2/20.3/0.05 ms
    let stats = text.lines().find(|l| l.contains("min/avg")).unwrap();
    let nums: Vec<f64> = stats
        .split('=')
        .nth(1)
        .unwrap()
        .trim()
        .split('/')
        .take(3)
        .map(|x| x.trim_end_matches(" ms").parse().unwrap())
        .collect();
    // The minimum is the path; the rest includes scheduling noise on a busy machine.
    assert!(nums[0] >= 20.0 && nums[0] < 22.0, "{stats}");

    let reply = request(&sock, &Request::Status).unwrap();
    let st = reply.status.unwrap();
    assert!(st.up.packets_out >= 5 && st.down.packets_out >= 5, "{st:?}");
    assert!(st.client.frames_read >= 5);
    // Loss on: offloads must switch off.
    let mut lossy = st.link.clone();
    lossy.up.loss = crate::config::Loss::EveryNth { n: 2 };
    assert!(
        request(
            &sock,
            &Request::SetLink {
                link: Box::new(lossy)
            }
        )
        .unwrap()
        .ok
    );
    let st = request(&sock, &Request::Status).unwrap().status.unwrap();
    assert!(!st.offloads);
    // A bad setting is refused with a sentence and changes nothing.
    let mut bad = st.link.clone();
    bad.up.reorder = tcptune_model::Probability::new(0.5).unwrap();
    bad.up.delay_s = Dur::ZERO;
    let r = request(
        &sock,
        &Request::SetLink {
            link: Box::new(bad),
        },
    )
    .unwrap();
    assert!(!r.ok && r.error.unwrap().contains("delay"));

    assert_eq!(tcptune_os::fs::write(stopper.as_fd(), &[1]).unwrap(), 1);
    assert_eq!(t.join().unwrap().unwrap(), Exit::Signal);
    let _ = std::fs::remove_dir_all(&dir);
}
