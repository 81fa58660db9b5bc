//! Parallel decoding of point arrays and the selectable point checks.

use std::sync::Mutex;

use cuzk_field::{DecodeError, Fp, Fp2, G1Affine, G2Affine};
use cuzk_msm::subgroup::{self, Gpu, PointCheckError};
use rayon::prelude::*;

use crate::FormatError;

/// How much of each point a reader verifies: one choice for every reader of this crate.
/// Verifying keys, the verifying-key part of cuzk and bellperson proving keys, and proofs are
/// always checked in full, whatever the choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PointChecks {
    /// Canonical coordinates, on the curve, in the prime-order subgroup: for files of unknown
    /// origin, and the same in every format. The subgroup check dominates: it runs on the first
    /// GPU when there is one (large arrays, after their decoding), else on every core.
    Full,
    /// Canonical coordinates and on the curve, no subgroup check (the dominant cost of a load
    /// without a GPU): for keys from a trusted source. A bad proving key can only make the
    /// prover's own proofs fail or leak, never make a verifier accept a false statement.
    /// - cuzk: the file's BLAKE3 checksum, always checked, covers its integrity.
    /// - bellperson, zkey: nothing covers the file's integrity (those formats carry no
    ///   checksum): points that are on the curve but corrupted are loaded.
    OnCurve,
    /// Instead of the point checks the whole file must hash to this digest (as Filecoin checks
    /// its parameters against published digests); the hash runs beside the parallel decoding.
    /// - cuzk: the digest covers every byte, the checksum included (which is still checked);
    ///   points are checked for canonical coordinates only.
    /// - bellperson: canonical coordinates only.
    /// - zkey (small, read whole): hashed before parsing; points keep the curve check.
    ///
    /// zkey's header points are always fully checked; its arrays, IC included, follow the
    /// choice.
    TrustedDigest(crate::Digest),
}

impl PointChecks {
    /// Whether every point is checked for the prime-order subgroup.
    pub(crate) fn subgroup(&self) -> bool {
        matches!(self, PointChecks::Full)
    }

    /// Whether zcash-encoded points are checked against the curve equation (iden3's are
    /// always).
    pub(crate) fn on_curve(&self) -> bool {
        !matches!(self, PointChecks::TrustedDigest(_))
    }

    /// The digest the whole file must have, if any.
    pub(crate) fn digest(&self) -> Option<&crate::Digest> {
        match self {
            PointChecks::TrustedDigest(d) => Some(d),
            PointChecks::Full | PointChecks::OnCurve => None,
        }
    }
}

/// A curve point type the readers can decode in bulk, described by its coordinates as Fp
/// elements (x then y; each Fp2 as c0 then c1), from which every encoding is derived.
pub(crate) trait Point: Copy + Send + Sync + Default + PartialEq {
    /// Fp elements per point: 2 (G1) or 4 (G2).
    const FPS: usize;
    /// Where the zcash encoding puts each of [`Self::FPS`]: it writes an Fp2 as c1 then c0.
    const ZCASH_ORDER: &'static [usize];
    const UNCOMPRESSED: usize = 48 * Self::FPS;
    const LEM: usize = 48 * Self::FPS;
    fn from_fps_unchecked(fps: &[Fp]) -> Self;
    fn to_fps(&self) -> [Fp; 4];
    fn identity_point(&self) -> bool;
    fn on_curve(&self) -> bool;
    fn in_subgroup(&self) -> bool;
    /// Every point in the subgroup, checked on the GPU (points on the curve).
    fn subgroup_on_gpu(gpu: &Gpu, points: &[Self]) -> Result<(), PointCheckError>;
    /// zcash uncompressed, canonical and on the curve (cuzk-field's decoder).
    fn decode_uncompressed(bytes: &[u8]) -> Result<Self, DecodeError>;
    fn encode_uncompressed(&self, out: &mut Vec<u8>);

    /// Canonical coordinates only, no curve equation: for files vouched for by a digest.
    fn decode_uncompressed_trusted(b: &[u8]) -> Result<Self, DecodeError> {
        if uncompressed_identity(b)? {
            return Ok(Self::default());
        }
        let mut fps = [Fp::ZERO; 4];
        for (k, &at) in Self::ZCASH_ORDER.iter().enumerate() {
            fps[at] = fp_be(&b[k * 48..(k + 1) * 48])?;
        }
        Ok(Self::from_fps_unchecked(&fps[..Self::FPS]))
    }

