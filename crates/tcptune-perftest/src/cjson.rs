//! JSON numbers as iperf3 writes them. iperf3 prints through cJSON, which writes a double with
//! no fractional part without one (`"start": 0`, `"lost_percent": 0`, `"omit": 1`), where
//! serde_json writes `0.0`; a script that checks types (or compares with `==` on the text)
//! sees the difference. This formatter writes such doubles as integers and leaves everything
//! else to the wrapped formatter (pretty for `-J`, compact for `--json-stream`).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

/// The largest magnitude below which every integral double is exactly an integer (2^53);
/// larger ones keep serde_json's form, as cJSON switches to `%g` there too.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// A formatter that writes integral doubles as cJSON does and delegates the rest.
pub struct CJson<F>(pub F);

impl<F: Formatter> Formatter for CJson<F> {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
        if v.is_finite() && v.fract() == 0.0 && v.abs() < EXACT {
            self.0.write_i64(w, v as i64)
        } else {
            self.0.write_f64(w, v)
        }
    }
    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
        self.write_f64(w, v as f64)
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Writes `value` as iperf3's `-J` does: indented, integral doubles as integers.
pub fn write_pretty<W: Write, T: Serialize + ?Sized>(w: W, value: &T) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, CJson(PrettyFormatter::new()));
    value.serialize(&mut ser)
}

/// `value` on one line (a `--json-stream` event), integral doubles as integers.
pub fn to_compact<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, CJson(CompactFormatter));
    // Writing into a Vec fails only if `value`'s Serialize does, which ours never do.
    let _ = value.serialize(&mut ser);
    String::from_utf8(out).unwrap_or_default()
}

/// A `-J` document (`TestOutput` as JSON) with only the keys iperf3 3.12 writes, so a script
/// checking key paths sees iperf3's: `start`'s (`iperf3_start_keys`) and each interval's
/// (`iperf3_interval_keys`). tcptune's own `tcptune` key stays (iperf3's readers skip it).
pub fn iperf3_keys(doc: &mut serde_json::Value) {
    if let Some(start) = doc.get_mut("start") {
        iperf3_start_keys(start);
    }
    if let Some(iv) = doc.get_mut("intervals").and_then(|v| v.as_array_mut()) {
        iv.iter_mut().for_each(iperf3_interval_keys);
    }
}

/// `start` as iperf3 3.12 writes it: no `test_start.bidir` (later releases add it), and no
/// `tcp_mss_default` in a UDP test.
pub fn iperf3_start_keys(start: &mut serde_json::Value) {
    let udp = start["test_start"]["protocol"] == "UDP";
    if let Some(ts) = start.get_mut("test_start").and_then(|v| v.as_object_mut()) {
        ts.remove("bidir");
    }
    if let Some(s) = start.as_object_mut().filter(|_| udp) {
        s.remove("tcp_mss_default");
    }
}

/// An interval as iperf3 writes it: a receiving stream has no RTT, path MTU or window figures
/// (iperf3 takes them from the sender's tcp_info only).
pub fn iperf3_interval_keys(interval: &mut serde_json::Value) {
    let Some(streams) = interval.get_mut("streams").and_then(|v| v.as_array_mut()) else {
        return;
    };
    for s in streams {
        if s["sender"] == false {
            if let Some(m) = s.as_object_mut() {
                for k in ["rtt", "rttvar", "pmtu", "rcv_wnd", "snd_wnd", "snd_cwnd"] {
                    m.remove(k);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integral_doubles_are_written_as_cjson_writes_them() {
        let v = json!({"start": 0.0, "end": 1.000046, "omit": 1.0, "bytes": 123_u64,
                       "big": 1e300, "neg": -2.0, "list": [0.5, 3.0]});
        let s = to_compact(&v);
        assert_eq!(
            s,
            r#"{"big":1e+300,"bytes":123,"end":1.000046,"list":[0.5,3],"neg":-2,"omit":1,"start":0}"#
        );
        // The same value back, number for number.
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["end"], 1.000046);
        let mut pretty = Vec::new();
        write_pretty(&mut pretty, &v).unwrap();
        let pretty = String::from_utf8(pretty).unwrap();
        assert!(pretty.contains("\n  \"start\": 0\n"), "{pretty}");
    }

    #[test]
    fn only_iperf3s_keys_under_j() {
        let mut doc = serde_json::json!({
            "start": {"tcp_mss_default": 1448, "test_start": {"protocol": "UDP", "bidir": 0}},
            "intervals": [{"streams": [
                {"sender": false, "rtt": 10, "rcv_wnd": 5, "bytes": 1},
                {"sender": true, "rtt": 10, "bytes": 1}
            ]}],
            "tcptune": {}
        });
        iperf3_keys(&mut doc);
        assert_eq!(
            doc,
            serde_json::json!({
                "start": {"test_start": {"protocol": "UDP"}},
                "intervals": [{"streams": [
                    {"sender": false, "bytes": 1},
                    {"sender": true, "rtt": 10, "bytes": 1}
                ]}],
                "tcptune": {}
            })
        );
    }
}
