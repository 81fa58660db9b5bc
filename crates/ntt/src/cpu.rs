//! The parallel CPU transforms, radix-2 butterflies arranged for few passes over memory.
//!
//! A vector of n = 2^log_n elements is seen as a `rows × cols` matrix (row-major, both powers
//! of two). The stages whose butterflies stay inside a row (half-size m < cols) run row by row,
//! each row in cache; the stages with m ≥ cols pair whole rows and run in a *column pass*: a
//! group of a few adjacent columns is copied into a contiguous scratch (one cache-friendly run
//! per row), all those stages run there, and it is copied back. A transform is then two passes
//! over memory instead of one per outer stage.
//!
//! The forward transform is decimation in time (bit-reversed in, natural out); the inverse is
//! decimation in frequency with ω^-1 (natural in, bit-reversed out). The quotient pairs them so
//! no permutation runs between its transforms: the coset scaling by g^i is applied in the
//! permuted order. Every step is exact field arithmetic on canonical values, so any arrangement
//! of the same transform gives the same bits.

use cuzk_field::Fr;
use rayon::prelude::*;

use crate::Domain;
use crate::arith::{self, L};

fn raw(v: &mut [Fr]) -> &mut [L] {
    bytemuck::cast_slice_mut(v)
}

/// Elements per parallel work item of the element-wise passes (128 KiB of Fr).
pub(crate) const CHUNK: usize = 1 << 12;
/// Largest transform done as a single row: 2^11 elements, 64 KiB.
const ROW_LOG: u32 = 11;
/// Columns per column-pass group: 512-byte runs per row; 2^11 rows make a 1 MiB scratch (L2).
const GROUP: usize = 16;
/// Stages with m < n >> COMPACT_SHIFT get their own contiguous twiddle table (n >> COMPACT_SHIFT
/// elements in all); the three largest read `half` at stride 1, 2, 4 instead of adding 7/8 of
/// its size again.
const COMPACT_SHIFT: u32 = 3;
/// Bit-reversal tiles are 2^TILE_LOG × 2^TILE_LOG elements (32 KiB, L1).
const TILE_LOG: u32 = 5;

/// Twiddle factors of one domain.
pub(crate) struct Twiddles {
    /// ω^j for j < n/2: stage m's table at stride n/(2m).
    half: Vec<L>,
    /// Stage m's ω_2m^j for j < m at [m − 1, 2m − 1), for every m < `compact_below`.
    compact: Vec<L>,
    compact_below: usize,
}

impl Twiddles {
    pub(crate) fn new(log_n: u32, omega: Fr) -> Self {
        let n = 1usize << log_n;
        let mut half = vec![Fr::ZERO; n / 2];
        fill_powers(&mut half, Fr::ONE, omega);
        let half: Vec<L> = half.into_par_iter().map(arith::limbs).collect();
        let compact_below = (n >> COMPACT_SHIFT).max(1);
        let compact = (0..compact_below - 1)
            .into_par_iter()
            .map(|k| {
                let m = 1usize << (k + 1).ilog2();
                half[(k + 1 - m) * (n / (2 * m))]
            })
            .collect();
        Self {
            half,
            compact,
            compact_below,
        }
    }

    /// Stage m's twiddles: ω_2m^j = table[j · stride] for j < m.
    fn stage(&self, m: usize) -> (&[L], usize) {
        if m < self.compact_below {
            (&self.compact[m - 1..2 * m - 1], 1)
        } else {
            (&self.half, self.half.len() / m)
        }
    }
}

/// `out[i] = start · base^i`, in parallel.
pub(crate) fn fill_powers(out: &mut [Fr], start: Fr, base: Fr) {
    let b = arith::limbs(base);
    raw(out)
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut acc = arith::limbs(start * base.pow(&[(k * CHUNK) as u64]));
            for slot in chunk {
                *slot = acc;
                acc = arith::mul(&acc, &b);
            }
        });
}

