//! The tap plane of the depthwise kernel (`depthwise.rs`): one zero-padded input channel laid
//! out in `i16` so that each 32-bit lane of a dot product multiplies two taps of one output
//! ([`TapPlane`], [`Columns`]), the tap entries that pair the taps ([`EntryTaps`],
//! [`depthwise_pairing`]), the writing of a channel into the plane, and the weights packed to
//! match (`pack_depthwise`).
//!
//! Narrowing to `i16` is exact for data and weights within 8 bits (cvm-compat §3 for conv2d). The
//! plane is used for a shape with one input channel per group whose plane fits within twice the
//! channel (plus a constant); `ConvShape::depthwise_plane` says when.

use alloc::vec;
use alloc::vec::Vec;

use crate::kernels::pack::{PackedRows, narrow16};
use crate::kernels::padded::{copy_fits, scatter_row};
use crate::kernels::shape::ConvShape;
use crate::kernels::simd::{LANES, Simd};

impl ConvShape {
    /// The tap plane of the depthwise kernel, if that kernel takes the shape: one input channel
    /// per group and a plane that fits ([`TapGeometry::fits`]).
    pub(super) fn depthwise_geometry(&self) -> Option<TapGeometry> {
        if self.group_in() != 1 {
            return None;
        }
        let geometry = self.tap_geometry();
        geometry.fits(self).then_some(geometry)
    }

    /// Tap entries of a depthwise layout that splits every stride into column phases (the
    /// shapes [`Self::tap_entries`] leaves to it): two taps of a kernel row share one when they sit at
    /// adjacent positions of the phase-split plane, any other tap takes one alone. Computed
    /// without enumerating the taps: column kj lies in phase (kj · DW) mod SW at position
    /// ⌊kj · DW / SW⌋, so when DW divides SW the taps of each of the SW / DW phases used are
    /// adjacent (n of them make ⌈n / 2⌉ entries), and otherwise no two are.
    pub fn depthwise_entries(&self) -> u64 {
        let [_, stride_w] = self.strides;
        let dil_w = self.dilation[1];
        let (kernel_h, kernel_w) = (self.kernel_h as u64, self.kernel_w as u64);
        let per_row = if stride_w.is_multiple_of(dil_w) {
            // Column kj is in phase class kj mod m; class r holds ⌊(KW − 1 − r) / m⌋ + 1 taps.
            let m = (stride_w / dil_w) as u64;
            (0..m.min(kernel_w))
                .map(|r| ((kernel_w - 1 - r) / m + 1).div_ceil(2))
                .sum()
        } else {
            kernel_w
        };
        per_row.saturating_mul(kernel_h)
    }

    /// Tap entries of the depthwise kernel ([`EntryTaps`], [`depthwise_pairing`]), per kernel
    /// row:
    /// - SW = 1 ([`Columns::Split`]): one per even column offset a that a tap's column x reads
    ///   from, as ⌊x / 2⌋ (even outputs) or ⌊(x + 1) / 2⌋ (odd outputs) times two: ⌊KW / 2⌋ + 1
    ///   when DW = 1, KW when DW is even (both reads of a tap fall on one a), and
    ///   ⌈KW / 2⌉ + 2·⌊KW / 2⌋ when DW is odd and at least 3 (taps at odd columns read two);
    /// - SW = 2, DW = 1 ([`Columns::Direct`]): ⌈KW / 2⌉, two neighbouring taps sharing one;
    /// - otherwise as [`Self::depthwise_entries`].
    pub fn tap_entries(&self) -> u64 {
        let kernel_w = self.kernel_w as u64;
        let per_row = match (self.strides[1], self.dilation[1]) {
            (1, 1) => kernel_w / 2 + 1,
            (1, dil) if dil % 2 == 0 => kernel_w,
            (1, _) => kernel_w.div_ceil(2) + 2 * (kernel_w / 2),
            (2, 1) => kernel_w.div_ceil(2),
            _ => return self.depthwise_entries(),
        };
        per_row.saturating_mul(self.kernel_h as u64)
    }

