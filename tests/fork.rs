//! Fork safety (issue 22): a child made by fork() after the thread pool
//! ran, and while other threads allocate, free, use the caching layer and
//! run parallel kernels, keeps using tessera: parallel add and sum (with
//! the thread count the parent set), the CPU allocator, the caching layer,
//! the statistics, new threads.
//!
//! A real fork (libc::fork); the child reports through its exit status,
//! which the parent reads with waitpid. An alarm in the child turns a hang
//! into a failure (SIGALRM). `harness = false`: libtest would run the
//! tests on threads of its own; here main runs them one after the other,
//! the quiet fork first, before any thread of the test exists.
//!
//! The child writes its messages with write(2), never through Rust's
//! stdout or stderr (whose locks another thread may hold at the fork).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera::allocator::caching::{self, CachingOptions};
use tessera::{kernels, parallel, Allocator, DType, Device, Scalar, Tensor};

/// Seconds a child may run before SIGALRM kills it.
const CHILD_ALARM_S: u32 = 20;
/// The quiet fork's tensors: 4M floats, as in the report.
const QUIET_N: i64 = 4 << 20;
/// The busy forks' tensors.
const BUSY_N: i64 = 1 << 18;

/// Writes `msg` to stderr with write(2) (no lock: safe in a forked child).
fn say(msg: &str) {
    let mut rest = msg.as_bytes();
    while !rest.is_empty() {
        // SAFETY: the pointer and length describe the live slice `rest`.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !($cond) {
            return Err(format!("{}:{}: {}: {}", file!(), line!(), stringify!($cond), format!($($fmt)+)));
        }
    };
}

/// A float tensor of `n` elements, every one `v`.
fn filled(n: i64, v: f64) -> Result<Tensor, String> {
    let t = Tensor::empty(&[n], DType::Float, Device::CPU).map_err(|e| e.to_string())?;
    t.fill_(Scalar::Float(v)).map_err(|e| e.to_string())?;
    Ok(t)
}

/// The float element `i` of a contiguous float tensor.
fn at(t: &Tensor, i: i64) -> f32 {
    assert!(i < t.numel());
    // SAFETY: t holds numel contiguous floats and i < numel.
    unsafe { *(t.data_ptr() as *const f32).add(i as usize) }
}

/// Checks `a + b` (a = 1.5, b = 2.25 everywhere) and sum(b); returns the
/// time of the add in milliseconds.
fn add_and_sum(a: &Tensor, b: &Tensor) -> Result<f64, String> {
    let n = a.numel();
    let t0 = Instant::now();
    let c = kernels::add(None, a, b, Scalar::Int(1)).map_err(|e| e.to_string())?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    for i in [0, 1, n / 2, n / 2 + 1, n - 1] {
        check!(at(&c, i) == 3.75, "c[{i}] = {}", at(&c, i));
    }
    let s = kernels::sum(b, &[], false).map_err(|e| e.to_string())?;
    let total = at(&s, 0) as f64;
    let want = 2.25 * n as f64;
    let close = (total - want).abs() <= want * 1e-6;
    check!(close, "sum {total}, expected {want}");
    Ok(ms)
}