/// `i` with its low `bits` bits reversed.
pub fn bit_reverse_index(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

pub(crate) fn bit_reverse(v: &mut [Fr], log_n: u32) {
    let v = raw(v);
    let src = v.to_vec();
    bit_reverse_raw(&src, v, log_n);
}

/// `dst[i] = src[bit_reverse(i)]`, tile by tile: a tile reads 2^TILE_LOG runs of 2^TILE_LOG
/// adjacent elements and writes as many, where an element-wise gather touches one cache line
/// and one page per element.
fn bit_reverse_raw(src: &[L], dst: &mut [L], log_n: u32) {
    debug_assert_eq!(src.len(), dst.len());
    let n = dst.len();
    if log_n < 2 * TILE_LOG + 2 {
        dst.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(k, chunk)| {
                for (j, x) in chunk.iter_mut().enumerate() {
                    *x = src[bit_reverse_index(k * CHUNK + j, log_n)];
                }
            });
        return;
    }
    // i = (h, mid, l) with h and l of TILE_LOG bits: bit_reverse(i) = (rev l, rev mid, rev h).
    // A task owns a range of mid in every one of the 2^TILE_LOG slices h.
    let (t, u) = (TILE_LOG, log_n - 2 * TILE_LOG);
    let tile = 1usize << t;
    let mids_per_task = (1usize << u).div_ceil(64);
    let mut tasks: Vec<Vec<&mut [L]>> = Vec::new();
    for slice in dst.chunks_mut(n >> t) {
        for (k, piece) in slice.chunks_mut(mids_per_task << t).enumerate() {
            if k == tasks.len() {
                tasks.push(Vec::with_capacity(tile));
            }
            tasks[k].push(piece);
        }
    }
    let rev_h: Vec<usize> = (0..tile).map(|h| bit_reverse_index(h, t)).collect();
    tasks
        .into_par_iter()
        .enumerate()
        .for_each(|(k, mut slices)| {
            for mi in 0..slices[0].len() >> t {
                let smid = bit_reverse_index(k * mids_per_task + mi, u) << t;
                for l in 0..tile {
                    let base = (bit_reverse_index(l, t) << (u + t)) | smid;
                    let run = &src[base..base + tile];
                    for (slice, &rh) in slices.iter_mut().zip(&rev_h) {
                        slice[(mi << t) + l] = run[rh];
                    }
                }
            }
        });
}

/// The matrix a transform of 2^log_n runs on: 2^k1 rows of 2^k2 elements.
#[derive(Clone, Copy)]
struct Shape {
    k1: u32,
    k2: u32,
}

impl Shape {
    fn of(log_n: u32) -> Self {
        // Rows of at most 2^11 elements for n ≤ 2^22 (they stay in L2), and at most 2^11 rows
        // so a column group's scratch stays at 1 MiB; beyond 2^22 the rows grow.
        let k1 = if log_n <= ROW_LOG {
            0
        } else {
            (log_n / 2).min(ROW_LOG)
        };
        Self { k1, k2: log_n - k1 }
    }
    fn rows(self) -> usize {
        1 << self.k1
    }
    fn cols(self) -> usize {
        1 << self.k2
    }
}

/// Per-row work of a row pass: gets the row index and the row.
trait RowOp: Fn(usize, &mut [L]) + Sync {}
impl<F: Fn(usize, &mut [L]) + Sync> RowOp for F {}

/// Runs `op` on every row of `dst`, after copying it in from `src` where given.
fn row_pass(dst: &mut [L], src: Option<&[L]>, shape: Shape, op: impl RowOp) {
    let cols = shape.cols();
    let min_rows = (CHUNK / cols).max(1);
    match src {
        None => dst
            .par_chunks_mut(cols)
            .with_min_len(min_rows)
            .enumerate()
            .for_each(|(r, row)| op(r, row)),
        Some(src) => dst
            .par_chunks_mut(cols)
            .zip(src.par_chunks(cols))
            .with_min_len(min_rows)
            .enumerate()
            .for_each(|(r, (row, s))| {
                row.copy_from_slice(s);
                op(r, row);
            }),
    }
}

/// The run `[q0, q0 + width)` of every row, grouped by q0 (one column group per entry).
fn column_groups(v: &mut [L], shape: Shape, width: usize) -> Vec<Vec<&mut [L]>> {
    let mut out: Vec<Vec<&mut [L]>> = (0..shape.cols() / width)
        .map(|_| Vec::with_capacity(shape.rows()))
        .collect();
    for row in v.chunks_mut(shape.cols()) {
        for (g, run) in row.chunks_mut(width).enumerate() {
            out[g].push(run);
        }
    }
    out
}

