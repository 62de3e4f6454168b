//! The runtime remote reads run on and the object stores they read:
//! one tokio runtime for the process, started on the first remote open
//! (never at library load), its threads named `tessera-remote`; an
//! object store per open (HTTP: the URL's origin; S3: the bucket, with
//! AWS's environment variables), with tessera's timeout and retries.

use super::settings::Settings;
use super::RemoteSettings;
use crate::error::Result;
use object_store::path::Path as ObjPath;
use object_store::{ClientConfigKey, ObjectStore, RetryConfig};
use std::sync::{Arc, OnceLock};

/// Worker threads of the runtime: the requests are I/O, the copies out
/// of their bodies short.
const WORKERS: usize = 2;

/// The runtime, started on first use.
pub(super) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .thread_name("tessera-remote")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| crate::err!(Io, "cannot start the runtime for remote reads: {e}"))
}

/// Makes ring rustls' process-wide crypto provider unless the process
/// already chose one (a Rust host may have; then that one is used). The
/// HTTP client object_store builds takes the default provider, and this
/// crate builds rustls with ring only (Cargo.toml says why).
fn tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Deprecated since rustls 0.23.48 because ring has no
            // post-quantum key exchange (X25519 and the NIST curves only);
            // the price of ring's build time, written down in
            // docs/FORMATS.md. Err only when another thread installed a
            // provider first: either way the process has one.
            #[allow(deprecated)]
            let provider = rustls::crypto::ring::default_provider();
            let _ = provider.install_default();
        }
    });
}

/// A parsed URL: the store that serves it, the object's key in it, and
/// how messages name it.
pub(super) struct Located {
    pub store: Arc<dyn ObjectStore>,
    pub key: ObjPath,
    /// The URL without credentials, up to the key (`scheme://host/`).
    pub root: String,
}

/// The store and key of `url` (`http://`, `https://`, `s3://BUCKET/KEY`).
/// Errors: `InvalidArgument` for a URL that does not parse, a query or a
/// fragment, an S3 URL without a bucket; `Io` for a store that cannot be
/// made (the reason object_store gives).
pub(super) fn locate(url: &str, settings: &Settings, over: &RemoteSettings) -> Result<Located> {
    let shown = super::shown(url);
    let parsed = url::Url::parse(url).map_err(|e| {
        crate::err!(
            InvalidArgument,
            "'{shown}' is not a URL ({e}): expected http://HOST/PATH, https://HOST/PATH or \
             s3://BUCKET/KEY"
        )
    })?;
    crate::ensure!(
        parsed.query().is_none() && parsed.fragment().is_none(),
        InvalidArgument,
        "'{shown}' has a query or a fragment: expected a URL naming an object by its path alone"
    );
    let key = ObjPath::from_url_path(parsed.path()).map_err(|e| {
        crate::err!(
            InvalidArgument,
            "'{shown}': its path is not an object key ({e}): expected segments without '.', \
             '..' or empty ones"
        )
    })?;
    let host = parsed.host_str().unwrap_or("");
    let retry = RetryConfig {
        max_retries: settings.retries,
        retry_timeout: settings.timeout.saturating_mul(2),
        ..RetryConfig::default()
    };
    let timeout = format!("{}ms", settings.timeout.as_millis());
    let scheme = parsed.scheme().to_ascii_lowercase();
    tls_provider();
    let built: std::result::Result<Arc<dyn ObjectStore>, object_store::Error> = if scheme == "s3" {
        crate::ensure!(
            !host.is_empty(),
            InvalidArgument,
            "'{shown}' names no bucket: expected s3://BUCKET/KEY"
        );
        let mut builder = object_store::aws::AmazonS3Builder::from_env();
        for (name, value) in over.aws() {
            if SECRET_VARIABLES.contains(&name) {
                remember_secret(value);
            }
            let key = name.to_ascii_lowercase().parse().map_err(|_| {
                crate::err!(
                    InvalidArgument,
                    "unknown remote setting '{name}': not an AWS variable object_store reads \
                     (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, \
                     AWS_SESSION_TOKEN, AWS_ALLOW_HTTP, ...)"
                )
            })?;
            builder = builder.with_config(key, value);
        }
        builder
            .with_bucket_name(host)
            .with_config(
                object_store::aws::AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                &timeout,
            )
            .with_config(
                object_store::aws::AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                &timeout,
            )
            .with_retry(retry)
            .build()
            .map(|s| Arc::new(s) as _)
    } else {
        let origin = parsed.origin().ascii_serialization();
        let options = object_store::ClientOptions::new()
            .with_allow_http(scheme == "http")
            .with_timeout(settings.timeout)
            .with_connect_timeout(settings.timeout);
        object_store::http::HttpBuilder::new()
            .with_url(origin)
            .with_client_options(options)
            .with_retry(retry)
            .build()
            .map(|s| Arc::new(s) as _)
    };
    let store = built.map_err(|e| {
        crate::err!(
            Io,
            "cannot reach '{shown}': {}",
            redact(&e.to_string(), url)
        )
    })?;
    let root = match scheme.as_str() {
        "s3" => format!("s3://{host}/"),
        _ => format!("{}/", parsed.origin().ascii_serialization()),
    };
    Ok(Located { store, key, root })
}

/// The AWS variables whose values never appear in a message.
const SECRET_VARIABLES: [&str; 3] = [
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCESS_KEY_ID",
];

/// The secrets given as settings of an open (not in the environment),
/// left out of every later message of the process.
static SECRETS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn remember_secret(value: &str) {
    let mut held = SECRETS.lock().unwrap_or_else(|p| p.into_inner());
    if !held.iter().any(|s| s == value) {
        held.push(value.to_owned());
    }
}

/// `message` with every credential it might hold replaced: the
/// password of `url`, and the values of AWS's secret variables (in the
/// environment or given as an open's settings).
pub(super) fn redact(message: &str, url: &str) -> String {
    let mut out = message.to_owned();
    let mut secrets: Vec<String> = SECRET_VARIABLES
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .collect();
    secrets.extend(
        SECRETS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned(),
    );
    if let Ok(u) = url::Url::parse(url) {
        secrets.extend(u.password().map(str::to_owned));
        if !u.username().is_empty() {
            secrets.push(u.username().to_owned());
        }
    }
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s.as_str(), "<redacted>");
    }
    out
}
