//! CPU MSM: rayon-parallel, sparse-aware, over blst's Pippenger.

use rayon::prelude::*;

use cuzk_field::Fr;

use crate::{MsmError, MsmPoint};

/// Below this many points per task, splitting costs more (per-call bucket setup) than it saves.
const MIN_PIPPENGER_CHUNK: usize = 1 << 10;
/// Scan granularity of the classification pass.
const CLASSIFY_CHUNK: usize = 1 << 12;

/// `Σ scalars[i] · points[i]`; the identity for n = 0.
///
/// Real Groth16 witnesses are mostly 0 and 1: zero scalars are skipped, points whose scalar is
/// one are summed with plain mixed additions, and only the remaining terms go through
/// Pippenger, split into one blst call per rayon thread.
pub fn msm<P: MsmPoint>(points: &[P], scalars: &[Fr]) -> Result<P::Projective, MsmError> {
    check_lengths(points.len(), scalars.len())?;
    let dense = scalars
        .par_chunks(CLASSIFY_CHUNK)
        .all(|c| c.iter().all(is_general));
    if dense {
        return Ok(parallel_pippenger(points, scalars));
    }

    // Per chunk: the sum of the ones, and the terms that need Pippenger.
    let parts: Vec<(P::Projective, Vec<P>, Vec<Fr>)> = points
        .par_chunks(CLASSIFY_CHUNK)
        .zip(scalars.par_chunks(CLASSIFY_CHUNK))
        .map(|(ps, ss)| {
            let mut ones = P::Projective::default();
            let (mut rest_p, mut rest_s) = (Vec::new(), Vec::new());
            for (p, s) in ps.iter().zip(ss) {
                if *s == Fr::ONE {
                    ones += *p;
                } else if !s.is_zero() {
                    rest_p.push(*p);
                    rest_s.push(*s);
                }
            }
            (ones, rest_p, rest_s)
        })
        .collect();

    let rest_len = parts.iter().map(|p| p.1.len()).sum();
    let mut rest_points = Vec::with_capacity(rest_len);
    let mut rest_scalars = Vec::with_capacity(rest_len);
    let mut ones = P::Projective::default();
    for (o, p, s) in parts {
        ones += o;
        rest_points.extend_from_slice(&p);
        rest_scalars.extend_from_slice(&s);
    }
    Ok(ones + parallel_pippenger(&rest_points, &rest_scalars))
}

/// Neither zero nor one: the terms Pippenger is for.
fn is_general(s: &Fr) -> bool {
    !s.is_zero() && *s != Fr::ONE
}

fn check_lengths(points: usize, scalars: usize) -> Result<(), MsmError> {
    if points == scalars {
        Ok(())
    } else {
        Err(MsmError::LengthMismatch { points, scalars })
    }
}

/// One blst Pippenger per thread over equal slices, summed.
fn parallel_pippenger<P: MsmPoint>(points: &[P], scalars: &[Fr]) -> P::Projective {
    let threads = rayon::current_num_threads().max(1);
    let chunk = points.len().div_ceil(threads).max(MIN_PIPPENGER_CHUNK);
    points
        .par_chunks(chunk)
        .zip(scalars.par_chunks(chunk))
        .map(|(p, s)| P::pippenger(p, s).expect("chunks of equal-length slices"))
        .reduce(P::Projective::default, |a, b| a + b)
}

/// Double-and-add over the canonical bits of each scalar, term by term: slow and obviously
/// right, the oracle for tests.
pub fn naive_msm<P: MsmPoint>(points: &[P], scalars: &[Fr]) -> Result<P::Projective, MsmError> {
    check_lengths(points.len(), scalars.len())?;
    let mut total = P::Projective::default();
    for (p, s) in points.iter().zip(scalars) {
        let mut acc = P::Projective::default();
        for limb in s.to_canonical().iter().rev() {
            for bit in (0..64).rev() {
                acc = P::double(&acc);
                if (limb >> bit) & 1 == 1 {
                    acc += *p;
                }
            }
        }
        total += acc;
    }
    Ok(total)
}
