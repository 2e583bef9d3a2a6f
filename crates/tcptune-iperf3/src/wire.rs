//! The bytes of iperf3's control protocol: the 37-byte cookie, the one-byte states, the
//! length-prefixed JSON frames, and the SERVER_ERROR payload.
//!
//! Everything here is bounded before it allocates: a JSON frame's length is checked against the
//! caller's limit before any buffer exists (iperf3's CVE-2023-38403 was a 0xFFFFFFFF length that
//! wrapped `hsize + 1` to zero), and bodies grow only as bytes actually arrive.

use std::fmt;

use serde_json::Value;

/// Bytes of a cookie on the wire: 36 characters and a NUL (iperf3's `COOKIE_SIZE`).
pub const COOKIE_LEN: usize = 37;

/// The characters iperf3's `make_cookie()` draws from.
pub const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// iperf3's limit on the parameters JSON (`MAX_PARAMS_JSON_STRING`).
pub const MAX_PARAMS_JSON: u32 = 8 * 1024;

/// Our limit on a results JSON without server output (iperf3 has none; 128 streams of results
/// are about 25 KiB).
pub const MAX_RESULTS_JSON: u32 = 1024 * 1024;

/// Our limit on a results JSON that carries the server's own output (`--get-server-output`).
pub const MAX_RESULTS_WITH_OUTPUT_JSON: u32 = 64 * 1024 * 1024;

/// Why bytes from the peer were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The cookie is not printable ASCII ended by a NUL.
    #[error("the cookie is not 36 printable characters followed by a NUL")]
    BadCookie,
    /// A state byte iperf3 never sends.
    #[error("unknown control state byte {0}")]
    UnknownState(i8),
    /// A JSON frame declares length 0.
    #[error("a JSON frame of length 0")]
    EmptyFrame,
    /// A JSON frame's declared length is over the limit.
    #[error("a JSON frame of {len} bytes exceeds the limit of {max}")]
    FrameTooLong {
        /// The declared length, bytes.
        len: u32,
        /// The limit, bytes.
        max: u32,
    },
    /// The frame is not valid UTF-8 JSON.
    #[error("the JSON frame is not UTF-8 JSON: {0}")]
    BadJson(String),
    /// The JSON is valid but not an object.
    #[error("the JSON frame is not an object")]
    NotAnObject,
}

/// A test cookie: identifies a test on the control connection and on every data connection.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie([u8; COOKIE_LEN]);

impl Cookie {
    /// A cookie from 36 random bytes (the caller owns the randomness, so this stays pure), mapped
    /// onto iperf3's 32-character alphabet as `make_cookie()` does.
    pub fn from_random(random: [u8; COOKIE_LEN - 1]) -> Cookie {
        let mut c = [0u8; COOKIE_LEN];
        for (out, r) in c.iter_mut().zip(random) {
            *out = COOKIE_ALPHABET[(r % 32) as usize];
        }
        Cookie(c)
    }

    /// A cookie as received. iperf3 compares cookies with `strncmp`, so only the bytes up to the
    /// first NUL count; we require that NUL (so the text is terminated) and printable ASCII
    /// before it, and normalise what follows it to zeros so equal cookies compare equal.
    pub fn from_wire(bytes: &[u8; COOKIE_LEN]) -> Result<Cookie, WireError> {
        let end = bytes
            .iter()
            .position(|&b| b == 0)
            .ok_or(WireError::BadCookie)?;
        if end == 0 || !bytes[..end].iter().all(|b| b.is_ascii_graphic()) {
            return Err(WireError::BadCookie);
        }
        let mut c = [0u8; COOKIE_LEN];
        c[..end].copy_from_slice(&bytes[..end]);
        Ok(Cookie(c))
    }

    /// The 37 bytes as sent on the wire, NUL included.
    pub fn as_bytes(&self) -> &[u8; COOKIE_LEN] {
        &self.0
    }

    /// The text before the NUL.
    pub fn as_str(&self) -> &str {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(COOKIE_LEN);
        // Invariant: both constructors only admit ASCII before the NUL.
        std::str::from_utf8(&self.0[..end]).unwrap_or("")
    }
}

