//! FAISS's OpenMP thread count.
//!
//! FAISS splits a batch of queries over OpenMP threads, and each thread's
//! matrix product runs on OpenBLAS, which starts its own pool of one thread
//! per core. Left to itself OpenMP also starts one per core, so on a small
//! machine the pools multiply and oversubscribe the cores: measured on two
//! cores, 64-query batches at 5000 x 2048 ran at 1,446 queries per second
//! against 4,341 with the process pinned to one core. With one OpenMP
//! thread (OpenBLAS keeps its pool for the one product in flight) the
//! unpinned figure matches the pinned one. So a field sets OpenMP to
//! [`FieldConfig::threads`] (default 1) when it is built; 0 leaves
//! OpenMP's own choice (`OMP_NUM_THREADS`, or all cores). The setting is
//! process-wide and operational: it changes speed, never a result.
//!
//! [`FieldConfig::threads`]: crate::FieldConfig::threads

use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

extern "C" {
    fn omp_set_num_threads(n: c_int);
}

/// What was last applied (0: nothing yet).
static APPLIED: AtomicU32 = AtomicU32::new(0);

/// Sets OpenMP's thread count to `n` for the whole process; 0 changes
/// nothing. Cheap when `n` is already applied.
#[allow(unsafe_code)]
pub fn apply(n: u32) {
    if n == 0 || APPLIED.swap(n, Ordering::Relaxed) == n {
        return;
    }
    let n = c_int::try_from(n).unwrap_or(c_int::MAX);
    // SAFETY: the function takes a plain integer, changes only OpenMP's
    // default team size for later parallel regions, and may be called from
    // any thread at any time; libgomp is linked into every binary that
    // links FAISS.
    unsafe {
        omp_set_num_threads(n);
    }
}

/// The count last applied by [`apply`], if any.
pub fn applied() -> Option<u32> {
    Some(APPLIED.load(Ordering::Relaxed)).filter(|n| *n > 0)
}