    /// Bytes of the depthwise kernel's weights ([`pack_depthwise`]): per output channel and tap
    /// entry, sixteen `i16`.
    pub fn depthwise_weight_bytes(&self) -> u64 {
        (self.out_channels as u64)
            .saturating_mul(self.tap_entries())
            .saturating_mul(4 * LANES as u64)
    }

    /// Geometry of the depthwise kernel's tap plane, in `u64` with saturating arithmetic (a
    /// shape that is not depthwise may be too large for `usize`); [`Self::tap_plane`] is the
    /// same for shapes the kernel takes.
    ///
    /// A row is rounded up to whole steps of eight positions, so that every step lies in one
    /// output row, when that lengthens it by at most a quarter (shorter rows keep their length:
    /// rounding would multiply their steps).
    fn tap_geometry(&self) -> TapGeometry {
        let [stride_h, stride_w] = self.strides.map(|n| n as u64);
        let [pad_h, pad_w] = self.padding.map(|n| n as u64);
        let (height, width) = (self.height as u64, self.width as u64);
        let (out_h, out_w) = (self.out_h as u64, self.out_w as u64);
        let columns = match self.strides[1] {
            1 => Columns::Split,
            2 if self.dilation[1] == 1 => Columns::Direct,
            _ => Columns::Pairs,
        };
        // Rows end where the next row's left padding begins (shared zeros) when they hold the
        // columns themselves; a row is never shorter than the output row it holds.
        let row = match columns {
            Columns::Split => (width + pad_w).max(out_w),
            Columns::Direct => (width + pad_w).div_ceil(2).max(out_w),
            Columns::Pairs => (width + 2 * pad_w).div_ceil(stride_w),
        };
        let whole = row
            .checked_next_multiple_of(LANES as u64)
            .unwrap_or(u64::MAX);
        let row = if (whole - row).saturating_mul(4) <= row {
            whole
        } else {
            row
        };
        let rows = (height + 2 * pad_h).div_ceil(stride_h);
        let steps = out_h.saturating_mul(row).div_ceil(LANES as u64);
        let unit_rows = stride_h.saturating_mul(rows);
        let filled = match columns {
            Columns::Split => unit_rows.saturating_mul(row),
            Columns::Direct => unit_rows.saturating_mul(2 * row),
            Columns::Pairs => unit_rows.saturating_mul(stride_w).saturating_mul(row),
        };
        // The largest unit of any tap of output position 0. A unit is a sum of a term of the
        // tap's row and one of its column (`tap_unit`), each maximised on its own over the
        // last SH rows (SW columns) of the kernel, where every row (column) phase the kernel
        // reaches occurs at its furthest; at SW = 1 the odd outputs' reads reach one column
        // further.
        let [dil_h, dil_w] = self.dilation.map(|n| n as u64);
        let (kernel_h, kernel_w) = (self.kernel_h as u64, self.kernel_w as u64);
        let furthest = |kernel: u64, stride: u64, unit: &dyn Fn(u64) -> u64| {
            (kernel.saturating_sub(stride)..kernel)
                .map(unit)
                .max()
                .unwrap_or(0)
        };
        let reach = furthest(kernel_h, stride_h, &|ki| {
            self.tap_unit(columns, row, rows, ki * dil_h, 0)
        })
        .saturating_add(furthest(kernel_w, stride_w, &|kj| {
            self.tap_unit(columns, row, rows, 0, kj * dil_w)
        }))
        .saturating_add(u64::from(columns == Columns::Split));
        // Units the last step reads past the reach: eight columns, sixteen at SW = 2, or eight
        // pairs and the neighbour of the last.
        let read = reach.saturating_add(match columns {
            Columns::Split => steps.saturating_mul(LANES as u64),
            Columns::Direct => steps.saturating_mul(2 * LANES as u64),
            Columns::Pairs => steps.saturating_mul(LANES as u64).saturating_add(1),
        });
        TapGeometry {
            columns,
            row,
            rows,
            steps,
            units: filled.max(read).next_multiple_of(LANES as u64),
        }
    }

