//! The process's allocator: mimalloc, and how long it keeps freed memory.

use std::time::Duration;

/// The controller builds and drops many small, short-lived values per
/// commit (entries, keys, paths); glibc's allocator spent half of a
/// commit's time on them (`foresight scale`, docs/figures.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (include/mimalloc.h),
/// which the Rust bindings do not name.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Where the user has not set `MIMALLOC_PURGE_DELAY`, return memory that
/// stayed free for `delay` to the OS (mimalloc's default is 1 s). A
/// controller's commits free and allocate the same megabytes every few
/// milliseconds; with the default, part of them went back to the OS and
/// came back as fresh pages the kernel zeroes (a tenth of the controller's
/// CPU in the 1,024-rank loop, docs/figures.md).
pub fn keep_freed_memory(delay: Duration) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    let ms = delay.as_millis().min(i32::MAX as u128) as std::ffi::c_long;
    // SAFETY: sets one of mimalloc's numeric options; called before the
    // daemon starts its threads (the setter is not thread safe).
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, ms) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index names the purge delay: it holds mimalloc's 1 s default
    /// until set (no other option defaults to 1,000), then what was set.
    #[test]
    fn the_purge_delay_is_the_option_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads a mimalloc option.
        let get = || unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        assert_eq!(get(), 1_000);
        keep_freed_memory(Duration::from_secs(10));
        assert_eq!(get(), 10_000);
    }
}
