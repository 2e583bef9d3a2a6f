//! tracefs `format` files: an event's id and its fields' offsets and sizes, and the ring
//! buffer's page header (`events/header_page`). Offsets are read from the running kernel,
//! never assumed: struct layouts differ between kernel versions and configurations.

use std::collections::HashMap;

/// One field of an event record (or of the page header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Byte offset in the record.
    pub offset: usize,
    /// Size in bytes (an array's whole size).
    pub size: usize,
    /// Whether the kernel declares it signed.
    pub signed: bool,
}

/// An event's format: its id (the record's `common_type`) and fields by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// The event's name, e.g. `tcp_probe`.
    pub name: String,
    /// The id records carry as `common_type`.
    pub id: u16,
    /// The fields by name, `common_*` included.
    pub fields: HashMap<String, Field>,
}

/// Why a format file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// A field or the id is not in the format file.
    #[error("the format of {event} has no {what}")]
    Missing {
        /// The event whose format was read.
        event: String,
        /// What is missing: a field's name, or its id.
        what: String,
    },
    /// A line that is not `field: …; offset: …; size: …; signed: …;`.
    #[error("the format of {event} has an unreadable line: {line}")]
    BadLine {
        /// The event whose format was read.
        event: String,
        /// The line as read.
        line: String,
    },
}

impl EventFormat {
    /// Parses an event's `format` file.
    pub fn parse(text: &str) -> Result<EventFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields = HashMap::new();
        for line in text.lines().map(str::trim) {
            if let Some(n) = line.strip_prefix("name:") {
                name = Some(n.trim().to_string());
            } else if let Some(i) = line.strip_prefix("ID:") {
                id = i.trim().parse::<u16>().ok();
            } else if line.starts_with("field:") {
                let event = name.clone().unwrap_or_default();
                let (fname, f) = parse_field(line).ok_or_else(|| FormatError::BadLine {
                    event,
                    line: line.to_string(),
                })?;
                fields.insert(fname, f);
            }
        }
        let name = name.ok_or_else(|| FormatError::Missing {
            event: "an event".into(),
            what: "name".into(),
        })?;
        let id = id.ok_or_else(|| FormatError::Missing {
            event: name.clone(),
            what: "ID".into(),
        })?;
        Ok(EventFormat { name, id, fields })
    }

    /// A field that must be there, no larger than `max` bytes.
    pub fn field(&self, name: &str, max: usize) -> Result<Field, FormatError> {
        self.fields
            .get(name)
            .filter(|f| f.size <= max && f.size > 0)
            .cloned()
            .ok_or_else(|| FormatError::Missing {
                event: self.name.clone(),
                what: format!("field {name} of at most {max} bytes"),
            })
    }

    /// Whether the event has a field (e.g. `sock_cookie`, absent from some events).
    pub fn has(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }
}

/// `field:TYPE NAME[N];\toffset:O;\tsize:S;\tsigned:G;` → (NAME, Field).
fn parse_field(line: &str) -> Option<(String, Field)> {
    let mut parts = line.split(';').map(str::trim);
    let decl = parts.next()?.strip_prefix("field:")?;
    let name = decl.split_whitespace().last()?;
    let name = name.split('[').next()?.to_string();
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.parse().ok();
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = v == "1";
        }
    }
    Some((
        name,
        Field {
            offset: offset?,
            size: size?,
            signed,
        },
    ))
}

/// The ring buffer's page header, from `events/header_page`: where the page's time stamp,
/// its commit word (bytes written plus flags) and its data are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageHeader {
    /// The page's time stamp (the trace clock at the first event).
    pub timestamp: Field,
    /// The commit word: bytes of data, plus the missed-events flags.
    pub commit: Field,
    /// Where the event data begins.
    pub data: Field,
}

impl PageHeader {
    /// Parses `events/header_page` (the same line syntax as an event's fields).
    pub fn parse(text: &str) -> Result<PageHeader, FormatError> {
        let mut fields = HashMap::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with("field:") {
                let (n, f) = parse_field(line).ok_or_else(|| FormatError::BadLine {
                    event: "header_page".into(),
                    line: line.to_string(),
                })?;
                // `overwrite` shares the commit word's first byte: keep the first of a name.
                fields.entry(n).or_insert(f);
            }
        }
        let take = |n: &str, sizes: &[usize]| {
            fields
                .get(n)
                .filter(|f| sizes.contains(&f.size) || n == "data")
                .cloned()
                .ok_or_else(|| FormatError::Missing {
                    event: "header_page".into(),
                    what: format!("field {n}"),
                })
        };
        Ok(PageHeader {
            timestamp: take("timestamp", &[8])?,
            commit: take("commit", &[4, 8])?,
            data: take("data", &[])?,
        })
    }

    /// A page's whole size: the header and its data area (what one read of trace_pipe_raw
    /// returns at most).
    pub fn page_size(&self) -> usize {
        self.data.offset + self.data.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROBE: &str = include_str!("../../../../fixtures/kernel/6.18/trace/tcp_probe.format");
    const HEADER: &str = include_str!("../../../../fixtures/kernel/6.18/trace/header_page");

    #[test]
    fn parses_tcp_probe_of_6_18() {
        let f = EventFormat::parse(PROBE).unwrap();
        assert_eq!(f.name, "tcp_probe");
        assert_eq!(f.id, 2273);
        let at = |n: &str| f.fields[n].clone();
        assert_eq!(at("common_type").offset, 0);
        assert_eq!(at("common_type").size, 2);
        assert!(at("common_pid").signed);
        assert_eq!((at("saddr").offset, at("saddr").size), (8, 28));
        assert_eq!((at("sport").offset, at("dport").offset), (64, 66));
        assert_eq!((at("snd_cwnd").offset, at("snd_cwnd").size), (88, 4));
        assert_eq!((at("srtt").offset, at("rcv_wnd").offset), (100, 104));
        assert_eq!((at("sock_cookie").offset, at("sock_cookie").size), (112, 8));
        assert_eq!(at("skaddr").offset, 128);
        assert!(
            f.field("sock_cookie", 4).is_err(),
            "8 bytes do not fit in 4"
        );
        assert!(f.field("nope", 8).is_err());
    }

    #[test]
    fn parses_header_page() {
        let h = PageHeader::parse(HEADER).unwrap();
        assert_eq!((h.timestamp.offset, h.timestamp.size), (0, 8));
        assert_eq!((h.commit.offset, h.commit.size), (8, 8));
        assert_eq!(h.data.offset, 16);
        assert_eq!(h.page_size(), 4096);
    }

    #[test]
    fn refuses_a_format_without_id_or_with_a_broken_field() {
        assert!(matches!(
            EventFormat::parse("name: x\nformat:\n"),
            Err(FormatError::Missing { .. })
        ));
        let broken = "name: x\nID: 3\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\n";
        assert!(matches!(
            EventFormat::parse(broken),
            Err(FormatError::BadLine { .. })
        ));
        assert!(PageHeader::parse("field: u64 timestamp;\toffset:0;\tsize:8;\n").is_err());
    }
}
