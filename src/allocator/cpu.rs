//! The built-in CPU allocator: 64-byte aligned memory from malloc, with
//! the size kept in a small header so a free needs no lookup, and a
//! per-thread cache of freed blocks (cpu_thread_cache.rs) so repeated sizes skip
//! malloc/free.
//!
//! Layout of an allocation: `malloc(capacity + 64)` returns `raw`, where
//! the capacity is the request's size class (cpu_thread_cache.rs; the request
//! itself when too large to cache); the data starts at the first 64-byte
//! boundary at least 16 bytes past `raw`; the 16 bytes before the data hold
//! `raw` and `n`. The context handed out is the data address itself (as
//! c10's CPU allocator), so raw allocate/deallocate work. With transparent
//! huge pages on, requests of 2 MiB or more are aligned to 2 MiB instead
//! and advised with `MADV_HUGEPAGE`.

use super::thread_counts::Shard;
use super::{
    cpu_thread_cache, Allocator, AllocatorImpl, AllocatorKind, Description, OomReport, OwnStats,
    RawAllocator,
};
use crate::data_ptr::{DataPtr, DeleterFn};
use crate::device::Device;
use crate::error::Result;
use crate::refcount::Ref;
use std::any::Any;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;

/// Alignment of every CPU allocation, in bytes.
pub const ALIGNMENT: usize = 64;
const HEADER: usize = 16;
const HUGE_PAGE: usize = 2 << 20;
/// The pattern junk-fill writes (reads as NaN in float32, a huge integer
/// otherwise).
pub const JUNK_PATTERN: u32 = 0x7fed_beef;

/// The options as bits, so the allocation path reads them with one load.
static OPTIONS: AtomicU8 = AtomicU8::new(0);
const ZERO_FILL: u8 = 1;
const JUNK_FILL: u8 = 2;
const HUGE_PAGES: u8 = 4;

/// Process-wide options of the built-in CPU allocator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuOptions {
    /// Zero new memory.
    pub zero_fill: bool,
    /// Fill new memory with [`JUNK_PATTERN`] (to expose reads of
    /// uninitialized memory). Exclusive with `zero_fill`.
    pub junk_fill: bool,
    /// Align requests of 2 MiB or more to 2 MiB and advise transparent huge
    /// pages.
    pub huge_pages: bool,
}

/// Sets the options; zero-fill and junk-fill together are refused.
pub fn set_options(options: CpuOptions) -> Result<()> {
    crate::ensure!(
        !(options.zero_fill && options.junk_fill),
        InvalidArgument,
        "zero_fill and junk_fill are both on: expected at most one of them"
    );
    let bits = (options.zero_fill as u8 * ZERO_FILL)
        | (options.junk_fill as u8 * JUNK_FILL)
        | (options.huge_pages as u8 * HUGE_PAGES);
    OPTIONS.store(bits, Relaxed);
    Ok(())
}

/// The current options.
pub fn options() -> CpuOptions {
    let bits = OPTIONS.load(Relaxed);
    CpuOptions {
        zero_fill: bits & ZERO_FILL != 0,
        junk_fill: bits & JUNK_FILL != 0,
        huge_pages: bits & HUGE_PAGES != 0,
    }
}

struct CpuBackend;

static BUILTIN: OnceLock<Allocator> = OnceLock::new();

/// The built-in CPU allocator.
pub fn builtin() -> Allocator {
    builtin_ref().clone()
}

/// The built-in CPU allocator, borrowed for the process lifetime.
pub(crate) fn builtin_ref() -> &'static Allocator {
    match BUILTIN.get() {
        Some(a) => a,
        None => make_builtin(),
    }
}

/// Makes the built-in CPU allocator (or waits for the thread making it),
/// never while a fork is under way, and a fork waits for it to finish
/// (`fork::without_fork`): a child that found the `OnceLock` half-made
/// would wait on it forever (seen in CI: a test forking while another
/// thread made its first allocation).
#[cold]
#[inline(never)]
fn make_builtin() -> &'static Allocator {
    // The atfork handlers first (they are what makes a fork wait): the
    // allocator list's step, which `Allocator::new_own_stats` below would
    // add anyway, only later.
    crate::fork::ensure_handlers(&super::FORK_STEP);
    crate::fork::without_fork(|| {
        BUILTIN.get_or_init(|| {
            apply_alloc_conf();
            Allocator::new_own_stats("cpu", Device::CPU, Box::new(CpuBackend)).mark_builtin_cpu()
        })
    })
}

