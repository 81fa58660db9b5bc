//! Any `:authority` on the unix socket.
//!
//! grpc-core clients (Python, C++, Ruby, PHP) send the socket's path, percent-encoded, as the
//! `:authority` of each request (`tmp%2Fcuzk-0.sock`). h2 refuses a malformed authority with
//! RST_STREAM PROTOCOL_ERROR before any service sees the request, and has no setting to
//! accept one. An authority means nothing on a local socket, so this reader replaces an
//! invalid one with `localhost` on the way in: it decodes each request's header block (HPACK,
//! tracking the client's dynamic table) and encodes it again without the table, so h2's
//! decoder never depends on what was changed.
//!
//! A connection whose first request has a valid authority (cuzk's own clients, grpc-go's) is
//! passed through untouched from then on: a streamed witness is never copied once more. A
//! channel keeps one authority for all its calls, so that first request speaks for the rest.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client's connection preface (`PRI * HTTP/2.0...`), passed on as it is.
const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest header frame read whole (the daemon's SETTINGS_MAX_FRAME_SIZE).
const MAX_HEADER_FRAME: usize = 1 << 20;
/// The largest header block of one request, over all its frames.
const MAX_BLOCK: usize = 1 << 20;
/// Frames written are at most SETTINGS_MAX_FRAME_SIZE's minimum, which every peer accepts.
const OUT_FRAME: usize = 16 << 10;
/// The HPACK dynamic table the client may use: h2's SETTINGS_HEADER_TABLE_SIZE, unchanged.
const HEADER_TABLE: usize = 4096;
const READ_CHUNK: usize = 64 << 10;

enum Mode {
    /// Header blocks are decoded; `rewriting` once the first one had an invalid authority.
    Parse { rewriting: bool },
    /// Every byte goes through unchanged.
    Pass,
}

/// A header block being read (a HEADERS frame and its CONTINUATION frames).
struct Block {
    stream: u32,
    end_stream: bool,
    fragment: Vec<u8>,
    /// The frames as received, for a connection that turns out to need no rewrite.
    raw: Vec<u8>,
}

/// A unix stream whose requests' `:authority` h2 accepts (see the module's comment).
pub(crate) struct AnyAuthority<IO> {
    io: IO,
    mode: Mode,
    /// Received, not yet handed on: `buf[start..end]`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes from `buf[start..]` on (read or still to come) to hand on unchanged.
    pass: usize,
    preface_left: usize,
    /// Bytes needed from `buf[start..]` before the next frame can be read.
    need: usize,
    /// Rewritten frames, handed on before anything else.
    out: Vec<u8>,
    out_pos: usize,
    block: Option<Block>,
    decoder: loona_hpack::Decoder<'static>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl<IO> AnyAuthority<IO> {
    pub(crate) fn new(io: IO) -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(HEADER_TABLE);
        Self {
            io,
            mode: Mode::Parse { rewriting: false },
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            pass: 0,
            preface_left: PREFACE_LEN,
            need: FRAME_HEADER_LEN,
            out: Vec::new(),
            out_pos: 0,
            block: None,
            decoder,
        }
    }

    /// Reads the next frame (or the preface) from the buffer; false when it needs more bytes.
    fn step(&mut self) -> io::Result<bool> {
        let avail = self.end - self.start;
        if self.preface_left > 0 {
            let n = avail.min(self.preface_left);
            self.preface_left -= n;
            self.pass += n;
            return Ok(n > 0);
        }
        self.need = FRAME_HEADER_LEN;
        if self.pass > 0 || avail < FRAME_HEADER_LEN {
            return Ok(false);
        }
        let h = &self.buf[self.start..self.start + FRAME_HEADER_LEN];
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        if kind != HEADERS && kind != CONTINUATION {
            if self.block.is_some() {
                return Err(invalid("a frame inside a header block".into()));
            }
            self.pass = FRAME_HEADER_LEN + len;
            return Ok(true);
        }
        if len > MAX_HEADER_FRAME {
            return Err(invalid(format!("a header frame of {len} bytes")));
        }
        self.need = FRAME_HEADER_LEN + len;
        if avail < self.need {
            return Ok(false);
        }
        let frame = &self.buf[self.start..self.start + self.need];
        let payload = &frame[FRAME_HEADER_LEN..];
        match (kind, self.block.as_mut()) {
            (HEADERS, None) => {
                let mut p = payload;
                let mut pad = 0;
                if flags & PADDED != 0 {
                    let Some((&n, rest)) = p.split_first() else {
                        return Err(invalid("a padded HEADERS frame without its length".into()));
                    };
                    pad = n as usize;
                    p = rest;
                }
                if flags & PRIORITY != 0 {
                    p = p.get(5..).ok_or_else(|| {
                        invalid("a HEADERS frame shorter than its priority".into())
                    })?;
                }
                let fragment = p
                    .get(..p.len().wrapping_sub(pad))
                    .filter(|_| pad <= p.len())
                    .ok_or_else(|| invalid("a HEADERS frame shorter than its padding".into()))?;
                self.block = Some(Block {
                    stream,
                    end_stream: flags & END_STREAM != 0,
                    fragment: fragment.to_vec(),
                    raw: frame.to_vec(),
                });
            }
            (CONTINUATION, Some(b)) if b.stream == stream => {
                b.fragment.extend_from_slice(payload);
                b.raw.extend_from_slice(frame);
                if b.fragment.len() > MAX_BLOCK {
                    return Err(invalid("a header block over 1 MiB".into()));
                }
            }
            _ => return Err(invalid("header frames out of order".into())),
        }
        self.start += self.need;
        self.need = FRAME_HEADER_LEN;
        if flags & END_HEADERS != 0
            && let Some(b) = self.block.take()
        {
            self.finish(b)?;
        }
        Ok(true)
    }

    /// Queues a whole header block: as received, or with its authority replaced.
    fn finish(&mut self, b: Block) -> io::Result<()> {
        let Mode::Parse { rewriting } = self.mode else {
            unreachable!("blocks are read only while parsing")
        };
        let mut encoded = Vec::with_capacity(b.fragment.len() + 64);
        let mut replaced = false;
        let decoded = self.decoder.decode_with_cb(&b.fragment, |name, value| {
            let value: &[u8] = if &*name == b":authority"
                && hyper::http::uri::Authority::try_from(&*value).is_err()
            {
                replaced = true;
                b"localhost"
            } else {
                &value
            };
            literal(&mut encoded, &name, value);
        });
        if !rewriting && (decoded.is_err() || !replaced) {
            // h2 reads this connection itself from here on (and answers a bad block itself).
            self.out.extend_from_slice(&b.raw);
            self.mode = Mode::Pass;
            return Ok(());
        }
        decoded.map_err(|e| invalid(format!("a request's header block: {e:?}")))?;
        self.mode = Mode::Parse { rewriting: true };
        let mut chunks = encoded.chunks(OUT_FRAME).peekable();
        let mut first = true;
        loop {
            let chunk = chunks.next().unwrap_or_default();
            let last = chunks.peek().is_none();
            let mut flags = if last { END_HEADERS } else { 0 };
            if first && b.end_stream {
                flags |= END_STREAM;
            }
            let len = (chunk.len() as u32).to_be_bytes();
            let kind = if first { HEADERS } else { CONTINUATION };
            self.out
                .extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
            self.out.extend_from_slice(&b.stream.to_be_bytes());
            self.out.extend_from_slice(chunk);
            first = false;
            if last {
                return Ok(());
            }
        }
    }
}