/// What every child does after the fork; returns the times of its first
/// and second parallel adds (ms).
fn child_work(
    a: &Tensor,
    b: &Tensor,
    cached: &Allocator,
    at_fork: Option<(tessera::allocator::StatsSnapshot, caching::CachingStats)>,
) -> Result<(f64, f64), String> {
    // Statistics first: exactly the parent's figures at the fork when the
    // parent was quiet.
    let cpu = Allocator::cpu();
    let cpu_stats = cpu.stats();
    let caching_stats = caching::of(cached)
        .unwrap()
        .stats()
        .map_err(|e| e.to_string())?;
    if let Some((cpu_then, caching_then)) = at_fork {
        check!(cpu_stats == cpu_then, "{cpu_stats:?} != {cpu_then:?}");
        check!(
            caching_stats == caching_then,
            "{caching_stats:?} != {caching_then:?}"
        );
    }
    check!(
        parallel::get_num_threads() == 2,
        "{} threads",
        parallel::get_num_threads()
    );
    // The first parallel op of the child: the pool is made again here.
    let first_ms = add_and_sum(a, b)?;
    // It ran on a pool thread too: with 2 threads, parallel_for hands the
    // second chunk to a worker.
    let on_worker = AtomicBool::new(false);
    parallel::parallel_for(0, 1 << 20, 1, |_, _| {
        if rayon::current_thread_index().is_some() {
            on_worker.store(true, Ordering::Relaxed);
        }
    });
    check!(
        on_worker.load(Ordering::Relaxed),
        "no chunk ran on a pool thread"
    );
    let second_ms = add_and_sum(a, b)?;

    // The CPU allocator, with its statistics moving on from the parent's.
    let before = cpu.stats();
    let p = cpu.allocate(4096).map_err(|e| e.to_string())?;
    let q = cpu.allocate(3 << 20).map_err(|e| e.to_string())?;
    let mid = cpu.stats();
    check!(
        mid.num_allocs == before.num_allocs + 2,
        "{mid:?} after {before:?}"
    );
    check!(
        mid.allocated_bytes == before.allocated_bytes + 4096 + (3 << 20),
        "{mid:?} after {before:?}"
    );
    drop((p, q));
    let after = cpu.stats();
    check!(after.num_frees == before.num_frees + 2, "{after:?}");
    check!(after.allocated_bytes == before.allocated_bytes, "{after:?}");

    // The caching layer.
    let layer = caching::of(cached).unwrap();
    let c0 = layer.stats().map_err(|e| e.to_string())?;
    let blocks: Vec<_> = [512usize, 4096, 2 << 20]
        .iter()
        .map(|&n| cached.allocate(n))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let c1 = layer.stats().map_err(|e| e.to_string())?;
    check!(
        c1.all.active_blocks.current == c0.all.active_blocks.current + 3,
        "{c1:?}"
    );
    drop(blocks);
    let c2 = layer.stats().map_err(|e| e.to_string())?;
    check!(
        c2.all.active_blocks.current == c0.all.active_blocks.current,
        "{c2:?}"
    );
    layer.empty_cache().map_err(|e| e.to_string())?;

    // A new thread of the child allocates (it takes a counter shard).
    let worked = std::thread::spawn(|| {
        let p = Allocator::cpu().allocate(1000);
        p.is_ok()
    })
    .join()
    .unwrap_or(false);
    check!(worked, "a child's thread could not allocate");
    Ok((first_ms, second_ms))
}

/// Forks; the child runs `work` under an alarm and exits with 0 (and
/// writes the time it returns) or 1 (and writes why). Returns the child's
/// verdict: Ok, or what went wrong.
fn fork_and_check(
    label: &str,
    work: impl FnOnce() -> Result<(f64, f64), String>,
) -> Result<(), String> {
    // SAFETY: fork has no memory-safety preconditions; the child only
    // runs `work` and then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork failed: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: alarm and _exit have no preconditions.
        unsafe { libc::alarm(CHILD_ALARM_S) };
        let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            Ok(Ok((first, second))) => {
                say(&format!(
                    "{label}: child's first parallel add {first:.2} ms (second {second:.2} ms)\n"
                ));
                0
            }
            Ok(Err(why)) => {
                say(&format!("{label}: child failed: {why}\n"));
                1
            }
            Err(_) => {
                say(&format!("{label}: child panicked\n"));
                2
            }
        };
        // SAFETY: ends the child without running the parent's exit
        // handlers or destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: pid is our child; status is writable.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    if r != pid {
        return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        return Err(if sig == libc::SIGALRM {
            format!("{label}: the child hung ({CHILD_ALARM_S} s alarm)")
        } else {
            format!("{label}: the child died of signal {sig}")
        });
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!(
            "{label}: the child exited with status {}",
            libc::WEXITSTATUS(status)
        ));
    }
    Ok(())
}

/// A fork after the pool ran, with no other thread of the test active.
fn quiet_fork() -> Result<(), String> {
    parallel::set_num_threads(2);
    let a = filled(QUIET_N, 1.5)?;
    let b = filled(QUIET_N, 2.25)?;
    let cached = caching::new(Allocator::cpu(), CachingOptions::default()).unwrap();
    let kept = cached.allocate(1 << 10).unwrap();
    // The pool starts here.
    let parent_ms = add_and_sum(&a, &b)?;
    println!("quiet fork: parent's first parallel add {parent_ms:.2} ms");
    let at_fork = (
        Allocator::cpu().stats(),
        caching::of(&cached).unwrap().stats().unwrap(),
    );
    fork_and_check("quiet fork", || child_work(&a, &b, &cached, Some(at_fork)))?;
    // The parent is unaffected: its pool still works.
    add_and_sum(&a, &b)?;
    drop(kept);
    Ok(())
}

