//! TESSERA_ALLOC_CONF: allocator settings from the environment, in the
//! style of PYTORCH_ALLOC_CONF (`key:value,key:value`), read once, when
//! the built-in CPU allocator is first made (in practice, the first
//! allocation). Keys (docs/SEMANTICS.md "TESSERA_ALLOC_CONF"):
//!
//! | key | value | effect |
//! |---|---|---|
//! | `record_history` | `true` / `false` | start memory history at start-up |
//! | `max_entries` | integer >= 1 | its ring's capacity (default 100000) |
//! | `backtraces` | `true` / `false` | capture a backtrace per allocation |
//! | `cpu_cache_limit_mb` | integer >= 0 | per-thread CPU cache budget, MiB (0: off) |
//! | `zero_fill` / `junk_fill` / `huge_pages` | `true` / `false` | the CPU allocator's options |
//! | `max_split_size_mb` | integer > 1 | caching allocators' default max_split_size, MiB |
//! | `expandable_segments` | `true` / `false` | caching allocators' default (c10's key) |
//! | `roundup_power2_divisions` | `N` or `[MiB:N,...,>:N]` | their default rounding (c10's) |
//! | `garbage_collection_threshold` | a fraction in (0, 1) | their default (c10's) |
//! | `max_non_split_rounding_mb` | integer > 20 | their default (c10's) |
//!
//! Entries are separated by commas outside brackets (the list form of
//! `roundup_power2_divisions` has commas of its own).
//!
//! An unknown key or a bad value is not fatal: a warning naming the key,
//! the value and what is accepted goes to stderr (the variable is read
//! where no caller could receive an error), and the other keys apply. A
//! value that is not UTF-8 is warned about the same way (shown lossily)
//! and ignored as a whole.

use super::roundup::RoundupDivisions;
use std::sync::OnceLock;

/// The settings read from TESSERA_ALLOC_CONF.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocConf {
    /// Start memory history at start-up.
    pub record_history: Option<bool>,
    /// The ring's capacity.
    pub max_entries: Option<usize>,
    /// Backtraces with each allocation.
    pub backtraces: Option<bool>,
    /// Per-thread CPU cache budget, bytes.
    pub cpu_cache_limit: Option<usize>,
    /// The CPU allocator's zero fill.
    pub zero_fill: Option<bool>,
    /// The CPU allocator's junk fill.
    pub junk_fill: Option<bool>,
    /// The CPU allocator's huge pages.
    pub huge_pages: Option<bool>,
    /// Caching allocators' default max_split_size, bytes.
    pub max_split_size: Option<usize>,
    /// Caching allocators' default for expandable segments.
    pub expandable_segments: Option<bool>,
    /// Caching allocators' default rounding.
    pub roundup_power2_divisions: Option<RoundupDivisions>,
    /// Caching allocators' default garbage-collection threshold.
    pub garbage_collection_threshold: Option<f64>,
    /// Caching allocators' default max_non_split_rounding, bytes.
    pub max_non_split_rounding: Option<usize>,
}

/// The accepted keys, for messages.
pub const KEYS: &str = "record_history, max_entries, backtraces, cpu_cache_limit_mb, zero_fill, \
                        junk_fill, huge_pages, max_split_size_mb, expandable_segments, \
                        roundup_power2_divisions, garbage_collection_threshold, \
                        max_non_split_rounding_mb";

/// c10's smallest max_non_split_rounding_mb is more than this (its
/// kLargeBuffer, 20 MiB).
pub const MIN_NON_SPLIT_ROUNDING_MB: usize = 20;

/// The default ring capacity when record_history is on.
pub const DEFAULT_MAX_ENTRIES: usize = 100_000;

fn boolean(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "true" | "1" | "True" => Ok(true),
        "false" | "0" | "False" => Ok(false),
        _ => Err(format!(
            "TESSERA_ALLOC_CONF: bad value '{v}' for key '{key}': expected true or false"
        )),
    }
}

fn integer(key: &str, v: &str, min: usize, what: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!(
            "TESSERA_ALLOC_CONF: bad value '{v}' for key '{key}': expected {what}"
        )),
    }
}

fn mib(key: &str, n: usize) -> Result<usize, String> {
    n.checked_mul(1 << 20)
        .ok_or_else(|| format!("TESSERA_ALLOC_CONF: bad value '{n}' for key '{key}': too large"))
}

/// A fraction strictly between 0 and 1.
fn fraction(key: &str, v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
        _ => Err(format!(
            "TESSERA_ALLOC_CONF: bad value '{v}' for key '{key}': expected a fraction between 0 \
             and 1 (both excluded)"
        )),
    }
}