    /// Geometry of the depthwise kernel's tap plane ([`TapPlane`]), for a shape the kernel
    /// takes ([`Self::uses_depthwise`]: every figure then fits twice the input plane).
    pub fn tap_plane(&self) -> TapPlane {
        self.tap_geometry().plane()
    }

    /// The unit of the tap plane holding padded row y, padded column x of output position 0
    /// (see [`TapPlane`]), saturating.
    fn tap_unit(&self, columns: Columns, row: u64, rows: u64, y: u64, x: u64) -> u64 {
        let [stride_h, stride_w] = self.strides.map(|n| n as u64);
        let vertical = (y % stride_h)
            .saturating_mul(rows)
            .saturating_add(y / stride_h);
        match columns {
            Columns::Split => vertical.saturating_mul(row).saturating_add(x),
            Columns::Direct => vertical.saturating_mul(2 * row).saturating_add(x),
            Columns::Pairs => ((x % stride_w).saturating_mul(stride_h).saturating_mul(rows))
                .saturating_add(vertical)
                .saturating_mul(row)
                .saturating_add(x / stride_w),
        }
    }
}

/// [`TapPlane`] in `u64`, for any shape.
#[derive(Clone, Copy, Debug)]
pub(super) struct TapGeometry {
    columns: Columns,
    row: u64,
    rows: u64,
    steps: u64,
    units: u64,
}

impl TapGeometry {
    /// Whether the plane (in `i16`, with the values it is built from) and its output positions
    /// stay within twice the channel's size (plus a constant).
    fn fits(&self, s: &ConvShape) -> bool {
        let elements = if self.columns == Columns::Pairs {
            self.units.saturating_mul(3).saturating_add(LANES as u64)
        } else {
            self.units
        };
        copy_fits(elements, s.height, s.width)
            && copy_fits(self.steps.saturating_mul(LANES as u64), s.height, s.width)
    }

    /// As a [`TapPlane`], for a shape whose plane fits ([`Self::fits`]: every figure then fits
    /// twice the input plane).
    pub(super) fn plane(&self) -> TapPlane {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        TapPlane {
            columns: self.columns,
            row: size(self.row),
            rows: size(self.rows),
            steps: size(self.steps),
            units: size(self.units),
        }
    }
}

/// How the depthwise kernel's [`TapPlane`] lays out the columns of a padded row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columns {
    /// SW = 1: the columns themselves. Eight columns from column o + a (a even) are four lane
    /// pairs: for even outputs o + 2i the taps at columns a and a + 1, for odd outputs
    /// o + 2i + 1 the taps at columns a − 1 and a. One read serves both, with two weight
    /// pairs.
    Split,
    /// SW = 2, DW = 1: the columns themselves. The lane pair (x, x + 1) at column 2q + x is
    /// the taps at columns x and x + 1 of output q.
    Direct,
    /// Any other stride: columns split by phase (column x goes to phase x mod SW, position
    /// ⌊x / SW⌋), and unit u holds the pair (value u, value u + 1) of that plane, so that two
    /// taps at adjacent positions are one lane pair.
    Pairs,
}

