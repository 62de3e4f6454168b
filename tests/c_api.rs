//! The C test suite: compiles every `c_tests/test_*.c` (one program each)
//! with the C compiler the `cc` crate selects, links it against the
//! libtessera cargo just built (shared, with an rpath, and static), runs it
//! and fails with the program's output when it fails.
//!
//! Environment:
//! - `TESSERA_C_TEST_CC`: the compiler (default: cc's choice, `$CC` or `cc`).
//! - `TESSERA_C_TEST_CFLAGS`: extra flags for compiling and linking, split
//!   on whitespace (e.g. `-fsanitize=address,undefined`).
//! - `TESSERA_C_TEST_WRAPPER`: a command that runs each program, split on
//!   whitespace (e.g. `valgrind --error-exitcode=99 --leak-check=full`).
//! - `TESSERA_C_TEST_LINK`: `shared`, `static` or `both` (default).
//! - `TESSERA_C_TEST_TIMEOUT`: seconds a program may run (default 600).
//! - `TESSERA_C_TEST_JOBS`: programs built and run at once (default: CPUs).
//!
//! Arguments that do not start with `-` filter the programs by substring
//! (`cargo test --test c_api -- dtype`); `--skip NAME` leaves some out.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Native libraries a program linking libtessera.a needs on Linux, as
/// `cargo rustc --lib -- --print native-static-libs` prints them.
const NATIVE_STATIC_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];
/// How every test program is compiled.
const C_FLAGS: &[&str] = &[
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-pthread",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Link {
    Shared,
    Static,
}

impl Link {
    fn name(self) -> &'static str {
        match self {
            Link::Shared => "shared",
            Link::Static => "static",
        }
    }
}

/// Everything a job needs, fixed before the jobs start.
struct Setup {
    root: PathBuf,
    scratch: PathBuf,
    shared_dir: PathBuf,
    static_lib: PathBuf,
    compiler: cc::Tool,
    extra_cflags: Vec<String>,
    wrapper: Vec<String>,
    timeout: Duration,
}

struct Job {
    source: PathBuf,
    name: String,
    link: Link,
}

/// The libtest-style arguments this runner understands: name filters,
/// `--skip NAME` and `--list`; other flags are ignored.
struct Args {
    filters: Vec<String>,
    skips: Vec<String>,
    list: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        filters: Vec::new(),
        skips: Vec::new(),
        list: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--list" => args.list = true,
            "--skip" => args.skips.extend(it.next()),
            // libtest flags that take a value
            "--test-threads" | "--format" | "--color" | "--logfile" | "-Z" | "--shuffle-seed" => {
                it.next();
            }
            _ if a.starts_with('-') => {}
            _ => args.filters.push(a),
        }
    }
    args
}

fn main() -> ExitCode {
    let args = parse_args();
    let setup = match Setup::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("c_api: cannot set up the C tests: {e}");
            return ExitCode::FAILURE;
        }
    };
    let jobs = match setup.jobs(&args) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("c_api: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.list {
        for job in &jobs {
            println!("{}[{}]: test", job.name, job.link.name());
        }
        return ExitCode::SUCCESS;
    }
    let mut how = format!("compiler: {}", setup.compiler.path().display());
    if !setup.extra_cflags.is_empty() {
        how += &format!(" {}", setup.extra_cflags.join(" "));
    }
    if !setup.wrapper.is_empty() {
        how += &format!("; run under: {}", setup.wrapper.join(" "));
    }
    println!("\nrunning {} C test programs ({how})", jobs.len());

    let failures = run_jobs(&setup, jobs);
    if failures.is_empty() {
        println!("\nC test result: ok\n");
        return ExitCode::SUCCESS;
    }
    println!("\nfailures:\n");
    for (name, report) in &failures {
        println!("---- {name} ----\n{report}\n");
    }
    println!("C test result: FAILED ({} failed)\n", failures.len());
    ExitCode::FAILURE
}

