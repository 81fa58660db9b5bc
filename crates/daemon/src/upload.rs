//! A streamed witness is parsed while it arrives: the chunks go through a bounded channel to a
//! blocking reader, so receiving, hashing and decoding overlap and the raw bytes are never
//! held whole.

use std::io::{self, Read};

use prost::bytes::{Buf, Bytes};
use tokio::sync::mpsc;

/// Chunks in flight between the gRPC stream and the parser (each at most one message).
pub const CHUNKS_IN_FLIGHT: usize = 16;

/// The `Read` end: blocks for the next chunk; the sender dropped is the end of the data.
pub struct ChunkReader {
    rx: mpsc::Receiver<Bytes>,
    chunk: Bytes,
}

impl ChunkReader {
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self {
            rx,
            chunk: Bytes::new(),
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match self.rx.blocking_recv() {
                Some(c) => self.chunk = c,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len());
        self.chunk.copy_to_slice(&mut buf[..n]);
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
        let chunks: Vec<Bytes> = data.chunks(333).map(Bytes::copy_from_slice).collect();
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
