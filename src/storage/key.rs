//! Order-preserving key encoding.
//!
//! Index keys are byte strings whose lexicographic (memcmp) order equals the order of the tuples of
//! values they encode, so that one ordered byte-keyed index serves every key type and a composite
//! key's prefix range-scans correctly (all customers of a district are one contiguous range).
//!
//! Each value is encoded as one tag byte followed by a body:
//!
//! | value        | tag    | body                                                              |
//! |--------------|--------|-------------------------------------------------------------------|
//! | `Null`       | `0x00` | none (nulls sort first)                                           |
//! | `Bool`       | `0x01` | one byte, 0 or 1                                                  |
//! | `Int(i)`     | `0x02` | 8 bytes big-endian of `i ^ i64::MIN` (flips the sign bit)         |
//! | `Float(f)`   | `0x03` | 8 bytes big-endian of the IEEE bits, all bits flipped if negative, else only the sign bit |
//! | `Text(s)`    | `0x04` | the bytes with `0x00` escaped as `0x00 0xFF`, then `0x00 0x00`    |
//! | `Bytes(b)`   | `0x05` | as text                                                           |
//!
//! The terminator `0x00 0x00` sorts below any escaped content byte, so `"ab" < "ab\0" < "abc"`, and
//! a composite key's later columns never bleed into an earlier column's order. Within one column
//! all values share a type, so the tag only orders null against non-null.
//!
//! A key is limited to [`KEY_SIZE_MAX_BYTES`]; longer keys are refused with an error rather than
//! silently truncated.

use super::value::{Value, ValueRef};
use std::sync::Arc;

/// The largest encoded key accepted, in bytes.
pub const KEY_SIZE_MAX_BYTES: usize = 4096;

const TAG_NULL: u8 = 0x00;
const TAG_BOOL: u8 = 0x01;
const TAG_INT: u8 = 0x02;
const TAG_FLOAT: u8 = 0x03;
const TAG_TEXT: u8 = 0x04;
const TAG_BYTES: u8 = 0x05;

/// Keys up to this many bytes are stored inline in [`Key`] (no allocation). 38 makes a `Key` 40
/// bytes and holds four integer columns (4 × 9 bytes): every primary key of TPC-C.
pub const KEY_INLINE_BYTES: usize = 38;

/// An encoded key: ordered, compared and hashed as its bytes (so a `&[u8]` looks it up in maps
/// keyed by `Key`). Short keys live inline, so building one allocates nothing and comparing one
/// inside an index entry touches no other cache line: profiling TPC-C showed a cold out-of-line
/// key behind most hash-index probes and B-tree comparisons (`docs/PERFORMANCE.md`). Longer keys
/// are shared (`Arc<[u8]>`), so every clone is cheap.
#[derive(Clone)]
pub struct Key(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; KEY_INLINE_BYTES] },
    Heap(Arc<[u8]>),
}

impl Key {
    /// The key's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..*len as usize],
            Repr::Heap(bytes) => bytes,
        }
    }
}

impl From<&[u8]> for Key {
    #[inline]
    fn from(b: &[u8]) -> Key {
        if b.len() <= KEY_INLINE_BYTES {
            Key(Repr::Inline { len: b.len() as u8, bytes: inline_bytes(b) })
        } else {
            Key(Repr::Heap(Arc::from(b)))
        }
    }
}

/// `b` (at most [`KEY_INLINE_BYTES`] long) padded with zeros, assembled from whole-word loads
/// into words at fixed offsets, so that the compiler keeps it in registers and stores it straight
/// into the key. A copy of `b.len()` bytes into an array went through a stack temporary, filled
/// by `memcpy`'s narrow stores and read back by the move into the key's wide loads: a failed
/// store forward on every key built (`perf annotate` of log replay, a tenth of applying a write).
#[inline(always)]
fn inline_bytes(b: &[u8]) -> [u8; KEY_INLINE_BYTES] {
    debug_assert!(b.len() <= KEY_INLINE_BYTES);
    let mut out = [0u8; KEY_INLINE_BYTES];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let word = padded_word(b, 8 * i).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    out
}

/// Bytes `at..at + 8` of `b` as a little-endian word, zeros past `b`'s end.
#[inline(always)]
fn padded_word(b: &[u8], at: usize) -> u64 {
    let n = b.len();
    if let Some(word) = b.get(at..at + 8) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        return u64::from_le_bytes(bytes);
    }
    if n <= at {
        return 0;
    }
    let present = n - at; // 1..=7 bytes
    if n >= 8 {
        // The last 8 bytes of `b` end with the `present` bytes wanted: shift the rest out.
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&b[n - 8..]);
        return u64::from_le_bytes(bytes) >> (8 * (8 - present));
    }
    // A key shorter than a word.
    b.iter().enumerate().fold(0, |word, (j, &x)| word | u64::from(x) << (8 * j))
}

impl From<Vec<u8>> for Key {
    fn from(v: Vec<u8>) -> Key {
        if v.len() <= KEY_INLINE_BYTES { Key::from(v.as_slice()) } else { Key(Repr::Heap(Arc::from(v))) }
    }
}