    /// iden3's little-endian Montgomery coordinates, the identity all zeros (as blst stores it).
    fn decode_lem(b: &[u8]) -> Result<Self, DecodeError> {
        let mut fps = [Fp::ZERO; 4];
        for (k, fp) in fps.iter_mut().take(Self::FPS).enumerate() {
            *fp = fp_from_lem(&b[k * 48..(k + 1) * 48])?;
        }
        if fps.iter().all(Fp::is_zero) {
            return Ok(Self::default());
        }
        let p = Self::from_fps_unchecked(&fps[..Self::FPS]);
        if p.on_curve() {
            Ok(p)
        } else {
            Err(DecodeError::NotOnCurve)
        }
    }

    fn encode_lem(&self, out: &mut Vec<u8>) {
        if self.identity_point() {
            out.extend(std::iter::repeat_n(0u8, Self::LEM));
        } else {
            for fp in &self.to_fps()[..Self::FPS] {
                fp_to_lem(fp, out);
            }
        }
    }
}

/// A coordinate (Fp) in iden3's little-endian Montgomery form: x·2^384 mod q.
fn fp_from_lem(b: &[u8]) -> Result<Fp, DecodeError> {
    let mut limbs = [0u64; 6];
    for (l, c) in limbs.iter_mut().zip(b.chunks_exact(8)) {
        *l = u64::from_le_bytes(c.try_into().expect("8 bytes"));
    }
    Fp::from_montgomery(limbs).ok_or(DecodeError::NonCanonical)
}

fn fp_to_lem(x: &Fp, out: &mut Vec<u8>) {
    for l in x.to_montgomery() {
        out.extend_from_slice(&l.to_le_bytes());
    }
}

/// A big-endian coordinate; the flag bits of the first byte must already be clear.
fn fp_be(b: &[u8]) -> Result<Fp, DecodeError> {
    Fp::from_bytes_be(b.try_into().expect("48 bytes")).map_err(|_| DecodeError::BadEncoding)
}

/// The zcash flags of an uncompressed encoding: `Ok(true)` for the identity, an error for a
/// compressed or malformed one.
fn uncompressed_identity(b: &[u8]) -> Result<bool, DecodeError> {
    let flags = b[0] >> 5;
    if flags & 0b101 != 0 {
        return Err(DecodeError::BadEncoding);
    }
    if flags & 0b010 != 0 {
        return if b[0] & 0x1f == 0 && b[1..].iter().all(|&x| x == 0) {
            Ok(true)
        } else {
            Err(DecodeError::BadEncoding)
        };
    }
    Ok(false)
}

macro_rules! point_common {
    ($t:ty, $n:literal) => {
        fn identity_point(&self) -> bool {
            self.is_identity()
        }
        fn on_curve(&self) -> bool {
            self.is_on_curve()
        }
        fn in_subgroup(&self) -> bool {
            self.is_torsion_free()
        }
        fn decode_uncompressed(bytes: &[u8]) -> Result<Self, DecodeError> {
            <$t>::from_uncompressed_unchecked(bytes.try_into().expect(concat!($n, " bytes")))
        }
        fn encode_uncompressed(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(&self.to_uncompressed());
        }
    };
}

impl Point for G1Affine {
    const FPS: usize = 2;
    const ZCASH_ORDER: &'static [usize] = &[0, 1];
    fn from_fps_unchecked(f: &[Fp]) -> Self {
        G1Affine::from_xy_unchecked(f[0], f[1])
    }
    fn to_fps(&self) -> [Fp; 4] {
        [self.x(), self.y(), Fp::ZERO, Fp::ZERO]
    }
    fn subgroup_on_gpu(gpu: &Gpu, points: &[Self]) -> Result<(), PointCheckError> {
        subgroup::check_subgroup_g1(gpu, points)
    }
    point_common!(G1Affine, "96");
}

impl Point for G2Affine {
    const FPS: usize = 4;
    const ZCASH_ORDER: &'static [usize] = &[1, 0, 3, 2];
    fn from_fps_unchecked(f: &[Fp]) -> Self {
        G2Affine::from_xy_unchecked(Fp2::new(f[0], f[1]), Fp2::new(f[2], f[3]))
    }
    fn to_fps(&self) -> [Fp; 4] {
        let (x, y) = (self.x(), self.y());
        [x.c0(), x.c1(), y.c0(), y.c1()]
    }
    fn subgroup_on_gpu(gpu: &Gpu, points: &[Self]) -> Result<(), PointCheckError> {
        subgroup::check_subgroup_g2(gpu, points)
    }
    point_common!(G2Affine, "192");
}