/// Geometry of the depthwise kernel's tap plane: the zero-padded input channel laid out so that
/// the lanes of one dot product ([`Simd::dot_add`]) multiply two taps of four outputs, and so
/// that the whole output plane is one run of vectors.
///
/// Padded rows are split by row phase (padded row y goes to phase y mod SH, row ⌊y / SH⌋), so
/// that consecutive output rows read consecutive rows of every phase. An output row is `row`
/// positions long, usually whole steps of eight: the `out_w` outputs, then positions whose
/// sums are discarded. Output position o = p · `row` + q reads from unit o · SW (o for
/// [`Columns::Pairs`]) plus its tap's unit. Columns are laid out as [`Columns`] says; when a
/// plane row holds the columns themselves, the units between its values and the next row's
/// are zeros: the right padding of the one and the left padding of the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapPlane {
    /// The layout of columns.
    pub columns: Columns,
    /// Output positions per row, rounded up to a multiple of eight when that lengthens it by at
    /// most a quarter; also positions per plane row (of
    /// pairs, or of output columns at stride 2).
    pub row: usize,
    /// Rows per row phase: ⌈(H + 2PH) / SH⌉.
    pub rows: usize,
    /// Steps of a pass over all output positions, eight positions each.
    pub steps: usize,
    /// Units of the plane (columns, or pairs), whole vectors: every padded row, and every unit
    /// the last step reads.
    pub units: usize,
}

impl TapPlane {
    /// `i16` elements of the plane.
    pub fn plane_len(&self) -> usize {
        match self.columns {
            Columns::Pairs => 2 * self.units,
            _ => self.units,
        }
    }

    /// `i16` elements of the plane of values the pairs are built from (none when the plane
    /// holds the columns themselves): one vector more than the units, for the neighbour of the
    /// last.
    pub fn values_len(&self) -> usize {
        match self.columns {
            Columns::Pairs => self.units + LANES,
            _ => 0,
        }
    }

    /// Units from one plane row to the next in a row phase, when the plane holds the columns
    /// themselves: an output row's positions, at stride 2 two units each.
    pub(super) fn unit_row(&self) -> usize {
        match self.columns {
            Columns::Direct => 2 * self.row,
            _ => self.row,
        }
    }

    /// The `i16` offset of the lane pairs of a tap at `unit` for output position 0.
    pub(super) fn offset(&self, unit: usize) -> usize {
        match self.columns {
            Columns::Pairs => 2 * unit,
            _ => unit,
        }
    }
}

/// The plane unit each input row starts at, when the plane holds the columns themselves (none
/// for a plane of pairs, built from its own phase-split rows): padded row y = row + PH goes to
/// row phase y mod SH, row ⌊y / SH⌋ of that phase, after its PW units of left padding.
/// Computed once per node: no division per channel.
pub(super) fn row_targets(s: &ConvShape, geometry: &TapPlane) -> Vec<usize> {
    if geometry.columns == Columns::Pairs {
        return Vec::new();
    }
    let unit_row = geometry.unit_row();
    row_phases(s)
        .map(|(phase, phase_row)| (phase * geometry.rows + phase_row) * unit_row + s.padding[1])
        .collect()
}

/// The row phase, and the row within it, of each input row in order: padded row y = row + PH
/// goes to row phase y mod SH, row ⌊y / SH⌋. Counted, not divided.
fn row_phases(s: &ConvShape) -> impl Iterator<Item = (usize, usize)> {
    let [stride_h, _] = s.strides;
    let pad_h = s.padding[0];
    let first = (pad_h % stride_h, pad_h / stride_h);
    core::iter::successors(Some(first), move |&(phase, row)| {
        Some(if phase + 1 < stride_h {
            (phase + 1, row)
        } else {
            (0, row + 1)
        })
    })
    .take(s.height)
}