impl<const N: usize> From<&[u8; N]> for Key {
    fn from(b: &[u8; N]) -> Key {
        Key::from(&b[..])
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for Key {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Maps keyed by `Key` are searched with `&[u8]`: `Eq`, `Ord` and `Hash` below are the bytes',
/// as `Borrow` requires.
impl std::borrow::Borrow<[u8]> for Key {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// A key equals the bytes it encodes: records hold their keys as bytes ([`super::Record::key`]).
impl PartialEq<[u8]> for Key {
    #[inline]
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

impl PartialEq<Key> for [u8] {
    #[inline]
    fn eq(&self, other: &Key) -> bool {
        self == other.as_bytes()
    }
}

/// Inline keys are zero beyond their length (`From<&[u8]>` is the only constructor), so two inline
/// keys compare as their fixed-size arrays and then their lengths: where the arrays first differ,
/// either both keys have a byte there or the shorter key's padding (zero) meets a byte of the
/// longer one, whose bytes up to there equal the shorter key, which is then its prefix and sorts
/// first, as the zero does. Words are compared big-endian, without a call to `memcmp`: index
/// inserts compare keys with keys (a checkpoint load spent 6 % of its time in `memcmp`).
#[inline]
fn inline_cmp(a_len: u8, a: &[u8; KEY_INLINE_BYTES], b_len: u8, b: &[u8; KEY_INLINE_BYTES]) -> std::cmp::Ordering {
    const WORD: usize = 8;
    let mut at = 0;
    while at + WORD <= KEY_INLINE_BYTES {
        let x = u64::from_be_bytes(word_at(a, at));
        let y = u64::from_be_bytes(word_at(b, at));
        if x != y {
            return x.cmp(&y);
        }
        at += WORD;
    }
    a[at..].cmp(&b[at..]).then(a_len.cmp(&b_len))
}

#[inline]
fn word_at(bytes: &[u8; KEY_INLINE_BYTES], at: usize) -> [u8; 8] {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    word
}

impl PartialEq for Key {
    #[inline]
    fn eq(&self, other: &Key) -> bool {
        match (&self.0, &other.0) {
            (Repr::Inline { len: a_len, bytes: a }, Repr::Inline { len: b_len, bytes: b }) => a_len == b_len && a == b,
            _ => self.as_bytes() == other.as_bytes(),
        }
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    #[inline]
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Bytes of a key [`sort_by_head_words`] copies beside it.
const SORT_HEAD_WORDS: usize = 4;

/// Sorts `items` by the bytes `key` gives for each (byte order, as [`Key`]'s order), comparing
/// words copied beside them: for keys [`permuted_by_varying_bytes`] declines.
///
/// A key longer than a [`Key`] holds inline lives behind a pointer, and a comparison sort of
/// many such keys follows two pointers per comparison, a cache miss each once they outgrow the
/// cache (a secondary index's keys, built after recovery). So the 32 bytes of each key after the
/// prefix all of them share are first copied beside it as big-endian words,
/// zero-padded, and the sort compares those, and the whole keys only where they tie. Zero padding
/// keeps the words' order the bytes' order wherever the words differ: a key that ends inside the
/// window is then a prefix of the other, so the smaller (as in the OLC tree's slices).
pub fn sort_by_head_words<T>(items: &mut Vec<T>, key: impl Fn(&T) -> &[u8]) {
    let Some(first) = items.first() else { return };
    let first = key(first).to_vec();
    let skip = items.iter().fold(first.len(), |shared, item| {
        let k = key(item);
        shared.min(first.iter().zip(k).take_while(|(a, b)| a == b).count())
    });
    let head = |k: &[u8]| -> [u64; SORT_HEAD_WORDS] {
        std::array::from_fn(|w| {
            let mut word = [0u8; 8];
            let start = (skip + w * 8).min(k.len());
            let bytes = &k[start..(start + 8).min(k.len())];
            word[..bytes.len()].copy_from_slice(bytes);
            u64::from_be_bytes(word)
        })
    };
    let mut headed: Vec<([u64; SORT_HEAD_WORDS], T)> = items.drain(..).map(|item| (head(key(&item)), item)).collect();
    headed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| key(&a.1).cmp(key(&b.1))));
    items.extend(headed.into_iter().map(|(_, item)| item));
}

/// The items of `sources`, all of them, in the order of the bytes `key` gives for each (byte
/// order, as [`Key`]'s order), if every key has the same length and they differ at no more than
/// [`VARYING_BYTES_MAX`] byte positions; if not, `sources` back as they were.
///
/// Keys of equal length compare as their bytes at the positions where any two differ, in order:
/// they are equal in all the others. So those bytes, packed into one integer, sort in the keys'
/// order. Recovery's keys are mostly so: composite integer keys, where only the low bytes of
/// each column vary (a TPC-C order line's 36-byte key varies in 5). Sorting (integer, index)
/// pairs and then moving each item once was 1.7× faster than comparing the keys, on 1.8 M
/// shuffled order-line keys (`docs/PERFORMANCE.md`, "Taurus", "Session 45"). The items stay
/// where they are until taken, in order, from the [`Permuted`] returned: a sorted copy of them
/// all was half of what an index rebuild faulted in.
pub fn permuted_by_varying_bytes<T>(
    sources: Vec<Vec<T>>,
    key: impl Fn(&T) -> &[u8],
) -> Result<Permuted<T>, Vec<Vec<T>>> {
    if sources.iter().map(Vec::len).sum::<usize>() > u32::MAX as usize {
        return Err(sources);
    }
    let Some(first) = sources.iter().flatten().next().map(|item| key(item).to_vec()) else {
        return Ok(Permuted::new(sources, Vec::new()));
    };
    let mut differ = vec![0u8; first.len()];
    for item in sources.iter().flatten() {
        let k = key(item);
        if k.len() != first.len() {
            return Err(sources);
        }
        for ((d, a), b) in differ.iter_mut().zip(k).zip(&first) {
            *d |= a ^ b;
        }
    }
    let varying: Vec<usize> = differ.iter().enumerate().filter(|&(_, d)| *d != 0).map(|(p, _)| p).collect();
    let order = if varying.len() <= 8 {
        packed_order(&sources, &key, &varying, |word: u64, byte| word << 8 | u64::from(byte))
    } else if varying.len() <= VARYING_BYTES_MAX {
        packed_order(&sources, &key, &varying, |word: u128, byte| word << 8 | u128::from(byte))
    } else {
        return Err(sources);
    };
    Ok(Permuted::new(sources, order))
}

/// The most byte positions [`permuted_by_varying_bytes`] packs (into a `u128`).
pub const VARYING_BYTES_MAX: usize = 16;

/// The indexes of the items of `sources` (among all of them, in order), sorted by their keys'
/// bytes at positions `varying`, packed by `pack` from a zero word.
fn packed_order<T, W: Ord + Copy + Default>(
    sources: &[Vec<T>],
    key: impl Fn(&T) -> &[u8],
    varying: &[usize],
    pack: impl Fn(W, u8) -> W,
) -> Vec<u32> {
    let mut order: Vec<(W, u32)> = sources
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, item)| {
            let k = key(item);
            (varying.iter().fold(W::default(), |word, &p| pack(word, k[p])), i as u32)
        })
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

/// Items in an order, taken from where they lie ([`permuted_by_varying_bytes`]): the `n`-th is
/// the one `order[n]` indexes among all the items of the lists, in order. Iterating moves them
/// out one by one; [`Permuted::get`] looks at one in place. Items not taken are dropped with it.
pub struct Permuted<T> {
    /// The lists, each given up its items (length 0): they stay allocated and hold the items
    /// until each is read out, once.
    sources: Vec<Vec<T>>,
    /// Each list's items, the index among all the items of its first, and how many it has.
    bases: Vec<(*const T, usize, usize)>,
    /// A permutation of `0..len`, so that each item is read out exactly once.
    order: Vec<u32>,
    /// Items taken so far: `order[..next]`.
    next: usize,
}

// SAFETY: a `Permuted` owns its items (the raw pointers are into its own lists), so it may move
// to another thread when they may.
unsafe impl<T: Send> Send for Permuted<T> {}

impl<T> Permuted<T> {
    /// Takes the items of `sources` in `order`, which must be a permutation of their indexes
    /// among all of them (asserted: the reads rest on it).
    fn new(mut sources: Vec<Vec<T>>, order: Vec<u32>) -> Permuted<T> {
        let mut seen = vec![false; order.len()];
        let permutation = order.iter().all(|&i| seen.get_mut(i as usize).is_some_and(|s| !std::mem::replace(s, true)));
        let mut bases = Vec::with_capacity(sources.len());
        let mut len = 0;
        for source in &mut sources {
            bases.push((source.as_ptr(), len, source.len()));
            len += source.len();
        }
        assert!(permutation && order.len() == len, "the order is a permutation of every item");
        for source in &mut sources {
            // SAFETY: the list gives up its items, which stay where they are (its buffer lives
            // as long as `self`) until read out below, each once; with length 0 it drops none.
            unsafe { source.set_len(0) };
        }
        Permuted { sources, bases, order, next: 0 }
    }

    /// Where the item with index `i` among all of them lies.
    fn locate(&self, i: u32) -> *const T {
        let i = i as usize;
        let s = self.bases.partition_point(|&(_, start, _)| start <= i) - 1;
        let (base, start, _) = self.bases[s];
        // SAFETY: `i` is below the total (it comes from the permutation), so `i - start` is
        // inside list `s`, whose buffer `base` points at.
        unsafe { base.add(i - start) }
    }

    /// The `n`-th item in order, if not taken yet.
    pub fn get(&self, n: usize) -> Option<&T> {
        let i = *self.order.get(n)?;
        // SAFETY: the item is there until taken, and items `next..` are not.
        (n >= self.next).then(|| unsafe { &*self.locate(i) })
    }

    /// The items not taken yet, in order, in place.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        (self.next..self.order.len()).filter_map(|n| self.get(n))
    }

    /// Every item, in place, in the lists' order rather than the permutation's: a pass that
    /// does not care for the order reads them one after another instead of at random. None may
    /// have been taken yet (asserted).
    pub fn iter_unordered(&self) -> impl Iterator<Item = &T> {
        assert_eq!(self.next, 0, "items were taken");
        // SAFETY: nothing was taken, so every item of every list is there, `len` of them from
        // `base`, for as long as `self` is borrowed.
        self.bases.iter().flat_map(|&(base, _, len)| unsafe { std::slice::from_raw_parts(base, len) })
    }
}

impl<T> Iterator for Permuted<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let i = *self.order.get(self.next)?;
        // The items lie at random: a taker that does much with each (a tree's leaf entry)
        // leaves the core too little room to overlap the misses unless asked ahead.
        if let Some(&ahead) = self.order.get(self.next + PERMUTED_PREFETCH_AHEAD) {
            super::prefetch::prefetch_line(self.locate(ahead));
        }
        self.next += 1;
        // SAFETY: `order` is a permutation and `next` only grows, so item `i` is read out once,
        // now, and then owned by the caller alone.
        Some(unsafe { std::ptr::read(self.locate(i)) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.order.len() - self.next;
        (left, Some(left))
    }
}

impl<T> ExactSizeIterator for Permuted<T> {}

/// How many items ahead [`Permuted`]'s iteration prefetches the one it will take.
const PERMUTED_PREFETCH_AHEAD: usize = 8;

impl<T> Drop for Permuted<T> {
    fn drop(&mut self) {
        // The items not taken, each once; then the lists free their buffers (length 0).
        for _ in self.by_ref() {}
        debug_assert!(self.sources.iter().all(Vec::is_empty));
    }
}

impl Ord for Key {
    #[inline]
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        match (&self.0, &other.0) {
            (Repr::Inline { len: a_len, bytes: a }, Repr::Inline { len: b_len, bytes: b }) => {
                inline_cmp(*a_len, a, *b_len, b)
            }
            _ => self.as_bytes().cmp(other.as_bytes()),
        }
    }
}

impl std::hash::Hash for Key {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_bytes(), f)
    }
}