impl fmt::Debug for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cookie({:?})", self.as_str())
    }
}

/// The one-byte states of the control connection (iperf3's `iperf_api.h`; a signed char).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Start the interval timers.
    TestStart,
    /// Start sending data.
    TestRunning,
    /// The client's time or byte count is up.
    TestEnd,
    /// The client is to send its parameters.
    ParamExchange,
    /// The client is to open the data connections.
    CreateStreams,
    /// The server ends the test early.
    ServerTerminate,
    /// The client ends the test early (Ctrl-C).
    ClientTerminate,
    /// Both sides are to send their results.
    ExchangeResults,
    /// The client is to print the results and answer IPERF_DONE.
    DisplayResults,
    /// The client is done; the server may close.
    IperfDone,
    /// The server is busy with another test or the cookie was wrong.
    AccessDenied,
    /// The server failed; `i_errno` and `errno` follow ([`ServerError`]).
    ServerError,
}

impl State {
    /// The byte on the wire.
    pub fn code(self) -> i8 {
        match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        }
    }

    /// The byte on the wire (the code as an unsigned byte).
    pub fn byte(self) -> u8 {
        self.code() as u8
    }

    /// The state a byte names. Codes iperf3 defines but never sends (3, 5–8, 15) are refused
    /// like unknown ones: a peer that sends them is not following the protocol.
    pub fn from_byte(b: u8) -> Result<State, WireError> {
        Ok(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            other => return Err(WireError::UnknownState(other)),
        })
    }
}

/// The two integers after a SERVER_ERROR state: iperf3's `i_errno` and the OS `errno`, each a
/// 4-byte big-endian int.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerError {
    /// iperf3's own error number (`i_errno`, see [`i_errno`]).
    pub i_errno: i32,
    /// The OS `errno` behind it, 0 when none.
    pub errno: i32,
}

impl ServerError {
    /// Bytes after the state byte: two 4-byte ints.
    pub const LEN: usize = 8;

    /// The state byte and both ints, ready to write.
    pub fn encode(self) -> [u8; 1 + Self::LEN] {
        let mut b = [0u8; 1 + Self::LEN];
        b[0] = State::ServerError.byte();
        b[1..5].copy_from_slice(&self.i_errno.to_be_bytes());
        b[5..9].copy_from_slice(&self.errno.to_be_bytes());
        b
    }

