//! Checkpoints behind URLs: `http://`, `https://` and `s3://BUCKET/KEY`
//! read wherever a path is (docs/FORMATS.md, "Remote checkpoints").
//! A URL is told from a path by its scheme; with the `remote` feature it
//! is opened through object_store ([`object::RemoteSource`], a
//! [`super::byte_source::ByteSource`] fetching ranges with concurrent
//! GETs) and indexed from its first bytes (and a zip's tail) like a file
//! ([`open`]); without it, refused.
//!
//! - [`settings`]: the environment's settings (concurrency, request size,
//!   timeout, retries).
//! - [`store`]: the lazily started runtime and the object stores.
//! - [`object`]: one object as a byte source.
//! - [`open`]: a URL's index: one object, a shard index and its shards, a
//!   DCP prefix; any other file spooled to a temporary file.
//! - [`save`]: saves to `s3://` URLs: written locally, then uploaded.

#[cfg(all(feature = "remote", target_os = "linux"))]
mod object;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod open;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod save;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod settings;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod store;

use super::ckpt_index::Index;
use super::formats::Format;
use super::LoadFlags;
use crate::error::Result;
use std::path::Path;

/// Settings for one open of a URL, over the environment's: the names
/// are the variables' (`TSR_REMOTE_CONCURRENCY`, `TSR_REMOTE_CHUNK_BYTES`,
/// `TSR_REMOTE_JOIN_GAP_BYTES`, `TSR_REMOTE_TIMEOUT_MS`, `TSR_REMOTE_RETRIES`, and AWS's `AWS_*`
/// variables object_store reads: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_SESSION_TOKEN`,
/// `AWS_ALLOW_HTTP`, ...); a value set here wins over the variable's.
/// Values are checked at the open that uses them; a local path ignores
/// them.
#[derive(Clone, Debug, Default)]
pub struct RemoteSettings {
    pairs: Vec<(String, String)>,
}

/// The tessera settings a [`RemoteSettings`] takes besides AWS's.
pub(crate) const TSR_SETTINGS: [&str; 5] = [
    "TSR_REMOTE_CONCURRENCY",
    "TSR_REMOTE_CHUNK_BYTES",
    "TSR_REMOTE_JOIN_GAP_BYTES",
    "TSR_REMOTE_TIMEOUT_MS",
    "TSR_REMOTE_RETRIES",
];

impl RemoteSettings {
    /// No settings: the environment's.
    pub fn new() -> RemoteSettings {
        RemoteSettings::default()
    }

    /// Sets `name` to `value` (a later set of the same name wins).
    /// Errors: `InvalidArgument` for a name that is neither one of
    /// tessera's remote settings nor an `AWS_` variable.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let aws = name.len() > 4
            && name.starts_with("AWS_")
            && name[4..]
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        crate::ensure!(
            TSR_SETTINGS.contains(&name) || aws,
            InvalidArgument,
            "unknown remote setting '{}': expected one of {} or an AWS_ variable              (AWS_ENDPOINT_URL, AWS_REGION, ...)",
            name.escape_debug(),
            TSR_SETTINGS.join(", ")
        );
        self.pairs.retain(|(n, _)| n != name);
        self.pairs.push((name.to_owned(), value.to_owned()));
        Ok(())
    }

    /// The value set for `name`, if any.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `AWS_` settings, in the order set.
    #[cfg_attr(not(all(feature = "remote", target_os = "linux")), allow(dead_code))]
    pub(crate) fn aws(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs
            .iter()
            .filter(|(n, _)| n.starts_with("AWS_"))
            .map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

/// The schemes read as URLs.
const SCHEMES: [&str; 3] = ["http://", "https://", "s3://"];

/// `path` as a URL when it starts with a scheme tessera reads
/// (case-insensitive), else None (a local path).
pub(crate) fn url_of(path: &Path) -> Option<&str> {
    let s = path.to_str()?;
    SCHEMES
        .iter()
        .any(|p| s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p))
        .then_some(s)
}