thread_local! {
    /// Scratch space for encoding keys: a key is encoded here and then copied into its `Key`,
    /// inline when short, so encoding allocates nothing.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(256));
}

/// Runs `f` with an empty scratch buffer (a fresh one if the thread's is in use).
pub fn with_scratch<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            f(&mut buf)
        }
        Err(_) => f(&mut Vec::new()),
    })
}

/// Errors from encoding or decoding a key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// The encoded key would exceed [`KEY_SIZE_MAX_BYTES`].
    #[error("key is {size_bytes} bytes encoded; the limit is {KEY_SIZE_MAX_BYTES}")]
    TooLong {
        /// The encoded size.
        size_bytes: usize,
    },
    /// Decoding met bytes that no encoder produces.
    #[error("malformed key at byte {offset}: {reason}")]
    Malformed {
        /// Offset of the offending byte.
        offset: usize,
        /// What was wrong.
        reason: &'static str,
    },
}

/// Appends the encoding of one value to `out`.
pub fn encode_value(value: &Value, out: &mut Vec<u8>) {
    encode_value_ref(value.view(), out);
}

/// Appends the encoding of one borrowed value to `out` ([`encode_value`]).
pub fn encode_value_ref(value: ValueRef<'_>, out: &mut Vec<u8>) {
    match value {
        ValueRef::Null => out.push(TAG_NULL),
        ValueRef::Bool(b) => {
            out.push(TAG_BOOL);
            out.push(u8::from(b));
        }
        ValueRef::Int(i) => {
            out.push(TAG_INT);
            out.extend_from_slice(&ordered_int(i));
        }
        ValueRef::Float(f) => {
            out.push(TAG_FLOAT);
            out.extend_from_slice(&ordered_float_bits(f.to_bits()).to_be_bytes());
        }
        ValueRef::Text(s) => {
            out.push(TAG_TEXT);
            encode_escaped(s.as_bytes(), out);
        }
        ValueRef::Bytes(b) => {
            out.push(TAG_BYTES);
            encode_escaped(b, out);
        }
    }
}

