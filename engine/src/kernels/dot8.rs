//! Dot products of packed `i8` rows, for operands proven to fit the byte instructions: the
//! activations (`x`) in [0, 127] and the weights (`w`) in [−128, 127].
//!
//! Integer dot products are exact, so any instruction that computes the exact sum gives the same
//! result. Two do so on four products at a time when `x` lies in [0, 127]:
//! - wasm `i32x4.relaxed_dot_i8x16_i7x16_add_s` (relaxed SIMD): engines may differ only when a
//!   lane of its second operand lies outside [0, 127] (read as signed or unsigned) or when a
//!   pair sum overflows `i16`; neither can happen here (|2 · 128 · 127| = 32512). `x` is always
//!   the second operand;
//! - x86-64 AVX2 `vpmaddubsw` (u8 × s8, pairs summed into saturating `i16`: no saturation for
//!   the same reason) then `vpmaddwd` with ones (the exact `i32` sum of four).
//!
//! The other backends widen the bytes: SSE2 to `i16` for `pmaddwd`, the portable one to `i32`.
//! The lanes in which a backend accumulates differ, but every lane holds an exact partial sum,
//! so the final sums are bit-identical (the precision bounds of `gemm.rs` keep them within
//! `i32`). Callers prove the bound on `x` (the non-negativity fact of validation,
//! `docs/ops.md` "Non-negative values") and narrow with [`narrow_u7`], which clamps to
//! [0, 127]: even a value outside the proof could never make a relaxed instruction leave its
//! deterministic domain.
//!
//! Rows are zero-padded to a multiple of [`BYTE_ALIGN`] bytes. The tiles are those of
//! `gemm.rs` (2 × 4 rows at most, accumulators in registers), written once over [`Dot8`].

use super::gemm::Strided;

/// The unit `i8` rows are padded to: one AVX2 vector, two wasm vectors.
pub const BYTE_ALIGN: usize = 32;

/// One unit of a packed `i8` row.
pub type Block8 = [i8; BYTE_ALIGN];

/// The padded row length (in bytes) for `depth` values.
pub const fn padded_bytes(depth: usize) -> usize {
    depth.div_ceil(BYTE_ALIGN) * BYTE_ALIGN
}

/// Narrows an activation proven within [0, 127], clamping (never wrapping) outside.
#[inline(always)]
pub fn narrow_u7(value: i32) -> i8 {
    value.clamp(0, 127) as i8
}

/// Narrows a weight within 8 bits, saturating outside.
#[inline(always)]
pub fn narrow_i8(value: i32) -> i8 {
    value.clamp(-128, 127) as i8
}

/// Accumulators of exact partial sums of products of `x` (in [0, 127]) and `w` bytes.
pub trait Dot8: Copy {
    /// An accumulator.
    type Acc: Copy;
    /// An accumulator of zeros.
    fn zero() -> Self::Acc;
    /// `acc` plus the 32 products `x[i] · w[i]`, spread over its lanes.
    fn dot(acc: Self::Acc, x: &Block8, w: &Block8) -> Self::Acc;
    /// The totals of four accumulators.
    fn sums4(acc: [Self::Acc; 4]) -> [i32; 4];
    /// The total of one accumulator.
    fn sum(acc: Self::Acc) -> i32;
}

/// Scalar: the reference.
#[derive(Clone, Copy, Debug)]
pub struct Portable8;

impl Dot8 for Portable8 {
    type Acc = i32;

    #[inline(always)]
    fn zero() -> i32 {
        0
    }

    #[inline(always)]
    fn dot(acc: i32, x: &Block8, w: &Block8) -> i32 {
        x.iter().zip(w).fold(acc, |sum, (&x, &w)| {
            sum.wrapping_add(i32::from(x) * i32::from(w))
        })
    }

    #[inline(always)]
    fn sums4(acc: [i32; 4]) -> [i32; 4] {
        acc
    }

    #[inline(always)]
    fn sum(acc: i32) -> i32 {
        acc
    }
}

/// x86-64 SSE2 (always available): bytes widened to `i16`, then `pmaddwd`.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Sse2Bytes;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
impl Dot8 for Sse2Bytes {
    type Acc = core::arch::x86_64::__m128i;

