//! In-place row writes into the FAISS flat storage: one of the
//! project's audited `unsafe` blocks (another sets OpenMP's thread count, in
//! [`crate::threads`]), and the guard around it.
//!
//! The `faiss` crate offers no safe way to change a stored vector: removing
//! and re-adding one shifts every later vector (a 40 MB move at 5,000 x
//! 2,048), which made reinforcement cost more than the search. FAISS's C
//! API hands out the flat storage (`IndexFlat::codes`) for exactly this
//! kind of access.
//!
//! **Precondition (owned storage).** The index is an `IdMap` over a flat
//! index that the map owns, and the caller holds it by `&mut` for the
//! whole access, so no search, add or resize runs meanwhile. [`Rows`] can
//! only be built through [`Rows::guard`], which checks what can be checked
//! at run time: that the inner index is flat, that its metric is inner
//! product (an L2 index would rank by distance, and every top-k would be
//! silently wrong), that its dimension is the row length, and that the
//! storage holds exactly `ntotal` rows.

use crate::error::FieldError;
use faiss::index::flat::FlatIndexImpl;
use faiss::{IdMap, Index, MetricType};

/// The index type: an ID map over a flat inner-product index.
pub(crate) type FlatMap = IdMap<FlatIndexImpl>;

/// Checks an index before the field adopts it (at creation and at load).
pub(crate) fn check_index(index: &FlatMap, row_len: usize) -> Result<(), FieldError> {
    if index.metric_type() != MetricType::InnerProduct {
        return Err(FieldError::Faiss(format!(
            "the index uses the {:?} metric; the field needs inner product",
            index.metric_type()
        )));
    }
    if index.d() as usize != row_len {
        return Err(FieldError::Faiss(format!("the index has dimension {}, the field's rows {row_len}", index.d())));
    }
    Ok(())
}

/// A checked view of the storage: `ntotal` rows of `row_len` floats.
pub(crate) struct Rows<'a> {
    data: &'a mut [f32],
    row_len: usize,
}

impl<'a> Rows<'a> {
    /// The storage of `index`, after the checks of the module docs.
    #[allow(unsafe_code)]
    pub(crate) fn guard(index: &'a mut FlatMap, row_len: usize) -> Result<Rows<'a>, FieldError> {
        check_index(index, row_len)?;
        let rows = usize::try_from(index.ntotal()).map_err(|_| FieldError::Faiss("index too large".into()))?;
        // SAFETY: `index_inner_ptr` is the live flat index owned by `index`
        // (the ID map owns its inner index), and `index` is borrowed
        // mutably for `'a`, so nothing else reads, writes or resizes the
        // storage while the slice lives. The cast returns null unless the
        // inner index is an `IndexFlat`; `faiss_IndexFlat_xb` reports the
        // storage's pointer and its length in floats, and the slice covers
        // exactly that length, which is checked against `ntotal x d` below
        // before any write.
        let data: &'a mut [f32] = unsafe {
            let flat = faiss_sys::faiss_IndexFlat_cast(index.index_inner_ptr());
            if flat.is_null() {
                return Err(FieldError::Faiss("the inner index is not a flat index".into()));
            }
            let (mut xb, mut len) = (std::ptr::null_mut::<f32>(), 0usize);
            faiss_sys::faiss_IndexFlat_xb(flat, &mut xb, &mut len);
            if xb.is_null() {
                &mut []
            } else {
                std::slice::from_raw_parts_mut(xb, len)
            }
        };
        if Some(data.len()) != rows.checked_mul(row_len) {
            return Err(FieldError::Faiss(format!(
                "the storage holds {} floats, not {rows} rows of {row_len}",
                data.len()
            )));
        }
        Ok(Rows { data, row_len })
    }

    /// Every row, concatenated.
    pub(crate) fn all(&self) -> &[f32] {
        self.data
    }

    /// Overwrites the rows at the given positions. Every position and row
    /// length is checked first: on an error nothing has been written.
    pub(crate) fn write(&mut self, rows: &[(usize, Vec<f32>)]) -> Result<(), FieldError> {
        let count = self.data.len() / self.row_len.max(1);
        for (pos, row) in rows {
            if row.len() != self.row_len {
                return Err(FieldError::Faiss(format!("row {pos} has {} floats, not {}", row.len(), self.row_len)));
            }
            if *pos >= count {
                return Err(FieldError::Faiss(format!("row {pos} is outside the index's {count} rows")));
            }
        }
        for (pos, row) in rows {
            self.data[pos * self.row_len..(pos + 1) * self.row_len].copy_from_slice(row);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faiss::Idx;

    fn index(metric_ip: bool, d: u32, rows: usize) -> FlatMap {
        let flat = if metric_ip { FlatIndexImpl::new_ip(d) } else { FlatIndexImpl::new_l2(d) };
        let mut m = IdMap::new(flat.expect("flat")).expect("id map");
        let data: Vec<f32> = (0..rows * d as usize).map(|i| i as f32).collect();
        let ids: Vec<Idx> = (0..rows as u64).map(Idx::new).collect();
        if rows > 0 {
            m.add_with_ids(&data, &ids).expect("add");
        }
        m
    }

    #[test]
    fn the_guard_refuses_l2_and_a_wrong_row_length() {
        let mut l2 = index(false, 3, 2);
        assert!(Rows::guard(&mut l2, 3).err().is_some_and(|e| e.to_string().contains("L2")));
        let mut ip = index(true, 3, 2);
        assert!(Rows::guard(&mut ip, 4).is_err());
        assert_eq!(Rows::guard(&mut ip, 3).expect("guard").all().len(), 6);
    }

    #[test]
    fn a_bad_write_changes_nothing() {
        let mut ip = index(true, 2, 2);
        let mut rows = Rows::guard(&mut ip, 2).expect("guard");
        let before = rows.all().to_vec();
        assert!(rows.write(&[(0, vec![9.0, 9.0]), (5, vec![1.0, 1.0])]).is_err());
        assert!(rows.write(&[(0, vec![9.0, 9.0]), (1, vec![1.0])]).is_err());
        assert_eq!(rows.all(), &before[..]);
        rows.write(&[(1, vec![7.0, 8.0])]).expect("write");
        assert_eq!(rows.all(), &[0.0, 1.0, 7.0, 8.0]);
    }
}
