//! The page and what it loads, embedded in the binary (no CDN: it works with no internet).
//! uPlot is vendored by `scripts/vendor-uplot` (which checks its sha256), with its licence.

/// (path, bytes, content type).
const ASSETS: &[(&str, &[u8], &str)] = &[
    (
        "/",
        include_bytes!("../assets/index.html"),
        "text/html; charset=utf-8",
    ),
    (
        "/assets/app.js",
        include_bytes!("../assets/app.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "/assets/app.css",
        include_bytes!("../assets/app.css"),
        "text/css; charset=utf-8",
    ),
    (
        "/assets/uPlot.iife.min.js",
        include_bytes!("../assets/uPlot.iife.min.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "/assets/uPlot.min.css",
        include_bytes!("../assets/uPlot.min.css"),
        "text/css; charset=utf-8",
    ),
    (
        "/assets/uPlot.LICENSE",
        include_bytes!("../assets/uPlot.LICENSE"),
        "text/plain; charset=utf-8",
    ),
];

/// An embedded file by its path.
pub fn find(path: &str) -> Option<(&'static [u8], &'static str)> {
    let path = if path == "/index.html" { "/" } else { path };
    ASSETS
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, b, t)| (*b, *t))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_asset_the_page_names_is_embedded() {
        let page = std::str::from_utf8(super::find("/").unwrap().0).unwrap();
        for (p, body, _) in super::ASSETS.iter().skip(1) {
            assert!(!body.is_empty(), "{p}");
            if p.ends_with(".js") || p.ends_with(".css") {
                assert!(page.contains(&p[1..]), "the page does not load {p}");
            }
        }
        assert!(super::find("/assets/nope.js").is_none());
    }
}