    #[inline(always)]
    fn zero() -> Self::Acc {
        use super::simd::{Simd, Sse2};
        Sse2::splat32(0)
    }

    #[inline(always)]
    fn dot(acc: Self::Acc, x: &Block8, w: &Block8) -> Self::Acc {
        use core::arch::x86_64::{
            __m128i, _mm_add_epi32, _mm_loadu_si128, _mm_madd_epi16, _mm_setzero_si128,
            _mm_srai_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
        };
        let (xp, wp): (*const __m128i, *const __m128i) = (x.as_ptr().cast(), w.as_ptr().cast());
        // SAFETY: `x` and `w` are valid, readable 32-byte arrays: both 16-byte halves are in
        // them; `loadu` has no alignment requirement. SSE2 is part of the x86-64 baseline.
        unsafe {
            let zero = _mm_setzero_si128();
            let mut acc = acc;
            for half in 0..2 {
                let xs = _mm_loadu_si128(xp.wrapping_add(half));
                let ws = _mm_loadu_si128(wp.wrapping_add(half));
                // x zero-extended (it is non-negative), w sign-extended (a byte in the high
                // half of each lane, shifted down arithmetically).
                let (x_lo, x_hi) = (_mm_unpacklo_epi8(xs, zero), _mm_unpackhi_epi8(xs, zero));
                let w_lo = _mm_srai_epi16::<8>(_mm_unpacklo_epi8(ws, ws));
                let w_hi = _mm_srai_epi16::<8>(_mm_unpackhi_epi8(ws, ws));
                acc = _mm_add_epi32(acc, _mm_madd_epi16(x_lo, w_lo));
                acc = _mm_add_epi32(acc, _mm_madd_epi16(x_hi, w_hi));
            }
            acc
        }
    }

    #[inline(always)]
    fn sums4(acc: [Self::Acc; 4]) -> [i32; 4] {
        use super::simd::{Simd, Sse2};
        let mut sums = [0; 4];
        Sse2::store32(&mut sums, Sse2::sums4(acc[0], acc[1], acc[2], acc[3]));
        sums
    }

    #[inline(always)]
    fn sum(acc: Self::Acc) -> i32 {
        use super::simd::{Simd, Sse2};
        Sse2::sum32(acc)
    }
}

/// x86-64 AVX2: `vpmaddubsw` (x unsigned, w signed) then `vpmaddwd` with ones. Only reached
/// through [`dot_products`] after the processor was found to have AVX2, within a function
/// compiled for it.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx2Bytes;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
impl Dot8 for Avx2Bytes {
    type Acc = core::arch::x86_64::__m256i;

    #[inline(always)]
    fn zero() -> Self::Acc {
        // SAFETY: only inlined into functions compiled with AVX2, called once it was detected.
        unsafe { core::arch::x86_64::_mm256_setzero_si256() }
    }

    #[inline(always)]
    fn dot(acc: Self::Acc, x: &Block8, w: &Block8) -> Self::Acc {
        use core::arch::x86_64::{
            _mm256_add_epi32, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maddubs_epi16,
            _mm256_set1_epi16,
        };
        // SAFETY: `x` and `w` are valid, readable 32-byte arrays; `loadu` has no alignment
        // requirement. Only inlined into functions compiled with AVX2, called once it was
        // detected.
        unsafe {
            let xs = _mm256_loadu_si256(x.as_ptr().cast());
            let ws = _mm256_loadu_si256(w.as_ptr().cast());
            let pairs = _mm256_maddubs_epi16(xs, ws);
            _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
        }
    }

    #[inline(always)]
    fn sums4(acc: [Self::Acc; 4]) -> [i32; 4] {
        Sse2Bytes::sums4(acc.map(Self::halves))
    }