/// The index of the checkpoint at `url` (module documentation). Errors
/// name the URL (its credentials, if it holds any, left out).
#[cfg(all(feature = "remote", target_os = "linux"))]
pub(crate) fn open_index(
    url: &str,
    format: Format,
    flags: LoadFlags,
    settings: &RemoteSettings,
) -> Result<Index> {
    open::open_index(url, format, flags, settings)
}

/// The checkpoint at `url` copied to a temporary directory (removed when
/// the guard is dropped), and the path standing for `url` in it: what
/// `verify` checks.
#[cfg(all(feature = "remote", target_os = "linux"))]
pub(crate) fn download(url: &str, format: Format) -> Result<(open::Spool, std::path::PathBuf)> {
    open::download(url, format)
}

/// Saves through `save` (writing the checkpoint at the local path it is
/// given) to `url` (`s3://` only): the path `save` returned, as a URL.
#[cfg(all(feature = "remote", target_os = "linux"))]
pub(crate) fn save_to(
    url: &str,
    save: impl FnOnce(&Path) -> Result<std::path::PathBuf>,
) -> Result<std::path::PathBuf> {
    save::save_to(url, save).map_err(|e| {
        let shown = shown(url);
        if e.message().contains(&shown) {
            e
        } else {
            e.context(&shown)
        }
    })
}

/// Without the `remote` feature: refused.
#[cfg(not(all(feature = "remote", target_os = "linux")))]
pub(crate) fn save_to(
    url: &str,
    _save: impl FnOnce(&Path) -> Result<std::path::PathBuf>,
) -> Result<std::path::PathBuf> {
    Err(without("save to", url))
}

/// Without the `remote` feature: refused.
#[cfg(not(all(feature = "remote", target_os = "linux")))]
pub(crate) fn open_index(
    url: &str,
    _format: Format,
    _flags: LoadFlags,
    _settings: &RemoteSettings,
) -> Result<Index> {
    Err(without("open", url))
}

/// Without the `remote` feature: refused.
#[cfg(not(all(feature = "remote", target_os = "linux")))]
pub(crate) fn download(url: &str, _format: Format) -> Result<((), std::path::PathBuf)> {
    Err(without("open", url))
}

#[cfg(not(all(feature = "remote", target_os = "linux")))]
fn without(verb: &str, url: &str) -> crate::error::Error {
    let scheme = url.split("://").next().unwrap_or(url);
    crate::err!(
        Unsupported,
        "cannot {verb} {}: this tessera was built without the `remote` feature (Linux only): expected a \
         local path, or a build with `--features remote` ({scheme}:// URLs)",
        shown(url)
    )
}

/// `url` as messages show it: any user and password left out.
pub(crate) fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(url_of(Path::new("http://h/x")).is_some());
        assert!(url_of(Path::new("HTTPS://h/x")).is_some());
        assert!(url_of(Path::new("s3://b/k")).is_some());
        assert!(url_of(Path::new("./http://x")).is_none());
        assert!(url_of(Path::new("s3:/b")).is_none());
        assert!(url_of(Path::new("model.safetensors")).is_none());
    }

    #[test]
    fn settings_take_tessera_and_aws_names_only() {
        let mut s = RemoteSettings::new();
        s.set("TSR_REMOTE_RETRIES", "1").unwrap();
        s.set("AWS_REGION", "eu-west-1").unwrap();
        s.set("AWS_REGION", "us-east-1").unwrap();
        assert_eq!(s.get("AWS_REGION"), Some("us-east-1"));
        assert_eq!(s.aws().count(), 1);
        for bad in [
            "TSR_REMOTE_THREADS",
            "AWS_",
            "aws_region",
            "HOME",
            "AWS_REGION\n",
        ] {
            let e = s.set(bad, "x").unwrap_err();
            assert!(e.message().contains(&bad.escape_debug().to_string()), "{e}");
        }
    }

    #[test]
    fn credentials_are_left_out_of_shown_urls() {
        assert_eq!(shown("http://u:secret@h:1/a@b"), "http://h:1/a@b");
        assert_eq!(shown("s3://bucket/k"), "s3://bucket/k");
    }
}
