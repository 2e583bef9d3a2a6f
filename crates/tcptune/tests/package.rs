//! The packaged documentation: `tcptune _generate` writes a man page per command and the
//! shell completions, the pages render with man(1), the completions load in the shells, and
//! the Debian package's asset list (crates/tcptune/Cargo.toml) names exactly those files.
//! scripts/package builds the .deb itself and installs it in a fresh chroot.

use std::path::Path;
use std::process::Command;
use tcptune_testkit::TempDir;

fn tcptune(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .unwrap()
}

fn generate(what: &str, dir: &Path) -> Vec<String> {
    let out = tcptune(&["_generate", what, dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "_generate {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn installed(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn man_pages_exist_per_command_and_render() {
    let dir = TempDir::new("package-man");
    let pages = generate("man", dir.path());
    // Every visible command and subcommand has its page; hidden internals have none.
    for name in [
        "tcptune.1",
        "tcptune-test.1",
        "tcptune-serve.1",
        "tcptune-conns.1",
        "tcptune-model.1",
        "tcptune-model-bdp.1",
        "tcptune-lab-up.1",
        "tcptune-lab-run.1",
        "tcptune-analyze.1",
    ] {
        assert!(pages.contains(&name.to_string()), "no {name} in {pages:?}");
    }
    assert!(
        !pages.iter().any(|p| p.contains('_')),
        "a hidden command got a page: {pages:?}"
    );
    let out = Command::new("man")
        .arg("-l")
        .arg(dir.path().join("tcptune-test.1"))
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .output()
        .expect("man(1) is needed (scripts/deps installs man-db)");
    assert!(out.status.success(), "man -l tcptune-test.1 failed");
    let page = String::from_utf8_lossy(&out.stdout);
    // Rendered (no roff requests left) with the test's options and their help.
    assert!(page.contains("tcptune-test"), "{page}");
    assert!(page.contains("--parallel"), "{page}");
    assert!(page.contains("Parallel streams"), "{page}");
    assert!(!page.contains(".TH"), "{page}");
    // Exit codes and examples, on every page.
    assert!(page.contains("EXIT STATUS"), "{page}");
    assert!(page.contains("EXAMPLES"), "{page}");
    assert!(page.contains("tcptune test 198.18.0.2 -t 5"), "{page}");
    for name in &pages {
        let roff = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(roff.contains(".SH \"EXIT STATUS\""), "{name}");
        assert!(roff.contains(".SH EXAMPLES"), "{name}");
    }
}

#[test]
fn every_man_page_renders_without_warnings_on_an_ascii_terminal() {
    // A minimal system (the package's chroot) renders in the C locale: a UTF-8 character in
    // the help text (…, ×, √, ≤) must reach groff as a glyph it can draw there.
    let dir = TempDir::new("package-man-ascii");
    let pages = generate("man", dir.path());
    for name in &pages {
        let out = Command::new("man")
            .arg("-l")
            .arg(dir.path().join(name))
            .env("LANG", "C")
            .env("LC_ALL", "C")
            .env("MANWIDTH", "100")
            .env("MANPAGER", "cat")
            .output()
            .expect("man(1) is needed (scripts/deps installs man-db)");
        assert!(out.status.success(), "man -l {name} failed");
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(warnings.trim().is_empty(), "{name}: {warnings}");
    }
    let mathis = Command::new("man")
        .arg("-l")
        .arg(dir.path().join("tcptune-model-mathis.1"))
        .env("LC_ALL", "C")
        .env("MANPAGER", "cat")
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&mathis.stdout);
    assert!(page.contains("rate <= MSS/RTT"), "{page}");
}

#[test]
fn completions_load_in_each_shell() {
    let dir = TempDir::new("package-completions");
    let files = generate("completions", dir.path());
    assert_eq!(files, ["_tcptune", "tcptune.bash", "tcptune.fish"]);
    let bash = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p tcptune",
            dir.path().join("tcptune.bash").display()
        ))
        .output()
        .unwrap();
    assert!(bash.status.success(), "{bash:?}");
    let registered = String::from_utf8_lossy(&bash.stdout);
    assert!(
        registered.starts_with("complete ") && registered.trim_end().ends_with(" tcptune"),
        "{registered}"
    );
    // The completion offers the verbs (and not the hidden ones) for `tcptune <TAB>`.
    let words = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(tcptune ''); COMP_CWORD=1; COMP_LINE='tcptune '; \
             COMP_POINT=8; _tcptune tcptune '' tcptune; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            dir.path().join("tcptune.bash").display()
        ))
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&words.stdout);
    for verb in ["conns", "test", "serve", "lab", "model", "analyze"] {
        assert!(words.lines().any(|w| w == verb), "no {verb} in {words}");
    }
    assert!(!words.contains("_generate"), "{words}");
    if installed("zsh") {
        let zsh = Command::new("zsh")
            .arg("-c")
            .arg(format!(
                "fpath=({} $fpath); autoload -Uz compinit && compinit -u && (( $+_comps[tcptune] ))",
                dir.path().display()
            ))
            .output()
            .unwrap();
        assert!(zsh.status.success(), "{zsh:?}");
    } else {
        tcptune_testkit::skip_without_tool(
            "the zsh completion check",
            "zsh is not installed (scripts/deps installs it)",
        );
    }
    if installed("fish") {
        let fish = Command::new("fish")
            .arg("-c")
            .arg(format!(
                "source {}; complete -C 'tcptune lab '",
                dir.path().join("tcptune.fish").display()
            ))
            .output()
            .unwrap();
        let words = String::from_utf8_lossy(&fish.stdout);
        assert!(words.lines().any(|l| l.starts_with("up")), "{words}");
    } else {
        tcptune_testkit::skip_without_tool(
            "the fish completion check",
            "fish is not installed (scripts/deps installs it)",
        );
    }
}