/// Which encoding an array uses.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Encoding {
    /// zcash uncompressed, big-endian (bellperson).
    Uncompressed,
    /// iden3 little-endian Montgomery (zkey).
    Lem,
}

/// What a point array may hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArraySpec<'a> {
    pub(crate) file: &'a str,
    pub(crate) field: &'a str,
    pub(crate) encoding: Encoding,
    /// Refuse the identity (bellperson never writes it into its queries).
    pub(crate) reject_identity: bool,
    /// Run the subgroup check on every point.
    pub(crate) subgroup: bool,
    /// Check the curve equation (off only for files vouched for by a digest).
    pub(crate) on_curve: bool,
    /// Where the subgroup checks of large arrays run instead of the CPU's decode.
    pub(crate) gpu: Option<&'a Gpu>,
}

/// The GPU for the subgroup checks of a fully checked read, when there is one.
pub(crate) fn subgroup_gpu_for(checks: &PointChecks) -> Option<Gpu> {
    if checks.subgroup() {
        Gpu::available()
    } else {
        None
    }
}

/// Arrays at least this long have their subgroup checks on the GPU (when there is one): for
/// fewer points the upload and launch cost more than the CPU's checks.
const GPU_MIN_POINTS: usize = 1 << 12;

impl<'a> ArraySpec<'a> {
    /// The GPU that checks an array of `count` points for the subgroup, if any.
    fn subgroup_gpu(&self, count: usize) -> Option<&'a Gpu> {
        self.gpu
            .filter(|_| self.subgroup && count >= GPU_MIN_POINTS)
    }

    /// The spec for decoding `count` points: without the subgroup checks when the GPU does them
    /// afterwards ([`check_subgroup_after`]).
    pub(crate) fn for_decode(self, count: usize) -> Self {
        if self.subgroup_gpu(count).is_some() {
            Self {
                subgroup: false,
                ..self
            }
        } else {
            self
        }
    }
}

/// The subgroup checks [`ArraySpec::for_decode`] left out, on the GPU, for a whole decoded
/// array (canonical and on the curve: the CPU decode checked that). A GPU failure (no memory,
/// a lost device) falls back to the CPU's checks: a slower load, the same verdict.
pub(crate) fn check_subgroup_after<P: Point>(
    points: &[P],
    spec: ArraySpec<'_>,
) -> Result<(), FormatError> {
    match spec.subgroup_gpu(points.len()) {
        Some(gpu) => subgroup_on(gpu, points, spec),
        None => Ok(()),
    }
}

/// The error of a failed decode of `count` points whose subgroup checks were left to the GPU,
/// made the one the CPU path gives: the lowest failing index, so a point outside the subgroup
/// before the decode's failing index wins. `points` holds the records decoded so far.
pub(crate) fn lowest_error<P: Point>(
    points: &[P],
    spec: ArraySpec<'_>,
    count: usize,
    e: FormatError,
) -> FormatError {
    let index = match &e {
        FormatError::BadPoint { index, .. } | FormatError::IdentityPoint { index, .. } => *index,
        _ => return e,
    };
    match spec.subgroup_gpu(count) {
        Some(gpu) => match subgroup_on(gpu, &points[..index.min(points.len())], spec) {
            Err(first) => first,
            Ok(()) => e,
        },
        None => e,
    }
}

/// Shifts a decode error's index by the records decoded before the failing run.
pub(crate) fn reindex(e: FormatError, before: usize) -> FormatError {
    match e {
        FormatError::BadPoint {
            file,
            field,
            index,
            source,
        } => FormatError::BadPoint {
            file,
            field,
            index: index + before,
            source,
        },
        FormatError::IdentityPoint { file, field, index } => FormatError::IdentityPoint {
            file,
            field,
            index: index + before,
        },
        other => other,
    }
}

fn subgroup_on<P: Point>(gpu: &Gpu, points: &[P], spec: ArraySpec<'_>) -> Result<(), FormatError> {
    let first = match P::subgroup_on_gpu(gpu, points) {
        Ok(()) => None,
        Err(PointCheckError::NotInSubgroup { index }) => Some(index),
        Err(PointCheckError::Gpu(e)) => {
            tracing::warn!(file = spec.file, field = spec.field, error = %e, "GPU subgroup check failed; checking on the CPU");
            points.par_iter().position_first(|p| !p.in_subgroup())
        }
    };
    match first {
        None => Ok(()),
        Some(index) => Err(FormatError::BadPoint {
            file: spec.file.to_string(),
            field: spec.field.to_string(),
            index,
            source: DecodeError::NotInSubgroup,
        }),
    }
}