/// The key of 8-byte values (`parts`: each value's raw bits and whether it is a float, as a row
/// holds them) followed by `primary`, an encoded primary key: what [`encode_value_ref`] writes for
/// those ints and floats, then `primary`'s bytes, built in place in the key with no scratch
/// buffer. `None` if the key would not fit inline ([`KEY_INLINE_BYTES`]); the caller then encodes
/// it the general way. A compiled secondary index's entry keys are made by it
/// ([`crate::storage::row::FixedEntryKey`]).
#[inline]
pub(crate) fn fixed_parts_key(parts: impl ExactSizeIterator<Item = (u64, bool)>, primary: &[u8]) -> Option<Key> {
    let head = INT_PART_BYTES * parts.len();
    let len = head + primary.len();
    if len > KEY_INLINE_BYTES {
        return None;
    }
    // In a plain array, the room checked once above: through an [`InlineKey`]'s appends the
    // index rebuild read 1–3 % slower in one A/B (`docs/PERFORMANCE.md`, "Compiled replay",
    // "Session 47").
    let mut bytes = [0u8; KEY_INLINE_BYTES];
    for (part, (bits, float)) in bytes.chunks_exact_mut(INT_PART_BYTES).zip(parts) {
        match float {
            true => write_part(part, TAG_FLOAT, ordered_float_bits(bits).to_be_bytes()),
            false => write_part(part, TAG_INT, ordered_int(bits as i64)),
        }
    }
    bytes[head..len].copy_from_slice(primary);
    Some(Key(Repr::Inline { len: len as u8, bytes }))
}

/// Lays an encoded part of `tag` and an 8-byte `body` already in key order out in `part` (its
/// [`INT_PART_BYTES`] bytes): [`encode_value_ref`]'s bytes for an int or a float, written by
/// every builder of an inline key that skips the general encoder.
#[inline]
fn write_part(part: &mut [u8], tag: u8, body: [u8; 8]) {
    part[0] = tag;
    part[1..].copy_from_slice(&body);
}

/// A key written into its inline bytes one encoded part after another, with no scratch buffer:
/// the one layout of a part there ([`encode_value_ref`]'s bytes) for every builder that skips
/// the general encoder. Each append is `None` when it would not fit.
struct InlineKey {
    bytes: [u8; KEY_INLINE_BYTES],
    len: usize,
}

impl InlineKey {
    #[inline]
    fn new() -> InlineKey {
        InlineKey { bytes: [0; KEY_INLINE_BYTES], len: 0 }
    }

    /// Appends a part of `tag` and an 8-byte body already in key order.
    #[inline]
    fn part(&mut self, tag: u8, body: [u8; 8]) -> Option<()> {
        write_part(self.bytes.get_mut(self.len..self.len + INT_PART_BYTES)?, tag, body);
        self.len += INT_PART_BYTES;
        Some(())
    }

    /// Appends bytes already encoded.
    #[inline]
    fn raw(&mut self, raw: &[u8]) -> Option<()> {
        self.bytes.get_mut(self.len..self.len + raw.len())?.copy_from_slice(raw);
        self.len += raw.len();
        Some(())
    }

