//! The text-level embedding cache, keyed by (model, dimension, text). In
//! memory, with an optional file so that a later run starts warm. A hit
//! costs nothing and is counted as a hit.
//!
//! The file is an [`engine::store::frame`] container (magic `SIMCACHE`) whose
//! frames each hold up to [`ENTRIES_PER_FRAME`] `(key, vector)` entries,
//! sorted by key, so the same cache always gives the same bytes.

use engine::digest::Digest;
use engine::error::{Error, Result};
use engine::store::frame::Format;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The container format of a cache file.
pub const CACHE_FORMAT: Format = Format { magic: *b"SIMCACHE", version: 2, what: "embedding cache file" };

/// Entries per frame: 4,096 vectors of 1,536 floats are 25 MB, well under
/// the frame limit at any dimension the configuration allows.
pub const ENTRIES_PER_FRAME: usize = 4_096;

type Entries = Vec<([u8; 32], Vec<f32>)>;

/// The cache.
#[derive(Debug, Default)]
pub struct TextCache {
    /// Lookup only; never iterated where order could matter (saving sorts).
    entries: Mutex<HashMap<Digest, Arc<[f32]>>>,
    file: Option<PathBuf>,
}

impl TextCache {
    /// An empty in-memory cache.
    pub fn in_memory() -> Self {
        TextCache::default()
    }

    /// A cache backed by `path`: loaded now if the file exists, saved by
    /// [`TextCache::save`]. A damaged file is an error naming the file, the
    /// frame and its offset.
    pub fn with_file(path: &Path) -> Result<Self> {
        let mut map = HashMap::new();
        if path.exists() {
            let frames = engine::store::frame::read_all(path, &CACHE_FORMAT, |f| {
                engine::store::codec::decode::<Entries>(&f.payload)
            })?;
            for (k, v) in frames.into_iter().flatten() {
                map.insert(Digest(k), Arc::from(v));
            }
        }
        Ok(TextCache { entries: Mutex::new(map), file: Some(path.to_path_buf()) })
    }

    /// A cached vector.
    pub fn get(&self, key: &Digest) -> Option<Arc<[f32]>> {
        self.entries.lock().get(key).cloned()
    }

    /// Stores vectors.
    pub fn put_all(&self, items: impl IntoIterator<Item = (Digest, Arc<[f32]>)>) {
        self.entries.lock().extend(items);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the cache file (sorted by key, so the same cache gives the
    /// same bytes), atomically. Does nothing without a file.
    pub fn save(&self) -> Result<()> {
        let Some(path) = &self.file else { return Ok(()) };
        let mut items: Vec<(Digest, Arc<[f32]>)> = self.entries.lock().iter().map(|(k, v)| (*k, v.clone())).collect();
        items.sort_by_key(|a| a.0);
        let mut payloads = Vec::with_capacity(items.len().div_ceil(ENTRIES_PER_FRAME));
        for chunk in items.chunks(ENTRIES_PER_FRAME) {
            let entries: Entries = chunk.iter().map(|(k, v)| (k.0, v.to_vec())).collect();
            let bytes = engine::store::codec::encode(&entries)
                .map_err(|e| Error::Format { file: path.display().to_string(), cause: e.to_string() })?;
            payloads.push(bytes);
        }
        engine::store::frame::write_file(path, &CACHE_FORMAT, payloads.iter().map(Vec::as_slice))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::embed::upstream::cache_key;

    #[test]
    fn saves_loads_and_names_damage() {
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
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        match TextCache::with_file(&path) {
            Err(Error::Corrupt { file, frame: 0, offset: 12, .. }) => assert!(file.ends_with("cache.bin"), "{file}"),
            other => panic!("expected a corrupt frame 0, got {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