/// Applies TESSERA_ALLOC_CONF (read once, here: the built-in CPU
/// allocator is made before the first allocation of any kind).
#[cold]
fn apply_alloc_conf() {
    let conf = super::alloc_conf::get();
    if let Some(limit) = conf.cpu_cache_limit {
        set_cache_limit(limit);
    }
    let mut o = options();
    o.zero_fill = conf.zero_fill.unwrap_or(o.zero_fill);
    o.junk_fill = conf.junk_fill.unwrap_or(o.junk_fill);
    o.huge_pages = conf.huge_pages.unwrap_or(o.huge_pages);
    // alloc_conf refuses zero_fill and junk_fill together.
    let _ = set_options(o);
    if conf.record_history == Some(true) {
        let entries = conf
            .max_entries
            .unwrap_or(super::alloc_conf::DEFAULT_MAX_ENTRIES);
        let _ = super::history::start(entries, conf.backtraces.unwrap_or(false));
    }
}

#[cold]
fn oom(nbytes: usize, reason: &str) -> crate::error::Error {
    crate::err!(
        OutOfMemory,
        "tsr CPU allocator: can't allocate memory: you tried to allocate {nbytes} bytes ({reason})"
    )
}

/// Writes the header of a block and returns its data address.
///
/// # Safety
/// `raw` must be the start of a block of at least capacity + ALIGNMENT
/// bytes for a request of `nbytes`.
#[inline]
unsafe fn place(raw: *mut u8, nbytes: usize) -> *mut u8 {
    let data = ((raw as usize + HEADER + ALIGNMENT - 1) & !(ALIGNMENT - 1)) as *mut u8;
    // SAFETY: malloc aligns to 16, so data - raw is in [16, 64]: the header
    // lies in the block and data + nbytes <= raw + 64 + capacity.
    unsafe {
        let header = data.sub(HEADER) as *mut usize;
        header.write(raw as usize);
        header.add(1).write(nbytes);
    }
    data
}

/// Bytes a block for a request of `nbytes` holds past its alignment
/// slack: the size class, so a cached block serves any request of its
/// class.
#[inline]
fn capacity(nbytes: usize) -> usize {
    cpu_thread_cache::class_of(nbytes).map_or(nbytes, cpu_thread_cache::class_size)
}

/// Allocates `nbytes` (> 0) with the option bits `opts` and returns the
/// data address and the thread's statistics shard that counted the
/// allocation (None: not counted), or the OS reason of the failure.
#[inline]
fn alloc_block(
    nbytes: usize,
    opts: u8,
) -> std::result::Result<(*mut u8, Option<&'static Shard>), String> {
    let class = cpu_thread_cache::class_of(nbytes);
    if opts == 0 {
        if let Some(c) = class {
            let (shard, cached) = cpu_thread_cache::on_alloc(Some(c));
            let raw = match cached {
                Some(raw) => raw,
                None => {
                    // SAFETY: plain C allocation; checked for NULL below.
                    let raw = unsafe { libc::malloc(cpu_thread_cache::class_size(c) + ALIGNMENT) }
                        as *mut u8;
                    if raw.is_null() {
                        return Err(malloc_failed(shard.is_some()));
                    }
                    raw
                }
            };
            // SAFETY: the block holds class_size(c) + ALIGNMENT bytes.
            return Ok((unsafe { place(raw, nbytes) }, shard));
        }
    }
    let data = alloc_block_with_options(nbytes, opts)?;
    Ok((data, cpu_thread_cache::count(0)))
}

/// The OS reason of a failed malloc, after taking back the thread's count
/// of the allocation.
#[cold]
#[inline(never)]
fn malloc_failed(counted: bool) -> String {
    let reason = std::io::Error::last_os_error().to_string();
    if counted {
        cpu_thread_cache::uncount_alloc();
    }
    reason
}

/// Advises transparent huge pages for `[data, data + nbytes)`, a range of
/// one live block starting on a 2 MiB boundary (Linux's MADV_HUGEPAGE;
/// elsewhere the block is still 2 MiB aligned and nothing is advised).
fn advise_huge_pages(data: *mut u8, nbytes: usize) {
    // SAFETY: the range lies in a block this allocator owns.
    unsafe { crate::platform::heap::advise_huge_pages(data, nbytes & !(4095)) };
}