    /// Appends `value`'s part; `None` for a text or bytes (escaped: the general encoder's).
    #[inline]
    fn value(&mut self, value: ValueRef<'_>) -> Option<()> {
        match value {
            ValueRef::Int(i) => self.part(TAG_INT, ordered_int(i)),
            ValueRef::Float(f) => self.part(TAG_FLOAT, ordered_float_bits(f.to_bits()).to_be_bytes()),
            ValueRef::Null => self.raw(&[TAG_NULL]),
            ValueRef::Bool(b) => self.raw(&[TAG_BOOL, u8::from(b)]),
            ValueRef::Text(_) | ValueRef::Bytes(_) => None,
        }
    }

    #[inline]
    fn finish(self) -> Key {
        Key(Repr::Inline { len: self.len as u8, bytes: self.bytes })
    }
}

/// A float's IEEE bits in a key: all flipped if negative, else only the sign bit, so that the
/// bytes compare in IEEE total order.
#[inline]
fn ordered_float_bits(bits: u64) -> u64 {
    if bits >> 63 == 1 { !bits } else { bits | (1 << 63) }
}

/// An integer's 8 bytes in a key: big-endian with the sign bit flipped, so that the bytes
/// compare as the integers do ([`int_of_word`] undoes it).
#[inline]
fn ordered_int(i: i64) -> [u8; 8] {
    ((i as u64) ^ (1 << 63)).to_be_bytes()
}

fn encode_escaped(bytes: &[u8], out: &mut Vec<u8>) {
    // Copied a run between zero bytes at a time (text has none): a push a byte was most of
    // checking a TPC-C customer-by-name entry (`docs/PERFORMANCE.md`, "TPC-C", "Session 63").
    out.reserve(bytes.len() + 2);
    for run in bytes.split_inclusive(|&b| b == 0) {
        out.extend_from_slice(run);
        if run.last() == Some(&0) {
            out.push(0xFF);
        }
    }
    out.push(0x00);
    out.push(0x00);
}

/// Encodes a tuple of values into a key.
pub fn encode_key(values: &[Value]) -> Result<Key, KeyError> {
    if let Some(key) = encode_int_key(values) {
        return Ok(key);
    }
    with_scratch(|out| {
        encode_into(values.iter().map(Value::view), out)?;
        Ok(Key::from(out.as_slice()))
    })
}

/// The most parts a key of integers may have to be encoded by [`encode_int_key`]: as many as
/// fit inline in a [`Key`].
const INT_KEY_PARTS_INLINE: usize = KEY_INLINE_BYTES / INT_PART_BYTES;

/// [`encode_key`] of a key whose parts are all integers, at most [`INT_KEY_PARTS_INLINE`] of them
/// (most primary keys: every TPC-C and YCSB key), written straight into the key's inline bytes:
/// no thread-local scratch buffer, no push per byte. Those were most of a key's encoding cost
/// (about 200 instructions for a key of 2–3 integers, which every point read, update and
/// prefetch pays). `None` for any other key. The bytes are [`encode_value`]'s (checked by a test).
#[inline]
fn encode_int_key(values: &[Value]) -> Option<Key> {
    encode_int_key_refs(values.iter().map(Value::view), values.len())
}

/// [`encode_int_key`] of a key given as its `i64` parts, the bytes it writes for the same
/// values: a compiled key of typed int expressions (`proc::compile::typed::IntKey`) needs no
/// `Value` a part. `None` for no part or more than [`INT_KEY_PARTS_INLINE`].
#[inline]
pub fn encode_int_parts(ints: &[i64]) -> Option<Key> {
    if ints.is_empty() || ints.len() > INT_KEY_PARTS_INLINE {
        return None;
    }
    let mut key = InlineKey::new();
    for (part, &i) in key.bytes.chunks_exact_mut(INT_PART_BYTES).zip(ints) {
        write_part(part, TAG_INT, ordered_int(i));
        key.len += INT_PART_BYTES;
    }
    Some(key.finish())
}

/// [`encode_int_key`] of borrowed values (a row's key columns), `count` of them.
#[inline]
pub fn encode_int_key_refs<'a>(values: impl Iterator<Item = ValueRef<'a>>, count: usize) -> Option<Key> {
    if count == 0 || count > INT_KEY_PARTS_INLINE {
        return None;
    }
    let mut key = InlineKey::new();
    // By whole parts, which need no check of room each: `count` fits.
    for (part, value) in key.bytes.chunks_exact_mut(INT_PART_BYTES).take(count).zip(values) {
        let ValueRef::Int(i) = value else { return None };
        write_part(part, TAG_INT, ordered_int(i));
        key.len += INT_PART_BYTES;
    }
    // Fewer values than `count` is a row too narrow for its key: the general encoder says so.
    (key.len == count * INT_PART_BYTES).then(|| key.finish())
}

/// The key of `values` followed by `suffix` (bytes already encoded, such as a primary key): a
/// secondary index's entry. A key of ints, floats, bools and nulls that fits inline is written
/// into the key where it lies; any other (text, bytes, too long) is encoded in the thread's
/// scratch buffer, as [`encode_into`] does. The thread-local buffer's access and its `Vec`'s
/// pushes were most of what made an entry's key (`docs/PERFORMANCE.md`, "Compiled replay",
/// "Session 46").
pub fn encode_with_suffix<'a>(
    values: impl Iterator<Item = ValueRef<'a>> + Clone,
    suffix: &[u8],
) -> Result<Key, KeyError> {
    if let Some(key) = inline_with_suffix(values.clone(), suffix) {
        return Ok(key);
    }
    with_scratch(|buf| {
        // The limit is the values' (`encode_into`'s), as when the two were encoded apart.
        encode_into(values, buf)?;
        buf.extend_from_slice(suffix);
        Ok(Key::from(buf.as_slice()))
    })
}

/// [`encode_with_suffix`]'s inline case, or `None`.
#[inline]
fn inline_with_suffix<'a>(values: impl Iterator<Item = ValueRef<'a>>, suffix: &[u8]) -> Option<Key> {
    let mut key = InlineKey::new();
    for value in values {
        key.value(value)?;
    }
    key.raw(suffix)?;
    Some(key.finish())
}

