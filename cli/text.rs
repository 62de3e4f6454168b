//! How the commands write text: every line a person reads goes through
//! [`put`] (stdout) or [`warn`] (stderr), which escape what a terminal
//! would act on ([`escape`]); numbers, shapes and byte counts.

use std::borrow::Cow;
use std::io::Write;

/// `s` as a terminal shows it without acting on it: a backslash as `\\`
/// (except on Windows: [`ESCAPE_BACKSLASH`]), newline, carriage return
/// and tab as `\n`, `\r`, `\t`, every other control character (C0, DEL,
/// C1) as `\xHH` and the Unicode controls of text direction as
/// `\u{HHHH}`; everything else as it is. A tensor name or an error
/// message holding ESC or a newline (a file's bytes, under another's
/// control) cannot clear the screen, move the cursor or forge a line:
/// what is printed is one line per message, and tells `\n` in a name
/// (`\\n`) from a newline (`\n`).
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' if ESCAPE_BACKSLASH => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether a backslash is escaped (`\\`). Not on Windows, where it is
/// the path separator: every path the commands print would show doubled
/// (`C:\\models\\x.pt`). Windows file names cannot hold control
/// characters, so a path printed there is never ambiguous; a tensor name
/// holding a backslash followed by `n` then reads like one holding a
/// newline, which `ls --json` tells apart (docs/CLI.md).
pub const ESCAPE_BACKSLASH: bool = !cfg!(windows);

/// Whether [`escape`] changes `c`: a backslash (where
/// [`ESCAPE_BACKSLASH`]), a control character, or one of the
/// bidirectional controls (which reorder what a terminal or an editor
/// shows: "Trojan Source").
fn needs_escape(c: char) -> bool {
    (c == '\\' && ESCAPE_BACKSLASH)
        || c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The characters `s` takes once escaped (to align columns).
pub fn width(s: &str) -> usize {
    escape(s).chars().count()
}

/// Writes one line for people to `out`, escaped ([`escape`]): the one
/// way the commands write text to stdout (`ls --json` writes its JSON,
/// escaped by serde_json, with [`put_json`]).
pub fn put(out: &mut dyn Write, line: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    let line = line.to_string();
    writeln!(out, "{}", escape(&line))
}

/// Writes one line of JSON to `out` as it is (serde_json escapes every
/// control character in its strings).
pub fn put_json(out: &mut dyn Write, line: &str) -> std::io::Result<()> {
    writeln!(out, "{line}")
}

/// Writes one message line to stderr, escaped ([`escape`]): the one way
/// the commands write to stderr (the progress bars escape their
/// messages too).
pub fn warn(line: std::fmt::Arguments<'_>) {
    let line = line.to_string();
    eprintln!("{}", escape(&line));
}

/// `[2, 3]`, `[]` for a 0-dim tensor.
pub fn shape(sizes: &[i64]) -> String {
    let parts: Vec<String> = sizes.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// A byte count for people: `512 B`, `1.5 KiB`, `1.0 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A measured value: six significant digits at most, trailing zeros
/// dropped (`0.5`, `1.953125e-3` as `0.00195312`), exponent form outside
/// 1e-3..1e6.
pub fn number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-3..6).contains(&mag) {
        return format!("{x:.4e}");
    }
    let s = format!("{x:.*}", (5 - mag).max(0) as usize);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// `n thing` or `n things`.
pub fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// The bytes of a tensor's elements (numel x itemsize).
pub fn tensor_bytes(t: &tessera::Tensor) -> u64 {
    (t.numel().max(0) as u64).saturating_mul(t.itemsize() as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_and_backslashes_are_shown_escaped() {
        use super::escape;
        assert_eq!(escape("model.0.weight"), "model.0.weight");
        assert_eq!(escape("naïve 名前"), "naïve 名前");
        assert_eq!(
            escape("a\x1b[2J\rtessera verify: ok\nb"),
            "a\\x1b[2J\\rtessera verify: ok\\nb"
        );
        assert_eq!(escape("tab\there"), "tab\\there");
        let backslash = if super::ESCAPE_BACKSLASH {
            "back\\\\slash\\\\n"
        } else {
            "back\\slash\\n"
        };
        assert_eq!(escape("back\\slash\\n"), backslash);
        assert_eq!(
            escape("C:\\m\\x.pt\n"),
            format!(
                "C:{0}m{0}x.pt\\n",
                if super::ESCAPE_BACKSLASH {
                    "\\\\"
                } else {
                    "\\"
                }
            )
        );
        assert_eq!(escape("\u{7f}\u{9b}31m\0"), "\\x7f\\x9b31m\\x00");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(super::width("a\nb"), 4);
    }

    /// Every line a command prints goes through text::put / text::warn
    /// (escaped): no other print in cli/.
    #[test]
    fn the_commands_print_only_through_put_and_warn() {
        let files = [
            ("convert.rs", include_str!("convert.rs")),
            ("diff.rs", include_str!("diff.rs")),
            ("fail.rs", include_str!("fail.rs")),
            ("input.rs", include_str!("input.rs")),
            ("ls.rs", include_str!("ls.rs")),
            ("main.rs", include_str!("main.rs")),
            ("memory_view.rs", include_str!("memory_view.rs")),
            ("progress.rs", include_str!("progress.rs")),
            ("verify.rs", include_str!("verify.rs")),
        ];
        for (name, src) in files {
            for m in [
                "println!",
                "print!",
                "eprintln!",
                "eprint!",
                "writeln!",
                "write!(",
            ] {
                assert!(
                    !src.contains(m),
                    "cli/{name} prints with {m}: print through text::put / text::warn"
                );
            }
        }
    }

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(super::bytes(0), "0 B");
        assert_eq!(super::bytes(1023), "1023 B");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(1 << 30), "1.0 GiB");
        assert_eq!(super::shape(&[]), "[]");
        assert_eq!(super::shape(&[2, 3]), "[2, 3]");
        assert_eq!(super::number(0.5), "0.5");
        assert_eq!(super::number(2.0), "2");
        assert_eq!(super::number(1.953125e-3), "0.00195312");
        assert_eq!(super::number(123456789.0), "1.2346e8");
        assert_eq!(super::number(f64::INFINITY), "inf");
    }
}