/// 20 forks while two threads allocate and free (CPU allocator and the
/// caching layer), run parallel kernels, start short-lived threads, and
/// read statistics.
fn busy_forks() -> Result<(), String> {
    parallel::set_num_threads(2);
    let a = Arc::new(filled(BUSY_N, 1.5)?);
    let b = Arc::new(filled(BUSY_N, 2.25)?);
    let cached = caching::new(Allocator::cpu(), CachingOptions::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let busy: Vec<_> = (0..2)
        .map(|t| {
            let (a, b, cached, stop, rounds) = (
                a.clone(),
                b.clone(),
                cached.clone(),
                stop.clone(),
                rounds.clone(),
            );
            std::thread::spawn(move || -> Result<(), String> {
                let cpu = Allocator::cpu();
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let sizes = [64usize, 700, 4096, 100_000, 3 << 20];
                    let held: Vec<_> = sizes
                        .iter()
                        .map(|&n| cpu.allocate(n + i % 64))
                        .collect::<Result<_, _>>()
                        .map_err(|e| e.to_string())?;
                    let held_c: Vec<_> = sizes
                        .iter()
                        .map(|&n| cached.allocate(n + i % 512))
                        .collect::<Result<_, _>>()
                        .map_err(|e| e.to_string())?;
                    drop(held);
                    drop(held_c);
                    add_and_sum(&a, &b)?;
                    let _ = cpu.stats();
                    let _ = caching::of(&cached).unwrap().stats();
                    let _ = tessera::allocator::get_allocator(tessera::DeviceType::Cpu);
                    if i % 16 == t {
                        caching::of(&cached).unwrap().empty_cache().ok();
                        // A thread that allocates and exits (its counter
                        // shard goes back to the free list).
                        std::thread::spawn(|| drop(Allocator::cpu().allocate(256)))
                            .join()
                            .ok();
                    }
                    i += 1;
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    let mut result = Ok(());
    for k in 0..20 {
        // Let the threads get going between forks.
        let start = rounds.load(Ordering::Relaxed);
        let t0 = Instant::now();
        while rounds.load(Ordering::Relaxed) < start + 2 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(300 * (k % 7)));
        let label = format!("busy fork {k}");
        if let Err(e) = fork_and_check(&label, || child_work(&a, &b, &cached, None)) {
            result = Err(e);
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join()
            .map_err(|_| "a busy thread panicked".to_string())??;
    }
    println!(
        "busy forks: the two threads ran {} rounds meanwhile",
        rounds.load(Ordering::Relaxed)
    );
    result
}

/// Whether .ci/arm.sh runs this under qemu-user (TESSERA_TEST_QEMU_USER
/// set, not "0").
fn under_qemu_user() -> bool {
    std::env::var("TESSERA_TEST_QEMU_USER").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn main() {
    // libtest's `--list`, `--skip NAME` and name filters (other flags are
    // ignored).
    let args: Vec<String> = std::env::args().skip(1).collect();
    let list = args.iter().any(|a| a == "--list");
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--skip" {
            skips.extend(it.next());
        } else if !a.starts_with('-') {
            filters.push(a);
        }
    }
    let mut failed = 0;
    for (name, test) in [
        (
            "quiet_fork_after_the_pool_ran",
            quiet_fork as fn() -> Result<(), String>,
        ),
        ("busy_forks_while_two_threads_work", busy_forks),
    ] {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        if skips.iter().any(|s| name.contains(s.as_str())) {
            continue;
        }
        if list {
            println!("{name}: test");
            continue;
        }
        // A fork of a process with threads (the pool's, idle or busy)
        // whose child then starts threads crashes qemu-user itself: an
        // assertion in its cpu_exec (qemu 7.2, "cpu == current_cpu"). Both
        // tests are such forks: under emulation (.ci/arm.sh sets
        // TESSERA_TEST_QEMU_USER) they are skipped, saying so, and left
        // for real Arm hardware (docs/PLATFORMS.md).
        if under_qemu_user() {
            println!("test {name} ... skipped: forks with threads crash qemu-user (TESSERA_TEST_QEMU_USER)");
            continue;
        }
        let t0 = Instant::now();
        match test() {
            Ok(()) => println!("test {name} ... ok ({:.2}s)", t0.elapsed().as_secs_f64()),
            Err(e) => {
                println!(
                    "test {name} ... FAILED ({:.2}s): {e}",
                    t0.elapsed().as_secs_f64()
                );
                failed += 1;
            }
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
