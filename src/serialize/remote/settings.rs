//! How remote checkpoints are fetched, from the environment (read at
//! each open, so that a host can change them between opens):
//!
//! - `TSR_REMOTE_CONCURRENCY`: requests in flight in a load (default 8;
//!   a load's own `concurrency` option wins);
//! - `TSR_REMOTE_CHUNK_BYTES`: bytes a request (default 8 MiB; a load's
//!   `chunk_bytes` wins);
//! - `TSR_REMOTE_JOIN_GAP_BYTES`: records smaller than this and closer
//!   than this are fetched by one request (up to a request's bytes),
//!   each through a staging buffer, the gaps between them
//!   read and dropped (default 1 MiB; 0: a request a record);
//! - `TSR_REMOTE_TIMEOUT_MS`: the most one request may take, connection,
//!   headers and body (default 30000), and the time after which a request
//!   is no longer retried;
//! - `TSR_REMOTE_RETRIES`: retries of a request that failed on a 5xx, a
//!   reset or a timeout, with backoff (default 3).
//!
//! S3's settings are AWS's own variables, read by object_store
//! (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION`, `AWS_ALLOW_HTTP`, ...).

use super::RemoteSettings;
use crate::error::Result;
use std::time::Duration;

/// The defaults: 8 requests of 8 MiB (docs/PERFORMANCE.md, "Remote
/// loads"; runai-model-streamer's defaults too).
pub(crate) const DEFAULT_CONCURRENCY: usize = 8;
pub(crate) const DEFAULT_CHUNK: u64 = 8 << 20;
/// 1 MiB: at 20 ms a request and 8 in flight, joining records is worth
/// a gap read at up to 50 MB/s a stream (docs/PERFORMANCE.md, "Remote
/// loads").
pub(crate) const DEFAULT_JOIN_GAP: u64 = 1 << 20;
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub(crate) const DEFAULT_RETRIES: usize = 3;

/// The settings of one open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Settings {
    pub concurrency: usize,
    pub chunk: u64,
    pub join_gap: u64,
    pub timeout: Duration,
    pub retries: usize,
}

impl Settings {
    /// The settings the environment gives. Errors: `InvalidArgument`
    /// naming the variable, its value and what was expected.
    pub(crate) fn from_env() -> Result<Settings> {
        Settings::with(&RemoteSettings::default())
    }

    /// The settings `over` gives, the environment's where it gives none.
    pub(crate) fn with(over: &RemoteSettings) -> Result<Settings> {
        let setting = |name: &str, default: u64, lo: u64, hi: u64| match over.get(name) {
            Some(v) => parse(name, v, default, lo, hi),
            None => var(name, default, lo, hi),
        };
        Ok(Settings {
            concurrency: setting(
                "TSR_REMOTE_CONCURRENCY",
                DEFAULT_CONCURRENCY as u64,
                1,
                1024,
            )? as usize,
            chunk: setting("TSR_REMOTE_CHUNK_BYTES", DEFAULT_CHUNK, 4096, 1 << 30)?,
            join_gap: setting("TSR_REMOTE_JOIN_GAP_BYTES", DEFAULT_JOIN_GAP, 0, 1 << 30)?,
            timeout: Duration::from_millis(setting(
                "TSR_REMOTE_TIMEOUT_MS",
                DEFAULT_TIMEOUT_MS,
                1,
                86_400_000,
            )?),
            retries: setting("TSR_REMOTE_RETRIES", DEFAULT_RETRIES as u64, 0, 100)? as usize,
        })
    }
}

/// The integer in variable `name` (`default` when unset or empty),
/// within `[lo, hi]`.
fn var(name: &str, default: u64, lo: u64, hi: u64) -> Result<u64> {
    let Some(value) = std::env::var_os(name) else {
        return Ok(default);
    };
    parse(name, &value.to_string_lossy(), default, lo, hi)
}

/// The integer `text` of setting `name` (`default` when empty), within
/// `[lo, hi]`.
fn parse(name: &str, text: &str, default: u64, lo: u64, hi: u64) -> Result<u64> {
    if text.trim().is_empty() {
        return Ok(default);
    }
    match text.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => crate::bail!(
            InvalidArgument,
            "{name}={text:?}: expected an integer in [{lo}, {hi}] (or unset: {default})"
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn out_of_range_values_are_refused_naming_the_variable() {
        // A name no other test sets.
        std::env::set_var("TSR_TEST_REMOTE_SETTING", "0");
        let e = super::var("TSR_TEST_REMOTE_SETTING", 8, 1, 10).unwrap_err();
        assert!(e.message().contains("TSR_TEST_REMOTE_SETTING=\"0\""), "{e}");
        std::env::set_var("TSR_TEST_REMOTE_SETTING", " 7 ");
        assert_eq!(super::var("TSR_TEST_REMOTE_SETTING", 8, 1, 10).unwrap(), 7);
        std::env::remove_var("TSR_TEST_REMOTE_SETTING");
        assert_eq!(super::var("TSR_TEST_REMOTE_SETTING", 8, 1, 10).unwrap(), 8);
    }
}
