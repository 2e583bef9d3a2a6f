//! The path's RTT measured from this host: `ping`'s minimum over a few echoes, from inside a
//! network namespace when one is named. Parsing its summary is separate from running it, so the
//! parser is tested on recorded output.

use std::io;
use std::process::Command;

use tcptune_model::Dur;

/// Echo requests sent, the interval between them and the wait for each reply (seconds): one
/// second in all, enough for a minimum on a quiet path.
const PING_ARGS: [&str; 7] = ["-c", "5", "-i", "0.2", "-W", "2", "-q"];

/// The minimum RTT `ping` measures to `host` (in namespace `netns` when given), or `None` when
/// no reply came. The error is that of starting `ping` (or `ip netns exec`).
pub fn ping_min_rtt(host: &str, netns: Option<&str>) -> io::Result<Option<Dur>> {
    let mut cmd = match netns {
        Some(n) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", n, "ping"]);
            c
        }
        None => Command::new("ping"),
    };
    let out = cmd.args(PING_ARGS).arg(host).output()?;
    Ok(min_rtt(&String::from_utf8_lossy(&out.stdout)))
}

/// The minimum of iputils ping's summary line, "rtt min/avg/max/mdev = 0.041/0.052/0.071/0.010
/// ms" (busybox writes "round-trip min/avg/max = …"), or `None` when there is none.
pub fn min_rtt(ping_output: &str) -> Option<Dur> {
    let ms = ping_output
        .lines()
        .find_map(|l| {
            l.split_once(" = ")
                .filter(|(k, _)| k.contains("min/avg"))
                .map(|(_, v)| v)
        })
        .and_then(|v| v.split('/').next())
        .and_then(|v| v.trim().parse::<f64>().ok())?;
    Some(Dur::from_secs_f64(ms / 1e3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimum_is_read_from_iputils_summary() {
        let out = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n\n\
                   --- 127.0.0.1 ping statistics ---\n\
                   5 packets transmitted, 5 received, 0% packet loss, time 819ms\n\
                   rtt min/avg/max/mdev = 0.041/0.052/0.071/0.010 ms\n";
        assert_eq!(min_rtt(out), Some(Dur::from_micros(41)));
        let busybox = "round-trip min/avg/max = 1.250/2.000/3.100 ms\n";
        assert_eq!(min_rtt(busybox), Some(Dur::from_micros(1250)));
    }

    #[test]
    fn no_reply_gives_no_rtt() {
        let out = "PING 198.18.0.9 (198.18.0.9) 56(84) bytes of data.\n\n\
                   --- 198.18.0.9 ping statistics ---\n\
                   5 packets transmitted, 0 received, 100% packet loss, time 4096ms\n";
        assert_eq!(min_rtt(out), None);
        assert_eq!(min_rtt(""), None);
    }
}