/// Writes one input channel (H rows of W values) into the [`TapPlane`] `plane`, narrowed to
/// `i16`: directly (rows where `rows` says), or into the phase-split `values` and then their
/// pairs. Padding units are never written: they keep their zeros. Not inlined, so that its
/// loops keep their pointers in registers also after Cranelift compiles the wasm.
#[inline(never)]
pub(super) fn write_tap_plane<S: Simd>(
    s: &ConvShape,
    geometry: &TapPlane,
    rows: &[usize],
    channel: &[i32],
    plane: &mut [i16],
    values: &mut [i16],
) {
    let TapPlane {
        columns,
        row,
        rows: phase_rows,
        ..
    } = *geometry;
    let [stride_h, stride_w] = s.strides;
    let pad_w = s.padding[1];
    if columns == Columns::Pairs {
        for (line, (phase, phase_row)) in channel.chunks_exact(s.width).zip(row_phases(s)) {
            scatter_row(
                line,
                pad_w,
                stride_w,
                stride_h * phase_rows * row,
                (phase * phase_rows + phase_row) * row,
                values,
                narrow16,
                narrow_line::<S>,
            );
        }
        neighbour_pairs::<S>(values, plane);
        return;
    }
    // The count of whole vectors of a row as a constant for rows of up to 64 values, so that
    // a row is one straight run.
    macro_rules! vectors {
        ($($count:literal)*) => {
            match s.width / LANES {
                $($count => narrow_rows::<S, $count>(channel, plane, rows, s.width),)*
                _ => narrow_rows::<S, 0>(channel, plane, rows, s.width),
            }
        };
    }
    vectors!(1 2 3 4 5 6 7 8);
}

/// Narrows each row of `width` values of `channel` into `plane` from the unit `targets` gives
/// it, with `V` whole vectors per row (0: any number, or a row shorter than one vector:
/// [`narrow_line`]). One plain loop over the channel's rows with no branch but its own: every
/// bound it needs is checked once before it, so that a row is one basic block (wasmtime meters
/// fuel per block, at a cost of its own). Not inlined, so that each count gets its own
/// registers.
#[inline(never)]
fn narrow_rows<S: Simd, const V: usize>(
    channel: &[i32],
    plane: &mut [i16],
    targets: &[usize],
    width: usize,
) {
    let Some(last) = plane.len().checked_sub(width) else {
        return; // every row fits the plane; never reached
    };
    if width == 0 {
        return;
    }
    if V == 0 || width / LANES != V {
        for (line, &start) in channel.chunks_exact(width).zip(targets) {
            if let Some(target) = plane.get_mut(start..start.saturating_add(width)) {
                narrow_line::<S>(line, target);
            }
        }
        return;
    }
    for (line, &start) in channel.chunks_exact(width).zip(targets) {
        // Every row fits its plane row, so the clamp never moves it; it spares a branch per row.
        let start = start.min(last);
        let Some(target) = plane.get_mut(start..start + width) else {
            return;
        };
        let (octets, _) = line.as_chunks::<LANES>();
        let (octet_targets, _) = target.as_chunks_mut::<LANES>();
        if let (Some((octets, _)), Some((octet_targets, _))) = (
            octets.split_first_chunk::<V>(),
            octet_targets.split_first_chunk_mut::<V>(),
        ) {
            for (values, octet) in octets.iter().zip(octet_targets) {
                narrow_octet::<S>(values, octet);
            }
        }
        // The last values by one more vector that ends with them (all eight rewritten with the
        // same values when the width is a multiple of eight: no branch on it).
        if let (Some(values), Some(octet)) = (line.last_chunk(), target.last_chunk_mut()) {
            narrow_octet::<S>(values, octet);
        }
    }
}

/// Narrows eight values into `octet` with the saturating [`Simd::narrow32`].
#[inline(always)]
fn narrow_octet<S: Simd>(values: &[i32; LANES], octet: &mut [i16; LANES]) {
    let (halves, _) = values.as_chunks::<4>();
    S::store16(
        octet,
        S::narrow32(S::load32(&halves[0]), S::load32(&halves[1])),
    );
}

