//! A streamed witness is parsed while it arrives: the chunks go through a bounded channel to a
//! blocking reader, so receiving, hashing and decoding overlap and the raw bytes are never
//! held whole.

use std::io::{self, Read};

use tokio::sync::mpsc;

/// Chunks in flight between the gRPC stream and the parser (each at most one message).
pub const CHUNKS_IN_FLIGHT: usize = 16;

/// The `Read` end: blocks for the next chunk; the sender dropped is the end of the data.
pub struct ChunkReader {
    rx: mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl ChunkReader {
    pub fn new(rx: mpsc::Receiver<Vec<u8>>) -> Self {
        Self {
            rx,
            chunk: Vec::new(),
            pos: 0,
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.blocking_recv() {
                Some(c) => {
                    self.chunk = c;
                    self.pos = 0;
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_chunks_in_order_across_boundaries_and_ends_when_the_sender_drops() {
        let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let chunks: Vec<Vec<u8>> = data.chunks(333).map(<[u8]>::to_vec).collect();
        let reader = std::thread::spawn(move || {
            let mut r = ChunkReader::new(rx);
            let mut got = vec![0u8; 1000];
            r.read_exact(&mut got).unwrap();
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).unwrap();
            got.extend(rest);
            got
        });
        for c in chunks {
            tx.blocking_send(c).unwrap();
        }
        drop(tx);
        assert_eq!(reader.join().unwrap(), data);
    }
}