/// Decodes `bytes` (a whole number of encodings) into a new vector, in parallel.
pub(crate) fn decode_array<P: Point>(
    bytes: &[u8],
    spec: ArraySpec<'_>,
) -> Result<Vec<P>, FormatError> {
    let mut out = Vec::new();
    let size = match spec.encoding {
        Encoding::Uncompressed => P::UNCOMPRESSED,
        Encoding::Lem => P::LEM,
    };
    let count = bytes.len() / size;
    if let Err(e) = decode_into(bytes, spec.for_decode(count), &mut out) {
        return Err(lowest_error(&out, spec, count, e));
    }
    check_subgroup_after(&out, spec)?;
    Ok(out)
}

/// Decodes `bytes` (a whole number of encodings) in parallel, appending straight into `out`
/// (no intermediate copy); on failure names the lowest failing index, counted from the start
/// of `bytes`.
pub(crate) fn decode_into<P: Point>(
    bytes: &[u8],
    spec: ArraySpec<'_>,
    out: &mut Vec<P>,
) -> Result<(), FormatError> {
    let size = match spec.encoding {
        Encoding::Uncompressed => P::UNCOMPRESSED,
        Encoding::Lem => P::LEM,
    };
    debug_assert_eq!(bytes.len() % size, 0);
    // The lowest failing index and why; points past a failure are still decoded (cheaper than
    // cancelling), their values discarded.
    let first: Mutex<Option<(usize, Option<DecodeError>)>> = Mutex::new(None);
    let record = |i: usize, e: Option<DecodeError>| {
        let mut g = first.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_none_or(|(j, _)| i < *j) {
            *g = Some((i, e));
        }
    };
    let iter = bytes
        .par_chunks_exact(size)
        .with_min_len(256)
        .enumerate()
        .map(|(i, chunk)| {
            let decoded = match spec.encoding {
                Encoding::Uncompressed if spec.on_curve => P::decode_uncompressed(chunk),
                Encoding::Uncompressed => P::decode_uncompressed_trusted(chunk),
                Encoding::Lem => P::decode_lem(chunk),
            };
            match decoded {
                Ok(p) if spec.reject_identity && p.identity_point() => {
                    record(i, None);
                    P::default()
                }
                Ok(p) if spec.subgroup && !p.in_subgroup() => {
                    record(i, Some(DecodeError::NotInSubgroup));
                    P::default()
                }
                Ok(p) => p,
                Err(e) => {
                    record(i, Some(e));
                    P::default()
                }
            }
        });
    out.par_extend(iter);
    match first.into_inner().unwrap_or_else(|p| p.into_inner()) {
        None => Ok(()),
        Some((index, None)) => Err(FormatError::IdentityPoint {
            file: spec.file.to_string(),
            field: spec.field.to_string(),
            index,
        }),
        Some((index, Some(source))) => Err(FormatError::BadPoint {
            file: spec.file.to_string(),
            field: spec.field.to_string(),
            index,
            source,
        }),
    }
}

/// One point, fully checked (keys' fixed elements: always all checks).
pub(crate) fn decode_one<P: Point>(
    bytes: &[u8],
    file: &str,
    field: &str,
    encoding: Encoding,
) -> Result<P, FormatError> {
    let spec = ArraySpec {
        file,
        field,
        encoding,
        reject_identity: false,
        subgroup: true,
        on_curve: true,
        gpu: None,
    };
    Ok(decode_array::<P>(bytes, spec)?[0])
}

/// Writes points in the given encoding, encoded in parallel a block at a time (the output
/// is streamed: no copy of the whole array is made).
pub(crate) fn write_array<P: Point>(
    points: &[P],
    encoding: Encoding,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    for block in points.chunks(1 << 16) {
        let parts: Vec<Vec<u8>> = block
            .par_chunks(1 << 10)
            .map(|chunk| {
                let mut v = Vec::with_capacity(chunk.len() * P::UNCOMPRESSED);
                for p in chunk {
                    match encoding {
                        Encoding::Uncompressed => p.encode_uncompressed(&mut v),
                        Encoding::Lem => p.encode_lem(&mut v),
                    }
                }
                v
            })
            .collect();
        for p in parts {
            out.write_all(&p)?;
        }
    }
    Ok(())
}
