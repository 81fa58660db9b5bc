//! Streaming a large file through the decoders without holding it in memory: a reader thread
//! fills fixed-size blocks (recycled through a pool), an optional hasher thread digests every
//! block while the caller decodes it, and the caller pulls records from the blocks, decoding
//! whole runs of records in parallel straight into the output vectors.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use crate::points::{ArraySpec, Point, check_subgroup_after, decode_into, lowest_error, reindex};
use crate::{Digest, FormatError};

/// Bytes per block: big enough that one block keeps every core busy decoding, small enough
/// that the few blocks in flight cost little memory.
const BLOCK: usize = 16 << 20;
/// Blocks queued between the reader and each consumer.
const QUEUE: usize = 3;

/// One filled block; its buffer goes back to the reader's pool when the last holder drops it.
struct Block {
    data: Vec<u8>,
    len: usize,
    pool: Sender<Vec<u8>>,
}

impl Drop for Block {
    fn drop(&mut self) {
        let _ = self.pool.send(std::mem::take(&mut self.data));
    }
}

type Msg = Result<Arc<Block>, std::io::Error>;

pub(crate) struct BlockStream {
    pub(crate) file: String,
    rx: Receiver<Msg>,
    current: Option<Arc<Block>>,
    offset: usize,
    /// Bytes consumed before the current block.
    base: usize,
    total: u64,
    reader: Option<JoinHandle<()>>,
    hasher: Option<JoinHandle<Vec<u8>>>,
    digest: Option<Digest>,
}

impl BlockStream {
    /// Opens `path` and starts the reader (and, with a digest, the hasher) thread.
    pub(crate) fn open(path: &Path, digest: Option<Digest>) -> Result<Self, FormatError> {
        Self::open_with_block(path, digest, BLOCK)
    }

    /// As [`Self::open`] with blocks of `block` bytes (tests use odd sizes so records
    /// straddle blocks).
    pub(crate) fn open_with_block(
        path: &Path,
        digest: Option<Digest>,
        block: usize,
    ) -> Result<Self, FormatError> {
        let file_name = path.display().to_string();
        let mut f = File::open(path).map_err(|e| FormatError::io(path, e))?;
        let total = f.metadata().map_err(|e| FormatError::io(path, e))?.len();
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        let (hash_tx, hasher) = match &digest {
            Some(d) => {
                let (htx, hrx) = sync_channel::<Arc<Block>>(QUEUE);
                let d = d.clone();
                (
                    Some(htx),
                    Some(std::thread::spawn(move || hash_blocks(d, hrx))),
                )
            }
            None => (None, None),
        };
        let reader = std::thread::spawn(move || read_blocks(&mut f, block.max(1), tx, hash_tx));
        Ok(Self {
            file: file_name,
            rx,
            current: None,
            offset: 0,
            base: 0,
            total,
            reader: Some(reader),
            hasher,
            digest,
        })
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.base + self.offset
    }

    fn truncated(&self, field: &str, needed: usize) -> FormatError {
        FormatError::Truncated {
            file: self.file.clone(),
            field: field.to_string(),
            offset: self.position(),
            needed,
            available: (self.total as usize).saturating_sub(self.position()),
        }
    }

    /// Makes the current block have unread bytes; `false` at the end of the file.
    fn fill(&mut self) -> Result<bool, FormatError> {
        if let Some(b) = &self.current
            && self.offset < b.len
        {
            return Ok(true);
        }
        if let Some(b) = self.current.take() {
            self.base += b.len;
            self.offset = 0;
        }
        match self.rx.recv() {
            Ok(Ok(b)) => {
                self.current = Some(b);
                Ok(true)
            }
            Ok(Err(e)) => Err(FormatError::Io {
                file: self.file.clone(),
                source: e,
            }),
            Err(_) => Ok(false),
        }
    }

