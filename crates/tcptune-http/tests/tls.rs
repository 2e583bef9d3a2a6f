//! TLS served from a web configuration, checked with curl (scripts/deps) against certificates
//! openssl makes for the test: a client that trusts the CA gets the page; plain HTTP on the TLS
//! port gets Go's 400 and no page; client certificates, versions and basic auth are enforced;
//! wrong certificate or key files are one sentence; a renewed certificate is served without a
//! restart.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use tcptune_http::tiny_http::Request;
use tcptune_http::{bind, path, serve, text, Options, Serving, WebConfig, WebConfigFile};
use tcptune_testkit::certs::Certs;
use tcptune_testkit::TempDir;

fn start(dir: &Path, web: &str) -> Serving {
    let file = dir.join("web.yml");
    std::fs::write(&file, web).unwrap();
    let web = WebConfig::load(&file).unwrap();
    assert!(web.serves_tls());
    let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let handler = |req: &Request| text(200, format!("page {}\n", path(req.url())));
    let opts = Options {
        threads: 2,
        realm: "tls test".into(),
    };
    serve(l, web, handler, opts).unwrap()
}

/// curl over HTTPS trusting the test's CA: Ok(body) or Err(curl's exit code).
fn curl(certs: &Certs, s: &Serving, extra: &[&str]) -> Result<String, i32> {
    let out = Command::new("curl")
        .args(["-sS", "--fail-with-body", "--max-time", "20", "--cacert"])
        .arg(certs.path("ca.pem"))
        .args(extra)
        .arg(format!("{}/metrics?x=1", s.url()))
        .output()
        .expect("curl (scripts/deps) runs");
    match out.status.code() {
        Some(0) => Ok(String::from_utf8(out.stdout).unwrap()),
        code => Err(code.unwrap_or(-1)),
    }
}

fn plain_get(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    String::from_utf8_lossy(&resp).into_owned()
}

fn tls(c: &Certs) -> String {
    format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        c.path("server.pem").file_name().unwrap().to_str().unwrap(),
        c.path("server.key").file_name().unwrap().to_str().unwrap()
    )
}

#[test]
fn https_serves_the_page_and_plain_http_gets_a_400() {
    let dir = TempDir::new("http-tls");
    let c = Certs::make(&dir, "a");
    let s = start(&dir, &format!("{}  min_version: TLS13\n", tls(&c)));
    assert!(s.url().starts_with("https://127.0.0.1:"), "{}", s.url());
    assert_eq!(curl(&c, &s, &[]).as_deref(), Ok("page /metrics\n"));
    // Twice on one connection (keep-alive through the bridge).
    let url = format!("{}/again", s.url());
    assert_eq!(
        curl(&c, &s, &[url.as_str()]).as_deref(),
        Ok("page /again\npage /metrics\n")
    );
    let plain = plain_get(s.addr);
    assert!(plain.starts_with("HTTP/1.0 400 Bad Request\r\n"), "{plain}");
    assert!(plain.ends_with("Client sent an HTTP request to an HTTPS server.\n"));
    assert!(!plain.contains("page"), "{plain}");
    // min_version TLS13: a TLS 1.2-only client is refused (curl 35: handshake failed).
    assert!(curl(&c, &s, &["--tls-max", "1.2"]).is_err());
    // A client that does not trust the CA refuses the server (60: certificate problem).
    let untrusting = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert", "/dev/null"])
        .arg(format!("{}/metrics", s.url()))
        .output()
        .unwrap();
    assert!(!untrusting.status.success());
    s.stop();
}

#[test]
fn client_certificates_and_basic_auth_are_required_when_configured() {
    let dir = TempDir::new("http-mtls");
    let c = Certs::make(&dir, "a");
    let other = Certs::make(&dir, "b");
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = format!(
        "{}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: a-ca.pem\nbasic_auth_users:\n  alice: '{hash}'\n",
        tls(&c)
    );
    let s = start(&dir, &web);
    let cert = |who: &Certs| {
        [
            "--cert".to_string(),
            who.path("client.pem").display().to_string(),
            "--key".to_string(),
            who.path("client.key").display().to_string(),
        ]
    };
    let mine = cert(&c);
    let mine: Vec<&str> = mine.iter().map(String::as_str).collect();
    let theirs = cert(&other);
    let theirs: Vec<&str> = theirs.iter().map(String::as_str).collect();
    fn with_user<'a>(args: &[&'a str]) -> Vec<&'a str> {
        let mut v = args.to_vec();
        v.extend(["-u", "alice:s3cret"]);
        v
    }
    assert!(
        curl(&c, &s, &with_user(&[])).is_err(),
        "no client certificate"
    );
    assert!(
        curl(&c, &s, &with_user(&theirs)).is_err(),
        "a certificate of another CA"
    );
    assert_eq!(curl(&c, &s, &mine), Err(22), "no password: 401");
    assert_eq!(
        curl(&c, &s, &with_user(&mine)).as_deref(),
        Ok("page /metrics\n")
    );
    s.stop();
}

