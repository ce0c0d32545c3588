//! The clock the benchmarks run at. `/proc/cpuinfo` reports a processor's nominal clock, but a
//! busy core runs at its boost clock, often much faster, and work per cycle means per cycle the
//! core actually ran.
//!
//! The bench times a chain of dependent one-cycle integer operations: each link is a shift, an
//! exclusive or and an addition, each waiting for the result of the one before, so that an
//! x86-64 core runs one of them per cycle however wide it is. Operations per second are then
//! cycles per second: criterion's throughput of `clock/dependent_operations` (in elements/s) is
//! the clock, which `benches/report.sh` divides by. On other architectures an instruction can
//! take a shifted operand (the shift and the exclusive or become one), so the bench is x86-64
//! only; elsewhere `benches/report.sh` falls back to `/proc/cpuinfo`.
//!
//! `clock/dot_add_i16` measures the ceiling of the instruction pair every 8-bit
//! multiply-accumulate of the wasm kernels compiles to: `i32x4.dot_i16x8_s` then `i32x4.add`,
//! which Cranelift emits as `vpmaddwd` and `vpaddd` on a CPU with AVX (as it does on the
//! machines of benches/README.md). Eight accumulators, each fed by its own product, so no
//! instruction waits for another's result and nothing is loaded: the most multiply-accumulates
//! per cycle the pair can give on this core. Its throughput is in multiply-accumulates (eight per
//! pair). Skipped on a CPU without AVX.

use criterion::{Criterion, criterion_group, criterion_main};

#[cfg(target_arch = "x86_64")]
fn dependent_operations(c: &mut Criterion) {
    use criterion::Throughput;
    use std::hint::black_box;

    /// Links per iteration: enough that the call and the loop's own counter (which runs beside
    /// the chain) are lost in the chain's latency.
    const LINKS: u64 = 1 << 20;
    /// One-cycle operations per link.
    const OPERATIONS: u64 = 3;

    fn chain(mut x: u64) -> u64 {
        for _ in 0..LINKS {
            x = (x ^ (x >> 1)).wrapping_add(0x9E37);
        }
        x
    }

    let mut group = c.benchmark_group("clock");
    group.throughput(Throughput::Elements(LINKS * OPERATIONS));
    group.bench_function("dependent_operations", |b| {
        b.iter(|| chain(black_box(0x1234_5678)))
    });
    group.finish();
}

#[cfg(not(target_arch = "x86_64"))]
fn dependent_operations(_: &mut Criterion) {}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // inline assembly: the instructions under measurement, exactly
fn dot_add_i16(c: &mut Criterion) {
    use criterion::Throughput;
    use std::arch::asm;
    use std::hint::black_box;

    /// Loop iterations per call; each runs eight independent pairs.
    const STEPS: u64 = 1 << 16;
    /// Multiply-accumulates per pair: `vpmaddwd` multiplies eight lane pairs.
    const MACS_PER_PAIR: u64 = 8;
    const PAIRS_PER_STEP: u64 = 8;

    /// `STEPS` iterations of eight (`vpmaddwd`, `vpaddd`) pairs into eight accumulators.
    ///
    /// # Safety
    /// The CPU must have AVX.
    #[target_feature(enable = "avx")]
    unsafe fn pairs(x: u64) -> u64 {
        let mut steps = STEPS;
        let mut out = x;
        // SAFETY: register-only AVX instructions, which the caller checked the CPU has; the
        // named and clobbered registers are all the block writes.
        unsafe {
            asm!(
                "vmovq xmm8, {x}",
                "vpshufd xmm8, xmm8, 0",
                "vpxor xmm9, xmm9, xmm9",
                "vpsubw xmm9, xmm9, xmm8",
                "vpxor xmm0, xmm0, xmm0",
                "vpxor xmm1, xmm1, xmm1",
                "vpxor xmm2, xmm2, xmm2",
                "vpxor xmm3, xmm3, xmm3",
                "vpxor xmm4, xmm4, xmm4",
                "vpxor xmm5, xmm5, xmm5",
                "vpxor xmm6, xmm6, xmm6",
                "vpxor xmm7, xmm7, xmm7",
                "2:",
                "vpmaddwd xmm10, xmm8, xmm9",
                "vpaddd xmm0, xmm0, xmm10",
                "vpmaddwd xmm11, xmm8, xmm9",
                "vpaddd xmm1, xmm1, xmm11",
                "vpmaddwd xmm12, xmm8, xmm9",
                "vpaddd xmm2, xmm2, xmm12",
                "vpmaddwd xmm13, xmm8, xmm9",
                "vpaddd xmm3, xmm3, xmm13",
                "vpmaddwd xmm10, xmm8, xmm9",
                "vpaddd xmm4, xmm4, xmm10",
                "vpmaddwd xmm11, xmm8, xmm9",
                "vpaddd xmm5, xmm5, xmm11",
                "vpmaddwd xmm12, xmm8, xmm9",
                "vpaddd xmm6, xmm6, xmm12",
                "vpmaddwd xmm13, xmm8, xmm9",
                "vpaddd xmm7, xmm7, xmm13",
                "dec {steps}",
                "jnz 2b",
                "vpaddd xmm0, xmm0, xmm1",
                "vpaddd xmm2, xmm2, xmm3",
                "vpaddd xmm4, xmm4, xmm5",
                "vpaddd xmm6, xmm6, xmm7",
                "vpaddd xmm0, xmm0, xmm2",
                "vpaddd xmm4, xmm4, xmm6",
                "vpaddd xmm0, xmm0, xmm4",
                "vmovq {out}, xmm0",
                x = in(reg) x,
                steps = inout(reg) steps,
                out = inout(reg) out,
                out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                out("xmm12") _, out("xmm13") _,
                options(nostack, nomem),
            );
        }
        let _ = steps;
        out
    }

    if !std::arch::is_x86_feature_detected!("avx") {
        eprintln!("clock/dot_add_i16 skipped: this CPU has no AVX");
        return;
    }
    let mut group = c.benchmark_group("clock");
    group.throughput(Throughput::Elements(STEPS * PAIRS_PER_STEP * MACS_PER_PAIR));
    group.bench_function("dot_add_i16", |b| {
        // SAFETY: AVX was detected above.
        b.iter(|| unsafe { pairs(black_box(0x0003_0005)) })
    });
    group.finish();
}

#[cfg(not(target_arch = "x86_64"))]
fn dot_add_i16(_: &mut Criterion) {}

criterion_group!(benches, dependent_operations, dot_add_i16);
criterion_main!(benches);
