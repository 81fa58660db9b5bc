//! The device work of one Pippenger batch (sort, accumulation, merge levels, reduction, window
//! sums, ones) and the streamed mode's chunk loop.

use super::*;

impl<P: MsmPoint> GpuMsm<P> {
    /// Enqueues one batch on the compute stream: `scratch.out` gets the window (bucket set)
    /// sums (`windows`) and the ones sum (`ones`); what is not requested is left untouched.
    /// `pts` holds the `n` points and, for a folded plan, their copies after them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn enqueue_batch(
        &self,
        pts: &DeviceBuffer<P>,
        n: usize,
        scalars: k::Scalars<'_, Fr>,
        plan: &Plan,
        sc: &mut Scratch<P>,
        windows: bool,
        ones: bool,
        marks: Option<&Marks>,
    ) -> Result<(), GpuError> {
        let (g, s, cv) = (&self.gpu, &self.compute, curve::<P>());
        mark(marks, s, M_BATCH)?;
        if windows {
            let (win, nk) = (plan.windows(n), plan.nkeys());
            mark(marks, s, 3)?;
            // marks 4, 5, 6 after the bin histogram, scan and scatter
            k::bin_sort(
                g,
                s,
                scalars,
                n,
                &win,
                plan.sort_fine_bits,
                plan.sort_top_fine_bits,
                &mut sc.counts,
                &mut sc.bins,
                &mut sc.cursors,
                &mut sc.sorted,
                &mut sc.offsets,
                |i| mark(marks, s, 3 + i as usize),
            )?;
            mark(marks, s, 7)?;
            k::accumulate(
                g,
                s,
                cv,
                pts,
                win.index_bound(n),
                &sc.sorted,
                &sc.offsets,
                nk,
                plan.threads,
                &mut sc.keys_a,
                &mut sc.pts_a,
                &mut sc.buckets,
            )?;
            mark(marks, s, 8)?;
            // Merge levels, ping-ponging between the a and b partial buffers.
            let mut count = 2 * plan.threads;
            let mut from_a = true;
            loop {
                let threads = count.div_ceil(FAN_IN);
                let last = threads == 1;
                let fan_in = if last { count } else { FAN_IN };
                let (ik, ip, ok, op) = if from_a {
                    (&sc.keys_a, &sc.pts_a, &mut sc.keys_b, &mut sc.pts_b)
                } else {
                    (&sc.keys_b, &sc.pts_b, &mut sc.keys_a, &mut sc.pts_a)
                };
                k::merge(
                    g,
                    s,
                    cv,
                    ik,
                    ip,
                    count,
                    fan_in,
                    ok,
                    op,
                    &mut sc.buckets,
                    nk,
                    last,
                )?;
                if last {
                    break;
                }
                count = 2 * threads;
                from_a = !from_a;
            }
            mark(marks, s, 9)?;
            let groups = plan.groups();
            k::bucket_reduce(
                g,
                s,
                cv,
                &sc.buckets,
                &sc.offsets,
                plan.buckets_per_window,
                plan.sets,
                plan.group,
                &mut sc.reduced,
            )?;
            mark(marks, s, 10)?;
            let mut count = groups;
            while count > 1 {
                k::sum_halves(g, s, cv, &mut sc.reduced, groups, plan.sets, count)?;
                count -= count / 2;
            }
            k::to_jacobian(g, s, cv, &sc.reduced, groups, plan.sets, &mut sc.out, 0)?;
            mark(marks, s, 11)?;
        } else {
            for i in 3..=11 {
                mark(marks, s, i)?;
            }
        }
        if ones {
            let t = plan.ones_threads;
            k::ones(g, s, cv, pts, scalars, n, t, &mut sc.ones)?;
            let mut count = t;
            while count > 1 {
                k::sum_halves(g, s, cv, &mut sc.ones, t, 1, count)?;
                count -= count / 2;
            }
            k::to_jacobian(g, s, cv, &sc.ones, t, 1, &mut sc.out, plan.sets)?;
        }
        mark(marks, s, MARKS - 1)?;
        Ok(())
    }

    /// Device bytes a streamed MSM with chunks of `len` points needs.
    pub(super) fn chunk_bytes(&self, len: usize) -> u64 {
        chunk_bytes_with::<P>(&self.plan(len, len), len)
    }

    pub(super) fn streamed_msm(
        &self,
        host: &PinnedBuffer<P>,
        scalars: Source<'_>,
    ) -> Result<P::Projective, MsmError> {
        let n = host.len();
        if n == 0 {
            return Ok(P::Projective::default());
        }
        let available = self
            .gpu
            .vram()
            .budget()
            .available()
            .min(self.vram_limit.unwrap_or(u64::MAX));
        let chunk = match self.chunk_len {
            Some(c) => c.min(n),
            None => {
                let mut c = if n >= OVERLAP_MIN_N {
                    n.div_ceil(MIN_CHUNKS)
                } else {
                    n
                };
                while c > 1024 && self.chunk_bytes(c) > available {
                    c = c.div_ceil(2);
                }
                if self.chunk_bytes(c) > available {
                    return Err(MsmError::NoRoom {
                        needed: self.chunk_bytes(c),
                        available,
                    });
                }
                c
            }
        };
        let (g, s) = (&self.gpu, &self.compute);
        let plan = self.plan(chunk, chunk);
        let v = g.vram();
        let mut pts_buf = [v.alloc::<P>(chunk)?, v.alloc::<P>(chunk)?];
        let mut sc_buf = [v.alloc::<Fr>(chunk)?, v.alloc::<Fr>(chunk)?];
        let mut canon = v.alloc::<Fr>(chunk)?;
        let mut counters = v.alloc::<u32>(2)?;
        let mut scratch = Scratch::<P>::new(g, &plan)?;
        let mut ring = ResultRing::<P::Projective>::new(g, s, plan.sets + 1)?;
        let uploaded = [g.event()?, g.event()?];
        let consumed = [g.event()?, g.event()?];
        let mut windows = vec![P::Projective::default(); plan.sets];
        let mut ones = P::Projective::default();
        let mut fold = |res: &[P::Projective]| {
            for (w, r) in windows.iter_mut().zip(res) {
                *w += *r;
            }
            ones += res[plan.sets];
        };
        let host_scalars: &[Fr] = match scalars {
            Source::Host(h) => h,
            Source::Device(..) | Source::Canonical(..) => &[],
        };
        let nchunks = n.div_ceil(chunk);
        with_uploads(g, &self.copy, &host[..], |up_pts| {
            with_uploads(g, &self.copy, host_scalars, |up_sc| {
                for i in 0..nchunks {
                    let b = i % 2;
                    let (start, len) = (i * chunk, chunk.min(n - i * chunk));
                    if i >= 2 {
                        self.copy.wait(&consumed[b])?;
                    }
                    up_pts.upload(start, len, &mut pts_buf[b])?;
                    if let Source::Host(_) = scalars {
                        up_sc.upload(start, len, &mut sc_buf[b])?;
                    }
                    self.copy.record(&uploaded[b])?;
                    s.wait(&uploaded[b])?;
                    counters.fill_bytes_async(0, s.cuda())?;
                    let chunk_scalars = match scalars {
                        Source::Host(_) => {
                            k::prepare(g, s, &sc_buf[b], 0, &mut canon, len, &mut counters, None)?;
                            k::Scalars {
                                buf: &canon,
                                at: 0,
                                skip: None,
                            }
                        }
                        Source::Device(d, at) => {
                            k::prepare(g, s, d, at + start, &mut canon, len, &mut counters, None)?;
                            k::Scalars {
                                buf: &canon,
                                at: 0,
                                skip: None,
                            }
                        }
                        Source::Canonical(cs, at) => k::Scalars {
                            buf: &cs.0,
                            at: at + start,
                            skip: None,
                        },
                    };
                    self.enqueue_batch(
                        &pts_buf[b],
                        len,
                        chunk_scalars,
                        &plan,
                        &mut scratch,
                        true,
                        true,
                        None,
                    )?;
                    s.record(&consumed[b])?;
                    if ring.is_pending(b) {
                        fold(ring.take(b)?);
                    }
                    ring.push(b, &scratch.out)?;
                }
                Ok(())
            })
        })?;
        for b in [nchunks % 2, (nchunks + 1) % 2] {
            if ring.is_pending(b) {
                fold(ring.take(b)?);
            }
        }
        Ok(combine::<P>(&windows, plan.c) + ones)
    }
}

/// Device bytes of a streamed MSM's chunk of `len` points under `plan`: two point and two
/// scalar buffers (one uploads while the other computes), the canonical scalars, the
/// per-point sort entries, and the plan's scratch.
pub(super) fn chunk_bytes_with<P: MsmPoint>(plan: &Plan, len: usize) -> u64 {
    let per = 2 * (size_of::<P>() + 32) + 32 + 2 * 256;
    (per * len) as u64 + plan.scratch_bytes(curve::<P>()) + 4096
}
