//! AVX2 tile transposition for the cache-blocked copies of `blocked`:
//! register micro-kernels (8 x 8 blocks of 2- and 4-byte elements, 4 x 4
//! of 8-byte ones), the loop over a tile's whole blocks, and the streaming
//! of a transposed tile's rows to the destination ([`RowStream`]), which
//! the loop interleaves with its own loads.

/// Transposes an 8 x 8 block of 4-byte elements: element c of source row
/// r (at `src + r * src_row + 4 * c`) goes to element r of destination
/// row c (at `dst + c * dst_row + 4 * r`).
///
/// # Safety
/// The CPU must have AVX2; all 64 source and destination elements must be
/// valid and the blocks must not overlap.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn transpose8x8_4(src: *const u8, src_row: isize, dst: *mut u8, dst_row: isize) {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 (this function's target feature) is the caller's
    // guarantee. `ld(r)` reads 32 bytes (8 elements of 4 bytes) of source
    // row r and `st(c)` writes 32 bytes of destination row c, for r, c < 8
    // only: the 64 elements on each side that the caller guarantees valid
    // and not overlapping. The loads and stores are unaligned (loadu /
    // storeu), so no alignment is needed.
    unsafe {
        let ld = |r: isize| _mm256_loadu_ps(src.offset(r * src_row) as *const f32);
        let (r0, r1, r2, r3) = (ld(0), ld(1), ld(2), ld(3));
        let (r4, r5, r6, r7) = (ld(4), ld(5), ld(6), ld(7));
        // Interleave pairs of rows, then pairs of pairs, then swap halves.
        let t0 = _mm256_unpacklo_ps(r0, r1);
        let t1 = _mm256_unpackhi_ps(r0, r1);
        let t2 = _mm256_unpacklo_ps(r2, r3);
        let t3 = _mm256_unpackhi_ps(r2, r3);
        let t4 = _mm256_unpacklo_ps(r4, r5);
        let t5 = _mm256_unpackhi_ps(r4, r5);
        let t6 = _mm256_unpacklo_ps(r6, r7);
        let t7 = _mm256_unpackhi_ps(r6, r7);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        let st = |c: isize, v: __m256| _mm256_storeu_ps(dst.offset(c * dst_row) as *mut f32, v);
        st(0, _mm256_permute2f128_ps::<0x20>(u0, u4));
        st(1, _mm256_permute2f128_ps::<0x20>(u1, u5));
        st(2, _mm256_permute2f128_ps::<0x20>(u2, u6));
        st(3, _mm256_permute2f128_ps::<0x20>(u3, u7));
        st(4, _mm256_permute2f128_ps::<0x31>(u0, u4));
        st(5, _mm256_permute2f128_ps::<0x31>(u1, u5));
        st(6, _mm256_permute2f128_ps::<0x31>(u2, u6));
        st(7, _mm256_permute2f128_ps::<0x31>(u3, u7));
    }
}

/// Transposes a 4 x 4 block of 8-byte elements (as [`transpose8x8_4`]).
///
/// # Safety
/// As [`transpose8x8_4`], for 16 elements.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn transpose4x4_8(src: *const u8, src_row: isize, dst: *mut u8, dst_row: isize) {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 (this function's target feature) is the caller's
    // guarantee. `ld(r)` reads 32 bytes (4 elements of 8 bytes) of source
    // row r and `st(c)` writes 32 bytes of destination row c, for r, c < 4
    // only: the 16 elements on each side that the caller guarantees valid
    // and not overlapping; loadu / storeu need no alignment.
    unsafe {
        let ld = |r: isize| _mm256_loadu_pd(src.offset(r * src_row) as *const f64);
        let (r0, r1, r2, r3) = (ld(0), ld(1), ld(2), ld(3));
        let t0 = _mm256_unpacklo_pd(r0, r1);
        let t1 = _mm256_unpackhi_pd(r0, r1);
        let t2 = _mm256_unpacklo_pd(r2, r3);
        let t3 = _mm256_unpackhi_pd(r2, r3);
        let st = |c: isize, v: __m256d| _mm256_storeu_pd(dst.offset(c * dst_row) as *mut f64, v);
        st(0, _mm256_permute2f128_pd::<0x20>(t0, t2));
        st(1, _mm256_permute2f128_pd::<0x20>(t1, t3));
        st(2, _mm256_permute2f128_pd::<0x31>(t0, t2));
        st(3, _mm256_permute2f128_pd::<0x31>(t1, t3));
    }
}