/// Encodes values into `out` (which is cleared first), enforcing the size limit.
pub fn encode_into<'a>(values: impl Iterator<Item = ValueRef<'a>>, out: &mut Vec<u8>) -> Result<(), KeyError> {
    out.clear();
    for v in values {
        encode_value_ref(v, out);
    }
    if out.len() > KEY_SIZE_MAX_BYTES {
        return Err(KeyError::TooLong { size_bytes: out.len() });
    }
    Ok(())
}

/// Decodes a key back into its values (used by tools and by recovery diagnostics).
pub fn decode_key(bytes: &[u8]) -> Result<Vec<Value>, KeyError> {
    let mut values = Vec::new();
    decode_key_each(bytes, |value| values.push(value))?;
    Ok(values)
}

/// Bytes of an encoded integer part: its tag and 8 bytes.
const INT_PART_BYTES: usize = 9;

/// Whether `bytes` is a key of exactly `parts` integer parts (most primary keys), whose part
/// `i` [`int_key_part`] then decodes. A fast path for compiled replay's delete and patch plans,
/// which know their key's length: the caller decodes any other key with [`decode_key_each`],
/// which names what is wrong with a malformed one.
#[inline]
pub fn is_int_key(bytes: &[u8], parts: usize) -> bool {
    bytes.len() == parts * INT_PART_BYTES && bytes.chunks_exact(INT_PART_BYTES).all(|c| c[0] == TAG_INT)
}

/// Part `i` of a key [`is_int_key`] accepted.
#[inline]
pub fn int_key_part(bytes: &[u8], i: usize) -> i64 {
    let at = i * INT_PART_BYTES + 1;
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    int_of_word(u64::from_be_bytes(raw))
}

/// The integer an encoded integer part's 8 bytes (big-endian, sign bit flipped so that bytes
/// order as integers do) stand for; [`encode_value`] is the inverse.
#[inline]
fn int_of_word(word: u64) -> i64 {
    (word ^ (1 << 63)) as i64
}

/// Decodes a key's values one by one into `put`, in order (compiled replay binds them straight
/// into a plan's frame); returns how many there were.
pub fn decode_key_each(mut bytes: &[u8], mut put: impl FnMut(Value)) -> Result<usize, KeyError> {
    let total = bytes.len();
    let mut count = 0;
    while let Some((&tag, rest)) = bytes.split_first() {
        let offset = total - bytes.len();
        let malformed = |reason| KeyError::Malformed { offset, reason };
        bytes = rest;
        let value = match tag {
            TAG_NULL => Value::Null,
            TAG_BOOL => {
                let (&b, rest) = bytes.split_first().ok_or(malformed("truncated bool"))?;
                bytes = rest;
                Value::Bool(b != 0)
            }
            TAG_INT | TAG_FLOAT => {
                let (head, rest) = bytes.split_at_checked(8).ok_or(malformed("truncated number"))?;
                bytes = rest;
                let mut raw = [0u8; 8];
                raw.copy_from_slice(head);
                let word = u64::from_be_bytes(raw);
                if tag == TAG_INT {
                    Value::Int(int_of_word(word))
                } else {
                    let bits = if word >> 63 == 1 { word & !(1 << 63) } else { !word };
                    Value::Float(f64::from_bits(bits))
                }
            }
            TAG_TEXT | TAG_BYTES => {
                let (raw, rest) = decode_escaped(bytes).ok_or(malformed("unterminated string"))?;
                bytes = rest;
                if tag == TAG_TEXT {
                    let s = String::from_utf8(raw).map_err(|_| malformed("text is not UTF-8"))?;
                    Value::Text(compact_str::CompactString::from(s))
                } else {
                    Value::bytes(&raw)
                }
            }
            _ => return Err(malformed("unknown type tag")),
        };
        put(value);
        count += 1;
    }
    Ok(count)
}

fn decode_escaped(bytes: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != 0 {
            out.push(b);
            i += 1;
            continue;
        }
        match bytes.get(i + 1)? {
            0x00 => return Some((out, &bytes[i + 2..])),
            0xFF => {
                out.push(0);
                i += 2;
            }
            _ => return None,
        }
    }
    None
}

/// The byte length of the first `count` encoded values of `bytes`, or `None` if `bytes` holds
/// fewer. A secondary entry key is `index columns ++ primary key`; this finds where the primary key
/// starts.
pub fn encoded_prefix_len(bytes: &[u8], count: usize) -> Option<usize> {
    let mut at = 0usize;
    for _ in 0..count {
        let tag = *bytes.get(at)?;
        at += 1;
        at += match tag {
            TAG_NULL => 0,
            TAG_BOOL => 1,
            TAG_INT | TAG_FLOAT => 8,
            TAG_TEXT | TAG_BYTES => {
                let rest = bytes.get(at..)?;
                let (_, after) = decode_escaped(rest)?;
                rest.len() - after.len()
            }
            _ => return None,
        };
    }
    (at <= bytes.len()).then_some(at)
}

