//! Pieces of a file read once and kept a while, from which the lines recall reads again are cut
//! (`NativeTexts::read`): the check reads a context's new messages in the order of the file, each
//! line once, so one read of a piece serves the many lines in it where a read of each line cost a
//! system call each (15,780 of them in `replay -p s08` of the bench's 5,000-call file, about 750
//! pieces of 64 KiB).

/// The last few pieces read, the newest last.
pub struct Pieces<K> {
    held: Vec<Piece<K>>,
    /// how many bytes a piece reads, and how many pieces are kept
    size: usize,
    keep: usize,
}

struct Piece<K> {
    /// the file (`K` tells one from another)
    file: K,
    start: u64,
    bytes: Vec<u8>,
}

impl<K: PartialEq> Pieces<K> {
    pub fn new(size: usize, keep: usize) -> Self {
        Pieces {
            held: Vec::new(),
            size,
            keep,
        }
    }

    /// The `length` bytes at `offset` of `file`: cut from a piece that holds them, else from a new
    /// piece read from `offset` (`fill(buffer, at)`: as many bytes as the buffer's capacity from
    /// `at`, fewer only at the file's end). None where a piece cannot hold them: a line longer
    /// than a piece, or a file with fewer bytes there (the caller reads it itself, and says so).
    pub fn get<E>(
        &mut self,
        file: K,
        offset: u64,
        length: usize,
        fill: impl FnOnce(&mut Vec<u8>, u64) -> Result<(), E>,
    ) -> Result<Option<&[u8]>, E> {
        if length > self.size {
            return Ok(None);
        }
        let end = offset + length as u64;
        let found = self.held.iter().position(|p| {
            p.file == file && p.start <= offset && end <= p.start + p.bytes.len() as u64
        });
        match found {
            Some(k) => {
                let piece = self.held.remove(k);
                self.held.push(piece);
            }
            None => {
                let mut bytes = Vec::with_capacity(self.size);
                fill(&mut bytes, offset)?;
                if bytes.len() < length {
                    return Ok(None);
                }
                if self.held.len() >= self.keep {
                    self.held.remove(0);
                }
                self.held.push(Piece {
                    file,
                    start: offset,
                    bytes,
                });
            }
        }
        let piece = self.held.last().expect("a piece was just kept");
        let at = (offset - piece.start) as usize;
        Ok(Some(&piece.bytes[at..at + length]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file's bytes read as `pread` reads them, counting the reads.
    fn reader<'a>(
        data: &'a [u8],
        reads: &'a mut usize,
    ) -> impl FnOnce(&mut Vec<u8>, u64) -> Result<(), ()> + 'a {
        move |buf: &mut Vec<u8>, at: u64| {
            *reads += 1;
            let at = (at as usize).min(data.len());
            let n = buf.capacity().min(data.len() - at);
            buf.extend_from_slice(&data[at..at + n]);
            Ok(())
        }
    }

    #[test]
    fn lines_are_cut_from_the_pieces_that_hold_them_as_read_alone() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut pieces = Pieces::new(64, 2);
        let mut reads = 0;
        // (in order, as a context's new messages: one read a piece)
        for (offset, length) in [(0, 10), (10, 20), (30, 30), (60, 4), (64, 10)] {
            let got = pieces
                .get(1, offset, length, reader(&data, &mut reads))
                .unwrap();
            assert_eq!(got, Some(&data[offset as usize..offset as usize + length]));
        }
        assert_eq!(reads, 2);
        // (an older line still held; another file's never cut from this one's)
        let got = pieces.get(1, 12, 5, reader(&data, &mut reads)).unwrap();
        assert_eq!((got, reads), (Some(&data[12..17]), 2));
        let got = pieces.get(2, 12, 5, reader(&data, &mut reads)).unwrap();
        assert_eq!((got, reads), (Some(&data[12..17]), 3));
        // (two kept: the oldest went)
        let got = pieces.get(1, 70, 5, reader(&data, &mut reads)).unwrap();
        assert_eq!((got, reads), (Some(&data[70..75]), 4));
    }

    #[test]
    fn a_line_no_piece_can_hold_is_the_callers() {
        let data = vec![b'x'; 100];
        let mut pieces = Pieces::new(64, 2);
        let mut reads = 0;
        assert_eq!(pieces.get(1, 0, 65, reader(&data, &mut reads)), Ok(None));
        assert_eq!(reads, 0); // (longer than a piece: not read here)
        assert_eq!(pieces.get(1, 90, 20, reader(&data, &mut reads)), Ok(None));
        assert_eq!(reads, 1); // (the file ends before it: cut short)
        assert_eq!(
            pieces.get(1, 90, 10, reader(&data, &mut reads)),
            Ok(Some(&data[90..]))
        );
        let failing = |_: &mut Vec<u8>, _: u64| Err("EIO");
        assert_eq!(pieces.get(1, 200, 1, failing), Err("EIO"));
    }
}
