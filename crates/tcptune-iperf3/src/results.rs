//! The results each side sends after EXCHANGE_RESULTS (client first, then server), typed and
//! checked as iperf3's `get_results()` checks them: CPU figures and `sender_has_retransmits`
//! required, a `streams` array whose entries carry `id`, `bytes`, `retransmits`, `jitter`,
//! `errors` and `packets`, and `omitted_errors`/`omitted_packets` only as a pair.

use serde_json::{Map, Value};

use crate::params::MAX_STREAMS;

/// Why a results object was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultsError {
    /// A top-level field is missing or of the wrong type (the field, what it should be).
    #[error("results field '{0}' is missing or not {1}")]
    Field(&'static str, &'static str),
    /// A stream's field is missing or not a number.
    #[error("stream {index}: field '{field}' is missing or not a number")]
    StreamField {
        /// The stream's position in the list.
        index: usize,
        /// The field.
        field: &'static str,
    },
    /// Only one of `omitted_errors` and `omitted_packets` is present.
    #[error("stream {0}: omitted_errors and omitted_packets must come together")]
    OmittedPair(usize),
    /// More streams than a test can have.
    #[error("results list {0} streams, more than the 256 a test can have")]
    TooManyStreams(usize),
}

/// One stream's totals as the sending side reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResult {
    /// iperf3's stream id (1, 3, 4, 5, … in accept order).
    pub id: i64,
    /// Bytes sent (by a sender, minus omitted) or received.
    pub bytes: u64,
    /// Retransmitted segments; −1 when unknown (a receiver, or no tcp_info).
    pub retransmits: i64,
    /// UDP jitter, seconds (0 for TCP).
    pub jitter: f64,
    /// UDP lost datagrams (0 for TCP).
    pub errors: i64,
    /// UDP datagrams lost in the omitted period; sent only together with `omitted_packets`.
    pub omitted_errors: Option<i64>,
    /// UDP datagrams (0 for TCP).
    pub packets: i64,
    /// UDP datagrams of the omitted period (with `omitted_errors`).
    pub omitted_packets: Option<i64>,
    /// Seconds from the stream's start (iperf3 ≥ 3.2 sends them).
    pub start_time: Option<f64>,
    /// Seconds from the stream's start to its end.
    pub end_time: Option<f64>,
}

/// One side's results (`Default`: none, as before an exchange).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// CPU use during the test, percent.
    pub cpu_util_total: f64,
    /// User-space share of `cpu_util_total`, percent.
    pub cpu_util_user: f64,
    /// Kernel share of `cpu_util_total`, percent.
    pub cpu_util_system: f64,
    /// 1 if this side sent and could count retransmits, 0 if it could not, −1 if it only
    /// received.
    pub sender_has_retransmits: i64,
    /// The congestion control the data streams used, as this side read it.
    pub congestion_used: Option<String>,
    /// Per data stream totals.
    pub streams: Vec<StreamResult>,
    /// The server's own JSON report, when the client asked for it.
    pub server_output_json: Option<Value>,
    /// The server's text report, when the client asked for it and the server is not in JSON mode.
    pub server_output_text: Option<String>,
    /// tcptune's extension (key [`EXTENSION_KEY`]): a tcptune server's tcp_info samples of its
    /// data streams. iperf3's `get_results()` ignores keys it does not know, so a stock peer
    /// never sees it; it is kept as raw JSON here and typed by the layer that uses it.
    pub extension: Option<Value>,
}

/// The results key that carries [`Results::extension`].
pub const EXTENSION_KEY: &str = "tcptune";

fn number(m: &Map<String, Value>, key: &'static str) -> Option<f64> {
    m.get(key).and_then(Value::as_f64)
}

/// A whole number. iperf3 3.12 writes −1 through an unsigned conversion, as
/// 18446744073709551615: values above i64::MAX are read back as the two's-complement
/// negative they came from.
fn integer(m: &Map<String, Value>, key: &'static str) -> Option<i64> {
    let v = m.get(key)?;
    v.as_i64()
        .or_else(|| v.as_u64().map(|u| u as i64))
        .or_else(|| v.as_f64().map(|f| f as i64))
}