/// The allocation path with fill or huge-page options, or for sizes too
/// large to cache.
#[cold]
fn alloc_block_with_options(nbytes: usize, opts: u8) -> std::result::Result<*mut u8, String> {
    let cap = capacity(nbytes);
    let zero = opts & ZERO_FILL != 0;
    let data = if opts & HUGE_PAGES != 0 && nbytes >= HUGE_PAGE {
        let total = cap
            .checked_add(HUGE_PAGE)
            .ok_or_else(|| "size overflow".to_string())?;
        let (raw, start) = crate::platform::heap::aligned_block(HUGE_PAGE, total)
            .map_err(|rc| std::io::Error::from_raw_os_error(rc).to_string())?;
        // SAFETY: HUGE_PAGE < total, so start + HUGE_PAGE is inside the
        // block and the header before it too.
        let data = unsafe { start.add(HUGE_PAGE) };
        // SAFETY: HEADER (16) < HUGE_PAGE, so the two words at
        // data - HEADER lie inside the `total` bytes from `start` that
        // aligned_block just gave us, which nothing else uses yet; start
        // and HUGE_PAGE are 2 MiB aligned, so data - 16 is 8-aligned for usize writes. The
        // header keeps the pointer to free (the block's own start).
        unsafe {
            let header = data.sub(HEADER) as *mut usize;
            header.write(raw as usize);
            header.add(1).write(nbytes);
        }
        advise_huge_pages(data, nbytes);
        if zero {
            // SAFETY: the data range is inside the block.
            unsafe { std::ptr::write_bytes(data, 0, nbytes) };
        }
        data
    } else {
        let total = cap
            .checked_add(ALIGNMENT)
            .ok_or_else(|| "size overflow".to_string())?;
        // SAFETY: plain C allocation; checked for NULL below.
        let raw = unsafe {
            if zero {
                libc::calloc(1, total)
            } else {
                libc::malloc(total)
            }
        } as *mut u8;
        if raw.is_null() {
            return Err(std::io::Error::last_os_error().to_string());
        }
        // SAFETY: the block holds cap + ALIGNMENT bytes.
        unsafe { place(raw, nbytes) }
    };
    if opts & JUNK_FILL != 0 {
        let words = nbytes / 4;
        // SAFETY: data is 64-aligned and valid for nbytes bytes.
        let slice = unsafe { std::slice::from_raw_parts_mut(data as *mut u32, words) };
        slice.fill(JUNK_PATTERN);
        // SAFETY: the tail bytes are inside the block.
        unsafe { std::ptr::write_bytes(data.add(words * 4), 0x7f, nbytes - words * 4) };
    }
    Ok(data)
}

/// Reads the header of a block: (raw pointer, size).
///
/// # Safety
/// `data` must come from `alloc_block` and not be freed.
unsafe fn header(data: *mut c_void) -> (*mut c_void, usize) {
    // SAFETY: alloc_block wrote both words just before data.
    unsafe {
        let h = (data as *mut u8).sub(HEADER) as *const usize;
        (h.read() as *mut c_void, h.add(1).read())
    }
}

unsafe extern "C" fn cpu_free(ctx: *mut c_void) {
    // SAFETY: ctx is the data address of a live block from alloc_block
    // (this deleter is only attached to those).
    let (raw, nbytes) = unsafe { header(ctx) };
    // The thread-cache hit first, with no call on its way (no frame to
    // set up): a busy or full cache, or a reporter or history to tell,
    // continues in free_rest.
    let hit =
        cpu_thread_cache::class_of(nbytes).and_then(|c| cpu_thread_cache::put(c, raw as *mut u8));
    match hit {
        Some(shard) if super::reporter::active_bits() == 0 => {
            builtin_ref().0.stats.count_free_sharded(shard, nbytes);
        }
        // SAFETY: ctx is a live block's data address (this deleter's
        // contract, above) and raw, nbytes are its header; `hit` says
        // whether put cached it.
        _ => unsafe { free_rest(ctx, raw, nbytes, hit) },
    }
}

/// cpu_free past its fast path: the statistics and report of a block the
/// cache took (`cached` its thread's shard), or the general path.
///
/// # Safety
/// As [`free_general`]; with `cached`, the block is in the thread's cache
/// already and only its free is recorded.
#[inline(never)]
unsafe fn free_rest(
    ctx: *mut c_void,
    raw: *mut c_void,
    nbytes: usize,
    cached: Option<&'static Shard>,
) {
    match cached {
        Some(shard) => builtin_ref()
            .0
            .stats
            .record_free_sharded(shard, ctx, nbytes, Device::CPU),
        // SAFETY: this function's contract: a live block not cached.
        None => unsafe { free_general(ctx, raw, nbytes) },
    }
}