    /// The two ints from the bytes after the state byte.
    pub fn decode(b: &[u8; Self::LEN]) -> ServerError {
        ServerError {
            i_errno: i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            errno: i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

/// Some of iperf3's `i_errno` values (`enum iperf_errno` in `iperf_api.h`, explicit numbers),
/// for SERVER_ERROR replies that a stock client prints as its own message.
pub mod i_errno {
    /// "test duration too long".
    pub const DURATION: i32 = 5;
    /// "number of parallel streams too large".
    pub const NUM_STREAMS: i32 = 6;
    /// "block size too large".
    pub const BLOCK_SIZE: i32 = 7;
    /// "socket buffer size too large".
    pub const BUF_SIZE: i32 = 8;
    /// "MSS too large".
    pub const MSS: i32 = 10;
    /// "bogus value for --omit".
    pub const OMIT: i32 = 12;
    /// "invalid burst count".
    pub const BURST: i32 = 15;
    /// "bad TOS value".
    pub const BAD_TOS: i32 = 21;
    /// "unable to read from the control socket".
    pub const CTRL_READ: i32 = 108;
    /// "received an unknown control message".
    pub const MESSAGE: i32 = 110;
    /// "unable to receive parameters from client".
    pub const RECV_PARAMS: i32 = 114;
    /// "unable to receive results".
    pub const RECV_RESULTS: i32 = 117;
    /// "the client has terminated".
    pub const CLIENT_TERM: i32 = 119;
    /// "the server is busy running a test".
    pub const ACCESS_DENIED: i32 = 121;
    /// "stream has an invalid id".
    pub const STREAM_ID: i32 = 208;
}

/// A JSON frame as iperf3 writes it: a 4-byte big-endian length, then compact JSON text.
pub fn encode_json(value: &Value) -> Vec<u8> {
    let text = value.to_string();
    let mut out = Vec::with_capacity(4 + text.len());
    // JSON we write is far below 4 GiB; saturate rather than wrap if it ever were not.
    out.extend_from_slice(&u32::try_from(text.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// Reads one length-prefixed JSON object incrementally, refusing an empty or oversized length
/// before allocating for it.
#[derive(Debug)]
pub struct JsonFrameReader {
    max: u32,
    header: [u8; 4],
    have_header: usize,
    body: Option<(u32, Vec<u8>)>,
}

impl JsonFrameReader {
    /// A reader for one frame of at most `max` bytes of JSON.
    pub fn new(max: u32) -> JsonFrameReader {
        JsonFrameReader {
            max,
            header: [0; 4],
            have_header: 0,
            body: None,
        }
    }

    /// Consumes bytes from `input` (returning how many) until the frame is complete; then
    /// returns the parsed object. Bytes after the frame are left unconsumed.
    pub fn feed(
        &mut self,
        input: &[u8],
    ) -> (
        usize,
        Result<Option<serde_json::Map<String, Value>>, WireError>,
    ) {
        let mut used = 0;
        if self.body.is_none() {
            let take = (4 - self.have_header).min(input.len());
            self.header[self.have_header..self.have_header + take].copy_from_slice(&input[..take]);
            self.have_header += take;
            used += take;
            if self.have_header < 4 {
                return (used, Ok(None));
            }
            let len = u32::from_be_bytes(self.header);
            if len == 0 {
                return (used, Err(WireError::EmptyFrame));
            }
            if len > self.max {
                return (used, Err(WireError::FrameTooLong { len, max: self.max }));
            }
            // Grow with the data, not with the claim: a peer that announces 64 MiB and sends
            // nothing costs us nothing.
            self.body = Some((len, Vec::with_capacity((len as usize).min(64 * 1024))));
        }
        let Some((len, body)) = self.body.as_mut() else {
            return (used, Ok(None));
        };
        let want = *len as usize - body.len();
        let take = want.min(input.len() - used);
        body.extend_from_slice(&input[used..used + take]);
        used += take;
        if body.len() < *len as usize {
            return (used, Ok(None));
        }
        let parsed = match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => Ok(Some(map)),
            Ok(_) => Err(WireError::NotAnObject),
            Err(e) => Err(WireError::BadJson(e.to_string())),
        };
        (used, parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cookies_look_like_iperf3s() {
        let c = Cookie::from_random([0xff; 36]);
        assert_eq!(c.as_bytes().len(), 37);
        assert_eq!(c.as_bytes()[36], 0);
        assert_eq!(c.as_str(), "7".repeat(36)); // 255 % 32 = 31 → '7'
        let c = Cookie::from_random(std::array::from_fn(|i| i as u8));
        assert_eq!(&c.as_str()[..6], "abcdef");
        assert!(c.as_str().bytes().all(|b| COOKIE_ALPHABET.contains(&b)));
        assert_eq!(Cookie::from_wire(c.as_bytes()), Ok(c));
    }

    #[test]
    fn received_cookies_are_checked_and_compared_like_strncmp() {
        // An old-style cookie, shorter than 36 characters, with bytes after its NUL.
        let mut old = [0u8; 37];
        old[..33].copy_from_slice(b"SVR028.1555493204.059114.5f55c3f5");
        old[35] = b'x';
        let mut same = old;
        same[35] = b'y';
        assert_eq!(Cookie::from_wire(&old), Cookie::from_wire(&same));
        assert_eq!(Cookie::from_wire(&old).unwrap().as_str().len(), 33);
        assert_eq!(Cookie::from_wire(&[b'a'; 37]), Err(WireError::BadCookie)); // no NUL
        assert_eq!(Cookie::from_wire(&[0; 37]), Err(WireError::BadCookie)); // empty
        let mut ctl = [b'a'; 37];
        ctl[3] = b'\n';
        ctl[36] = 0;
        assert_eq!(Cookie::from_wire(&ctl), Err(WireError::BadCookie));
    }

    #[test]
    fn state_bytes() {
        for s in [
            State::TestStart,
            State::TestRunning,
            State::TestEnd,
            State::ParamExchange,
            State::CreateStreams,
            State::ServerTerminate,
            State::ClientTerminate,
            State::ExchangeResults,
            State::DisplayResults,
            State::IperfDone,
            State::AccessDenied,
            State::ServerError,
        ] {
            assert_eq!(State::from_byte(s.byte()), Ok(s));
        }
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        assert_eq!(State::ParamExchange.byte(), 9);
        for unused in [0u8, 3, 5, 6, 7, 8, 15, 17, 0x80] {
            assert!(State::from_byte(unused).is_err(), "{unused}");
        }
    }

    #[test]
    fn server_error_payload() {
        let e = ServerError {
            i_errno: 106,
            errno: -3,
        };
        let b = e.encode();
        assert_eq!(b[..5], [0xfe, 0, 0, 0, 106]);
        assert_eq!(ServerError::decode(b[1..].try_into().unwrap()), e);
    }

    #[test]
    fn frames_round_trip_in_any_chunking() {
        let v = serde_json::json!({"tcp": true, "time": 10, "title": "x"});
        let wire = encode_json(&v);
        assert_eq!(&wire[..4], &(wire.len() as u32 - 4).to_be_bytes());
        assert_eq!(&wire[4..], br#"{"tcp":true,"time":10,"title":"x"}"#);
        // Byte by byte, with a trailing state byte that must be left alone.
        let mut stream = wire.clone();
        stream.push(4);
        let mut r = JsonFrameReader::new(MAX_PARAMS_JSON);
        let mut got = None;
        let mut pos = 0;
        while got.is_none() {
            let (used, res) = r.feed(&stream[pos..pos + 1]);
            pos += used;
            got = res.unwrap();
        }
        assert_eq!(Value::Object(got.unwrap()), v);
        assert_eq!(pos, wire.len());
    }

    #[test]
    fn cve_2023_38403_lengths_are_refused_before_allocating() {
        let mut r = JsonFrameReader::new(MAX_PARAMS_JSON);
        let (used, res) = r.feed(&[0xff, 0xff, 0xff, 0xff, b'{']);
        assert_eq!(used, 4);
        assert_eq!(
            res,
            Err(WireError::FrameTooLong {
                len: u32::MAX,
                max: MAX_PARAMS_JSON
            })
        );
        let mut r = JsonFrameReader::new(MAX_PARAMS_JSON);
        assert_eq!(r.feed(&[0, 0, 0, 0]).1, Err(WireError::EmptyFrame));
        let mut r = JsonFrameReader::new(MAX_PARAMS_JSON);
        assert!(r.feed(&(MAX_PARAMS_JSON + 1).to_be_bytes()).1.is_err());
        // A large announced length that is allowed reserves only a small buffer up front.
        let mut r = JsonFrameReader::new(MAX_RESULTS_WITH_OUTPUT_JSON);
        assert_eq!(r.feed(&(60u32 << 20).to_be_bytes()).1, Ok(None));
        assert!(r.body.as_ref().unwrap().1.capacity() <= 64 * 1024);
    }

    #[test]
    fn bad_bodies() {
        let frame = |body: &[u8]| {
            let mut b = (body.len() as u32).to_be_bytes().to_vec();
            b.extend_from_slice(body);
            JsonFrameReader::new(MAX_PARAMS_JSON).feed(&b).1
        };
        assert_eq!(frame(b"[1,2]"), Err(WireError::NotAnObject));
        assert!(matches!(frame(b"{\"a\":"), Err(WireError::BadJson(_))));
        assert!(matches!(frame(&[0xff, 0xfe]), Err(WireError::BadJson(_))));
        assert!(matches!(frame(b"{}"), Ok(Some(_))));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut r = JsonFrameReader::new(256);
            let mut pos = 0;
            while pos < bytes.len() {
                let (used, res) = r.feed(&bytes[pos..]);
                pos += used;
                if !matches!(res, Ok(None)) || used == 0 {
                    break;
                }
            }
            let _ = State::from_byte(bytes.first().copied().unwrap_or(0));
            let mut c = [0u8; 37];
            for (d, s) in c.iter_mut().zip(&bytes) { *d = *s; }
            let _ = Cookie::from_wire(&c);
        }
    }
}