/// Copies each group of columns into a row-major `rows × width` scratch, runs `op(scratch, q0)`
/// on it and writes it back.
fn column_pass(v: &mut [L], shape: Shape, op: impl Fn(&mut [L], usize) + Sync) {
    if shape.k1 == 0 {
        return;
    }
    let width = GROUP.min(shape.cols());
    let size = shape.rows() * width;
    column_groups(v, shape, width)
        .into_par_iter()
        .enumerate()
        .for_each_init(
            || vec![[0u64; 4]; size],
            |scratch: &mut Vec<L>, (g, mut runs)| {
                for (dst, run) in scratch.chunks_exact_mut(width).zip(&runs) {
                    dst.copy_from_slice(run);
                }
                op(scratch, g * width);
                for (src, run) in scratch.chunks_exact(width).zip(&mut runs) {
                    run.copy_from_slice(src);
                }
            },
        );
}

#[inline(always)]
fn butterfly(x: &mut L, y: &mut L, w: &L) {
    let t = arith::mul(y, w);
    *y = arith::sub(x, &t);
    *x = arith::add(x, &t);
}

#[inline(always)]
fn butterfly_one(x: &mut L, y: &mut L) {
    let (a, b) = (*x, *y);
    *x = arith::add(&a, &b);
    *y = arith::sub(&a, &b);
}

/// The inverse DIF butterfly with ω_2m^-j = −ω_2m^(m−j) (0 < j < m) and `w` = ω_2m^(m−j):
/// (x − y)·ω^-j = (y − x)·ω^(m−j), so the forward table serves both directions.
#[inline(always)]
fn butterfly_inv(x: &mut L, y: &mut L, w: &L) {
    let (a, b) = (*x, *y);
    *x = arith::add(&a, &b);
    *y = arith::mul(&arith::sub(&b, &a), w);
}

/// DIT butterflies of `lo[k]`, `hi[k]` with ω_2m^(j0 + k) from stage m's `(table, stride)`.
#[inline(always)]
fn dit_run(lo: &mut [L], hi: &mut [L], (table, stride): (&[L], usize), j0: usize) {
    let (lo, hi, j0) = if j0 == 0 {
        // ω^0 = 1: skip the multiplication.
        butterfly_one(&mut lo[0], &mut hi[0]);
        (&mut lo[1..], &mut hi[1..], 1)
    } else {
        (lo, hi, j0)
    };
    let tws = table[j0 * stride..].iter().step_by(stride);
    for ((x, y), w) in lo.iter_mut().zip(hi).zip(tws) {
        butterfly(x, y, w);
    }
}

/// Inverse DIF butterflies of `lo[k]`, `hi[k]` with ω_2m^-(j0 + k), stage m.
#[inline(always)]
fn dif_inv_run(lo: &mut [L], hi: &mut [L], (table, stride): (&[L], usize), m: usize, j0: usize) {
    let (lo, hi, j0) = if j0 == 0 {
        butterfly_one(&mut lo[0], &mut hi[0]);
        (&mut lo[1..], &mut hi[1..], 1)
    } else {
        (lo, hi, j0)
    };
    // ω_2m^(m − j) for j = j0, j0 + 1, …: descending through the table.
    let tws = table[..=(m - j0) * stride].iter().rev().step_by(stride);
    for ((x, y), w) in lo.iter_mut().zip(hi).zip(tws) {
        butterfly_inv(x, y, w);
    }
}

/// The DIT stages inside one row: m = 1, 2, …, len/2.
fn dit_row(row: &mut [L], tw: &Twiddles) {
    for pair in row.chunks_exact_mut(2) {
        let (lo, hi) = pair.split_at_mut(1);
        butterfly_one(&mut lo[0], &mut hi[0]);
    }
    let mut m = 2;
    while m < row.len() {
        let t = tw.stage(m);
        for chunk in row.chunks_exact_mut(2 * m) {
            let (lo, hi) = chunk.split_at_mut(m);
            dit_run(lo, hi, t, 0);
        }
        m *= 2;
    }
}

/// The inverse DIF stages inside one row: m = len/2, …, 1.
fn dif_inv_row(row: &mut [L], tw: &Twiddles) {
    let mut m = row.len() / 2;
    while m >= 2 {
        let t = tw.stage(m);
        for chunk in row.chunks_exact_mut(2 * m) {
            let (lo, hi) = chunk.split_at_mut(m);
            dif_inv_run(lo, hi, t, m, 0);
        }
        m /= 2;
    }
    if m == 1 {
        for pair in row.chunks_exact_mut(2) {
            let (lo, hi) = pair.split_at_mut(1);
            butterfly_one(&mut lo[0], &mut hi[0]);
        }
    }
}