/// cpu_free past the thread-cache hit (on_free looks at the cache once
/// more: a miss, at most a few instructions).
///
/// # Safety
/// `ctx` the data address of a live block from alloc_block, not freed
/// yet; `raw` and `nbytes` read from its header.
#[inline(never)]
unsafe fn free_general(ctx: *mut c_void, raw: *mut c_void, nbytes: usize) {
    let stats = &builtin_ref().0.stats;
    // Every block of a cacheable size holds its class capacity, so it can
    // serve any later request of that class.
    let (shard, cached) =
        cpu_thread_cache::on_free(cpu_thread_cache::class_of(nbytes), raw as *mut u8, free_raw);
    match shard {
        Some(shard) => stats.record_free_sharded(shard, ctx, nbytes, Device::CPU),
        None => stats.record_free(ctx, nbytes, Device::CPU),
    }
    if !cached {
        // SAFETY: raw is what malloc/calloc/posix_memalign returned.
        unsafe { libc::free(raw) };
    }
}

/// Frees a block leaving the thread cache.
///
/// # Safety
/// `raw` must be the start of a block from alloc_block, not in use.
unsafe fn free_raw(raw: *mut u8) {
    // SAFETY: alloc_block gets its blocks from malloc, calloc or
    // posix_memalign, all freed by free; the caller passes a block's start
    // that nothing uses any more, so it is freed once.
    unsafe { libc::free(raw as *mut c_void) };
}

/// Sets the per-thread cache budget of the built-in CPU allocator (bytes;
/// 0 turns caching off).
pub fn set_cache_limit(bytes: usize) {
    cpu_thread_cache::set_cache_limit(bytes);
}

/// The per-thread cache budget.
pub fn cache_limit() -> usize {
    cpu_thread_cache::cache_limit()
}

/// Frees the blocks the calling thread keeps cached; returns the bytes.
pub fn release_thread_cache() -> usize {
    cpu_thread_cache::release_thread_cache()
}

/// Frees the blocks every thread keeps cached (the caller's at once, the
/// others' as soon as they are not inside the allocator); returns the
/// bytes freed.
pub fn release_all_caches() -> usize {
    cpu_thread_cache::release_all_caches()
}

/// Before retrying a failed allocation: frees every thread's cache.
#[cold]
fn release_for_retry() -> usize {
    release_all_caches()
}

/// Bytes the calling thread keeps cached.
pub fn thread_cached_bytes() -> usize {
    cpu_thread_cache::thread_cached_bytes()
}

impl RawAllocator for CpuBackend {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        allocate_cpu(&builtin_ref().0, nbytes, device, OomReport::Quiet)
    }

    fn raw_deleter(&self) -> Option<DeleterFn> {
        Some(cpu_free)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn describe(&self) -> Description {
        Description::of(AllocatorKind::Cpu)
    }

    fn device_hooks(&self) -> super::DeviceHooks {
        super::DeviceHooks {
            memory_info: Some(super::cpu_vmm::memory_info),
            virtual_memory: Some(&super::cpu_vmm::HOST_VM),
            ..super::DeviceHooks::NONE
        }
    }
}

impl OwnStats for CpuBackend {
    fn allocate_tracked(
        &self,
        owner: &Ref<AllocatorImpl>,
        nbytes: usize,
        device: Device,
        report: OomReport,
    ) -> Result<DataPtr> {
        allocate_cpu(owner, nbytes, device, report)
    }
}

/// The built-in CPU allocator's thread-cache hit on `a`'s default device,
/// or None having done nothing (also when `a` is another allocator): the
/// part of an allocation that cannot fail, for a C entry point to try
/// before its general path. Context == data, deleter == the raw deleter:
/// also a raw allocation.
#[inline(always)]
pub(crate) fn allocate_hit(a: &AllocatorImpl, nbytes: usize) -> Option<DataPtr> {
    if !a.builtin_cpu {
        return None;
    }
    allocate_cached(a, nbytes, a.default_device)
}

/// The allocation fast path of the built-in CPU allocator: a request of
/// a cacheable size, without fill options, served from the thread's
/// cache. None: take [`allocate_cpu`] (nothing was done).
#[inline(always)]
pub(super) fn allocate_cached(
    owner: &AllocatorImpl,
    nbytes: usize,
    device: Device,
) -> Option<DataPtr> {
    if !device.is_cpu() {
        return None;
    }
    let data = cached_block(owner, nbytes)?;
    // SAFETY: as in allocate_cpu.
    Some(unsafe { DataPtr::from_raw_parts(data, data, Some(cpu_free), Device::CPU) })
}