/// `target[i] = narrow16(line[i])` over the common length, eight values per step with the
/// saturating narrowing of [`Simd::narrow32`] (no constant vectors) in straight runs, the last
/// values by one more vector that ends with them (rewriting some values with the same ones)
/// instead of one at a time, when there are at least eight.
#[inline(always)]
fn narrow_line<S: Simd>(line: &[i32], target: &mut [i16]) {
    let n = line.len().min(target.len());
    let (line, target) = (&line[..n], &mut target[..n]);
    let narrow = narrow_octet::<S>;
    let (octets, tail) = line.as_chunks::<LANES>();
    let (targets, _) = target.as_chunks_mut::<LANES>();
    let len = octets.len().min(targets.len());
    let (octets, targets) = (&octets[..len], &mut targets[..len]);
    straight_runs!(16, len, |k| {
        narrow(&octets[k], &mut targets[k]);
    });
    if tail.is_empty() {
        return;
    }
    let last_values = line.last_chunk::<LANES>();
    match (last_values, target.last_chunk_mut::<LANES>()) {
        (Some(values), Some(octet)) => narrow(values, octet),
        _ => {
            for (slot, &value) in target.iter_mut().zip(line) {
                *slot = narrow16(value);
            }
        }
    }
}

/// The taps of one tap entry of the depthwise kernel: its unit relative to output position 0 in
/// the [`TapPlane`], and the kernel index (ki · KW + kj) of the tap each lane of a pair
/// multiplies, for even outputs (`even`, the only ones unless the columns are
/// [`Columns::Split`]) and odd outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryTaps {
    /// Unit of the entry's first lane for output position 0.
    pub unit: usize,
    /// Taps of the two lanes of a pair for even outputs (or all outputs); `None` takes weight
    /// 0.
    pub even: [Option<usize>; 2],
    /// Taps of the two lanes of a pair for odd outputs at SW = 1.
    pub odd: [Option<usize>; 2],
}

/// The tap entries of the depthwise kernel for `s`, in order of unit within each kernel row.
/// At SW = 1 every tap at column x lands in the entry of column ⌊x / 2⌋ · 2 (lane x mod 2) for
/// even outputs and of ⌊(x + 1) / 2⌋ · 2 (lane (x + 1) mod 2) for odd ones; otherwise two taps
/// of a kernel row at adjacent units share an entry, and any other tap takes one alone. As many
/// entries as [`ConvShape::tap_entries`].
pub fn depthwise_pairing(s: &ConvShape) -> Vec<EntryTaps> {
    pairing_in(s, &s.tap_plane())
}

/// [`depthwise_pairing`] for the shape's tap plane `geometry`.
pub(super) fn pairing_in(s: &ConvShape, geometry: &TapPlane) -> Vec<EntryTaps> {
    let TapPlane {
        columns, row, rows, ..
    } = *geometry;
    let [dil_h, dil_w] = s.dilation;
    let unit = |y: usize, x: usize| {
        let unit = s.tap_unit(columns, row as u64, rows as u64, y as u64, x as u64);
        usize::try_from(unit).unwrap_or(usize::MAX)
    };
    // At most as many entries as `tap_entries` (as many at strides 1 and 2).
    let mut pairing: Vec<EntryTaps> =
        Vec::with_capacity(usize::try_from(s.tap_entries()).unwrap_or(0));
    if columns == Columns::Split {
        for ki in 0..s.kernel_h {
            let base = unit(ki * dil_h, 0);
            let first = pairing.len();
            // Entries of this row by column: each tap's even read, then its odd read.
            let mut lanes: Vec<(usize, bool, usize, usize)> = (0..s.kernel_w)
                .flat_map(|kj| {
                    let (x, tap) = (kj * dil_w, ki * s.kernel_w + kj);
                    [
                        (x - x % 2, false, x % 2, tap),
                        (x + 1 - (x + 1) % 2, true, (x + 1) % 2, tap),
                    ]
                })
                .collect();
            lanes.sort_unstable();
            for (column, odd, lane, tap) in lanes {
                let unit = base + column;
                if pairing.len() == first || pairing.last().is_some_and(|e| e.unit != unit) {
                    pairing.push(EntryTaps {
                        unit,
                        ..EntryTaps::default()
                    });
                }
                if let Some(entry) = pairing.last_mut() {
                    let lanes = if odd { &mut entry.odd } else { &mut entry.even };
                    lanes[lane] = Some(tap);
                }
            }
        }
        return pairing;
    }
    // Computed once per node: no division in the loops.
    let mut order: Vec<(usize, usize, usize)> = (0..s.kernel_h * s.kernel_w)
        .map(|tap| {
            let (ki, kj) = (tap / s.kernel_w, tap % s.kernel_w);
            (ki, unit(ki * dil_h, kj * dil_w), tap)
        })
        .collect();
    order.sort_unstable();
    let mut rest = order.as_slice();
    while let Some((&(ki, unit, tap), after)) = rest.split_first() {
        let (second, next_rest) = match after.split_first() {
            Some((&(next_ki, next, next_tap), later)) if next_ki == ki && next == unit + 1 => {
                (Some(next_tap), later)
            }
            _ => (None, after),
        };
        pairing.push(EntryTaps {
            unit,
            even: [Some(tap), second],
            odd: [None, None],
        });
        rest = next_rest;
    }
    pairing
}

