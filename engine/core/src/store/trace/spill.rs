//! A tick put together from the shards' parts without holding it: each
//! shard's frame goes into spill files (one per list of the frame, its job
//! positions moved past the shards before it), and the merged frame is
//! encoded from those files into the trace. A merge of shards
//! (`sim-cli merge`) holds one tick of one shard at a time this way.

use super::file::TraceWriter;
use super::record::TickFrame;
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::store::codec::{decode_from, encode_native_to};
use crate::turn::{ContentChain, FullChain, Outcome, TickDigests};
use bincode::enc::write::Writer;
use bincode::Encode;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// The lists of a tick frame, in the frame's order: one spill file each.
const LISTS: [&str; 5] = ["outcomes", "embeddings", "memories", "persona-digests", "consolidation"];
const OUTCOMES: usize = 0;
const PERSONAS: usize = 3;

/// Spill files' buffers.
const BUFFER: usize = 256 << 10;

fn io_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Format { file: path.display().to_string(), cause: e.to_string() }
}

/// The tick being put together: its spill files, being written.
pub struct TickSpill {
    files: Vec<(PathBuf, BufWriter<File>, u64)>,
    stimuli: Vec<String>,
    jobs: u32,
}

impl TickSpill {
    /// Empty spill files in `dir` (any there before are replaced).
    pub fn create(dir: &Path) -> Result<TickSpill> {
        let mut files = Vec::with_capacity(LISTS.len());
        for name in LISTS {
            let path = dir.join(name);
            let f = File::create(&path).map_err(|e| io_error(&path, e))?;
            files.push((path, BufWriter::with_capacity(BUFFER, f), 0));
        }
        Ok(TickSpill { files, stimuli: Vec::new(), jobs: 0 })
    }

    /// Appends the next shard's part of the tick: its job positions (in
    /// outcomes and memory events) move past the jobs appended before it,
    /// and its stimuli join the first-exposure order.
    pub fn add(&mut self, frame: TickFrame) -> Result<()> {
        let offset = self.jobs;
        let TickFrame { stimuli, outcomes, embeddings, memories, persona_digests, consolidation, .. } = frame;
        for s in stimuli {
            if !self.stimuli.contains(&s) {
                self.stimuli.push(s);
            }
        }
        self.jobs += outcomes.len() as u32;
        self.put(
            OUTCOMES,
            outcomes.into_iter().map(|mut o| {
                o.position += offset;
                o
            }),
        )?;
        self.put(1, embeddings.into_iter())?;
        self.put(
            2,
            memories.into_iter().map(|mut m| {
                m.position += offset;
                m
            }),
        )?;
        self.put(PERSONAS, persona_digests.into_iter())?;
        self.put(4, consolidation.into_iter())
    }

    fn put<T: Encode>(&mut self, list: usize, items: impl Iterator<Item = T>) -> Result<()> {
        let (path, w, n) = &mut self.files[list];
        for item in items {
            encode_native_to(&item, w).map_err(|e| io_error(path, e))?;
            *n += 1;
        }
        Ok(())
    }

    /// The files written out, ready to be read back.
    pub fn close(self) -> Result<SpilledTick> {
        let mut files = Vec::with_capacity(self.files.len());
        for (path, mut w, n) in self.files {
            w.flush().map_err(|e| io_error(&path, e))?;
            files.push((path, n));
        }
        Ok(SpilledTick { files, stimuli: self.stimuli })
    }
}

/// A tick put together in spill files.
pub struct SpilledTick {
    files: Vec<(PathBuf, u64)>,
    stimuli: Vec<String>,
}

impl SpilledTick {
    fn reader(&self, list: usize) -> Result<BufReader<File>> {
        let path = &self.files[list].0;
        Ok(BufReader::with_capacity(BUFFER, File::open(path).map_err(|e| io_error(path, e))?))
    }

    /// Each outcome in job order, decoded one at a time.
    fn outcomes(&self, mut each: impl FnMut(&Outcome)) -> Result<()> {
        let mut r = self.reader(OUTCOMES)?;
        for _ in 0..self.files[OUTCOMES].1 {
            each(&decode_from::<Outcome, _>(&mut r).map_err(|e| io_error(&self.files[OUTCOMES].0, e))?);
        }
        Ok(())
    }

    /// The tick's digests after `prev`: the content digest exactly as a
    /// run of the whole panel chains it (its outcomes in job order, every
    /// persona's state digest), the full digest over every outcome's costs
    /// and the shards' own full digests (`shards`, in shard order).
    pub fn digests(
        &self,
        prev: &TickDigests,
        tick: u32,
        shards: impl IntoIterator<Item = Digest>,
    ) -> Result<TickDigests> {
        let mut c = ContentChain::new(prev, tick, self.files[OUTCOMES].1 as u32);
        self.outcomes(|o| c.outcome(o))?;
        let (path, n) = &self.files[PERSONAS];
        c.personas(*n as u32);
        let mut r = self.reader(PERSONAS)?;
        for _ in 0..*n {
            c.persona(decode_from::<Option<Digest>, _>(&mut r).map_err(|e| io_error(path, e))?.as_ref());
        }
        let digest = c.finish();
        let mut f = FullChain::new(prev, &digest);
        self.outcomes(|o| f.outcome(o))?;
        Ok(TickDigests { digest, full_digest: f.shards(shards) })
    }

    /// Appends the tick, with `digests`, to `trace`, streamed from the
    /// files (in parts when it is large).
    pub fn write(&self, trace: &mut TraceWriter, tick: u32, digests: TickDigests) -> Result<u64> {
        trace.append_tick_encoded(tick, &Streamed { tick, spilled: self, digests })
    }
}

/// A spilled tick, encoded as `Record::Tick` would encode its frame.
struct Streamed<'a> {
    tick: u32,
    spilled: &'a SpilledTick,
    digests: TickDigests,
}

impl Streamed<'_> {
    /// List `list` as a `Vec` encodes: its length, then its items as
    /// spilled.
    fn copy<E: bincode::enc::Encoder>(
        &self,
        list: usize,
        e: &mut E,
    ) -> std::result::Result<(), bincode::error::EncodeError> {
        let (path, n) = &self.spilled.files[list];
        n.encode(e)?;
        let io = |err: std::io::Error| bincode::error::EncodeError::OtherString(format!("{}: {err}", path.display()));
        let mut file = File::open(path).map_err(io)?;
        let mut buf = vec![0u8; BUFFER];
        loop {
            match file.read(&mut buf).map_err(io)? {
                0 => return Ok(()),
                got => e.writer().write(&buf[..got])?,
            }
        }
    }
}

impl Encode for Streamed<'_> {
    fn encode<E: bincode::enc::Encoder>(&self, e: &mut E) -> std::result::Result<(), bincode::error::EncodeError> {
        // `Record::Tick` is the record's second variant; the fields of a
        // `TickFrame` follow in their order.
        1u32.encode(e)?;
        self.tick.encode(e)?;
        self.spilled.stimuli.encode(e)?;
        for list in 0..4 {
            self.copy(list, e)?;
        }
        self.digests.encode(e)?;
        self.copy(4, e)
    }
}