/// The DIT stages that pair rows (m = cols, 2·cols, …, n/2) on a column group's scratch of
/// columns starting at column q0.
fn dit_columns(s: &mut [L], shape: Shape, q0: usize, tw: &Twiddles) {
    let mut h = 1;
    while h < shape.rows() {
        let t = tw.stage(h * shape.cols());
        column_stage(s, shape, h, q0, |lo, hi, j0| dit_run(lo, hi, t, j0));
        h *= 2;
    }
}

/// The inverse DIF stages that pair rows (m = n/2, …, cols) on a column group's scratch.
fn dif_inv_columns(s: &mut [L], shape: Shape, q0: usize, tw: &Twiddles) {
    let mut h = shape.rows() / 2;
    while h >= 1 {
        let m = h * shape.cols();
        let t = tw.stage(m);
        column_stage(s, shape, h, q0, |lo, hi, j0| dif_inv_run(lo, hi, t, m, j0));
        h /= 2;
    }
}

/// One row-pairing stage (rows r and r + h of every block of 2h rows) on a column group's
/// scratch: `run(lo, hi, j0)` with j0 the twiddle index of the pair's first column.
fn column_stage(
    s: &mut [L],
    shape: Shape,
    h: usize,
    q0: usize,
    run: impl Fn(&mut [L], &mut [L], usize),
) {
    let width = s.len() >> shape.k1;
    for blk in s.chunks_exact_mut(2 * h * width) {
        let (lo, hi) = blk.split_at_mut(h * width);
        let pairs = lo.chunks_exact_mut(width).zip(hi.chunks_exact_mut(width));
        for (r, (lo, hi)) in pairs.enumerate() {
            run(lo, hi, r * shape.cols() + q0);
        }
    }
}

/// start · base^bit_reverse(p) for the element at position p = r·cols + q, as the product
/// `per_row[r] · per_col[q]`: bit_reverse(p) = rev(q)·rows + rev(r).
struct BrPowers {
    per_row: Vec<L>,
    per_col: Vec<L>,
}

impl BrPowers {
    fn new(shape: Shape, start: Fr, base: Fr) -> Self {
        let powers = |start: Fr, base: Fr, k: u32| -> Vec<L> {
            let mut p = vec![Fr::ZERO; 1 << k];
            fill_powers(&mut p, start, base);
            (0..1usize << k)
                .map(|i| arith::limbs(p[bit_reverse_index(i, k)]))
                .collect()
        };
        Self {
            per_row: powers(Fr::ONE, base, shape.k1),
            per_col: powers(start, base.pow(&[shape.rows() as u64]), shape.k2),
        }
    }

    fn apply(&self, r: usize, row: &mut [L]) {
        let f = self.per_row[r];
        for (x, c) in row.iter_mut().zip(&self.per_col) {
            *x = arith::mul(&arith::mul(x, c), &f);
        }
    }
}

/// The forward DFT X_k = Σ x_j ω^(jk) of `v` scaled to `v_j · g^j` first when `shift` is g;
/// natural order in and out.
pub(crate) fn forward(domain: &Domain, v: &mut [Fr], shift: Option<Fr>) {
    let n = v.len();
    debug_assert_eq!(n, domain.size());
    let log_n = domain.log_size();
    let shape = Shape::of(log_n);
    let tw = domain.twiddles();
    let scale = shift.map(|g| BrPowers::new(shape, Fr::ONE, g));
    let v = raw(v);
    let mut permuted = vec![[0u64; 4]; n];
    bit_reverse_raw(v, &mut permuted, log_n);
    row_pass(v, Some(&permuted), shape, |r, row| {
        if let Some(s) = &scale {
            s.apply(r, row);
        }
        dit_row(row, tw);
    });
    drop(permuted);
    column_pass(v, shape, |s, q0| dit_columns(s, shape, q0, tw));
}