/// The thread-cache hit of [`allocate_cached`] as a bare data address
/// (its context is itself and its deleter `cpu_free`), counted in
/// `owner`'s statistics; None having done nothing.
#[inline(always)]
fn cached_block(owner: &AllocatorImpl, nbytes: usize) -> Option<*mut c_void> {
    if nbytes == 0 || OPTIONS.load(Relaxed) != 0 {
        return None;
    }
    let (raw, shard) = cpu_thread_cache::take(cpu_thread_cache::class_of(nbytes)?)?;
    // SAFETY: a cached block of this class holds class_size + ALIGNMENT
    // bytes, and the class holds nbytes.
    let data = unsafe { place(raw, nbytes) } as *mut c_void;
    owner
        .stats
        .record_alloc_sharded(shard, data, nbytes, Device::CPU);
    Some(data)
}

/// Raw allocation from the built-in CPU allocator (c10's raw_allocate):
/// the bare data address (NULL for 0 bytes), which is also its context;
/// free it with the raw deleter (`cpu_free`). The thread-cache hit inline, the rest out
/// of line; a failure for want of memory tells the out-of-memory
/// observers.
#[inline(always)]
pub(super) fn raw_allocate(owner: &AllocatorImpl, nbytes: usize) -> Result<*mut c_void> {
    match cached_block(owner, nbytes) {
        Some(data) => Ok(data),
        None => raw_allocate_general(owner, nbytes),
    }
}

/// [`raw_allocate`] past the thread-cache hit.
#[inline(never)]
fn raw_allocate_general(owner: &AllocatorImpl, nbytes: usize) -> Result<*mut c_void> {
    Ok(allocate_cpu(owner, nbytes, Device::CPU, OomReport::Notify)?
        .into_raw_parts()
        .0)
}

/// The allocation path of the built-in CPU allocator (statistics into
/// `owner`, the built-in allocator's object); a failure for want of
/// memory tells the out-of-memory observers, as `report` says, before it
/// returns (here, so that the caller's hot path has no check of its own).
#[inline(never)]
pub(super) fn allocate_cpu(
    owner: &AllocatorImpl,
    nbytes: usize,
    device: Device,
    report: OomReport,
) -> Result<DataPtr> {
    if !device.is_cpu() {
        return Err(not_cpu(device));
    }
    if nbytes == 0 {
        return Ok(DataPtr::empty(Device::CPU));
    }
    if nbytes > isize::MAX as usize - HUGE_PAGE {
        return Err(failed(owner, too_large(nbytes), nbytes, report));
    }
    let mut result = alloc_block(nbytes, OPTIONS.load(Relaxed));
    if result.is_err() && release_for_retry() > 0 {
        // Out of memory with blocks cached: give them back and retry once.
        result = alloc_block(nbytes, OPTIONS.load(Relaxed));
    }
    match result {
        Ok((data, shard)) => {
            let data = data as *mut c_void;
            match shard {
                Some(shard) => owner
                    .stats
                    .record_alloc_sharded(shard, data, nbytes, Device::CPU),
                None => owner.stats.record_alloc(data, nbytes, Device::CPU),
            }
            // SAFETY: cpu_free frees exactly a block from alloc_block, given
            // its data address.
            Ok(unsafe { DataPtr::from_raw_parts(data, data, Some(cpu_free), Device::CPU) })
        }
        Err(reason) => Err(failed(owner, oom(nbytes, &reason), nbytes, report)),
    }
}

/// A failed allocation of `nbytes`: counted, and told to the out-of-memory
/// observers as `report` says; returns `e`.
#[cold]
fn failed(
    owner: &AllocatorImpl,
    e: crate::error::Error,
    nbytes: usize,
    report: OomReport,
) -> crate::error::Error {
    owner.stats.record_failure();
    super::oom::notify_if(report, &e, owner, nbytes, Device::CPU);
    e
}

#[cold]
fn not_cpu(device: Device) -> crate::error::Error {
    crate::err!(Device, "the CPU allocator cannot allocate on {device}")
}

#[cold]
fn too_large(nbytes: usize) -> crate::error::Error {
    oom(
        nbytes,
        &format!(
            "more than the largest allocation, {} bytes",
            isize::MAX as usize - HUGE_PAGE
        ),
    )
}
