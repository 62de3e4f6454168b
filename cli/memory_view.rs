//! `tessera memory-view`: the memory viewer page (docs/memory_viewer.html)
//! with a snapshot in it, one file that opens in any browser, offline.

use crate::fail::{Fail, Outcome, DIFFERENT, UNREADABLE};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The viewer page, built into the command.
const VIEWER: &str = include_str!("../docs/memory_viewer.html");

/// The viewer's empty snapshot block, which the snapshot replaces (as
/// scripts/snapshot_report.py does).
const MARKER: &str = r#"<script type="application/json" id="snapshot"></script>"#;

/// What `--help` says after the options: what the command does, in
/// full, and examples (an `after_help`: a `long_about` would make clap
/// print every option on two lines, past a screen).
const DETAILS: &str = "\
The page shows the timeline of memory in use, the live blocks and the\n\
allocation sites.\n\
\n\
SNAPSHOT is what tsr_memory_snapshot wrote: tessera's JSON\n\
(TSR_SNAPSHOT_JSON) or the pickle of the TORCH form, or a pickle PyTorch\n\
wrote (pickle.dump of torch.cuda.memory._snapshot(), the file\n\
pytorch.org/memory_viz opens). The page holds everything it shows: no\n\
network, no other file.\n\
\n\
Example:\n\
\x20 tessera memory-view snapshot.pickle -o memory.html";

/// Make the memory viewer page of a memory snapshot
#[derive(clap::Args, Debug)]
#[command(after_help = DETAILS)]
pub struct Args {
    /// The snapshot file
    #[arg(value_name = "SNAPSHOT")]
    snapshot: PathBuf,
    /// The page to write
    #[arg(
        short = 'o',
        long = "output",
        value_name = "PAGE.html",
        required = true
    )]
    output: PathBuf,
}

/// The snapshot as tessera's JSON text.
fn snapshot_json(path: &Path) -> Result<String, Fail> {
    let unreadable = |why: String| Fail::new(UNREADABLE, format!("{}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| unreadable(format!("cannot open it: {e}")))?;
    if !meta.is_file() {
        return Err(unreadable(
            "not a regular file: expected a memory snapshot".into(),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| unreadable(format!("cannot read it: {e}")))?;
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    match start.map(|i| bytes[i]) {
        Some(b'{') => {
            let v: serde_json::Value =
                serde_json::from_slice(&bytes).map_err(|e| unreadable(format!("not JSON: {e}")))?;
            let format = v.get("format").and_then(|f| f.as_str());
            if format != Some("tessera-memory-snapshot") {
                return Err(unreadable(format!(
                    "JSON, but its \"format\" is {}: expected \"tessera-memory-snapshot\"",
                    v.get("format").map_or("missing".into(), |f| f.to_string())
                )));
            }
            String::from_utf8(bytes).map_err(|e| unreadable(format!("not UTF-8: {e}")))
        }
        Some(0x80) => tessera::allocator::snapshot::json_from_torch(&bytes)
            .map_err(|e| unreadable(e.message().to_owned())),
        _ => Err(unreadable(
            "neither a tessera JSON snapshot nor a pickled one (PyTorch's or tessera's TORCH \
             form)"
                .into(),
        )),
    }
}

/// `s` for an HTML attribute value.
fn attribute(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The page: the viewer with `json` in its snapshot block. `<` occurs in
/// JSON only inside strings, where `\u003c` means the same, so the block
/// cannot end early or open a comment.
fn page(json: &str, source: &str) -> String {
    let block = format!(
        r#"<script type="application/json" id="snapshot" data-source="{}">{}</script>"#,
        attribute(source),
        json.trim().replace('<', "\\u003c")
    );
    VIEWER.replacen(MARKER, &block, 1)
}

/// Writes `text` to `path` whole or not at all: a file beside it, renamed
/// over it when complete.
fn write_atomic(path: &Path, text: &str) -> Result<(), Fail> {
    let fail =
        |e: std::io::Error| Fail::new(DIFFERENT, format!("cannot write {}: {e}", path.display()));
    let name = path
        .file_name()
        .ok_or_else(|| Fail::new(DIFFERENT, format!("{}: not a file name", path.display())))?;
    let temp = path.with_file_name(format!(
        ".{}.tessera-tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::File::create_new(&temp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|_| std::fs::rename(&temp, path)) {
        let _ = std::fs::remove_file(&temp);
        return Err(fail(e));
    }
    Ok(())
}

pub fn run(args: Args) -> Outcome {
    debug_assert_eq!(VIEWER.matches(MARKER).count(), 1);
    let json = snapshot_json(&args.snapshot)?;
    let source = args
        .snapshot
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    write_atomic(&args.output, &page(&json, &source))?;
    Ok(ExitCode::SUCCESS)
}
