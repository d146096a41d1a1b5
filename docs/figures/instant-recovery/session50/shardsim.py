#!/usr/bin/env python3
"""How evenly the restore's shard cuts split a table's keys (session 50).

`raw`: the cut the restorer makes (`interpolate` in src/durability/indexed/restorer.rs): the 8
bytes after the first and last keys' common prefix read as a big-endian number, 4,096 evenly
spaced points between them. `union`: the same points in a radix learned from a sample of keys
(the first and last 64 keys, and 64 keys after each of 32 raw points): the bytes the sampled keys
use after the common prefix, each position read as a digit of that alphabet (a key that has
ended ranks lowest). Not built; simulated here.

Keys are mocked as full keys of the indexed log: a 4-byte table id, the key's tag and bytes and a
two-byte terminator (the escaping of zero bytes is left out: none of these keys hold one).

usage: python3 shardsim.py     (prints non-empty shards, median and largest shard per key set)
"""
import bisect
import random

SPAN = 8
PARTS = 4096


def common(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def raw_cuts(first, last, parts):
    c = common(first, last)
    word = lambda k: int.from_bytes((k[c:] + b"\0" * 8)[:8], "big")
    a, b = word(first), word(last)
    return [first[:c] + (a + (b - a) * i // parts).to_bytes(8, "big") for i in range(1, parts)]


def union_cuts(first, last, parts, sample):
    c = common(first, last)
    alphabet = sorted({byte for k in sample for byte in k[c:c + SPAN]})
    radix = len(alphabet) + 2

    def fraction(k):
        tail, v, scale = k[c:], 0.0, 1.0
        for i in range(SPAN):
            digit = 1 + bisect.bisect_left(alphabet, tail[i]) if i < len(tail) else 0
            scale /= radix
            v += digit * scale
        return v

    fa, fb = fraction(first), fraction(last)
    cuts = []
    for j in range(1, parts):
        f = fa + (fb - fa) * j / parts
        key = bytearray(first[:c])
        for _ in range(SPAN):
            f *= radix
            digit = min(max(int(f), 0), radix - 1)
            f -= digit
            if digit == 0:
                break
            key.append(alphabet[digit - 1] if digit - 1 < len(alphabet) else 255)
        cuts.append(bytes(key))
    return cuts


def sample_of(keys, probes=32, run=64):
    sample = keys[:run] + keys[-run:]
    for point in raw_cuts(keys[0], keys[-1], probes):
        i = bisect.bisect_left(keys, point)
        sample += keys[i:i + run]
    return sample


def stats(keys, cuts):
    cuts = sorted(set(cuts))
    counts = {}
    for k in keys:
        i = bisect.bisect_right(cuts, k)
        counts[i] = counts.get(i, 0) + 1
    v = sorted(counts.values())
    return f"non-empty {len(v)}, median {v[len(v) // 2]}, largest {v[-1]}"


def report(name, keys):
    keys = sorted(keys)
    print(f"{name}: raw: {stats(keys, raw_cuts(keys[0], keys[-1], PARTS))}")
    print(f"{name}: union: {stats(keys, union_cuts(keys[0], keys[-1], PARTS, sample_of(keys)))}")


def full(s):
    return b"\x00\x00\x00\x01\x05" + s + b"\x00\x00"


random.seed(50)
report("key:<n>, 5 M", [full(b"key:%d" % i) for i in range(5_000_000)])
report("memtier-<n>, 1 M", [full(b"memtier-%d" % i) for i in range(1_000_000)])
report("random 16 bytes, 100 K", [full(bytes(random.getrandbits(8) for _ in range(16))) for _ in range(100_000)])
report("integers, 1 M", [b"\x00\x00\x00\x01\x02" + (i * 7 + (1 << 63)).to_bytes(8, "big") for i in range(1_000_000)])
report("user:<hex>, 200 K", [full(b"user:%08x" % random.getrandbits(32)) for _ in range(200_000)])
