//! The `tessera` command against names made to act on a terminal: tensor
//! names, metadata, archive entry names and file paths holding ESC, CR,
//! newlines and backslashes. Every line the command prints is escaped
//! (`\x1b`, `\r`, `\n`, `\\` but on Windows; cli/text.rs): no control character reaches
//! the terminal, each message stays one line, and no forged line appears;
//! `ls --json` keeps the names exact (JSON escapes them itself).

#[path = "common/cli.rs"]
mod cli;

use cli::{f32s, safetensors, tessera, Scratch};
use serde_json::Value;
use std::io::Write;

/// Clears the screen, returns to the line's start, forges a line, and
/// ends in a backslash.
const HOSTILE: &str = "a\x1b[2J\rtessera verify: ok\nb\\";
/// HOSTILE as the command shows it (on Windows a backslash is shown as it
/// is: the path separator there; docs/CLI.md).
#[cfg(not(windows))]
const SHOWN: &str = r"a\x1b[2J\rtessera verify: ok\nb\\";
#[cfg(windows)]
const SHOWN: &str = r"a\x1b[2J\rtessera verify: ok\nb\";

/// Panics unless `text` holds no control character but the newlines
/// ending its lines, has `lines` lines, and none of them is forged.
#[track_caller]
fn inert(what: &str, text: &str, lines: usize) {
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{what}: a control character reaches the terminal: {text:?}"
    );
    assert_eq!(text.lines().count(), lines, "{what}: {text:?}");
    assert!(
        !text.lines().any(|l| l.starts_with("tessera verify: ok")),
        "{what}: a forged line: {text:?}"
    );
}

/// A safetensors file whose tensor and metadata carry HOSTILE.
fn hostile_file(dir: &Scratch, name: &str) -> std::path::PathBuf {
    let p = dir.path(name);
    safetensors(
        &p,
        &[(HOSTILE, "F32", &[2], f32s(&[1.0, 2.0]))],
        &[(HOSTILE, HOSTILE)],
    );
    p
}

#[test]
fn ls_shows_hostile_names_escaped_on_one_line_each() {
    let dir = Scratch::new("hostile-ls");
    let p = hostile_file(&dir, "h.safetensors");
    let r = tessera(&["ls", p.to_str().unwrap()]).expect(0);
    // The heading, the table's head and one row, "metadata:" and its one
    // key.
    inert("ls", &r.stdout, 5);
    assert!(
        r.stdout
            .lines()
            .nth(2)
            .unwrap()
            .starts_with(&format!("  {SHOWN}  Float")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!("    {SHOWN}: {SHOWN}\n")),
        "{}",
        r.stdout
    );
    // --json keeps the name exact.
    let r = tessera(&["ls", "--json", p.to_str().unwrap()]).expect(0);
    assert!(!r.stdout.contains('\x1b'), "{}", r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v[0]["name"], HOSTILE);
}

#[test]
fn messages_naming_hostile_entries_and_paths_stay_one_line() {
    let dir = Scratch::new("hostile-msg");
    // An npz whose entry (named HOSTILE) is not an npy array: refused,
    // naming the entry.
    let npz = dir.path("bad.npz");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&npz).unwrap());
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file(format!("{HOSTILE}.npy"), stored).unwrap();
    zip.write_all(b"not an npy array at all").unwrap();
    zip.finish().unwrap();
    for cmd in ["ls", "verify"] {
        let r = tessera(&[cmd, npz.to_str().unwrap()]);
        assert_ne!(r.code, 0, "{cmd}: {}", r.stderr);
        inert(cmd, &r.stderr, 1);
        inert(cmd, &r.stdout, 0);
    }
    // A missing file whose path carries HOSTILE.
    let missing = dir.path(&format!("{HOSTILE}.pt"));
    let r = tessera(&["verify", missing.to_str().unwrap()]).expect(3);
    inert("verify of a missing file", &r.stderr, 1);
    assert!(r.stderr.contains(SHOWN), "{}", r.stderr);
}

#[test]
fn verify_convert_and_diff_escape_what_they_name() {
    let dir = Scratch::new("hostile-cmds");
    let p = hostile_file(&dir, &format!("{HOSTILE}.safetensors"));
    let r = tessera(&["verify", p.to_str().unwrap()]).expect(0);
    inert("verify", &r.stdout, 1);
    assert!(r.stdout.starts_with("ok: "), "{}", r.stdout);

    let out = dir.path(&format!("{HOSTILE}.pt"));
    let r = tessera(&["convert", p.to_str().unwrap(), out.to_str().unwrap()]).expect(0);
    inert("convert", &r.stdout, 1);
    assert_eq!(r.stdout.matches(SHOWN).count(), 2, "{}", r.stdout);

    let other = dir.path("other.safetensors");
    safetensors(&other, &[("w", "F32", &[1], f32s(&[1.0]))], &[]);
    let r = tessera(&["diff", p.to_str().unwrap(), other.to_str().unwrap()]).expect(1);
    // HOSTILE only in a, w only in b, the summary.
    inert("diff", &r.stdout, 3);
    assert!(
        r.stdout.starts_with(&format!("{SHOWN}: only in ")),
        "{}",
        r.stdout
    );
}