/// Transposes an 8 x 8 block of 2-byte elements (as [`transpose8x8_4`]).
///
/// # Safety
/// As [`transpose8x8_4`] (SSE2 suffices; the AVX2 requirement keeps one
/// gate for all micro-kernels).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn transpose8x8_2(src: *const u8, src_row: isize, dst: *mut u8, dst_row: isize) {
    use std::arch::x86_64::*;
    // SAFETY: the SSE2 intrinsics are part of x86-64 (AVX2, the target
    // feature, is the caller's guarantee anyway). `ld(r)` reads 16 bytes
    // (8 elements of 2 bytes) of source row r and `st(c)` writes 16 bytes
    // of destination row c, for r, c < 8 only: the 64 elements on each
    // side that the caller guarantees valid and not overlapping; loadu /
    // storeu need no alignment.
    unsafe {
        let ld = |r: isize| _mm_loadu_si128(src.offset(r * src_row) as *const __m128i);
        let (r0, r1, r2, r3) = (ld(0), ld(1), ld(2), ld(3));
        let (r4, r5, r6, r7) = (ld(4), ld(5), ld(6), ld(7));
        let a0 = _mm_unpacklo_epi16(r0, r1);
        let a1 = _mm_unpackhi_epi16(r0, r1);
        let a2 = _mm_unpacklo_epi16(r2, r3);
        let a3 = _mm_unpackhi_epi16(r2, r3);
        let a4 = _mm_unpacklo_epi16(r4, r5);
        let a5 = _mm_unpackhi_epi16(r4, r5);
        let a6 = _mm_unpacklo_epi16(r6, r7);
        let a7 = _mm_unpackhi_epi16(r6, r7);
        let b0 = _mm_unpacklo_epi32(a0, a2);
        let b1 = _mm_unpackhi_epi32(a0, a2);
        let b2 = _mm_unpacklo_epi32(a1, a3);
        let b3 = _mm_unpackhi_epi32(a1, a3);
        let b4 = _mm_unpacklo_epi32(a4, a6);
        let b5 = _mm_unpackhi_epi32(a4, a6);
        let b6 = _mm_unpacklo_epi32(a5, a7);
        let b7 = _mm_unpackhi_epi32(a5, a7);
        let st =
            |c: isize, v: __m128i| _mm_storeu_si128(dst.offset(c * dst_row) as *mut __m128i, v);
        st(0, _mm_unpacklo_epi64(b0, b4));
        st(1, _mm_unpackhi_epi64(b0, b4));
        st(2, _mm_unpacklo_epi64(b1, b5));
        st(3, _mm_unpackhi_epi64(b1, b5));
        st(4, _mm_unpacklo_epi64(b2, b6));
        st(5, _mm_unpackhi_epi64(b2, b6));
        st(6, _mm_unpacklo_epi64(b3, b7));
        st(7, _mm_unpackhi_epi64(b3, b7));
    }
}

/// Transposes the whole blocks of a tile into `dst` with the register
/// micro-kernels: element (i, j) at `src + i * src_row + j * size` goes to
/// `dst + j * dst_row + i * size`, for i < rows and j < cols rounded down
/// to the block edge (8, or 4 for 8-byte elements). Returns the rounded
/// (rows, cols) it covered; (0, 0) for element sizes without a kernel.
/// After each block, streams one row of `pending` (the previous tile).
///
/// # Safety
/// The CPU must have AVX2; every addressed element must be valid and the
/// two sides must not overlap; `pending` as [`RowStream::next_row`], its
/// rows apart from both sides.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn transpose_blocks(
    size: usize,
    src: *const u8,
    src_row: isize,
    dst: *mut u8,
    dst_row: isize,
    (rows, cols): (usize, usize),
    pending: &mut RowStream,
) -> (usize, usize) {
    // A local copy, kept in registers across the blocks.
    let mut stream = std::mem::replace(pending, RowStream::empty());
    macro_rules! blocks {
        ($k:expr, $micro:ident) => {{
            let (r, c) = (rows / $k * $k, cols / $k * $k);
            for i in (0..r).step_by($k) {
                for j in (0..c).step_by($k) {
                    // SAFETY: the block at (i, j) lies inside both sides,
                    // per the caller, as do the pending rows.
                    unsafe {
                        $micro(
                            src.offset(i as isize * src_row + (j * size) as isize),
                            src_row,
                            dst.offset(j as isize * dst_row + (i * size) as isize),
                            dst_row,
                        );
                        stream.next_row();
                    };
                }
            }
            (r, c)
        }};
    }
    let covered = match size {
        2 => blocks!(8, transpose8x8_2),
        4 => blocks!(8, transpose8x8_4),
        8 => blocks!(4, transpose4x4_8),
        _ => (0, 0),
    };
    *pending = stream;
    covered
}