    #[inline(always)]
    fn sum(acc: Self::Acc) -> i32 {
        Sse2Bytes::sum(Self::halves(acc))
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
impl Avx2Bytes {
    /// The lane-wise sum of the two 128-bit halves.
    #[inline(always)]
    fn halves(acc: core::arch::x86_64::__m256i) -> core::arch::x86_64::__m128i {
        use core::arch::x86_64::{_mm_add_epi32, _mm256_castsi256_si128, _mm256_extracti128_si256};
        // SAFETY: only inlined into functions compiled with AVX2, called once it was detected.
        unsafe {
            _mm_add_epi32(
                _mm256_castsi256_si128(acc),
                _mm256_extracti128_si256::<1>(acc),
            )
        }
    }
}

/// wasm relaxed SIMD: `i32x4.relaxed_dot_i8x16_i7x16_add_s`, `x` the second (i7) operand.
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
#[derive(Clone, Copy, Debug)]
pub struct RelaxedDot;

#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
#[allow(unsafe_code)]
impl Dot8 for RelaxedDot {
    type Acc = core::arch::wasm32::v128;

    #[inline(always)]
    fn zero() -> Self::Acc {
        core::arch::wasm32::i32x4_splat(0)
    }

    #[inline(always)]
    fn dot(acc: Self::Acc, x: &Block8, w: &Block8) -> Self::Acc {
        use core::arch::wasm32::{i32x4_relaxed_dot_i8x16_i7x16_add, v128, v128_load};
        let (xp, wp): (*const v128, *const v128) = (x.as_ptr().cast(), w.as_ptr().cast());
        // SAFETY: `x` and `w` are valid, readable 32-byte arrays: both 16-byte halves are in
        // them; `v128_load` has no alignment requirement.
        let (x0, x1, w0, w1) = unsafe {
            (
                v128_load(xp),
                v128_load(xp.wrapping_add(1)),
                v128_load(wp),
                v128_load(wp.wrapping_add(1)),
            )
        };
        let acc = i32x4_relaxed_dot_i8x16_i7x16_add(w0, x0, acc);
        i32x4_relaxed_dot_i8x16_i7x16_add(w1, x1, acc)
    }

    #[inline(always)]
    fn sums4(acc: [Self::Acc; 4]) -> [i32; 4] {
        use super::simd::{Simd, Wasm128};
        let mut sums = [0; 4];
        Wasm128::store32(&mut sums, Wasm128::sums4(acc[0], acc[1], acc[2], acc[3]));
        sums
    }

    #[inline(always)]
    fn sum(acc: Self::Acc) -> i32 {
        use super::simd::{Simd, Wasm128};
        Wasm128::sum32(acc)
    }
}

/// Blocks common to every row.
#[inline(always)]
fn common_blocks(rows: &[&[Block8]]) -> usize {
    rows.iter().map(|row| row.len()).min().unwrap_or(0)
}

/// `R` rows of `a` against `C` rows of `b`: every pair's sum. Straight runs of 64 blocks keep
/// the accumulators in registers (see `straight_runs!`). A separate function in wasm (as the
/// tiles of `gemm.rs`), inlined into the AVX2 entry natively.
#[cfg_attr(target_arch = "wasm32", inline(never))]
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
fn tile<D: Dot8, const R: usize, const C: usize>(
    a: [&[Block8]; R],
    b: [&[Block8]; C],
) -> [[i32; C]; R] {
    let mut acc = [[D::zero(); C]; R];
    let blocks = common_blocks(&a).min(common_blocks(&b));
    let (a, b) = (a.map(|row| &row[..blocks]), b.map(|row| &row[..blocks]));
    straight_runs!(64, blocks, |k| {
        for c in 0..C {
            let w = &b[c][k];
            for r in 0..R {
                acc[r][c] = D::dot(acc[r][c], &a[r][k], w);
            }
        }
    });
    acc.map(|row| {
        if C == 4 {
            let quad = D::sums4(core::array::from_fn(|c| row[c % C]));
            core::array::from_fn(|c| quad[c % 4])
        } else {
            row.map(D::sum)
        }
    })
}

/// Row `index` of rows of `blocks` blocks.
#[inline(always)]
fn nth_row(values: &[Block8], index: usize, blocks: usize) -> &[Block8] {
    &values[index * blocks..(index + 1) * blocks]
}

/// [`dot_products`] with backend `D`.
#[inline(always)]
pub fn dot_products_with<D: Dot8>(
    a: &[i8],
    m: usize,
    b: &[i8],
    n: usize,
    stride: usize,
    mut out: Strided<'_>,
) {
    let blocks = stride / BYTE_ALIGN;
    let (a, _) = a.as_chunks::<BYTE_ALIGN>();
    let (b, _) = b.as_chunks::<BYTE_ALIGN>();
    if a.len() < m * blocks || b.len() < n * blocks {
        return; // callers pass full matrices; never reached
    }
    let mut j = 0;
    while j + 4 <= n {
        let quad: [&[Block8]; 4] = core::array::from_fn(|c| nth_row(b, j + c, blocks));
        let mut i = 0;
        while i + 2 <= m {
            let pair = [nth_row(a, i, blocks), nth_row(a, i + 1, blocks)];
            out.store(i, j, tile::<D, 2, 4>(pair, quad));
            i += 2;
        }
        if i < m {
            out.store(i, j, tile::<D, 1, 4>([nth_row(a, i, blocks)], quad));
        }
        j += 4;
    }
    while j < n {
        let single = [nth_row(b, j, blocks)];
        let mut i = 0;
        while i + 2 <= m {
            let pair = [nth_row(a, i, blocks), nth_row(a, i + 1, blocks)];
            out.store(i, j, tile::<D, 2, 1>(pair, single));
            i += 2;
        }
        if i < m {
            out.store(i, j, tile::<D, 1, 1>([nth_row(a, i, blocks)], single));
        }
        j += 1;
    }
}

/// [`dot_products_with`] compiled for AVX2.
///
/// # Safety
/// The processor must have AVX2 ([`has_avx2`]).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx2")]
#[inline(never)]
pub unsafe fn dot_products_avx2(
    a: &[i8],
    m: usize,
    b: &[i8],
    n: usize,
    stride: usize,
    out: Strided<'_>,
) {
    dot_products_with::<Avx2Bytes>(a, m, b, n, stride, out);
}

/// Whether the processor has AVX2 and the operating system saves its registers (CPUID and
/// XCR0, as `is_x86_feature_detected!` checks them), found once.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub fn has_avx2() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    // 0: not yet known; 1: no; 2: yes.
    static KNOWN: AtomicU8 = AtomicU8::new(0);
    match KNOWN.load(Ordering::Relaxed) {
        1 => return false,
        2 => return true,
        _ => {}
    }
    #[target_feature(enable = "xsave")]
    fn xcr0() -> u64 {
        // SAFETY: only called when CPUID reports OSXSAVE, so `xgetbv` is enabled.
        unsafe { core::arch::x86_64::_xgetbv(0) }
    }
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    let max_leaf = __cpuid(0).eax;
    let features = __cpuid(1).ecx;
    let (osxsave, avx) = (features & (1 << 27) != 0, features & (1 << 28) != 0);
    let found = max_leaf >= 7
        && osxsave
        && avx
        // SAFETY: OSXSAVE is set, so the processor has XSAVE and `xgetbv` is enabled.
        && unsafe { xcr0() } & 0b110 == 0b110
        && __cpuid_count(7, 0).ebx & (1 << 5) != 0;
    KNOWN.store(if found { 2 } else { 1 }, Ordering::Relaxed);
    found
}

/// Writes `Σ_k a[i][k]·b[j][k]` to `out` for every row `i` of `a` (`m` rows, values in
/// [0, 127]) and `j` of `b` (`n` rows, values in [−128, 127]), both of `stride` bytes (a
/// multiple of [`BYTE_ALIGN`]), with the fastest backend of this processor: relaxed SIMD in
/// wasm, AVX2 when present natively (else SSE2), scalar elsewhere. Each pair is written once.
pub fn dot_products(a: &[i8], m: usize, b: &[i8], n: usize, stride: usize, out: Strided<'_>) {
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    {
        dot_products_wasm(a, m, b, n, stride, out);
    }
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the processor has AVX2.
            #[allow(unsafe_code)]
            unsafe {
                dot_products_avx2(a, m, b, n, stride, out);
            }
        } else {
            dot_products_with::<Sse2Bytes>(a, m, b, n, stride, out);
        }
    }
    #[cfg(not(any(
        all(target_arch = "wasm32", target_feature = "relaxed-simd"),
        target_arch = "x86_64"
    )))]
    {
        dot_products_with::<Portable8>(a, m, b, n, stride, out);
    }
}

/// [`dot_products_with`] on relaxed SIMD.
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
#[inline(never)]
fn dot_products_wasm(a: &[i8], m: usize, b: &[i8], n: usize, stride: usize, out: Strided<'_>) {
    dot_products_with::<RelaxedDot>(a, m, b, n, stride, out);
}
