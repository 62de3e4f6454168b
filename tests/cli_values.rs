//! The CLI and a checkpoint's non-tensor values and left-out entries
//! (issue 68, items 2 and 3): `ls` prints the values (`--json` includes
//! them); a converted file does not carry the source's `tessera.skipped`
//! as its own (its provenance is counted under `tessera.source`), so
//! `ls`, `verify` and the next `convert` of it report nothing left out;
//! `verify` prints one summary line for left-out entries.
//!
//! The fixture tests/data/values/checkpoint.pt is torch.save's
//! (scripts/make_values_fixtures.py): values beside two tensors, and three
//! entries tessera leaves out (an argparse.Namespace, a float nan, a list
//! nested 40 deep).

#[path = "common/cli.rs"]
mod cli;

use cli::{tessera, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn checkpoint() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/values/checkpoint.pt")
}

fn left_out_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains("left out")).collect()
}

#[test]
fn ls_prints_values_and_json_includes_them() {
    let ckpt = checkpoint();
    let run = tessera(&["ls".as_ref(), ckpt.as_os_str()]).expect(0);
    assert!(run.stdout.contains("\n  values:\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("\n    global_step = 1234\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\n    hidden_dims = [64,128,256]\n"),
        "{}",
        run.stdout
    );
    let run = tessera(&["ls".as_ref(), "--json".as_ref(), ckpt.as_os_str()]).expect(0);
    let all: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let step = all
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "global_step")
        .expect("global_step listed");
    assert_eq!(step["value"], 1234);
    assert_eq!(step["format"], "torch");
}

#[test]
fn verify_prints_one_line_for_left_out_entries() {
    let ckpt = checkpoint();
    let run = tessera(&["verify".as_ref(), ckpt.as_os_str()]).expect(0);
    assert_eq!(
        left_out_lines(&run.stdout),
        [format!(
            "  left out: 3 values (tessera ls {} lists them)",
            ckpt.display()
        )],
        "{}",
        run.stdout
    );
}

#[test]
fn a_converted_file_does_not_carry_the_sources_left_out_list() {
    let dir = Scratch::new("values-provenance");
    let ckpt = checkpoint();
    for out in ["out.safetensors", "out.pt", "out.gguf"] {
        let out = dir.path(out);
        let run = tessera(&["convert".as_ref(), ckpt.as_os_str(), out.as_os_str()]).expect(0);
        assert!(
            run.stderr.contains(
                "left out 3 values (counted in the output's metadata key tessera.source)"
            ),
            "{}",
            run.stderr
        );
        // The new file: nothing left out of it, its provenance one key.
        let ls = tessera(&["ls".as_ref(), out.as_os_str()]).expect(0);
        assert_eq!(
            left_out_lines(&ls.stdout),
            Vec::<&str>::new(),
            "{}",
            ls.stdout
        );
        assert!(!ls.stdout.contains("tessera.skipped"), "{}", ls.stdout);
        let source = ls
            .stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("tessera.source: "))
            .unwrap_or_else(|| panic!("a tessera.source line: {}", ls.stdout));
        let source: Value = serde_json::from_str(source).expect("JSON");
        assert_eq!(source["file"], "checkpoint.pt");
        assert_eq!(source["format"], "torch");
        assert_eq!(source["left_out"], 3);
        assert!(
            ls.stdout.contains("\n    global_step = 1234\n"),
            "{}",
            ls.stdout
        );
        let verify = tessera(&["verify".as_ref(), out.as_os_str()]).expect(0);
        assert_eq!(left_out_lines(&verify.stdout), Vec::<&str>::new());
        // The next conversion has nothing to report left out.
        let again = dir.path("again.safetensors");
        let run = tessera(&["convert".as_ref(), out.as_os_str(), again.as_os_str()]).expect(0);
        assert_eq!(run.stderr, "", "{}", run.stderr);
        let ls = tessera(&["ls".as_ref(), again.as_os_str()]).expect(0);
        assert!(ls.stdout.contains("\"left_out\":3"), "{}", ls.stdout);
        assert!(
            ls.stdout.contains("\n    global_step = 1234\n"),
            "{}",
            ls.stdout
        );
    }
}
