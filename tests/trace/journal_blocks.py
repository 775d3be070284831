"""The blocks of a journal file, read straight from its bytes (docs/journal-format.md), for the
shell tests that check what the recorder wrote: no allockit code in between."""
import struct

CLOCK, RSS = 2, 3  # block codecs (the low byte of a block header's codec field)


def _walk(path):
    """(header offset, codec, stored length, the file's bytes) of each whole block, then
    (offset of the bytes left after them, None, 0, the file's bytes)."""
    d = open(path, "rb").read()
    o = 24 + struct.unpack_from("<I", d, 12)[0]
    while o + 40 <= len(d):
        codec, stored = struct.unpack_from("<II", d, o + 4)
        if o + 40 + stored > len(d):
            break  # cut off: left over
        yield o, codec, stored, d
        o += 40 + stored
    yield o, None, 0, d


def blocks(path):
    """(codec, event_count, payload) of each whole block, then the bytes left after them (a
    cut-off block) as a last (None, 0, rest)."""
    for o, codec, stored, d in _walk(path):
        if codec is None:
            yield None, 0, d[o:]
        else:
            yield codec, struct.unpack_from("<I", d, o + 16)[0], d[o + 40:o + 40 + stored]


def event_blocks(path):
    """(thread, base time) of each whole event block (codec 0 or 1), in file order."""
    for o, codec, _, d in _walk(path):
        if codec is not None and codec & 0xff in (0, 1):
            yield struct.unpack_from("<I", d, o + 20)[0], struct.unpack_from("<Q", d, o + 32)[0]


def rss_samples(path):
    """Every memory sample, (tsc, anon, rss, recorder, nonheap), in the journal's order."""
    return [struct.unpack_from("<QQQQQ", p, 40 * i)
            for codec, n, p in blocks(path) if codec is not None and codec & 0xff == RSS
            for i in range(n)]


def ms_per_tick(path):
    """Milliseconds per TSC tick, from the journal's first and last clock blocks."""
    clocks = [struct.unpack_from("<QQ", p) for codec, _, p in blocks(path)
              if codec is not None and codec & 0xff == CLOCK]
    (t0, n0), (t1, n1) = clocks[0], clocks[-1]
    return (n1 - n0) / (t1 - t0) / 1e6
