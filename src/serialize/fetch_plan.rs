//! Which reads a fetch makes: each job's bytes cut in chunks, except
//! where its source asks for small records to be read together
//! ([`FetchHints::join_gap`](super::byte_source::FetchHints)): there,
//! whole jobs smaller than the gap (and than a chunk) whose bytes lie
//! within the gap of one another are read by one read of the span they
//! cover, gaps included (a server's round trip costs more than the bytes
//! between two small tensors). A joined job's bytes pass through a
//! staging buffer, a copy that costs about what reading as many gap bytes
//! does, so bigger jobs are read straight into their storages (a shared
//! request saves them no more than a concurrent one). Jobs are joined in
//! the order of their bytes in the source, whatever the order asked.

use super::ckpt_index::{Index, RecordData};
use std::ops::Range;

/// `len` bytes from byte `start` of record `record` into one new storage;
/// `entries` are the tensors it holds (named in progress when it is
/// done).
pub(crate) struct Job {
    pub record: usize,
    pub start: u64,
    pub len: u64,
    pub entries: Vec<usize>,
}

/// One read of a fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Read {
    /// Bytes `[off, off + len)` of job `job`; `crc`: whether its CRC-32
    /// is computed (its job reads a whole record that has one).
    Part {
        job: usize,
        off: u64,
        len: u64,
        crc: bool,
    },
    /// The whole jobs `members[first..first + count]` of the plan, read
    /// by one read of bytes `[offset, offset + len)` of source `source`.
    Joined {
        first: usize,
        count: usize,
        source: usize,
        offset: u64,
        len: u64,
    },
}

/// The reads of a fetch.
pub(super) struct Plan {
    pub reads: Vec<Read>,
    /// The jobs of the joined reads.
    pub members: Vec<usize>,
    /// Per job: its part reads (empty for a joined job).
    pub parts: Vec<Range<usize>>,
    /// 0..jobs: a part read's finished job as a slice.
    pub each: Vec<usize>,
}

impl Plan {
    /// The jobs `read` finishes, given whether it was its job's last
    /// part.
    pub(super) fn finished(&self, read: &Read, last: bool) -> &[usize] {
        match *read {
            Read::Part { job, .. } if last => &self.each[job..job + 1],
            Read::Part { .. } => &[],
            Read::Joined { first, count, .. } => &self.members[first..first + count],
        }
    }
}

/// The reads of `jobs` of `index` in reads of at most `chunk` bytes.
pub(super) fn plan(index: &Index, jobs: &[Job], chunk: u64, crc: impl Fn(&Job) -> bool) -> Plan {
    let joined = join(index, jobs, chunk);
    let mut in_group = vec![false; jobs.len()];
    let mut plan = Plan {
        reads: Vec::new(),
        members: Vec::new(),
        parts: Vec::with_capacity(jobs.len()),
        each: (0..jobs.len()).collect(),
    };
    for Group {
        source,
        start,
        end,
        jobs: group,
    } in joined
    {
        group.iter().for_each(|&j| in_group[j] = true);
        plan.reads.push(Read::Joined {
            first: plan.members.len(),
            count: group.len(),
            source,
            offset: start,
            len: end - start,
        });
        plan.members.extend(group);
    }
    for (i, job) in jobs.iter().enumerate() {
        let first = plan.reads.len();
        if !in_group[i] {
            let crc = crc(job);
            let mut off = 0;
            while off < job.len {
                let len = chunk.min(job.len - off);
                plan.reads.push(Read::Part {
                    job: i,
                    off,
                    len,
                    crc,
                });
                off += len;
            }
        }
        plan.parts.push(first..plan.reads.len());
    }
    plan
}

/// Where job `job`'s bytes lie when they are one range of a source:
/// (source, offset, length).
fn place(index: &Index, job: &Job) -> Option<(usize, u64, u64)> {
    match index.records[job.record].data {
        RecordData::Range { source, offset } => Some((source, offset + job.start, job.len)),
        _ => None,
    }
}

/// Jobs read together: bytes `[start, end)` of source `source`.
struct Group {
    source: usize,
    start: u64,
    end: u64,
    /// In the order of their bytes.
    jobs: Vec<usize>,
}

