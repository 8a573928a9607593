//! The C library's allocator told to keep the memory a process frees (glibc's `mallopt`), for the
//! `compactlab` command's own process (`plumbing/process.py`): a replay reads its file a block of
//! about 256 KiB at a time and frees each block a few blocks later; with glibc's sliding
//! thresholds the heap's top was handed back to the system past twice the largest block freed and
//! faulted in again at the next (about 1,300 of a 5,000-call replay's 10,500 page faults).

/// glibc's `mallopt` parameters (`malloc.h`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const M_TRIM_THRESHOLD: i32 = -1;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const M_MMAP_THRESHOLD: i32 = -3;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    fn mallopt(param: i32, value: i32) -> i32;
}

/// Blocks smaller than `mmap` bytes served from the heap, and the heap's top handed back only past
/// `trim` free bytes; whether the C library took both (false where it is not glibc: nothing set).
pub fn keep_freed(mmap: i32, trim: i32) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` is glibc's (`target_env = "gnu"`), declared as `malloc.h` declares it:
        // two ints in, an int out (1 on success). It sets two of the allocator's parameters under
        // the allocator's own lock, reads and writes no memory of the caller's, and any value is
        // valid input (one it refuses returns 0).
        unsafe { mallopt(M_MMAP_THRESHOLD, mmap) == 1 && mallopt(M_TRIM_THRESHOLD, trim) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (mmap, trim);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_takes_the_thresholds_and_the_allocator_still_serves_blocks() {
        let taken = keep_freed(32 << 20, 64 << 20);
        assert_eq!(taken, cfg!(all(target_os = "linux", target_env = "gnu")));
        // (blocks of the sizes a replay reads, made and freed in turn, as its reader does)
        for round in 0..64usize {
            let block = vec![round as u8; 256 << 10];
            assert_eq!(block[(256 << 10) - 1], round as u8);
        }
    }
}