/// Packs the weights of the depthwise kernel for `shape` (a shape it takes): per output
/// channel, per tap entry of [`depthwise_pairing`] in order, the weights of its even outputs'
/// lane pair (`[w_first, w_second]` repeated four times, 0 for a lane without a tap), then of its
/// odd outputs' pair (only the [`Columns::Split`] columns have odd outputs of their own; 0
/// otherwise). Weights are within 8 bits (cvm-compat §3), so narrowing them is exact.
pub fn pack_depthwise(shape: &ConvShape, weights: &[i32]) -> PackedRows {
    let geometry = shape.tap_plane();
    let pairing = pairing_in(shape, &geometry);
    let split = geometry.columns == Columns::Split;
    let taps = shape.kernel_h * shape.kernel_w;
    let stride = pairing.len() * 2 * LANES;
    let mut values = vec![0; shape.out_channels * stride];
    if stride > 0 && taps > 0 {
        for (row, kernel) in values
            .chunks_exact_mut(stride)
            .zip(weights.chunks_exact(taps))
        {
            let weight = |tap: Option<usize>| {
                tap.and_then(|tap| kernel.get(tap))
                    .map_or(0, |&w| narrow16(w))
            };
            let (entries, _) = row.as_chunks_mut::<{ 2 * LANES }>();
            for (entry, taps) in entries.iter_mut().zip(&pairing) {
                let pairs = if split {
                    [taps.even, taps.odd]
                } else {
                    [taps.even, [None, None]]
                };
                let (halves, _) = entry.as_chunks_mut::<LANES>();
                for (half, [first, second]) in halves.iter_mut().zip(pairs) {
                    let pair = [weight(first), weight(second)];
                    for (slot, &w) in half.iter_mut().zip(pair.iter().cycle()) {
                        *slot = w;
                    }
                }
            }
        }
    }
    PackedRows::from_rows(values, shape.out_channels, stride)
}

/// Writes `(values[i], values[i + 1])` at `pairs[2i..2i + 2]` for every i of `pairs`' length.
fn neighbour_pairs<S: Simd>(values: &[i16], pairs: &mut [i16]) {
    let (at, _) = values.as_chunks::<LANES>();
    let (next, _) = values.get(1..).unwrap_or_default().as_chunks::<LANES>();
    let (targets, _) = pairs.as_chunks_mut::<{ 2 * LANES }>();
    for ((at, next), target) in at.iter().zip(next).zip(targets) {
        let (lo, hi) = S::interleave16(S::load16(at), S::load16(next));
        let (halves, _) = target.as_chunks_mut::<LANES>();
        if let [first, second] = halves {
            S::store16(first, lo);
            S::store16(second, hi);
        }
    }
}