/// The rows of a transposed tile on their way to the destination with
/// 32-byte streaming stores: `rows` rows of `row_bytes` bytes, back to
/// back from `src`, each to `dst + r * dst_row`.
///
/// [`transpose_blocks`] streams one row of the previous tile after each
/// block it transposes, so the core's loads of the source and its stores
/// to the destination overlap. Transposing a whole tile and then writing
/// it out takes the sum of the two phases; interleaved, less (figures in
/// benches/PERF_RESULTS.md, "src/kernels/transpose.rs").
pub(crate) struct RowStream {
    dst: *mut u8,
    dst_row: isize,
    src: *const u8,
    row_bytes: usize,
    rows: usize,
}

impl RowStream {
    /// Nothing to stream.
    pub(crate) const fn empty() -> RowStream {
        RowStream {
            dst: std::ptr::null_mut(),
            dst_row: 0,
            src: std::ptr::null(),
            row_bytes: 0,
            rows: 0,
        }
    }

    /// The rows to stream, or None unless the CPU has AVX2 (enabled),
    /// every destination row is 32-byte aligned and `row_bytes` a multiple
    /// of 32. (So a RowStream with rows left implies AVX2.)
    pub(crate) fn new(
        dst: *mut u8,
        dst_row: isize,
        src: *const u8,
        row_bytes: usize,
        rows: usize,
    ) -> Option<RowStream> {
        let aligned = (dst as usize) % 32 == 0 && dst_row % 32 == 0 && row_bytes % 32 == 0;
        (aligned && super::simd::avx2_enabled()).then_some(RowStream {
            dst,
            dst_row,
            src,
            row_bytes,
            rows,
        })
    }

    /// Streams the next row, if one is left.
    ///
    /// # Safety
    /// The CPU must have AVX2; the rows given to [`RowStream::new`] must
    /// still be valid on both sides (the tile buffer not yet reused) and
    /// not overlap. Call [`super::simd::sfence`] before other threads read
    /// them.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) unsafe fn next_row(&mut self) {
        use std::arch::x86_64::*;
        if self.rows == 0 {
            return;
        }
        let (dst, src) = (self.dst as *mut __m256i, self.src as *const __m256i);
        if self.row_bytes == 256 {
            // The common row (64 floats), unrolled: faster than the loop
            // below (benches/PERF_RESULTS.md, "src/kernels/transpose.rs").
            for k in 0..8 {
                // SAFETY: AVX2 is the caller's guarantee. rows > 0, so this
                // is one of the rows given to `new`, valid on both sides
                // per the caller; k < 8 covers its 256 bytes in 32-byte
                // pieces. The destination row is 32-byte aligned, as the
                // stream store needs: `new` checked dst and dst_row.
                unsafe { _mm256_stream_si256(dst.add(k), _mm256_loadu_si256(src.add(k))) };
            }
        } else {
            for k in 0..self.row_bytes / 32 {
                // SAFETY: AVX2 is the caller's guarantee. rows > 0, so this
                // is one of the rows given to `new`, valid on both sides
                // per the caller; row_bytes is a multiple of 32 (checked in
                // `new`), so the pieces k < row_bytes / 32 cover it exactly,
                // and the destination row is 32-byte aligned (dst and
                // dst_row checked in `new`).
                unsafe { _mm256_stream_si256(dst.add(k), _mm256_loadu_si256(src.add(k))) };
            }
        }
        self.rows -= 1;
        // Past the last row these point outside the tile: never read.
        self.dst = self.dst.wrapping_offset(self.dst_row);
        self.src = self.src.wrapping_add(self.row_bytes);
    }

    /// Streams every row left; callable on any CPU (rows are only ever
    /// left where AVX2 is).
    ///
    /// # Safety
    /// The rows left must be valid, as for [`RowStream::next_row`].
    pub(crate) unsafe fn finish(&mut self) {
        if self.rows > 0 {
            // SAFETY: rows are left, so `new` saw AVX2; the rows are valid
            // per the caller.
            unsafe { self.finish_avx2() };
        }
    }

    /// [`RowStream::finish`] on a CPU with AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn finish_avx2(&mut self) {
        while self.rows > 0 {
            // SAFETY: per the caller.
            unsafe { self.next_row() };
        }
    }
}