/// The `[package.metadata.deb]` of crates/tcptune/Cargo.toml.
fn deb_metadata() -> toml_edit::Table {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let doc = toml_edit::ImDocument::parse(text).unwrap();
    doc["package"]["metadata"]["deb"]
        .as_table()
        .unwrap()
        .clone()
}

#[test]
fn the_package_ships_what_generate_writes_and_declares_its_dependencies() {
    let deb = deb_metadata();
    let depends = deb["depends"].as_str().unwrap();
    let suggests = deb["suggests"].as_str().unwrap();
    assert!(depends.split(", ").any(|d| d == "iproute2"), "{depends}");
    for tool in ["iperf3", "tcpdump", "chromium"] {
        assert!(suggests.split(", ").any(|d| d == tool), "{suggests}");
        assert!(!depends.contains(tool), "{tool} must only be suggested");
    }
    // Every generated file is matched by an asset, and every asset under target/release/man
    // or completions names a generated file: the package cannot miss or invent one.
    let man = TempDir::new("package-assets-man");
    let comp = TempDir::new("package-assets-completions");
    let generated: Vec<(String, String)> = generate("man", man.path())
        .into_iter()
        .map(|f| ("man".to_string(), f))
        .chain(
            generate("completions", comp.path())
                .into_iter()
                .map(|f| ("completions".to_string(), f)),
        )
        .collect();
    let assets: Vec<(String, String)> = deb["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_array().unwrap();
            (
                a.get(0).unwrap().as_str().unwrap().to_string(),
                a.get(1).unwrap().as_str().unwrap().to_string(),
            )
        })
        .collect();
    let matches = |pattern: &str, dir: &str, file: &str| {
        let Some(rest) = pattern.strip_prefix(&format!("target/release/{dir}/")) else {
            return false;
        };
        // scripts/package gzips the man pages before cargo-deb packs them.
        let rest = match dir {
            "man" => rest.strip_suffix(".gz").unwrap_or("(not gzipped)"),
            _ => rest,
        };
        match rest.strip_prefix('*') {
            Some(suffix) => file.ends_with(suffix),
            None => rest == file,
        }
    };
    for (dir, file) in &generated {
        assert!(
            assets.iter().any(|(src, _)| matches(src, dir, file)),
            "generated {dir}/{file} is not in the package"
        );
    }
    for (src, dest) in &assets {
        if let Some(dir) = ["man", "completions"]
            .into_iter()
            .find(|d| src.starts_with(&format!("target/release/{d}/")))
        {
            assert!(
                generated
                    .iter()
                    .any(|(d, f)| d == dir && matches(src, dir, f)),
                "asset {src} matches no generated file"
            );
        }
        if src.starts_with("target/release/man/") {
            assert_eq!(dest, "usr/share/man/man1/");
        }
    }
    let dests: Vec<&str> = assets.iter().map(|(_, d)| d.as_str()).collect();
    for d in [
        "usr/bin/",
        "usr/share/bash-completion/completions/tcptune",
        "usr/share/zsh/vendor-completions/",
        "usr/share/fish/vendor_completions.d/",
    ] {
        assert!(dests.contains(&d), "nothing installed into {d}");
    }
}

#[test]
fn json_is_refused_where_there_is_no_document() {
    let dir = TempDir::new("package-json");
    let target = dir.join("man");
    let out = tcptune(&["--json", "_generate", "man", target.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--json does not apply"), "{err}");
    assert!(
        !target.exists(),
        "refused, yet it wrote {}",
        target.display()
    );
}