/// A header as an HPACK literal without indexing, its name and value not Huffman-coded.
fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0);
    for s in [name, value] {
        integer(out, s.len());
        out.extend_from_slice(s);
    }
}

/// An HPACK integer with a 7-bit prefix (a string's length, its Huffman bit clear).
fn integer(out: &mut Vec<u8>, n: usize) {
    const MAX: usize = 127;
    if n < MAX {
        out.push(n as u8);
        return;
    }
    out.push(MAX as u8);
    let mut rest = n - MAX;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

impl<IO: AsyncRead + Unpin> AsyncRead for AnyAuthority<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = dst.remaining().min(this.out.len() - this.out_pos);
                dst.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let passing = match this.mode {
                Mode::Pass => usize::MAX,
                Mode::Parse { .. } => this.pass,
            };
            if passing > 0 && this.start < this.end {
                let n = dst.remaining().min(this.end - this.start).min(passing);
                dst.put_slice(&this.buf[this.start..this.start + n]);
                this.start += n;
                if let Mode::Parse { .. } = this.mode {
                    this.pass -= n;
                }
                return Poll::Ready(Ok(()));
            }
            if let Mode::Pass = this.mode {
                return Pin::new(&mut this.io).poll_read(cx, dst);
            }
            if this.step()? {
                continue;
            }
            // Room for the frame being read, behind what is buffered.
            if this.start > 0 {
                this.buf.copy_within(this.start..this.end, 0);
                this.end -= this.start;
                this.start = 0;
            }
            if this.buf.len() < this.need {
                this.buf.resize(this.need, 0);
            }
            let mut rb = ReadBuf::new(&mut this.buf[this.end..]);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                // The client closed: what is left goes to h2 as it is, then the end.
                this.mode = Mode::Pass;
                if let Some(b) = this.block.take() {
                    this.out.extend_from_slice(&b.raw);
                }
                if this.start == this.end && this.out.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.end += n;
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for AnyAuthority<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, src)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// HPACK, as grpc-core writes it: an indexed name with a Huffman-free literal value.
    fn request_block(authority: &[u8]) -> Vec<u8> {
        let mut b = vec![0x82, 0x86]; // :method GET, :scheme http (static table)
        b.push(0x41); // :authority, literal with incremental indexing, static name 1
        integer(&mut b, authority.len());
        b.extend_from_slice(authority);
        b.push(0x84); // :path /
        b
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn connection(blocks: &[&[u8]]) -> Vec<u8> {
        let mut c = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        c.extend(frame(0x4, 0, 0, &[])); // SETTINGS
        for (i, b) in blocks.iter().enumerate() {
            let stream = 2 * i as u32 + 1;
            // The first block split across a padded HEADERS frame and a CONTINUATION.
            let (a, rest) = b.split_at(b.len() / 2);
            let mut padded = vec![3];
            padded.extend_from_slice(a);
            padded.extend_from_slice(&[0; 3]);
            c.extend(frame(HEADERS, PADDED, stream, &padded));
            c.extend(frame(CONTINUATION, END_HEADERS, stream, rest));
            c.extend(frame(0x0, END_STREAM, stream, b"body"));
        }
        c
    }

    async fn through(input: Vec<u8>) -> Vec<u8> {
        let (mut client, server) = tokio::io::duplex(7); // small: frames arrive in pieces
        let writer = tokio::spawn(async move {
            tokio::io::AsyncWriteExt::write_all(&mut client, &input)
                .await
                .unwrap();
        });
        let mut out = Vec::new();
        AnyAuthority::new(server)
            .read_to_end(&mut out)
            .await
            .unwrap();
        writer.await.unwrap();
        out
    }

    /// The header lists of every header block in `conn`, decoded as h2 would.
    fn requests(conn: &[u8]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut d = loona_hpack::Decoder::new();
        let (mut i, mut all, mut block) = (PREFACE_LEN, Vec::new(), Vec::new());
        while i < conn.len() {
            let len = u32::from_be_bytes([0, conn[i], conn[i + 1], conn[i + 2]]) as usize;
            let (kind, flags) = (conn[i + 3], conn[i + 4]);
            let mut p = &conn[i + 9..i + 9 + len];
            if kind == HEADERS && flags & PADDED != 0 {
                p = &p[1..p.len() - p[0] as usize];
            }
            if kind == HEADERS || kind == CONTINUATION {
                block.extend_from_slice(p);
                if flags & END_HEADERS != 0 {
                    all.push(d.decode(&block).unwrap());
                    block.clear();
                }
            }
            i += 9 + len;
        }
        all
    }

    fn authority(headers: &[(Vec<u8>, Vec<u8>)]) -> &[u8] {
        &headers.iter().find(|(n, _)| n == b":authority").unwrap().1
    }

    #[tokio::test]
    async fn a_socket_path_authority_becomes_localhost_in_every_request() {
        let path = b"tmp%2Fcuzk-0.sock";
        // The second request names the authority by the client's dynamic table entry (62).
        let conn = connection(&[&request_block(path), &[0x82, 0x86, 0xbe, 0x84]]);
        let out = through(conn).await;
        let reqs = requests(&out);
        assert_eq!(reqs.len(), 2);
        for r in &reqs {
            assert_eq!(authority(r), b"localhost");
            assert_eq!(r.len(), 4, "{r:?}");
        }
        // The DATA frames and the preface are passed on unchanged.
        assert!(out.starts_with(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
        assert_eq!(out.windows(4).filter(|w| w == b"body").count(), 2);
    }

    #[tokio::test]
    async fn a_valid_authority_passes_the_connection_through_unchanged() {
        let conn = connection(&[&request_block(b"localhost"), &[0x82, 0x86, 0xbe, 0x84]]);
        assert_eq!(through(conn.clone()).await, conn);
    }

    #[test]
    fn integers_over_the_prefix_take_continuation_bytes() {
        let mut v = Vec::new();
        integer(&mut v, 1337 + 127 - 31); // RFC 7541 C.1.2 uses a 5-bit prefix; ours is 7
        assert_eq!(v[0], 127);
        let mut n = 0usize;
        for (i, b) in v[1..].iter().enumerate() {
            n += ((b & 0x7f) as usize) << (7 * i);
        }
        assert_eq!(n + 127, 1337 + 127 - 31);
    }
}