/// The groups of two or more jobs read together: jobs of one range
/// each, smaller than `chunk` and than the gap, from a source that asks
/// for joins, whose bytes start at or after the group's end and less
/// than its gap after it, the group's span at most `chunk`.
fn join(index: &Index, jobs: &[Job], chunk: u64) -> Vec<Group> {
    let gap_of = |source: usize| {
        index.sources[source]
            .fetch_hints()
            .join_gap
            .filter(|&g| g > 0)
    };
    let mut cands: Vec<(usize, u64, u64, usize, u64)> = jobs
        .iter()
        .enumerate()
        .filter(|(_, job)| job.len > 0 && job.len < chunk)
        .filter_map(|(i, job)| {
            let (source, at, len) = place(index, job)?;
            let gap = gap_of(source).filter(|&g| job.len < g)?;
            Some((source, at, len, i, gap))
        })
        .collect();
    cands.sort_unstable();
    let mut groups = Vec::new();
    let mut cur = Group {
        source: usize::MAX,
        start: 0,
        end: 0,
        jobs: Vec::new(),
    };
    for (source, at, len, job, gap) in cands {
        // Overlapping records (a hostile file's) are never joined: each
        // job's bytes are made native in place.
        let joins = source == cur.source
            && at >= cur.end
            && at - cur.end < gap
            && at + len - cur.start <= chunk;
        if joins {
            cur.end = at + len;
            cur.jobs.push(job);
            continue;
        }
        let next = Group {
            source,
            start: at,
            end: at + len,
            jobs: vec![job],
        };
        let done = std::mem::replace(&mut cur, next);
        if done.jobs.len() > 1 {
            groups.push(done);
        }
    }
    if cur.jobs.len() > 1 {
        groups.push(cur);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::dtype::DType;
    use crate::error::Result;
    use crate::serialize::byte_source::{ByteSource, FetchHints};
    use crate::serialize::ckpt_index::{Entry, RecordCrc, RecordSpec};
    use crate::serialize::fetch::{fetch, Options};
    use crate::serialize::formats::Format;
    use std::sync::{Arc, Mutex};

    /// Bytes in memory that ask for joins within `gap`, logging each read.
    struct Mem {
        bytes: Vec<u8>,
        gap: u64,
        reads: Mutex<Vec<(u64, usize)>>,
    }

    impl ByteSource for Mem {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            self.reads.lock().unwrap().push((offset, buf.len()));
            let at = offset as usize;
            buf.copy_from_slice(&self.bytes[at..at + buf.len()]);
            Ok(())
        }
        fn bytes_read(&self) -> u64 {
            0
        }
        fn name(&self) -> &str {
            "mem"
        }
        fn check_unchanged(&self) -> Result<()> {
            Ok(())
        }
        fn fetch_hints(&self) -> FetchHints {
            FetchHints {
                join_gap: Some(self.gap),
                ..FetchHints::default()
            }
        }
    }

    /// An index over 1 KiB of memory (byte i is i % 251) with a float
    /// record at each (offset, len) of `at`, `swap` wide, and its jobs
    /// (whole records).
    fn index(at: &[(u64, u64)], gap: u64, swap: usize) -> (Arc<Mem>, Index, Vec<Job>) {
        let mem = Arc::new(Mem {
            bytes: (0..1024).map(|i| (i % 251) as u8).collect(),
            gap,
            reads: Mutex::new(Vec::new()),
        });
        let records = at
            .iter()
            .map(|&(offset, len)| RecordSpec {
                data: RecordData::Range { source: 0, offset },
                len,
                swap,
                crc: None,
            })
            .collect();
        let entries = at
            .iter()
            .enumerate()
            .map(|(i, &(_, len))| Entry {
                name: format!("t{i}"),
                record: i,
                offset: 0,
                sizes: vec![len as i64 / 4],
                strides: vec![1],
                dtype: DType::Float,
            })
            .collect();
        let source: Arc<dyn ByteSource> = mem.clone();
        let index =
            Index::new(Format::Safetensors, vec![source], records, entries, vec![]).unwrap();
        let jobs = at
            .iter()
            .enumerate()
            .map(|(i, &(_, len))| Job {
                record: i,
                start: 0,
                len,
                entries: vec![i],
            })
            .collect();
        (mem, index, jobs)
    }

    fn joined(plan: &Plan) -> Vec<(Vec<usize>, u64, u64)> {
        plan.reads
            .iter()
            .filter_map(|r| match *r {
                Read::Joined {
                    first,
                    count,
                    offset,
                    len,
                    ..
                } => Some((plan.members[first..first + count].to_vec(), offset, len)),
                Read::Part { .. } => None,
            })
            .collect()
    }

    #[test]
    fn records_closer_than_the_gap_are_read_together_in_byte_order() {
        // Asked out of order; gaps 0, 50 and 200 bytes.
        let at = [(60, 60), (0, 60), (170, 60), (430, 60)];
        let (_, idx, jobs) = index(&at, 100, 0);
        let plan = plan(&idx, &jobs, 4096, |_| false);
        assert_eq!(joined(&plan), vec![(vec![1, 0, 2], 0, 230)]);
        // The far one alone, as a part; the joined ones have none.
        assert_eq!(plan.parts[3].len(), 1);
        assert!(plan.parts[..3].iter().all(|p| p.is_empty()));
        assert_eq!(plan.reads.len(), 2);
        // A gap of exactly the setting is not joined; one byte more is.
        let (_, idx, jobs) = index(&[(0, 60), (160, 60)], 100, 0);
        assert!(joined(&plan_of(&idx, &jobs, 4096)).is_empty());
        let (_, idx, jobs) = index(&[(0, 60), (160, 60)], 101, 0);
        assert_eq!(joined(&plan_of(&idx, &jobs, 4096)).len(), 1);
    }

    fn plan_of(idx: &Index, jobs: &[Job], chunk: u64) -> Plan {
        plan(idx, jobs, chunk, |_| false)
    }

    #[test]
    fn no_join_for_a_gap_of_0_overlaps_records_past_the_gap_or_spans_past_a_chunk() {
        let touching = [(0, 100), (100, 100), (200, 100)];
        let (_, idx, jobs) = index(&touching, 0, 0);
        let plan = plan_of(&idx, &jobs, 4096);
        assert!(joined(&plan).is_empty());
        assert_eq!(plan.reads.len(), 3);
        // Overlapping records: each read alone.
        let (_, idx, jobs) = index(&[(0, 100), (50, 100)], 1000, 0);
        assert!(joined(&plan_of(&idx, &jobs, 4096)).is_empty());
        // A span past the chunk starts a new group; a record of a whole
        // chunk is never joined.
        let (_, idx, jobs) = index(&touching, 1000, 0);
        assert_eq!(
            joined(&plan_of(&idx, &jobs, 208)),
            vec![(vec![0, 1], 0, 200)]
        );
        let (_, idx, jobs) = index(&touching, 1000, 0);
        assert!(joined(&plan_of(&idx, &jobs, 100)).is_empty());
        // Records as big as the gap are read straight into their
        // storages, however close; smaller ones beside them still join.
        let (_, idx, jobs) = index(&touching, 100, 0);
        assert!(joined(&plan_of(&idx, &jobs, 4096)).is_empty());
        let (_, idx, jobs) = index(&[(0, 100), (100, 100), (200, 40), (240, 40)], 100, 0);
        assert_eq!(
            joined(&plan_of(&idx, &jobs, 4096)),
            vec![(vec![2, 3], 200, 80)]
        );
    }

    #[test]
    fn a_joined_fetch_reads_once_and_gives_each_record_its_own_bytes() {
        let at = [(300, 40), (0, 64), (64, 16), (700, 32)];
        for swap in [0, 4] {
            let (mem, idx, jobs) = index(&at, 512, swap);
            let mut names = Vec::new();
            let mut cb = |p: &crate::serialize::fetch::Progress<'_>| {
                names.extend(p.finished.map(str::to_owned));
                true
            };
            let opts = Options {
                concurrency: 2,
                chunk: 0,
                progress: Some(&mut cb),
            };
            let got = fetch(&idx, &jobs, Device::CPU, opts).unwrap();
            for (s, &(offset, len)) in got.iter().zip(&at) {
                let mut want: Vec<u8> = (offset..offset + len).map(|i| (i % 251) as u8).collect();
                if swap > 0 {
                    want.chunks_exact_mut(swap).for_each(<[u8]>::reverse);
                }
                // SAFETY: a fetched CPU storage of len bytes.
                let bytes =
                    unsafe { std::slice::from_raw_parts(s.data() as *const u8, len as usize) };
                assert_eq!(bytes, &want[..], "record at {offset}, swap {swap}");
            }
            // One read of bytes [0, 732): the gaps are under 512 bytes.
            assert_eq!(*mem.reads.lock().unwrap(), vec![(0, 732)]);
            names.sort();
            assert_eq!(names, ["t0", "t1", "t2", "t3"]);
        }
    }

    #[test]
    fn a_joined_record_with_a_wrong_crc_is_refused_naming_its_entry() {
        let (_, mut idx, jobs) = index(&[(0, 64), (64, 64)], 512, 0);
        let good = crc32fast::hash(&(64..128).map(|i| i as u8).collect::<Vec<_>>());
        for (expected, ok) in [(good, true), (good ^ 1, false)] {
            idx.records[1].crc = Some(RecordCrc {
                entry: "archive/data/1".into(),
                expected,
                prefix: crc32fast::Hasher::new(),
            });
            let got = fetch(&idx, &jobs, Device::CPU, Options::default());
            match got {
                Ok(_) => assert!(ok),
                Err(e) => {
                    assert!(!ok, "{e}");
                    assert!(e.message().contains("archive/data/1"), "{e}");
                }
            }
        }
    }
}