/// The smallest key strictly greater than every key that starts with `prefix`, or `None` when no
/// such key exists (the prefix is all `0xFF`). Used to turn "all keys with this prefix" into a
/// half-open range.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_of_any_length_holds_its_bytes() {
        let source: Vec<u8> = (1..=60).collect();
        for n in 0..=source.len() {
            let key = Key::from(&source[..n]);
            assert_eq!(key.as_bytes(), &source[..n], "length {n}");
            if let Repr::Inline { bytes, .. } = &key.0 {
                assert!(bytes[n..].iter().all(|&x| x == 0), "length {n}: padded with zeros");
            }
        }
    }

    /// A row's key columns are all written or the key is left to the general encoder (which
    /// names what is missing): a key of fewer integers than its parts is not padded out.
    #[test]
    fn an_int_key_short_of_its_parts_is_left_to_the_general_encoder() {
        let values = [Value::Int(7), Value::Int(-3)];
        assert!(encode_int_key_refs(values.iter().map(Value::view), 3).is_none());
        let whole = encode_int_key_refs(values.iter().map(Value::view), 2).expect("two ints fit inline");
        assert_eq!(whole, encode_key(&values).expect("ints encode"));
    }

    proptest::proptest! {
        /// Inline keys compare and equal exactly as their bytes do, including keys that are
        /// prefixes of each other and keys with zero bytes (which meet the padding).
        #[test]
        fn key_order_and_equality_are_the_bytes(
            a in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(0u8), 0u8..4, proptest::num::u8::ANY], 0..48),
            b in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(0u8), 0u8..4, proptest::num::u8::ANY], 0..48),
            cut in 0usize..48,
        ) {
            // Half the cases compare a key with a prefix of itself or of a near copy.
            let b = if cut % 2 == 0 { a[..cut.min(a.len())].to_vec() } else { b };
            let (ka, kb) = (Key::from(&a[..]), Key::from(&b[..]));
            proptest::prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            proptest::prop_assert_eq!(ka == kb, a == b);
        }

        /// `sort_by_head_words` orders keys as their bytes do: keys sharing a long prefix, keys
        /// longer than the copied window, keys that are prefixes of others, zero bytes that meet
        /// the padding, and duplicates.
        #[test]
        fn sorting_by_head_words_is_byte_order(
            prefix in proptest::collection::vec(0u8..3, 0..40),
            tails in proptest::collection::vec(
                proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(0u8), 0u8..3, proptest::num::u8::ANY], 0..70),
                0..60,
            ),
        ) {
            let mut keys: Vec<Vec<u8>> = tails.iter().map(|t| [&prefix[..], t].concat()).collect();
            let mut want = keys.clone();
            want.sort();
            super::sort_by_head_words(&mut keys, |k| k.as_slice());
            proptest::prop_assert_eq!(keys, want);
        }

        /// `permuted_by_varying_bytes` sorts keys of one length that vary at up to 16 positions (as
        /// 8-byte and 16-byte words), from several lists, keeping every item once; it hands back
        /// lists it cannot sort (keys of two lengths, or more positions) untouched.
        #[test]
        fn sorting_by_varying_bytes_is_byte_order_or_declined(
            base in proptest::collection::vec(proptest::num::u8::ANY, 1..40),
            varying in proptest::collection::vec(0usize..40, 0..20),
            keys in proptest::collection::vec((proptest::collection::vec(proptest::num::u8::ANY, 20), 0usize..3), 0..200),
            short_one in proptest::bool::weighted(0.1),
        ) {
            // Each key is `base` with its bytes at the `varying` positions taken from its own draw.
            let mut sources: Vec<Vec<(Vec<u8>, usize)>> = vec![Vec::new(); 3];
            for (n, (bytes, source)) in keys.iter().enumerate() {
                let mut key = base.clone();
                for (j, &p) in varying.iter().enumerate() {
                    key[p % base.len()] = bytes[j] % 4;
                }
                if short_one && n == 0 {
                    key.pop();
                }
                sources[*source].push((key, n));
            }
            let mut want: Vec<(Vec<u8>, usize)> = sources.iter().flatten().cloned().collect();
            want.sort();
            let all: Vec<&Vec<u8>> = want.iter().map(|(k, _)| k).collect();
            let one_length = all.iter().all(|k| k.len() == all[0].len());
            let positions = (0..base.len()).filter(|&p| all.iter().any(|k| k.get(p) != all[0].get(p))).count();
            match super::permuted_by_varying_bytes(sources.clone(), |(k, _)| k.as_slice()) {
                Ok(got) => {
                    let mut got: Vec<(Vec<u8>, usize)> = got.collect();
                    proptest::prop_assert!(one_length && positions <= super::VARYING_BYTES_MAX);
                    proptest::prop_assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "not in key order");
                    got.sort();
                    proptest::prop_assert_eq!(got, want, "every item once");
                }
                Err(back) => {
                    proptest::prop_assert!(!one_length || positions > super::VARYING_BYTES_MAX);
                    proptest::prop_assert_eq!(back, sources);
                }
            }
        }
    }

    use super::*;
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Int),
            any::<f64>().prop_filter("no NaN", |f| !f.is_nan()).prop_map(Value::Float),
            "[a-c\\x00]{0,4}".prop_map(|s| Value::text(&s)),
        ]
    }

    fn same_kind(a: &Value, b: &Value) -> bool {
        a.is_null() || b.is_null() || a.column_type() == b.column_type()
    }

    proptest! {
        #[test]
        fn encoding_preserves_tuple_order(a in proptest::collection::vec(arb_value(), 1..4),
                                          b in proptest::collection::vec(arb_value(), 1..4)) {
            let n = a.len().min(b.len());
            prop_assume!((0..n).all(|i| same_kind(&a[i], &b[i])));
            let (a, b) = (&a[..n], &b[..n]);
            let mut expected = std::cmp::Ordering::Equal;
            for i in 0..n {
                let c = a[i].total_cmp(&b[i]);
                // -0.0 and 0.0 compare unequal under total order, as their encodings do.
                if c != std::cmp::Ordering::Equal { expected = c; break; }
            }
            let ka = encode_key(a).unwrap();
            let kb = encode_key(b).unwrap();
            prop_assert_eq!(ka.as_ref().cmp(kb.as_ref()), expected);
        }

        /// An entry key (values, then an encoded suffix) is the values' general encoding and then
        /// the suffix, whether it is built inline or in the scratch buffer: any values (bools and
        /// NaN too), any suffix, short and long.
        #[test]
        fn an_entry_key_is_the_values_encoding_then_the_suffix(
            values in proptest::collection::vec(prop_oneof![
                arb_value(),
                any::<bool>().prop_map(Value::Bool),
                Just(Value::Float(f64::NAN)),
            ], 0..6),
            suffix in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let mut expected = Vec::new();
            encode_into(values.iter().map(Value::view), &mut expected).unwrap();
            expected.extend_from_slice(&suffix);
            let key = encode_with_suffix(values.iter().map(Value::view), &suffix).unwrap();
            prop_assert_eq!(key.as_bytes(), &expected[..]);
            prop_assert_eq!(key, Key::from(expected));
        }

        /// A key of integers encodes on the stack ([`encode_int_key`]) to the very bytes the
        /// generic encoder writes, extremes included; longer or mixed keys take the generic path.
        #[test]
        fn integer_keys_encode_as_the_generic_encoder_does(
            ints in proptest::collection::vec(prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), any::<i64>()], 1..7),
            text_at in proptest::option::of(0usize..6),
        ) {
            let mut values: Vec<Value> = ints.iter().map(|&i| Value::Int(i)).collect();
            if let Some(at) = text_at.filter(|&at| at < values.len()) {
                values[at] = Value::Text("k".into());
            }
            let mut generic = Vec::new();
            encode_into(values.iter().map(Value::view), &mut generic).unwrap();
            let key = encode_key(&values).unwrap();
            prop_assert_eq!(key.as_ref(), generic.as_slice());
            let fast = encode_int_key(&values);
            let all_ints = values.iter().all(|v| matches!(v, Value::Int(_)));
            prop_assert_eq!(fast.is_some(), all_ints && values.len() <= INT_KEY_PARTS_INLINE);
            if let Some(fast) = fast {
                prop_assert_eq!(fast.as_ref(), generic.as_slice());
            }
            let parts = encode_int_parts(&ints);
            prop_assert_eq!(parts.is_some(), ints.len() <= INT_KEY_PARTS_INLINE);
            if let (Some(parts), None) = (parts, text_at.filter(|&at| at < ints.len())) {
                prop_assert_eq!(parts.as_ref(), generic.as_slice());
            }
        }

        #[test]
        fn decode_inverts_encode(vals in proptest::collection::vec(arb_value(), 0..5)) {
            let key = encode_key(&vals).unwrap();
            prop_assert_eq!(decode_key(&key).unwrap(), vals);
        }

        /// The integer fast path accepts exactly the keys of `parts` integers, and decodes them as
        /// the generic decoder does; any other key (a text or null part, another part count,
        /// a cut key) is left to the generic decoder.
        #[test]
        fn the_int_key_fast_path_agrees_with_decode(
            vals in prop_oneof![
                proptest::collection::vec(any::<i64>().prop_map(Value::Int), 0..5),
                proptest::collection::vec(arb_value(), 0..5),
            ],
            other_parts in proptest::option::of(0usize..6),
            cut in 0usize..50,
        ) {
            let parts = other_parts.unwrap_or(vals.len());
            let key = encode_key(&vals).unwrap();
            let key = if cut < key.len() && cut % 3 == 0 { &key[..cut] } else { &key[..] };
            let decoded = decode_key(key).ok();
            let all_ints = decoded.as_ref().is_some_and(|d| d.len() == parts && d.iter().all(|v| matches!(v, Value::Int(_))));
            prop_assert_eq!(is_int_key(key, parts), all_ints);
            if all_ints {
                let fast: Vec<Value> = (0..parts).map(|i| Value::Int(int_key_part(key, i))).collect();
                prop_assert_eq!(Some(fast), decoded);
            }
        }
    }

    #[test]
    fn composite_prefix_scans_contiguously() {
        let k = |a: i64, s: &str| encode_key(&[Value::Int(a), Value::text(s)]).unwrap();
        let prefix = encode_key(&[Value::Int(1)]).unwrap();
        let end = prefix_successor(&prefix).unwrap();
        for key in [k(1, ""), k(1, "zzz"), k(1, "\0")] {
            assert!(key.as_ref() >= prefix.as_ref() && key.as_ref() < end.as_slice());
        }
        assert!(k(2, "").as_ref() >= end.as_slice());
        assert!(k(0, "zzzz").as_ref() < prefix.as_ref());
    }

    #[test]
    fn prefix_length_finds_the_primary_key() {
        let sec = encode_key(&[Value::text("a\0b"), Value::Int(3)]).unwrap();
        let pk = encode_key(&[Value::Int(42)]).unwrap();
        let entry = [sec.as_ref(), pk.as_ref()].concat();
        assert_eq!(encoded_prefix_len(&entry, 2), Some(sec.len()));
        assert_eq!(encoded_prefix_len(&entry, 3), Some(entry.len()));
        assert_eq!(encoded_prefix_len(&entry, 4), None);
    }

    #[test]
    fn overlong_key_is_refused() {
        let big = Value::text(&"x".repeat(KEY_SIZE_MAX_BYTES));
        assert!(matches!(encode_key(&[big]), Err(KeyError::TooLong { .. })));
    }

    #[test]
    fn garbage_does_not_decode() {
        assert!(decode_key(&[0x09]).is_err());
        assert!(decode_key(&[TAG_INT, 1, 2]).is_err());
        assert!(decode_key(&[TAG_TEXT, b'a', 0x00, 0x07]).is_err());
    }
}
