//! The binary's allocator: mimalloc, told to keep the pages it frees.
//!
//! CPU forwards and training steps allocate and free buffers of tens of MB per layer. glibc's
//! malloc hands each back to the kernel (mmap/munmap; page faults took half the wall time of a CPU
//! run); mimalloc keeps them, but by default still purges free pages after a delay, and the
//! kernel then zeroes every page again on reuse (`clear_page_erms`: 5 % of a `bench dit` forward,
//! 8 % of a codec training step under `perf`; 58,560 page faults in a 3-step codec run against
//! 688 with purging off). [`keep_freed_pages`] turns purging off unless `MIMALLOC_PURGE_DELAY`
//! is set.

use std::ffi::{c_int, c_long};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The option calls of the mimalloc library that `libmimalloc-sys` links (its bindings for them
// sit behind a feature whose dependency is not available offline).
unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    #[cfg(test)]
    fn mi_option_get(option: c_int) -> c_long;
}

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (include/mimalloc.h of libmimalloc-sys
/// 0.1.49, the version the workspace pins).
const PURGE_DELAY: c_int = 15;

/// Never return freed pages to the kernel (mimalloc's `purge_delay = -1`), unless the
/// environment sets `MIMALLOC_PURGE_DELAY`.
pub fn keep_freed_pages() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of the allocator's global options, which mimalloc allows at any time.
        unsafe { mi_option_set(PURGE_DELAY, -1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Option 15 is the purge delay: it holds mimalloc 3's documented default of 1000 ms, and
    /// -1 once set.
    #[test]
    fn the_option_set_is_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        assert_eq!(unsafe { mi_option_get(PURGE_DELAY) }, 1000);
        keep_freed_pages();
        assert_eq!(unsafe { mi_option_get(PURGE_DELAY) }, -1);
    }
}
