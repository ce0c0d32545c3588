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

criterion_group!(benches, dependent_operations);
criterion_main!(benches);
