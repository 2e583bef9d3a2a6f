//! Building replies and reading requests: the helpers handlers (and the server's own 401)
//! use, over tiny_http's types.

use tiny_http::{Header, Request, Response, ResponseBox};

/// What a handler answers: any tiny_http response, boxed (a body may be a stream).
pub type Reply = ResponseBox;

/// A header; names and values that are not valid header text become `X-Invalid: 1` (callers
/// pass ASCII constants and formatted numbers).
pub fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|_| Header::from_bytes("X-Invalid", "1").expect("ASCII header"))
}

/// A body with its content type and status.
pub fn body(code: u16, content_type: &str, bytes: Vec<u8>) -> Reply {
    Response::from_data(bytes)
        .with_status_code(code)
        .with_header(header("Content-Type", content_type))
        .boxed()
}

/// A plain-text reply.
pub fn text(code: u16, body: impl Into<String>) -> Reply {
    self::body(code, "text/plain; charset=utf-8", body.into().into_bytes())
}

/// A request header's value (the first of that name, case-insensitive).
pub fn request_header<'r>(req: &'r Request, name: &str) -> Option<&'r str> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// A query parameter's raw value (`None` when absent; not percent-decoded).
pub fn query<'u>(url: &'u str, name: &str) -> Option<&'u str> {
    let query = url.split_once('?').map(|(_, q)| q)?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then_some(v)
    })
}

/// The URL's path, without its query.
pub fn path(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_path_are_split() {
        assert_eq!(query("/c", "top"), None);
        assert_eq!(query("/c?top=3", "top"), Some("3"));
        assert_eq!(query("/c?x=1&top=1000", "top"), Some("1000"));
        assert_eq!(query("/c?top", "top"), Some(""));
        assert_eq!(path("/c?top=3"), "/c");
        assert_eq!(path("/"), "/");
    }
}