/// `v_i ← start · base^i · Σ_j v_j ω^-(ij)`: the inverse DFT times n (start = 1/n for the
/// inverse transform); natural order in and out.
pub(crate) fn inverse(domain: &Domain, v: &mut [Fr], start: Fr, base: Fr) {
    let n = v.len();
    debug_assert_eq!(n, domain.size());
    let log_n = domain.log_size();
    let v = raw(v);
    let mut scratch = vec![[0u64; 4]; n];
    inverse_into(domain, v, &mut scratch, start, base);
    bit_reverse_raw(&scratch, v, log_n);
}

/// The inverse transform of `v` with the scaling of [`inverse`], in bit-reversed order into
/// `out`; `v` is clobbered.
fn inverse_into(domain: &Domain, v: &mut [L], out: &mut [L], start: Fr, base: Fr) {
    let shape = Shape::of(domain.log_size());
    let tw = domain.twiddles();
    column_pass(v, shape, |s, q0| dif_inv_columns(s, shape, q0, tw));
    if base == Fr::ONE {
        let s = arith::limbs(start);
        row_pass(out, Some(v), shape, |_, row| {
            dif_inv_row(row, tw);
            for x in row {
                *x = arith::mul(x, &s);
            }
        });
    } else {
        let scale = BrPowers::new(shape, start, base);
        row_pass(out, Some(v), shape, |r, row| {
            dif_inv_row(row, tw);
            scale.apply(r, row);
        });
    }
}

/// The Groth16 quotient (see [`Domain::quotient_in_place`]): each of a, b, c goes to
/// coefficients (inverse DIF, natural → bit-reversed), is scaled by g^i/n in that order and
/// evaluated on the coset (DIT, bit-reversed → natural) with no permutation in between; the
/// last inverse transform folds Z^-1 into its g^-i/n scaling and ends with the one permutation.
pub(crate) fn quotient(domain: &Domain, a: &mut [Fr], b: &mut [Fr], c: &mut [Fr], z_inv: Fr) {
    let shape = Shape::of(domain.log_size());
    let tw = domain.twiddles();
    let (a, b, c) = (raw(a), raw(b), raw(c));
    let to_coset_scale = BrPowers::new(shape, domain.size_inv(), domain.coset_shift());
    for v in [&mut *a, &mut *b, &mut *c] {
        column_pass(v, shape, |s, q0| dif_inv_columns(s, shape, q0, tw));
        row_pass(v, None, shape, |r, row| {
            dif_inv_row(row, tw);
            to_coset_scale.apply(r, row);
            dit_row(row, tw);
        });
        column_pass(v, shape, |s, q0| dit_columns(s, shape, q0, tw));
    }
    pointwise_quotient(a, b, c);
    inverse_into(
        domain,
        a,
        b,
        z_inv * domain.size_inv(),
        domain.coset_shift_inv(),
    );
    bit_reverse_raw(b, a, domain.log_size());
}

/// `a[i] = a[i]·b[i] − c[i]` (Z^-1 is folded into the last scaling).
fn pointwise_quotient(a: &mut [L], b: &[L], c: &[L]) {
    a.par_chunks_mut(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .zip(c.par_chunks(CHUNK))
        .for_each(|((a, b), c)| {
            for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                *a = arith::sub(&arith::mul(a, b), c);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limbs(n: usize, seed: u64) -> Vec<L> {
        crate::testing::random_fr(n, seed)
            .into_iter()
            .map(arith::limbs)
            .collect()
    }

    #[test]
    fn tiled_bit_reversal_is_the_permutation() {
        for log_n in [0u32, 1, 5, 11, 12, 13, 16] {
            let n = 1 << log_n;
            let src = limbs(n, u64::from(log_n));
            let mut dst = vec![[0u64; 4]; n];
            bit_reverse_raw(&src, &mut dst, log_n);
            for (i, x) in dst.iter().enumerate() {
                assert_eq!(*x, src[bit_reverse_index(i, log_n)], "2^{log_n}, {i}");
            }
        }
    }

    #[test]
    fn compact_tables_are_strided_half() {
        let log_n = 9;
        let d = Domain::new(log_n).unwrap();
        let tw = d.twiddles();
        for lg_m in 0..log_n {
            let m = 1usize << lg_m;
            let (t, stride) = tw.stage(m);
            for j in 0..m {
                let want = arith::limbs(d.generator().pow(&[(j << (log_n - 1 - lg_m)) as u64]));
                assert_eq!(t[j * stride], want, "m = {m}, j = {j}");
            }
        }
    }
}