/// Runs the jobs on a few worker threads; returns (name, report) of the
/// failed ones.
fn run_jobs(setup: &Setup, jobs: Vec<Job>) -> Vec<(String, String)> {
    let workers = env_var("TESSERA_C_TEST_JOBS")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let queue = Mutex::new(jobs.into_iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let Some(job) = queue.lock().unwrap().next() else {
                    break;
                };
                let label = format!("{} [{}]", job.name, job.link.name());
                let start = Instant::now();
                let result = setup.build(&job).and_then(|exe| setup.run(&exe));
                let secs = start.elapsed().as_secs_f64();
                match result {
                    Ok(()) => println!("test {label} ... ok ({secs:.2}s)"),
                    Err(report) => {
                        println!("test {label} ... FAILED ({secs:.2}s)");
                        failures.lock().unwrap().push((label, report));
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    failures
}

impl Setup {
    fn new() -> Result<Setup, String> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let (lib_dir, profile_dir) = library_dirs()?;
        let scratch = profile_dir.join("c_tests");
        let shared_dir = scratch.join("lib");
        std::fs::create_dir_all(&shared_dir)
            .map_err(|e| format!("{}: {e}", shared_dir.display()))?;
        link_shared_library(&lib_dir.join("libtessera.so"), &shared_dir)?;
        let static_lib = lib_dir.join("libtessera.a");
        if !static_lib.exists() {
            return Err(format!("{} is missing", static_lib.display()));
        }

        // The target this test was built for (build.rs): with a cross
        // build (docs/PLATFORMS.md, aarch64 under qemu) the cc crate must
        // choose the flags of that target, not of the machine's rustc.
        let triple = env!("TESSERA_TARGET");
        let mut build = cc::Build::new();
        build
            .cargo_metadata(false)
            .opt_level(0)
            .debug(true)
            .host(triple)
            .target(triple);
        if let Some(cc) = env_var("TESSERA_C_TEST_CC") {
            build.compiler(cc);
        }
        let compiler = build.try_get_compiler().map_err(|e| e.to_string())?;
        let timeout = env_var("TESSERA_C_TEST_TIMEOUT")
            .map(|s| {
                s.parse()
                    .map_err(|_| format!("TESSERA_C_TEST_TIMEOUT={s}: expected seconds"))
            })
            .transpose()?
            .unwrap_or(600);
        Ok(Setup {
            root,
            scratch,
            shared_dir,
            static_lib,
            compiler,
            extra_cflags: split_env("TESSERA_C_TEST_CFLAGS"),
            wrapper: split_env("TESSERA_C_TEST_WRAPPER"),
            timeout: Duration::from_secs(timeout),
        })
    }

    /// One job per test program and link kind, sorted by name.
    fn jobs(&self, args: &Args) -> Result<Vec<Job>, String> {
        let links = match env_var("TESSERA_C_TEST_LINK").as_deref() {
            None | Some("both") => vec![Link::Shared, Link::Static],
            Some("shared") => vec![Link::Shared],
            Some("static") => vec![Link::Static],
            Some(other) => {
                return Err(format!(
                    "TESSERA_C_TEST_LINK={other}: expected shared, static or both"
                ))
            }
        };
        let dir = self.root.join("c_tests");
        let mut sources: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        sources.retain(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("test_") && name.ends_with(".c")
        });
        sources.sort();
        if sources.is_empty() {
            return Err(format!("no test_*.c files in {}", dir.display()));
        }
        let mut jobs = Vec::new();
        for source in sources {
            let name = source.file_stem().unwrap().to_string_lossy().into_owned();
            let wanted =
                args.filters.is_empty() || args.filters.iter().any(|f| name.contains(f.as_str()));
            if !wanted || args.skips.iter().any(|s| name.contains(s.as_str())) {
                continue;
            }
            for &link in &links {
                jobs.push(Job {
                    source: source.clone(),
                    name: name.clone(),
                    link,
                });
            }
        }
        Ok(jobs)
    }

    /// Compiles and links one program; returns the executable.
    fn build(&self, job: &Job) -> Result<PathBuf, String> {
        let exe = self
            .scratch
            .join(format!("{}-{}", job.name, job.link.name()));
        let mut cmd = self.compiler.to_command();
        cmd.args(C_FLAGS)
            .args(&self.extra_cflags)
            .arg("-I")
            .arg(self.root.join("include"))
            .arg("-I")
            .arg(self.root.join("c_tests"))
            .arg(&job.source)
            .arg("-o")
            .arg(&exe);
        match job.link {
            Link::Shared => {
                cmd.arg("-L")
                    .arg(&self.shared_dir)
                    .arg("-ltessera")
                    .arg(format!("-Wl,-rpath,{}", self.shared_dir.display()));
            }
            Link::Static => {
                cmd.arg(&self.static_lib).args(NATIVE_STATIC_LIBS);
            }
        }
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run the C compiler {cmd:?}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "compilation failed ({}):\n$ {}\n{}{}",
                out.status,
                command_line(&cmd),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(exe)
    }

    /// Runs one program (through the wrapper) with a time limit.
    fn run(&self, exe: &Path) -> Result<(), String> {
        let mut cmd = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        // Output goes to files, read after the exit, so a chatty program
        // cannot block on a full pipe while we wait for it.
        let log = exe.with_extension("log");
        let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err_file = file.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(file).stderr(err_file);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", command_line(&cmd)))?;
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break Some(status);
            }
            if start.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        match status {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(format!(
                "$ {}\n{output}\nexited with {s}",
                command_line(&cmd)
            )),
            None => Err(format!(
                "$ {}\n{output}\nkilled after {}s (TESSERA_C_TEST_TIMEOUT)",
                command_line(&cmd),
                self.timeout.as_secs()
            )),
        }
    }
}

/// The directory holding the libtessera this test was built with (cargo
/// builds the cdylib and staticlib next to the test executable, in
/// target/<profile>/deps) and target/<profile>.
fn library_dirs() -> Result<(PathBuf, PathBuf), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let deps = exe.parent().ok_or("test executable has no directory")?;
    let profile = deps.parent().ok_or("deps directory has no parent")?;
    for dir in [deps, profile] {
        if dir.join("libtessera.so").exists() && dir.join("libtessera.a").exists() {
            return Ok((dir.to_path_buf(), profile.to_path_buf()));
        }
    }
    Err(format!(
        "libtessera.so and libtessera.a not found in {} or {}",
        deps.display(),
        profile.display()
    ))
}

/// Makes `dir/libtessera.so.0.<MINOR>` (the SONAME programs record while
/// the version is 0.x; `libtessera.so.<MAJOR>` from 1.0, docs/ABI.md) and
/// `dir/libtessera.so` (what `-ltessera` finds) point at `built`.
fn link_shared_library(built: &Path, dir: &Path) -> Result<(), String> {
    if !built.exists() {
        return Err(format!("{} is missing", built.display()));
    }
    let soname = match env!("CARGO_PKG_VERSION_MAJOR") {
        "0" => format!("libtessera.so.0.{}", env!("CARGO_PKG_VERSION_MINOR")),
        major => format!("libtessera.so.{major}"),
    };
    for (name, target) in [
        (soname.as_str(), built),
        ("libtessera.so", Path::new(&soname)),
    ] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    Ok(())
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn split_env(name: &str) -> Vec<String> {
    env_var(name)
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