    /// Exactly `n` bytes, copied (for headers and records that straddle blocks).
    pub(crate) fn take_small(&mut self, n: usize, field: &str) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if !self.fill()? {
                return Err(self.truncated(field, n - out.len()));
            }
            let b = self.current.as_ref().expect("filled");
            let k = (n - out.len()).min(b.len - self.offset);
            out.extend_from_slice(&b.data[self.offset..self.offset + k]);
            self.offset += k;
        }
        Ok(out)
    }

    pub(crate) fn u32_be(&mut self, field: &str) -> Result<u32, FormatError> {
        let b = self.take_small(4, field)?;
        Ok(u32::from_be_bytes(b.try_into().expect("4 bytes")))
    }

    /// `count` point records of `size` bytes, decoded in parallel a block at a time.
    pub(crate) fn points<P: Point>(
        &mut self,
        count: usize,
        size: usize,
        spec: ArraySpec<'_>,
    ) -> Result<Vec<P>, FormatError> {
        let bytes = count.saturating_mul(size);
        let left = (self.total as usize).saturating_sub(self.position());
        if bytes > left {
            // Refuse before allocating: a corrupt length must not reserve gigabytes.
            return Err(self.truncated(spec.field, bytes));
        }
        let mut out: Vec<P> = Vec::with_capacity(count);
        let full = spec;
        let spec = spec.for_decode(count);
        while out.len() < count {
            if !self.fill()? {
                return Err(self.truncated(spec.field, (count - out.len()) * size));
            }
            let b = Arc::clone(self.current.as_ref().expect("filled"));
            let whole = ((b.len - self.offset) / size).min(count - out.len());
            if whole == 0 {
                // One record across the block boundary.
                let rec = self.take_small(size, spec.field)?;
                let before = out.len();
                decode_into::<P>(&rec, spec, &mut out)
                    .map_err(|e| lowest_error(&out, full, count, reindex(e, before)))?;
                continue;
            }
            let slice = &b.data[self.offset..self.offset + whole * size];
            let before = out.len();
            decode_into::<P>(slice, spec, &mut out)
                .map_err(|e| lowest_error(&out, full, count, reindex(e, before)))?;
            self.offset += whole * size;
        }
        check_subgroup_after(&out, full)?;
        Ok(out)
    }

    /// Fails unless the file ends here; then waits for the threads and checks the digest.
    pub(crate) fn finish(mut self, last_field: &str) -> Result<(), FormatError> {
        let rest = (self.total as usize).saturating_sub(self.position());
        if rest != 0 {
            return Err(FormatError::TrailingBytes {
                file: self.file.clone(),
                field: last_field.to_string(),
                extra: rest,
            });
        }
        self.current = None;
        // Drain so the reader finishes (it may still report an end-of-file).
        while let Ok(m) = self.rx.recv() {
            if let Err(e) = m {
                return Err(FormatError::Io {
                    file: self.file.clone(),
                    source: e,
                });
            }
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        if let (Some(h), Some(d)) = (self.hasher.take(), self.digest.take()) {
            let found = h.join().map_err(|_| {
                FormatError::invalid(&self.file, "digest", "the hashing thread panicked")
            })?;
            d.check_computed(&self.file, &found)?;
        }
        Ok(())
    }
}

fn read_blocks(
    f: &mut File,
    block_size: usize,
    tx: SyncSender<Msg>,
    hash_tx: Option<SyncSender<Arc<Block>>>,
) {
    let (pool_tx, pool_rx) = channel::<Vec<u8>>();
    loop {
        let mut buf = pool_rx.try_recv().unwrap_or_else(|_| vec![0u8; block_size]);
        let mut len = 0;
        while len < block_size {
            match f.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(k) => len += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
        if len == 0 {
            return;
        }
        let block = Arc::new(Block {
            data: buf,
            len,
            pool: pool_tx.clone(),
        });
        if let Some(h) = &hash_tx
            && h.send(Arc::clone(&block)).is_err()
        {
            return;
        }
        if tx.send(Ok(block)).is_err() {
            return;
        }
    }
}

fn hash_blocks(d: Digest, rx: Receiver<Arc<Block>>) -> Vec<u8> {
    let mut h = d.hasher();
    for b in rx {
        h.update(&b.data[..b.len]);
    }
    h.finish()
}

/// Where a sequential reader takes its bytes from: a streamed file or a buffer.
pub(crate) trait Source {
    fn file(&self) -> &str;
    fn take_small(&mut self, n: usize, field: &str) -> Result<Vec<u8>, FormatError>;
    fn u32_be(&mut self, field: &str) -> Result<u32, FormatError>;
    fn points<P: Point>(
        &mut self,
        count: usize,
        size: usize,
        spec: ArraySpec<'_>,
    ) -> Result<Vec<P>, FormatError>;
}

impl Source for BlockStream {
    fn file(&self) -> &str {
        &self.file
    }
    fn take_small(&mut self, n: usize, field: &str) -> Result<Vec<u8>, FormatError> {
        BlockStream::take_small(self, n, field)
    }
    fn u32_be(&mut self, field: &str) -> Result<u32, FormatError> {
        BlockStream::u32_be(self, field)
    }
    fn points<P: Point>(
        &mut self,
        count: usize,
        size: usize,
        spec: ArraySpec<'_>,
    ) -> Result<Vec<P>, FormatError> {
        BlockStream::points(self, count, size, spec)
    }
}

impl Source for crate::cursor::Cursor<'_> {
    fn file(&self) -> &str {
        self.file
    }
    fn take_small(&mut self, n: usize, field: &str) -> Result<Vec<u8>, FormatError> {
        Ok(self.take(n, field)?.to_vec())
    }
    fn u32_be(&mut self, field: &str) -> Result<u32, FormatError> {
        crate::cursor::Cursor::u32_be(self, field)
    }
    fn points<P: Point>(
        &mut self,
        count: usize,
        size: usize,
        spec: ArraySpec<'_>,
    ) -> Result<Vec<P>, FormatError> {
        let bytes = self.take_records(count, size, spec.field)?;
        crate::points::decode_array(bytes, spec)
    }
}
