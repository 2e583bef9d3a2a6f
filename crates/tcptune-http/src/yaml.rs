//! The YAML the web configuration file uses, and no more: nested `key: value` maps by
//! indentation, lists (`- item` lines or `[a, b]`), quoted or plain one-line scalars and
//! comments. Anything else (block scalars, anchors, tabs) is refused with its line, so a file
//! is never half understood.

/// A value: a one-line scalar (empty for none), a list of scalars, or a map.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A one-line scalar, unquoted; empty for none.
    Scalar(String),
    /// A list of scalars, each with its line (1-based).
    List(Vec<(usize, String)>),
    /// A map, entries in file order.
    Map(Vec<Entry>),
}

/// A map entry with its line (1-based).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Line of the key, 1-based.
    pub line: usize,
    /// The key, unquoted.
    pub key: String,
    /// What follows the key (on its line or indented below).
    pub value: Value,
}

/// Why the text is not the YAML read here: the line and one sentence.
pub type Error = (usize, String);

struct Line<'a> {
    no: usize,
    indent: usize,
    body: &'a str,
}

/// A scalar without its quotes.
pub fn unquote(v: &str) -> &str {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// A line without its comment (a `#` at the start or after a space, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

fn lines(text: &str) -> Result<Vec<Line<'_>>, Error> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let body = strip_comment(raw).trim_end();
        if body.trim().is_empty() || body.trim() == "---" {
            continue;
        }
        let indent = body.len() - body.trim_start_matches(' ').len();
        if body[indent..].starts_with('\t') {
            return Err((n + 1, "indent with spaces, not tabs".into()));
        }
        out.push(Line {
            no: n + 1,
            indent,
            body: body.trim(),
        });
    }
    Ok(out)
}

/// Parses the text into its top-level map.
pub fn parse(text: &str) -> Result<Vec<Entry>, Error> {
    let lines = lines(text)?;
    let mut i = 0;
    let map = parse_map(&lines, &mut i, 0)?;
    if let Some(l) = lines.get(i) {
        return Err((l.no, "this line is indented less than its section".into()));
    }
    Ok(map)
}

fn is_item(body: &str) -> bool {
    body == "-" || body.starts_with("- ")
}

fn scalar(no: usize, v: &str) -> Result<String, Error> {
    if v.starts_with(['|', '>', '&', '*', '!', '{']) && v != "{}" {
        return Err((
            no,
            "block scalars, anchors, tags and inline maps are not supported; write the value on one line".into(),
        ));
    }
    Ok(unquote(v).to_string())
}

fn parse_map(lines: &[Line], i: &mut usize, indent: usize) -> Result<Vec<Entry>, Error> {
    let mut map = Vec::new();
    while let Some(l) = lines.get(*i) {
        if l.indent < indent {
            break;
        }
        if l.indent > indent {
            return Err((
                l.no,
                "this line is indented more than the key before it".into(),
            ));
        }
        if is_item(l.body) {
            return Err((l.no, "a list item where a 'key: value' was expected".into()));
        }
        let (k, v) = l
            .body
            .split_once(':')
            .ok_or_else(|| (l.no, "expected 'key: value'".to_string()))?;
        let (key, v) = (unquote(k).to_string(), v.trim());
        if map.iter().any(|e: &Entry| e.key == key) {
            return Err((l.no, format!("'{key}' is given twice")));
        }
        *i += 1;
        let value = if let Some(inner) = v.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or_else(|| {
                (
                    l.no,
                    "a list that opens with [ closes with ] on the same line".to_string(),
                )
            })?;
            let items = inner.split(',').map(str::trim).filter(|s| !s.is_empty());
            Value::List(items.map(|s| (l.no, unquote(s).to_string())).collect())
        } else if v == "{}" {
            Value::Map(Vec::new())
        } else if !v.is_empty() {
            Value::Scalar(scalar(l.no, v)?)
        } else {
            match lines.get(*i) {
                // A list may sit at its key's own indentation.
                Some(n) if n.indent >= indent && is_item(n.body) => parse_list(lines, i, n.indent)?,
                Some(n) if n.indent > indent => Value::Map(parse_map(lines, i, n.indent)?),
                _ => Value::Scalar(String::new()),
            }
        };
        map.push(Entry {
            line: l.no,
            key,
            value,
        });
    }
    Ok(map)
}

fn parse_list(lines: &[Line], i: &mut usize, indent: usize) -> Result<Value, Error> {
    let mut items = Vec::new();
    while let Some(l) = lines.get(*i) {
        if l.indent != indent || !is_item(l.body) {
            break;
        }
        items.push((l.no, scalar(l.no, l.body[1..].trim())?));
        *i += 1;
    }
    Ok(Value::List(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(line: usize, key: &str, value: Value) -> Entry {
        Entry {
            line,
            key: key.into(),
            value,
        }
    }

    #[test]
    fn maps_lists_and_scalars_nest_by_indentation() {
        let text = "---\n# c\ntls_server_config:\n  cert_file: \"a b.pem\" # note\n  cipher_suites:\n    - X\n    - 'Y'\n  curve_preferences: [P, Q]\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\nbasic_auth_users: {}\nlist:\n- z\n";
        let s = |v: &str| Value::Scalar(v.into());
        assert_eq!(
            parse(text).unwrap(),
            vec![
                e(
                    3,
                    "tls_server_config",
                    Value::Map(vec![
                        e(4, "cert_file", s("a b.pem")),
                        e(
                            5,
                            "cipher_suites",
                            Value::List(vec![(6, "X".into()), (7, "Y".into())])
                        ),
                        e(
                            8,
                            "curve_preferences",
                            Value::List(vec![(8, "P".into()), (8, "Q".into())])
                        ),
                    ])
                ),
                e(
                    9,
                    "http_server_config",
                    Value::Map(vec![e(
                        10,
                        "headers",
                        Value::Map(vec![e(11, "X-Frame-Options", s("deny"))])
                    )])
                ),
                e(12, "basic_auth_users", Value::Map(vec![])),
                e(13, "list", Value::List(vec![(14, "z".into())])),
            ]
        );
    }

    #[test]
    fn what_is_not_read_here_is_refused_with_its_line() {
        let err = |t: &str| parse(t).unwrap_err();
        assert_eq!(err("a:\n\tb: 1\n").0, 2);
        assert_eq!(err("a: 1\n  b: 2\n").0, 2);
        assert_eq!(err("a: |\n  x\n").0, 1);
        assert_eq!(err("a: 1\na: 2\n").1, "'a' is given twice");
        assert_eq!(err("a:\n    b: 1\n  c: 2\n").0, 3);
        assert_eq!(err("just text\n").1, "expected 'key: value'");
        assert_eq!(err("a: [x, y\n").0, 1);
    }
}
