//! Certificates for TLS tests, made by the openssl CLI (scripts/deps): a CA, a server
//! certificate for 127.0.0.1 and localhost, and a client certificate, both signed by the CA
//! (P-256 keys, valid two days), in a directory the caller owns.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The files of one CA and the certificates it signed.
pub struct Certs {
    dir: PathBuf,
    tag: String,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl (scripts/deps) runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Certs {
    /// Makes `TAG-ca.pem`, `TAG-server.pem`/`.key` and `TAG-client.pem`/`.key` in `dir`.
    pub fn make(dir: &Path, tag: &str) -> Certs {
        let c = Certs {
            dir: dir.to_path_buf(),
            tag: tag.to_string(),
        };
        let ca_subj = format!("/CN=tt-{tag}-ca");
        let ca = c.name("ca.pem");
        let ca_key = c.name("ca.key");
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut args = vec!["req", "-x509", "-days", "2", "-subj", ca_subj.as_str()];
        args.extend(ec);
        args.extend(["-keyout", ca_key.as_str(), "-out", ca.as_str()]);
        args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(dir, &args);
        for (who, ext) in [
            (
                "server",
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
            ),
            (
                "client",
                "subjectAltName=DNS:tt-client\nextendedKeyUsage=clientAuth\n",
            ),
        ] {
            let (key, csr, pem) = (
                c.name(&format!("{who}.key")),
                c.name(&format!("{who}.csr")),
                c.name(&format!("{who}.pem")),
            );
            let extfile = c.name(&format!("{who}.ext"));
            std::fs::write(
                dir.join(extfile.as_str()),
                format!("basicConstraints=CA:FALSE\n{ext}"),
            )
            .unwrap();
            let subj = format!("/CN=tt-{tag}-{who}");
            let mut args = vec![
                "req",
                "-subj",
                subj.as_str(),
                "-keyout",
                key.as_str(),
                "-out",
                csr.as_str(),
            ];
            args.extend(ec);
            openssl(dir, &args);
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    csr.as_str(),
                    "-CA",
                    ca.as_str(),
                    "-CAkey",
                    ca_key.as_str(),
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-extfile",
                    extfile.as_str(),
                    "-out",
                    pem.as_str(),
                ],
            );
        }
        c
    }

    fn name(&self, file: &str) -> String {
        format!("{}-{file}", self.tag)
    }

    /// A file's full path: `ca.pem`, `server.pem`, `server.key`, `client.pem`, `client.key`.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(self.name(file))
    }
}