/// The entries of a value: split at commas outside brackets.
fn entries(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, ch) in text.char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// Parses a TESSERA_ALLOC_CONF value: the settings, and a message for each
/// entry that could not be applied.
pub fn parse(text: &str) -> (AllocConf, Vec<String>) {
    let mut c = AllocConf::default();
    let mut errors = Vec::new();
    for entry in entries(text)
        .into_iter()
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let Some((key, value)) = entry.split_once(':') else {
            errors.push(format!(
                "TESSERA_ALLOC_CONF: entry '{entry}' has no ':': expected key:value"
            ));
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let r: Result<(), String> = match key {
            "record_history" => boolean(key, value).map(|b| c.record_history = Some(b)),
            "backtraces" => boolean(key, value).map(|b| c.backtraces = Some(b)),
            "zero_fill" => boolean(key, value).map(|b| c.zero_fill = Some(b)),
            "junk_fill" => boolean(key, value).map(|b| c.junk_fill = Some(b)),
            "huge_pages" => boolean(key, value).map(|b| c.huge_pages = Some(b)),
            "max_entries" => {
                integer(key, value, 1, "an integer >= 1").map(|n| c.max_entries = Some(n))
            }
            "cpu_cache_limit_mb" => integer(key, value, 0, "a number of MiB (0: no cache)")
                .and_then(|n| mib(key, n))
                .map(|n| c.cpu_cache_limit = Some(n)),
            "max_split_size_mb" => integer(key, value, 2, "a number of MiB > 1")
                .and_then(|n| mib(key, n))
                .map(|n| c.max_split_size = Some(n)),
            "expandable_segments" => boolean(key, value).map(|b| c.expandable_segments = Some(b)),
            "roundup_power2_divisions" => RoundupDivisions::parse(value)
                .map(|d| c.roundup_power2_divisions = Some(d))
                .map_err(|e| format!("TESSERA_ALLOC_CONF: {e}")),
            "garbage_collection_threshold" => {
                fraction(key, value).map(|x| c.garbage_collection_threshold = Some(x))
            }
            "max_non_split_rounding_mb" => integer(
                key,
                value,
                MIN_NON_SPLIT_ROUNDING_MB + 1,
                "a number of MiB > 20 (c10's smallest)",
            )
            .and_then(|n| mib(key, n))
            .map(|n| c.max_non_split_rounding = Some(n)),
            _ => Err(format!(
                "TESSERA_ALLOC_CONF: unknown key '{key}'; accepted keys: {KEYS}"
            )),
        };
        if let Err(e) = r {
            errors.push(e);
        }
    }
    if c.zero_fill == Some(true) && c.junk_fill == Some(true) {
        errors.push(
            "TESSERA_ALLOC_CONF: zero_fill and junk_fill are both true: expected at most one; \
             neither applied"
                .to_string(),
        );
        c.zero_fill = None;
        c.junk_fill = None;
    }
    (c, errors)
}

/// The warning for a value that is not UTF-8: no key can be read from
/// it, so the whole variable is ignored (shown lossily, U+FFFD for each
/// bad byte).
fn not_utf8(raw: &std::ffi::OsStr) -> String {
    format!(
        "TESSERA_ALLOC_CONF is not UTF-8: '{}'; expected UTF-8 key:value pairs, so the whole \
         variable",
        raw.to_string_lossy()
    )
}

/// The settings of this process, read and parsed once; the warnings go
/// to stderr then.
pub fn get() -> &'static AllocConf {
    static CONF: OnceLock<AllocConf> = OnceLock::new();
    CONF.get_or_init(|| {
        let Some(raw) = std::env::var_os("TESSERA_ALLOC_CONF") else {
            return AllocConf::default();
        };
        let (conf, errors) = match raw.to_str() {
            Some(text) => parse(text),
            None => (AllocConf::default(), vec![not_utf8(&raw)]),
        };
        for e in errors {
            eprintln!("tessera: warning: {e} (ignored)");
        }
        conf
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_parses() {
        let (c, errors) = parse(
            " record_history:true,max_entries:7,backtraces:false,cpu_cache_limit_mb:3,\
             zero_fill:1,huge_pages:true,max_split_size_mb:64,junk_fill:false,, ",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            c,
            AllocConf {
                record_history: Some(true),
                max_entries: Some(7),
                backtraces: Some(false),
                cpu_cache_limit: Some(3 << 20),
                zero_fill: Some(true),
                junk_fill: Some(false),
                huge_pages: Some(true),
                max_split_size: Some(64 << 20),
                ..AllocConf::default()
            }
        );
    }

    #[test]
    fn c10_keys_parse_without_warnings() {
        let (c, errors) = parse(
            "expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:8],\
             garbage_collection_threshold:0.6,max_non_split_rounding_mb:64",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(c.expandable_segments, Some(true));
        assert_eq!(
            c.roundup_power2_divisions,
            Some(RoundupDivisions::parse("[256:1,512:2,>:8]").unwrap())
        );
        assert_eq!(c.garbage_collection_threshold, Some(0.6));
        assert_eq!(c.max_non_split_rounding, Some(64 << 20));
        let (c, errors) = parse("roundup_power2_divisions:4");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            c.roundup_power2_divisions,
            Some(RoundupDivisions::uniform(4).unwrap())
        );
        let (c, errors) = parse(
            "garbage_collection_threshold:1.0,max_non_split_rounding_mb:20,\
             roundup_power2_divisions:[256:3],expandable_segments:maybe",
        );
        assert_eq!(c, AllocConf::default());
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors[0].contains("'1.0' for key 'garbage_collection_threshold'"));
        assert!(errors[1].contains("'20' for key 'max_non_split_rounding_mb'"));
        assert!(errors[2].contains("divisions '3'"));
        assert!(errors[3].contains("'maybe' for key 'expandable_segments'"));
    }

    #[test]
    fn bad_entries_are_named_and_the_rest_applies() {
        let (c, errors) =
            parse("colour:blue,max_entries:0,backtraces:yes,huge_pages,zero_fill:true");
        assert_eq!(c.zero_fill, Some(true));
        assert_eq!(c.max_entries, None);
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors[0].contains("unknown key 'colour'") && errors[0].contains("max_entries"));
        assert!(errors[1].contains("'0' for key 'max_entries'") && errors[1].contains(">= 1"));
        assert!(
            errors[2].contains("'yes' for key 'backtraces'") && errors[2].contains("true or false")
        );
        assert!(errors[3].contains("'huge_pages' has no ':'"));
        let (c, errors) = parse("zero_fill:true,junk_fill:true,max_split_size_mb:1");
        assert_eq!(
            (c.zero_fill, c.junk_fill, c.max_split_size),
            (None, None, None)
        );
        assert_eq!(errors.len(), 2, "{errors:?}");
    }
}