#[test]
fn wrong_certificate_or_key_files_are_one_sentence() {
    let dir = TempDir::new("http-badtls");
    Certs::make(&dir, "a");
    let other = Certs::make(&dir, "b");
    let load = |text: String| {
        let file = dir.join("web.yml");
        std::fs::write(&file, text).unwrap();
        WebConfig::load(&file).unwrap_err().to_string()
    };
    let e = load("tls_server_config:\n  cert_file: missing.pem\n  key_file: a-server.key\n".into());
    assert_eq!(
        e,
        format!(
            "cannot read the TLS certificate file {}: No such file or directory (os error 2)",
            dir.join("missing.pem").display()
        )
    );
    let e =
        load("tls_server_config:\n  cert_file: a-server.pem\n  key_file: a-server.pem\n".into());
    assert!(e.starts_with("the TLS key file"), "{e}");
    assert!(
        e.ends_with(
            "holds no unencrypted PEM private key (PKCS#8, RSA or EC); give the certificate's key"
        ),
        "{e}"
    );
    let e =
        load("tls_server_config:\n  cert_file: a-server.key\n  key_file: a-server.key\n".into());
    assert!(
        e.ends_with("holds no PEM certificate; give the server's certificate (chain) in PEM"),
        "{e}"
    );
    let e = load(format!(
        "tls_server_config:\n  cert_file: a-server.pem\n  key_file: {}\n",
        other.path("server.key").display()
    ));
    assert!(
        e.contains("check that the key file holds this certificate's key"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    let e = load("tls_server_config:\n  cert_file: a-server.pem\n  key_file: a-server.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: a-server.key\n".into());
    assert!(e.starts_with("the client CA file"), "{e}");
}

/// Writes `text` to `dir/name` the way configuration tools and certificate renewals do: a new
/// file renamed over the old one.
fn replace(dir: &Path, name: &str, text: &[u8]) {
    let tmp = dir.join(format!("{name}.new"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

#[test]
fn a_renewed_certificate_is_served_without_a_restart_and_tls_stays_on() {
    let dir = TempDir::new("http-renew");
    let (a, b) = (Certs::make(&dir, "a"), Certs::make(&dir, "b"));
    let install = |c: &Certs| {
        for (from, to) in [("server.pem", "now.pem"), ("server.key", "now.key")] {
            replace(&dir, to, &std::fs::read(c.path(from)).unwrap());
        }
    };
    install(&a);
    let file = dir.join("web.yml");
    replace(
        &dir,
        "web.yml",
        b"tls_server_config:\n  cert_file: now.pem\n  key_file: now.key\n",
    );
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = said.clone();
    let web = WebConfigFile::load(
        &file,
        Box::new(move |m| log.lock().unwrap().push(m.to_string())),
    )
    .unwrap();
    let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let handler = |req: &Request| text(200, format!("page {}\n", path(req.url())));
    let opts = Options {
        threads: 2,
        realm: "renew test".into(),
    };
    let s = serve(l, web, handler, opts).unwrap();
    assert_eq!(curl(&a, &s, &[]).as_deref(), Ok("page /metrics\n"));
    assert!(curl(&b, &s, &[]).is_err(), "a client trusting only B's CA");
    // Renewed: the certificate and key of CA B, in the files the configuration names.
    install(&b);
    assert_eq!(curl(&b, &s, &[]).as_deref(), Ok("page /metrics\n"));
    assert!(
        curl(&a, &s, &[]).is_err(),
        "the old certificate is no longer served"
    );
    assert_eq!(
        said.lock().unwrap().as_slice(),
        [format!(
            "the web config {} changed: reloaded",
            file.display()
        )]
    );
    // A configuration without TLS is refused: the listener speaks TLS until a restart.
    replace(&dir, "web.yml", b"");
    assert_eq!(curl(&b, &s, &[]).as_deref(), Ok("page /metrics\n"));
    let last = said.lock().unwrap().last().unwrap().clone();
    assert!(last.contains("turning TLS off needs a restart"), "{last}");
    s.stop();
}
