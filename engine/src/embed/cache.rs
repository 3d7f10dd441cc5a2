//! The text-level embedding cache, keyed by (model, dimension, text). In
//! memory, with an optional file so that a later run starts warm. A hit
//! costs nothing and is counted as a hit.

use crate::digest::{Digest, DigestWriter};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"SIMCACHE";

/// The cache.
#[derive(Debug, Default)]
pub struct TextCache {
    /// Lookup only; never iterated where order could matter (saving sorts).
    entries: Mutex<HashMap<Digest, Arc<[f32]>>>,
    file: Option<PathBuf>,
}

/// The cache key of a text.
pub fn cache_key(model: &str, dim: usize, text: &str) -> Digest {
    DigestWriter::new("embed cache v1").str(model).u64(dim as u64).str(text).finish()
}

impl TextCache {
    /// An empty in-memory cache.
    pub fn in_memory() -> Self {
        TextCache::default()
    }

    /// A cache backed by `path`: loaded now if the file exists, saved by
    /// [`TextCache::save`].
    pub fn with_file(path: &Path) -> Result<Self> {
        let cache = TextCache { entries: Mutex::default(), file: Some(path.to_path_buf()) };
        if path.exists() {
            let bytes = std::fs::read(path).map_err(|e| cache_err(path, e.to_string()))?;
            let map = decode(&bytes).map_err(|cause| cache_err(path, cause))?;
            if let Ok(mut m) = cache.entries.lock() {
                *m = map;
            }
        }
        Ok(cache)
    }

    /// A cached vector.
    pub fn get(&self, key: &Digest) -> Option<Arc<[f32]>> {
        self.entries.lock().ok().and_then(|m| m.get(key).cloned())
    }

    /// Stores vectors.
    pub fn put_all(&self, items: impl IntoIterator<Item = (Digest, Arc<[f32]>)>) {
        if let Ok(mut m) = self.entries.lock() {
            m.extend(items);
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the cache file (sorted by key, so the same cache gives the
    /// same bytes), atomically. Does nothing without a file.
    pub fn save(&self) -> Result<()> {
        let Some(path) = &self.file else { return Ok(()) };
        let mut items: Vec<(Digest, Arc<[f32]>)> =
            self.entries.lock().map(|m| m.iter().map(|(k, v)| (*k, v.clone())).collect()).unwrap_or_default();
        items.sort_by_key(|a| a.0);
        let mut out = Vec::with_capacity(16 + items.len() * 300);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(items.len() as u64).to_le_bytes());
        for (k, v) in &items {
            out.extend_from_slice(&k.0);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            for x in v.iter() {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        let tmp = path.with_extension("partial");
        std::fs::write(&tmp, &out).and_then(|_| std::fs::rename(&tmp, path)).map_err(|e| cache_err(path, e.to_string()))
    }
}

fn cache_err(path: &Path, cause: String) -> Error {
    Error::Config { source_name: path.display().to_string(), field: "embedding.cache_file".into(), cause }
}

fn decode(b: &[u8]) -> std::result::Result<HashMap<Digest, Arc<[f32]>>, String> {
    let take = |at: &mut usize, n: usize| -> std::result::Result<&[u8], String> {
        let s = b.get(*at..*at + n).ok_or("the cache file is truncated")?;
        *at += n;
        Ok(s)
    };
    let mut at = 0;
    if take(&mut at, 8)? != MAGIC {
        return Err("not an embedding cache file".into());
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(take(&mut at, 8)?);
    let count = u64::from_le_bytes(n);
    let mut map = HashMap::new();
    for _ in 0..count {
        let mut k = [0u8; 32];
        k.copy_from_slice(take(&mut at, 32)?);
        let mut d = [0u8; 4];
        d.copy_from_slice(take(&mut at, 4)?);
        let dim = u32::from_le_bytes(d) as usize;
        let raw = take(&mut at, dim.checked_mul(4).ok_or("bad dimension")?)?;
        let v: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        map.insert(Digest(k), Arc::from(v));
    }
    if at != b.len() {
        return Err("the cache file has trailing bytes".into());
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads_and_rejects_damage() {
        let dir = std::env::temp_dir().join(format!("sim-cache-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("cache.bin");
        let _ = std::fs::remove_file(&path);
        let c = TextCache::with_file(&path).expect("new");
        let k = cache_key("m", 2, "hello");
        c.put_all([(k, Arc::from(vec![0.5f32, -0.5]))]);
        c.save().expect("save");
        let again = TextCache::with_file(&path).expect("load");
        assert_eq!(again.get(&k).as_deref(), Some(&[0.5f32, -0.5][..]));
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("write");
        let err = TextCache::with_file(&path).expect_err("truncated").to_string();
        assert!(err.contains("cache.bin") && err.contains("truncated"), "{err}");
    }
}