impl Results {
    /// Reads a peer's results object; the error names the field that is missing or mistyped.
    pub fn from_json(m: &Map<String, Value>) -> Result<Results, ResultsError> {
        let req = |k: &'static str| number(m, k).ok_or(ResultsError::Field(k, "a number"));
        let cpu_util_total = req("cpu_util_total")?;
        let cpu_util_user = req("cpu_util_user")?;
        let cpu_util_system = req("cpu_util_system")?;
        let sender_has_retransmits = integer(m, "sender_has_retransmits")
            .ok_or(ResultsError::Field("sender_has_retransmits", "a number"))?;
        let list = m
            .get("streams")
            .and_then(Value::as_array)
            .ok_or(ResultsError::Field("streams", "an array"))?;
        if list.len() > 2 * MAX_STREAMS as usize {
            return Err(ResultsError::TooManyStreams(list.len()));
        }
        let mut streams = Vec::with_capacity(list.len());
        for (index, s) in list.iter().enumerate() {
            let s = s.as_object().ok_or(ResultsError::StreamField {
                index,
                field: "(entry)",
            })?;
            let req = |field: &'static str| {
                integer(s, field).ok_or(ResultsError::StreamField { index, field })
            };
            let omitted_errors = integer(s, "omitted_errors");
            let omitted_packets = integer(s, "omitted_packets");
            if omitted_errors.is_some() != omitted_packets.is_some() {
                return Err(ResultsError::OmittedPair(index));
            }
            let bytes = s
                .get("bytes")
                .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f.max(0.0) as u64)))
                .ok_or(ResultsError::StreamField {
                    index,
                    field: "bytes",
                })?;
            streams.push(StreamResult {
                id: req("id")?,
                bytes,
                retransmits: req("retransmits")?,
                jitter: number(s, "jitter").ok_or(ResultsError::StreamField {
                    index,
                    field: "jitter",
                })?,
                errors: req("errors")?,
                omitted_errors,
                packets: req("packets")?,
                omitted_packets,
                start_time: number(s, "start_time"),
                end_time: number(s, "end_time"),
            });
        }
        let string = |k: &'static str| match m.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ResultsError::Field(k, "a string")),
        };
        Ok(Results {
            cpu_util_total,
            cpu_util_user,
            cpu_util_system,
            sender_has_retransmits,
            congestion_used: string("congestion_used")?,
            streams,
            server_output_json: m.get("server_output_json").cloned(),
            server_output_text: string("server_output_text")?,
            extension: m.get(EXTENSION_KEY).cloned(),
        })
    }

    /// The results object as iperf3's `send_results()` writes it.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("cpu_util_total".into(), self.cpu_util_total.into());
        m.insert("cpu_util_user".into(), self.cpu_util_user.into());
        m.insert("cpu_util_system".into(), self.cpu_util_system.into());
        m.insert(
            "sender_has_retransmits".into(),
            self.sender_has_retransmits.into(),
        );
        if let Some(c) = &self.congestion_used {
            m.insert("congestion_used".into(), Value::String(c.clone()));
        }
        if let Some(j) = &self.server_output_json {
            m.insert("server_output_json".into(), j.clone());
        }
        if let Some(t) = &self.server_output_text {
            m.insert("server_output_text".into(), Value::String(t.clone()));
        }
        if let Some(x) = &self.extension {
            m.insert(EXTENSION_KEY.into(), x.clone());
        }
        let streams = self
            .streams
            .iter()
            .map(|s| {
                let mut o = Map::new();
                o.insert("id".into(), s.id.into());
                o.insert("bytes".into(), s.bytes.into());
                o.insert("retransmits".into(), s.retransmits.into());
                o.insert("jitter".into(), s.jitter.into());
                o.insert("errors".into(), s.errors.into());
                if let (Some(e), Some(p)) = (s.omitted_errors, s.omitted_packets) {
                    o.insert("omitted_errors".into(), e.into());
                    o.insert("omitted_packets".into(), p.into());
                }
                o.insert("packets".into(), s.packets.into());
                if let Some(t) = s.start_time {
                    o.insert("start_time".into(), t.into());
                }
                if let Some(t) = s.end_time {
                    o.insert("end_time".into(), t.into());
                }
                Value::Object(o)
            })
            .collect();
        m.insert("streams".into(), Value::Array(streams));
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        // The shape iperf3 3.12 sends as a TCP sender with one stream.
        json!({
            "cpu_util_total": 12.5, "cpu_util_user": 0.5, "cpu_util_system": 12.0,
            "sender_has_retransmits": 1, "congestion_used": "cubic",
            "streams": [{
                "id": 1, "bytes": 12345678901u64, "retransmits": 3, "jitter": 0, "errors": 0,
                "omitted_errors": 0, "packets": 0, "omitted_packets": 0,
                "start_time": 0, "end_time": 10.0002
            }]
        })
    }

    #[test]
    fn a_stock_result_parses_and_round_trips() {
        let r = Results::from_json(sample().as_object().unwrap()).unwrap();
        assert_eq!(r.streams[0].bytes, 12_345_678_901);
        assert_eq!(r.streams[0].retransmits, 3);
        assert_eq!(r.congestion_used.as_deref(), Some("cubic"));
        let back = Results::from_json(r.to_json().as_object().unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn missing_or_mistyped_fields_are_refused() {
        let mut v = sample();
        v.as_object_mut().unwrap().remove("cpu_util_user");
        assert_eq!(
            Results::from_json(v.as_object().unwrap()),
            Err(ResultsError::Field("cpu_util_user", "a number"))
        );
        let mut v = sample();
        v["streams"][0]
            .as_object_mut()
            .unwrap()
            .remove("omitted_packets");
        assert_eq!(
            Results::from_json(v.as_object().unwrap()),
            Err(ResultsError::OmittedPair(0))
        );
        let mut v = sample();
        v["streams"][0]["bytes"] = json!("lots");
        assert!(Results::from_json(v.as_object().unwrap()).is_err());
        let mut v = sample();
        v["congestion_used"] = json!(7);
        assert!(Results::from_json(v.as_object().unwrap()).is_err());
        let mut v = sample();
        v["streams"] = json!(vec![v["streams"][0].clone(); 257]);
        assert_eq!(
            Results::from_json(v.as_object().unwrap()),
            Err(ResultsError::TooManyStreams(257))
        );
        // Pre-3.2 peers send neither omitted counts nor times: still accepted.
        let mut v = sample();
        for k in [
            "omitted_errors",
            "omitted_packets",
            "start_time",
            "end_time",
        ] {
            v["streams"][0].as_object_mut().unwrap().remove(k);
        }
        assert!(Results::from_json(v.as_object().unwrap()).is_ok());
    }
}
