#!/usr/bin/python3
"""An independent check of `wex plan`, from what wex prints and nothing else.

For each job it runs `wex layout --json` for both sides and `wex plan --ops
--json` (globally and for every rank of both sides), then checks:

  a. every operation's boxes lie inside its local tensors, the dtypes agree
     and bytes = product(extent) * dtype size;
  b. each operation's destination box, cut by the destination tensor's
     pieces, is covered by pieces, and every part of it reads, from the
     source pieces, exactly the canonical tensor and coordinates it lands on;
  c. every element of every destination piece is written exactly once
     (box sweeps with coordinate compression, never per element);
  d. the --json summary: no redundant bytes, bytes == bytes_needed == the
     destination pieces' bytes, the operation count, hosts, intra-host
     bytes, the busiest sender and receiver, predicted_seconds recomputed
     from the operations and the topology, and
     predicted_seconds >= lower_bound_seconds > 0;
  e. the per-rank plans (--rank N --side S) hold exactly the global plan's
     operations of that rank, and both ends of every (source, destination)
     pair list that pair's operations in the same order.

  check_plan.py [--wex WEX] [--max-ranks N] JOB.json...
  check_plan.py --self-test [--wex WEX] [--models DIR]

One line per job: operations, bytes, predicted / lower bound, then OK or
the first failure. Exit 0 when every job passed (77 when every job was
skipped for --max-ranks, for ctest's SKIP_RETURN_CODE), 1 on a failure.
Only the standard library: it runs under /usr/bin/python3.
"""
import argparse
import bisect
import collections
import concurrent.futures
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

DTYPE_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1,
              "F8_E5M2": 1, "I8": 1, "U8": 1, "I32": 4, "I64": 8}

SKIPPED = 77


class CheckFailure(Exception):
    """The first thing found wrong with a job's plan (check letter + text)."""

    def __init__(self, check, text):
        super().__init__("check %s: %s" % (check, text))
        self.check = check


class WexError(Exception):
    """wex itself failed: exit status and its stderr."""


def cpus():
    try:
        return max(1, min(16, len(os.sched_getaffinity(0))))
    except AttributeError:
        return max(1, min(16, os.cpu_count() or 1))


def default_wex():
    return os.environ.get("WEX") or os.path.join(ROOT, "build", "bin", "wex")


def run_wex(wex, args, stdout=None):
    """Runs wex; returns its stdout text (or None when redirected to a file)."""
    if stdout is not None:
        with open(stdout, "w") as out:
            p = subprocess.run([wex] + args, stdout=out, stderr=subprocess.PIPE,
                               text=True)
        text = None
    else:
        p = subprocess.run([wex] + args, capture_output=True, text=True)
        text = p.stdout
    if p.returncode != 0:
        raise WexError("wex %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                p.stderr.strip()))
    return text


# ---- boxes: (lo, hi) tuples of per-dim coordinates, hi exclusive ---------

def volume(lo, hi):
    v = 1
    for a, b in zip(lo, hi):
        v *= b - a
    return v


def intersect(alo, ahi, blo, bhi):
    lo = tuple(max(a, b) for a, b in zip(alo, blo))
    hi = tuple(min(a, b) for a, b in zip(ahi, bhi))
    for a, b in zip(lo, hi):
        if a >= b:
            return None
    return lo, hi


def fmt_box(lo, hi):
    return "[" + ", ".join("%d:%d" % (a, b) for a, b in zip(lo, hi)) + "]"


def exactly_once(written, held):
    return held <= 1 and written == held


def multiplicity(writes, holds, ndim, ok=exactly_once):
    """Sweeps the boxes `writes` and `holds` (lists of (lo, hi)), one
    dimension at a time over compressed coordinates, and returns None when
    ok(times written, times held) holds for every element, else (lo, hi,
    times written, times held) of a region where it fails. Slabs with the
    same active boxes are solved once."""

    def rec(w_ids, h_ids, d):
        if not w_ids and not h_ids:
            return None
        if d == ndim:
            if not ok(len(w_ids), len(h_ids)):
                return (), (), len(w_ids), len(h_ids)
            return None
        if len(w_ids) + len(h_ids) == 1:  # one box: the same count all over
            lo, hi = (writes[next(iter(w_ids))] if w_ids
                      else holds[next(iter(h_ids))])
            if ok(len(w_ids), len(h_ids)):
                return None
            return lo[d:], hi[d:], len(w_ids), len(h_ids)
        if len(w_ids) == 1 and len(h_ids) == 1 and ok(1, 1):
            (w,), (h,) = w_ids, h_ids
            if writes[w][0][d:] == holds[h][0][d:] and \
                    writes[w][1][d:] == holds[h][1][d:]:
                return None
        starts = collections.defaultdict(list)
        ends = collections.defaultdict(list)
        for kind, ids, boxes in ((0, w_ids, writes), (1, h_ids, holds)):
            for i in ids:
                starts[boxes[i][0][d]].append((kind, i))
                ends[boxes[i][1][d]].append((kind, i))
        coords = sorted(set(starts) | set(ends))
        active = (set(), set())
        solved = set()
        for a, b in zip(coords, coords[1:]):
            for kind, i in ends.get(a, ()):
                active[kind].discard(i)
            for kind, i in starts.get(a, ()):
                active[kind].add(i)
            key = (frozenset(active[0]), frozenset(active[1]))
            if key in solved:
                continue
            bad = rec(active[0], active[1], d + 1)
            if bad is not None:
                lo, hi, nw, nh = bad
                return (a,) + lo, (b,) + hi, nw, nh
            solved.add(key)
        return None

    return rec(set(range(len(writes))), set(range(len(holds))), 0)


# ---- layouts -------------------------------------------------------------

class Piece:
    __slots__ = ("canon", "coff", "lo", "hi", "k")

    def __init__(self, canon, coff, lo, hi, k):
        self.canon, self.coff, self.lo, self.hi, self.k = canon, coff, lo, hi, k

    def to_canonical(self, lo, hi):
        """The canonical box of the local box lo..hi (inside this piece)."""
        n = len(self.lo)
        c_lo = tuple(self.coff[j] + lo[n - self.k + j] - self.lo[n - self.k + j]
                     for j in range(self.k))
        c_ext = tuple(hi[n - self.k + j] - lo[n - self.k + j]
                      for j in range(self.k))
        return self.canon, c_lo, c_ext


class Local:
    """One local tensor of one rank, its pieces indexed for box queries."""
    __slots__ = ("name", "dtype", "shape", "pieces", "_lo0", "_maxhi0")

    def __init__(self, name, dtype, shape, pieces):
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.pieces = sorted(pieces, key=lambda p: p.lo)
        self._lo0 = [p.lo[0] for p in self.pieces]
        self._maxhi0, m = [], -1
        for p in self.pieces:
            m = max(m, p.hi[0])
            self._maxhi0.append(m)

    def overlapping(self, lo, hi):
        """(piece, part lo, part hi) for every piece meeting the box."""
        out = []
        i = bisect.bisect_left(self._lo0, hi[0]) - 1
        while i >= 0 and self._maxhi0[i] > lo[0]:
            p = self.pieces[i]
            part = intersect(lo, hi, p.lo, p.hi)
            if part is not None:
                out.append((p, part[0], part[1]))
            i -= 1
        return out

    def bytes_held(self):
        return sum(volume(p.lo, p.hi) for p in self.pieces) * DTYPE_SIZE[self.dtype]


def load_layout(doc, what):
    """The ranks of a `wex layout --json` document as lists of Local, after
    checking each piece lies in its local tensor and its canonical tensor,
    and pieces of a local tensor do not overlap."""
    canon = {t["name"]: t["shape"] for t in doc["model"]["tensors"]}
    ranks = []
    for r, rank in enumerate(doc["layout"]):
        if rank["rank"] != r:
            raise CheckFailure("layout", "%s layout lists rank %d at index %d"
                               % (what, rank["rank"], r))
        tensors = []
        for ti, t in enumerate(rank["tensors"]):
            shape = t["shape"]
            n = len(shape)
            pieces = []
            for p in t["pieces"]:
                ext, off, at = p["extent"], p["offset"], p["at"]
                k = len(ext)
                c = canon.get(p["tensor"])
                lead = n - k
                if c is None or len(c) != k or len(off) != k or len(at) != n or lead < 0:
                    raise CheckFailure("layout", "%s rank %d tensor %d (%s): malformed "
                                       "piece %s" % (what, r, ti, t["name"], json.dumps(p)))
                lo = tuple(at)
                hi = tuple(a + 1 for a in at[:lead]) + \
                    tuple(a + e for a, e in zip(at[lead:], ext))
                if not all(b <= z for b, z in zip(hi, shape)) or \
                        not all(o + e <= z for o, e, z in zip(off, ext, c)):
                    raise CheckFailure("layout", "%s rank %d tensor %d (%s): piece %s "
                                       "lies outside the local tensor %s or the "
                                       "canonical %s" % (what, r, ti, t["name"],
                                                         json.dumps(p), shape, c))
                pieces.append(Piece(p["tensor"], tuple(off), lo, hi, k))
            local = Local(t["name"], t["dtype"], shape, pieces)
            if len(pieces) > 1:
                bad = multiplicity([], [(q.lo, q.hi) for q in local.pieces], n,
                                   lambda written, held: held <= 1)
                if bad is not None:
                    raise CheckFailure("layout", "%s rank %d tensor %d (%s): pieces "
                                       "overlap at %s" % (what, r, ti, t["name"],
                                                         fmt_box(bad[0], bad[1])))
            tensors.append(local)
        ranks.append(tensors)
    if len(ranks) != doc["ranks"]:
        raise CheckFailure("layout", "%s layout: ranks %d but %d listed" %
                           (what, doc["ranks"], len(ranks)))
    return ranks


# ---- operations ----------------------------------------------------------

OP_KEYS = ("src_rank", "src_tensor", "src_offset", "dst_rank", "dst_tensor",
           "dst_offset", "extent", "bytes")
OP_KEYSET = set(OP_KEYS)


def op_key(op):
    return (op["src_rank"], op["src_tensor"], tuple(op["src_offset"]),
            op["dst_rank"], op["dst_tensor"], tuple(op["dst_offset"]),
            tuple(op["extent"]), op["bytes"])


def read_ops(path):
    """The operations of an --ops file, parsed as one JSON array (fast);
    line by line only to say where a bad line is."""
    with open(path) as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    try:
        ops = json.loads("[" + ",".join(lines) + "]")
        if all(type(op) is dict and op.keys() == OP_KEYSET for op in ops):
            return ops
    except ValueError:
        pass
    ops = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                op = json.loads(line)
            except ValueError as e:
                raise CheckFailure("a", "%s:%d: not JSON (%s)" % (path, n, e))
            if not isinstance(op, dict) or op.keys() != OP_KEYSET:
                raise CheckFailure("a", "%s:%d: expected the keys %s: %s" %
                                   (path, n, ", ".join(OP_KEYS), line.strip()))
            ops.append(op)
    return ops


def op_box(offset, extent):
    """The local box of an operation side: leading dims fixed at offset."""
    n, k = len(offset), len(extent)
    lo = tuple(offset)
    hi = tuple(offset[d] + (extent[d - n + k] if d >= n - k else 1)
               for d in range(n))
    return lo, hi


class Lazy:
    """Formats as fn(*args), computed only when printed."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __str__(self):
        return self.fn(*self.args)


def describe(i, op, src, dst):
    s = "op %d %s" % (i, json.dumps(op, separators=(",", ":")))
    try:
        s += " (%s -> %s)" % (src[op["src_rank"]][op["src_tensor"]].name,
                              dst[op["dst_rank"]][op["dst_tensor"]].name)
    except (IndexError, TypeError):
        pass
    return s


def check_op(i, op, src, dst):
    """Checks a and b for one operation; returns its destination box."""
    where = Lazy(describe, i, op, src, dst)
    # a: inside the local tensors, same dtype, bytes.
    ext = op["extent"]
    k = len(ext)
    try:
        st = src[op["src_rank"]][op["src_tensor"]]
        dt = dst[op["dst_rank"]][op["dst_tensor"]]
    except (IndexError, TypeError):
        raise CheckFailure("a", "%s: no such source or destination rank "
                           "or local tensor" % where)
    if k < 1 or min(ext) < 1 or len(op["src_offset"]) != len(st.shape) or \
            len(op["dst_offset"]) != len(dt.shape) or k > len(st.shape) or \
            k > len(dt.shape):
        raise CheckFailure("a", "%s: extent or offsets do not fit the local "
                           "tensors' dims (%s %s, %s %s)" % (
                               where, st.name, list(st.shape), dt.name, list(dt.shape)))
    s_lo, s_hi = op_box(op["src_offset"], ext)
    d_lo, d_hi = op_box(op["dst_offset"], ext)
    if any(b > s for b, s in zip(s_hi, st.shape)) or min(s_lo) < 0:
        raise CheckFailure("a", "%s: source box %s outside %s %s" % (
            where, fmt_box(s_lo, s_hi), st.name, list(st.shape)))
    if any(b > s for b, s in zip(d_hi, dt.shape)) or min(d_lo) < 0:
        raise CheckFailure("a", "%s: destination box %s outside %s %s" % (
            where, fmt_box(d_lo, d_hi), dt.name, list(dt.shape)))
    if st.dtype != dt.dtype:
        raise CheckFailure("a", "%s: dtypes differ: %s -> %s" % (
            where, st.dtype, dt.dtype))
    if op["bytes"] != volume(d_lo, d_hi) * DTYPE_SIZE[dt.dtype]:
        raise CheckFailure("a", "%s: bytes %d, but the extent holds %d "
                           "elements of %s" % (where, op["bytes"],
                                               volume(d_lo, d_hi), dt.dtype))
    # b: the destination box is pieces only, each part read from the
    # same canonical coordinates.
    nd, ns = len(d_lo), len(s_lo)
    shift = [0] * nd  # dst coordinate -> src coordinate, trailing k dims
    for j in range(k):
        shift[nd - k + j] = s_lo[ns - k + j] - d_lo[nd - k + j]

    def to_src(lo, hi):
        return (s_lo[:ns - k] + tuple(lo[nd - k + j] + shift[nd - k + j]
                                      for j in range(k)),
                s_hi[:ns - k] + tuple(hi[nd - k + j] + shift[nd - k + j]
                                      for j in range(k)))

    def to_dst(lo, hi):
        return (d_lo[:nd - k] + tuple(lo[ns - k + j] - shift[nd - k + j]
                                      for j in range(k)),
                d_hi[:nd - k] + tuple(hi[ns - k + j] - shift[nd - k + j]
                                      for j in range(k)))

    parts = dt.overlapping(d_lo, d_hi)
    covered = sum(volume(lo, hi) for _, lo, hi in parts)
    if covered != volume(d_lo, d_hi):
        raise CheckFailure("b", "%s: destination box %s: only %d of its %d "
                           "elements are in pieces of %s (%d pieces met: %s); "
                           "it writes padding or elements the rank does not hold"
                           % (where, fmt_box(d_lo, d_hi), covered,
                              volume(d_lo, d_hi), dt.name, len(parts),
                              ", ".join("%s at %s" % (p.canon, fmt_box(p.lo, p.hi))
                                        for p, _, _ in parts[:4])))
    for dp, p_lo, p_hi in parts:
        sp_lo, sp_hi = to_src(p_lo, p_hi)
        sparts = st.overlapping(sp_lo, sp_hi)
        scovered = sum(volume(lo, hi) for _, lo, hi in sparts)
        if scovered != volume(sp_lo, sp_hi):
            raise CheckFailure("b", "%s: the part %s of %s it writes (dst %s) "
                               "is read from source box %s, of which only %d "
                               "of %d elements are in pieces of %s" % (
                                   where, dp.canon + fmt_canon(dp.to_canonical(p_lo, p_hi)),
                                   dt.name, fmt_box(p_lo, p_hi), fmt_box(sp_lo, sp_hi),
                                   scovered, volume(sp_lo, sp_hi), st.name))
        for sp, q_lo, q_hi in sparts:
            got = sp.to_canonical(q_lo, q_hi)
            want = dp.to_canonical(*to_dst(q_lo, q_hi))
            if got != want:
                raise CheckFailure("b", "%s: destination %s %s holds %s%s "
                                   "but it is read from source %s %s, which "
                                   "holds %s%s" % (
                                       where, dt.name, fmt_box(*to_dst(q_lo, q_hi)),
                                       want[0], fmt_canon(want), st.name,
                                       fmt_box(q_lo, q_hi), got[0], fmt_canon(got)))
    return d_lo, d_hi


def check_dst_rank(r, indices):
    """Checks a and b for the operations `indices` (all of destination rank
    r), then c for the rank's tensors. Returns (the rank's piece bytes,
    None) or (None, (check, text)) at the first failure."""
    ops, src, dst = _shared
    writes = collections.defaultdict(list)  # tensor -> boxes
    try:
        for i in indices:
            writes[ops[i]["dst_tensor"]].append(check_op(i, ops[i], src, dst))
        needed = 0
        for ti, t in enumerate(dst[r]):
            needed += t.bytes_held()
            boxes = writes.get(ti, [])
            if not boxes and not t.pieces:
                continue
            bad = multiplicity(boxes, [(p.lo, p.hi) for p in t.pieces],
                               len(t.shape))
            if bad is not None:
                lo, hi, nw, nh = bad
                held = [p for p in t.pieces if intersect(lo, hi, p.lo, p.hi)]
                what = ("%s%s" % (held[0].canon, fmt_canon(held[0].to_canonical(
                    *intersect(lo, hi, held[0].lo, held[0].hi)))) if held
                    else "no piece")
                raise CheckFailure("c", "destination rank %d tensor %d (%s): "
                                   "elements %s (%s) are written %d times "
                                   "(held %d times)%s" % (
                                       r, ti, t.name, fmt_box(lo, hi), what, nw, nh,
                                       overlapping_ops(ops, r, ti, lo, hi)))
        return needed, None
    except CheckFailure as e:
        return None, (e.check, str(e).split(": ", 1)[1])


_shared = None  # (ops, src, dst) for check_dst_rank, inherited by forks


def check_ops(ops, src, dst, processes=None):
    """Checks a, b and c; returns the destination pieces' total bytes.
    Destination ranks are checked in parallel (forked processes) when the
    plan is large."""
    global _shared
    by_rank = [[] for _ in dst]
    for i, op in enumerate(ops):
        r = op["dst_rank"]
        if not isinstance(r, int) or not 0 <= r < len(dst):
            raise CheckFailure("a", "%s: no such destination rank" %
                               describe(i, op, src, dst))
        by_rank[r].append(i)
    _shared = (ops, src, dst)
    try:
        processes = processes or cpus()
        if len(ops) < 20000 or processes < 2 or len(dst) < 2:
            results = map(check_dst_rank, range(len(dst)), by_rank)
            return collect(results)
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(min(processes, len(dst))) as pool:
            return collect(pool.starmap(check_dst_rank, enumerate(by_rank), 1))
    finally:
        _shared = None


def collect(results):
    needed = 0
    for n, failure in results:
        if failure is not None:
            raise CheckFailure(*failure)
        needed += n
    return needed


def fmt_canon(c):
    _, lo, ext = c
    return fmt_box(lo, tuple(a + b for a, b in zip(lo, ext)))


def overlapping_ops(ops, r, ti, lo, hi):
    found = ["op %d %s" % (i, json.dumps(op, separators=(",", ":")))
             for i, op in enumerate(ops)
             if op["dst_rank"] == r and op["dst_tensor"] == ti and
             intersect(lo, hi, *op_box(op["dst_offset"], op["extent"]))]
    if not found:
        return "; no operation writes there"
    return "; by " + "; ".join(found[:3])


# ---- a job ---------------------------------------------------------------

def parallel_arg(parallel):
    out = []
    for key, v in parallel.items():
        if isinstance(v, list):
            if len(v) < 2:
                raise WexError("parallel/%s: a one-entry list cannot be given "
                               "to wex layout --parallel" % key)
            v = ":".join(str(x) for x in v)
        out.append("%s=%s" % (key, v))
    return ",".join(out)


def side_args(job, job_path, side):
    s = job[side]
    base = os.path.dirname(os.path.abspath(job_path))
    model = os.path.join(base, s.get("model", job["model"]))
    args = ["layout", "--model", model, "--engine", s["engine"]]
    if s.get("parallel"):
        args += ["--parallel", parallel_arg(s["parallel"])]
    if s.get("options"):
        args += ["--options", json.dumps(s["options"])]
    return args


def side_ranks(wex, job, job_path, side):
    """How many ranks a side has, from `wex layout --rank 0` (cheap)."""
    text = run_wex(wex, side_args(job, job_path, side) + ["--rank", "0"])
    m = re.search(r"^engine\s+\S+: (\d+) ranks", text, re.M)
    if m is None:
        raise WexError("wex layout: no rank count in %r" % text[:200])
    return int(m.group(1))


def rank_views(wex, job_path, tmp, side, ranks, threads):
    """{rank: list of op keys} from `wex plan --rank N --side side`."""

    def one(r):
        path = os.path.join(tmp, "%s-%d.jsonl" % (side, r))
        doc = json.loads(run_wex(wex, ["plan", job_path, "--json", "--rank", str(r),
                                       "--side", side, "--ops", path]))
        ops = read_ops(path)
        os.unlink(path)
        if doc.get("operations") != len(ops) or \
                doc.get("bytes") != sum(o["bytes"] for o in ops):
            raise CheckFailure("e", "%s rank %d: --json says %s operations, %s "
                               "bytes; --ops wrote %d operations, %d bytes" % (
                                   side, r, doc.get("operations"), doc.get("bytes"),
                                   len(ops), sum(o["bytes"] for o in ops)))
        return r, [op_key(o) for o in ops]

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return dict(pool.map(one, range(ranks)))


def check_views(ops, src_views, dst_views):
    by_src = collections.defaultdict(list)
    by_dst = collections.defaultdict(list)
    for op in ops:
        k = op_key(op)
        by_src[k[0]].append(k)
        by_dst[k[3]].append(k)
    for side, views, by, idx in (("source", src_views, by_src, 0),
                                 ("destination", dst_views, by_dst, 3)):
        for r, keys in sorted(views.items()):
            if sorted(keys) != sorted(by[r]):
                mine, theirs = collections.Counter(keys), collections.Counter(by[r])
                extra = mine - theirs
                missing = theirs - mine
                wrong = [k for k in keys if k[idx] != r]
                raise CheckFailure("e", "%s rank %d: --rank lists %d operations, "
                                   "the global plan %d involving it; %d only in "
                                   "the rank's (e.g. %s), %d only in the global "
                                   "(e.g. %s)%s" % (
                                       side, r, len(keys), len(by[r]),
                                       sum(extra.values()), fmt_key(next(iter(extra), None)),
                                       sum(missing.values()), fmt_key(next(iter(missing), None)),
                                       "; %d name another rank" % len(wrong) if wrong else ""))
    pairs_src = collections.defaultdict(list)
    pairs_dst = collections.defaultdict(list)
    for r, keys in src_views.items():
        for k in keys:
            pairs_src[(r, k[3])].append(k)
    for r, keys in dst_views.items():
        for k in keys:
            pairs_dst[(k[0], r)].append(k)
    for pair in sorted(set(pairs_src) | set(pairs_dst)):
        a, b = pairs_src.get(pair, []), pairs_dst.get(pair, [])
        if a != b:
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y),
                     min(len(a), len(b)))
            raise CheckFailure("e", "source rank %d and destination rank %d order "
                               "their %d operations differently: position %d is "
                               "%s on the source, %s on the destination" % (
                                   pair[0], pair[1], len(a), i,
                                   fmt_key(a[i] if i < len(a) else None),
                                   fmt_key(b[i] if i < len(b) else None)))


def fmt_key(k):
    if k is None:
        return "none"
    return json.dumps(dict(zip(OP_KEYS, [list(x) if isinstance(x, tuple) else x
                                         for x in k])), separators=(",", ":"))


def placement(topology, src_ranks, dst_ranks):
    """(host of each source rank, host of each destination rank, hosts,
    NIC and intra-host bytes per second), as job.schema.json describes the
    topology and its defaults."""
    t = topology or {}
    nic = t.get("nic_gb_per_s", 50) * 1e9
    intra = t.get("intra_host_gb_per_s", 400) * 1e9
    if "hosts" in t:
        src, dst = [None] * src_ranks, [None] * dst_ranks
        for h, host in enumerate(t["hosts"]):
            for r in host.get("source", []):
                src[r] = h
            for r in host.get("destination", []):
                dst[r] = h
        return src, dst, len(t["hosts"]), nic, intra
    per = t.get("gpus_per_host", 8)
    src_hosts, dst_hosts = -(-src_ranks // per), -(-dst_ranks // per)
    if t.get("placement", "disaggregated") == "colocated":
        return ([r // per for r in range(src_ranks)],
                [r // per for r in range(dst_ranks)],
                max(src_hosts, dst_hosts), nic, intra)
    return ([r // per for r in range(src_ranks)],
            [src_hosts + r // per for r in range(dst_ranks)],
            src_hosts + dst_hosts, nic, intra)


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


SUMMARY_KEYS = ("source_ranks", "destination_ranks", "hosts", "operations", "bytes",
                "bytes_needed", "redundant_bytes", "intra_host_bytes",
                "max_rank_send_bytes", "max_rank_recv_bytes", "predicted_seconds",
                "lower_bound_seconds")


def check_summary(doc, ops, needed, src, dst, topology=None):
    """d: the --json summary against the operations, the layouts and the
    topology."""
    missing = [k for k in SUMMARY_KEYS if not isinstance(doc.get(k), (int, float))]
    if missing:
        raise CheckFailure("d", "--json lacks %s" % ", ".join(missing))
    total = sum(o["bytes"] for o in ops)
    problems = []
    s_host, d_host, hosts, nic, intra = placement(topology, len(src), len(dst))
    send = [[0, 0] for _ in src]  # [over the NIC, within the host]
    recv = [[0, 0] for _ in dst]
    for o in ops:
        local = int(s_host[o["src_rank"]] == d_host[o["dst_rank"]])
        send[o["src_rank"]][local] += o["bytes"]
        recv[o["dst_rank"]][local] += o["bytes"]
    intra_bytes = sum(r[1] for r in recv)
    if doc["hosts"] != hosts:
        problems.append("hosts %s, the topology places ranks on %d" % (doc["hosts"], hosts))
    if doc["intra_host_bytes"] != intra_bytes:
        problems.append("intra_host_bytes %s, the operations move %d bytes within "
                        "hosts" % (doc["intra_host_bytes"], intra_bytes))
    for key, links in (("max_rank_send_bytes", send), ("max_rank_recv_bytes", recv)):
        busiest = max(sum(link) for link in links)
        if doc[key] != busiest:
            problems.append("%s %s, the operations say %d" % (key, doc[key], busiest))
    predicted = max(max(link[0] / nic, link[1] / intra) for link in send + recv)
    if not close(doc["predicted_seconds"], predicted):
        problems.append("predicted_seconds %r, the busiest link of the operations "
                        "needs %r" % (doc["predicted_seconds"], predicted))
    if doc["source_ranks"] != len(src) or doc["destination_ranks"] != len(dst):
        problems.append("ranks %s/%s but the layouts have %d/%d" % (
            doc["source_ranks"], doc["destination_ranks"], len(src), len(dst)))
    if doc["redundant_bytes"] != 0:
        problems.append("redundant_bytes %s" % doc["redundant_bytes"])
    if not doc["bytes"] == doc["bytes_needed"] == needed == total:
        problems.append("bytes %s, bytes_needed %s, destination pieces %d bytes, "
                        "operations %d bytes" % (doc["bytes"], doc["bytes_needed"],
                                                 needed, total))
    if doc["operations"] != len(ops):
        problems.append("operations %s, but %d lines" % (doc["operations"], len(ops)))
    lb, pred = doc["lower_bound_seconds"], doc["predicted_seconds"]
    if not (lb > 0 and pred >= lb * (1 - 1e-9)):
        problems.append("predicted_seconds %r, lower_bound_seconds %r" % (pred, lb))
    if problems:
        raise CheckFailure("d", "; ".join(problems))


def load_sides(wex, job, job_path, tmp):
    docs = {}
    for side in ("source", "destination"):
        path = os.path.join(tmp, side + ".layout.json")
        run_wex(wex, side_args(job, job_path, side) + ["--json"], stdout=path)
        with open(path) as f:
            docs[side] = json.load(f)
        os.unlink(path)
    return load_layout(docs["source"], "source"), \
        load_layout(docs["destination"], "destination")


def check_job(wex, job_path, max_ranks=None, views=True, threads=None):
    """Checks one job; returns (status, line) with status 'OK', 'FAIL' or
    'SKIP'."""
    t0 = time.monotonic()
    threads = threads or max(2, cpus())
    tmp = tempfile.mkdtemp(prefix="wex-check-plan-")
    stats = ""
    try:
        with open(job_path) as f:
            job = json.load(f)
        if max_ranks is not None:
            n = [side_ranks(wex, job, job_path, s) for s in ("source", "destination")]
            if max(n) > max_ranks:
                return "SKIP", "%s: SKIP (%d source, %d destination ranks; more " \
                               "than --max-ranks %d)" % (job_path, n[0], n[1], max_ranks)
        src, dst = load_sides(wex, job, job_path, tmp)
        ops_path = os.path.join(tmp, "plan.jsonl")
        doc = json.loads(run_wex(wex, ["plan", job_path, "--json", "--ops", ops_path]))
        ops = read_ops(ops_path)
        lb = doc.get("lower_bound_seconds") or 0
        stats = "%d ops, %d bytes, predicted/lower bound %.3f" % (
            len(ops), sum(o["bytes"] for o in ops),
            doc.get("predicted_seconds", 0) / lb if lb else float("nan"))
        needed = check_ops(ops, src, dst)
        check_summary(doc, ops, needed, src, dst, job.get("topology"))
        if views:
            check_views(ops, rank_views(wex, job_path, tmp, "source", len(src), threads),
                        rank_views(wex, job_path, tmp, "destination", len(dst), threads))
        return "OK", "%s: %s, %.1f s: OK" % (job_path, stats, time.monotonic() - t0)
    except (CheckFailure, WexError) as e:
        return "FAIL", "%s: %s: FAIL: %s" % (job_path, stats or "no plan", e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- self-test: the checker must catch broken plans ----------------------

def self_test(wex, models):
    """Plans a small job with DP replicas on both sides, checks it passes,
    then corrupts its operations four ways and checks a, b and c catch
    each one."""
    tmp = tempfile.mkdtemp(prefix="wex-check-plan-self-")
    failures = 0
    try:
        engines = loaded_engines(wex)
        src_engine = "megatron" if "megatron" in engines else "vllm"
        job = {"model": os.path.join(os.path.abspath(models), "Qwen3-0.6B.config.json"),
               "source": {"engine": src_engine, "parallel": {"tp": 2, "pp": 2}},
               "destination": {"engine": "vllm", "parallel": {"tp": 2, "dp": 2}},
               "transport": "shm",
               "topology": {"placement": "colocated", "gpus_per_host": 4}}
        job_path = os.path.join(tmp, "self-test.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        status, line = check_job(wex, job_path)
        print("self-test baseline: " + line)
        if status != "OK":
            return 1
        src, dst = load_sides(wex, job, job_path, tmp)
        ops_path = os.path.join(tmp, "plan.jsonl")
        run_wex(wex, ["plan", job_path, "--ops", ops_path])
        ops = read_ops(ops_path)

        def pick(pred):
            return next(i for i, op in enumerate(ops) if pred(op))

        def drop(ops):
            i = pick(lambda op: True)
            return ops[:i] + ops[i + 1:], "drop op %d" % i

        def duplicate(ops):
            i = len(ops) // 2
            return ops + [dict(ops[i])], "duplicate op %d" % i

        def shift_row(ops):
            # A 2-D source box one row short of its tensor's end, shifted
            # down a row: still inside the tensor, so only b can see it.
            def fits(op):
                t = src[op["src_rank"]][op["src_tensor"]]
                k = len(op["extent"])
                d = len(t.shape) - k
                return k >= 2 and op["src_offset"][d] + op["extent"][0] < t.shape[d]
            i = pick(fits)
            op = dict(ops[i])
            d = len(op["src_offset"]) - len(op["extent"])
            op["src_offset"] = list(op["src_offset"])
            op["src_offset"][d] += 1
            return ops[:i] + [op] + ops[i + 1:], "shift op %d's source a row down" % i

        def other_dst(ops):
            # Another replica's rank: the same tensor exists there, so the
            # op stays in bounds; only the coverage count can see it.
            def pieces(t):
                return [(p.canon, p.coff, p.lo, p.hi) for p in t.pieces]

            def twin(op):
                t = dst[op["dst_rank"]][op["dst_tensor"]]
                for r in range(len(dst)):
                    if r != op["dst_rank"] and op["dst_tensor"] < len(dst[r]) and \
                            dst[r][op["dst_tensor"]].shape == t.shape and \
                            pieces(dst[r][op["dst_tensor"]]) == pieces(t):
                        return r
                return None
            i = pick(lambda op: twin(op) is not None)
            op = dict(ops[i])
            op["dst_rank"] = twin(op)
            return ops[:i] + [op] + ops[i + 1:], \
                "move op %d to destination rank %d" % (i, op["dst_rank"])

        for corrupt in (drop, duplicate, shift_row, other_dst):
            bad, what = corrupt(ops)
            try:
                check_ops(bad, src, dst)
            except CheckFailure as e:
                print("self-test %s: caught: %s" % (what, str(e)[:300]))
                continue
            print("self-test %s: NOT CAUGHT" % what)
            failures += 1
        # The view comparison must catch a per-rank list that lost an op or
        # swapped two of one pair's ops.
        keys = [op_key(o) for o in ops]
        src_views = collections.defaultdict(list)
        dst_views = collections.defaultdict(list)
        for k in keys:
            src_views[k[0]].append(k)
            dst_views[k[3]].append(k)
        check_views(ops, dict(src_views), dict(dst_views))
        r = max(src_views, key=lambda r: len(src_views[r]))
        short, swapped = dict(src_views), dict(src_views)
        short[r] = src_views[r][:-1]
        swapped[r] = swap_pair(src_views[r])
        for what, views in (("a source view without its last op", short),
                            ("a source view with one pair's ops swapped", swapped)):
            try:
                check_views(ops, views, dict(dst_views))
            except CheckFailure as e:
                print("self-test %s: caught: %s" % (what, str(e)[:300]))
                continue
            print("self-test %s: NOT CAUGHT" % what)
            failures += 1
    except (CheckFailure, WexError, StopIteration) as e:
        print("self-test: cannot run: %r" % e)
        failures += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("self-test: %s" % ("OK" if failures == 0 else "%d FAILED" % failures))
    return 0 if failures == 0 else 1


def swap_pair(keys):
    """The list with the first two ops of one destination swapped."""
    keys = list(keys)
    seen = {}
    for i, k in enumerate(keys):
        if k[3] in seen and keys[seen[k[3]]] != k:
            j = seen[k[3]]
            keys[i], keys[j] = keys[j], keys[i]
            return keys
        seen.setdefault(k[3], i)
    raise StopIteration("no pair with two different ops")


def loaded_engines(wex):
    doc = json.loads(run_wex(wex, ["plugins", "--json"]))
    return sorted(p["name"] for p in doc["plugins"]
                  if p["kind"] == "engine" and p["status"] == "loaded")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jobs", nargs="*", help="job files")
    ap.add_argument("--wex", default=default_wex(), help="the wex binary")
    ap.add_argument("--max-ranks", type=int,
                    help="skip jobs with more ranks than this on either side")
    ap.add_argument("--no-views", action="store_true",
                    help="skip check e (the per-rank plans)")
    ap.add_argument("--self-test", action="store_true",
                    help="check that the checker catches corrupted plans")
    ap.add_argument("--models", default=os.path.join(ROOT, "samples", "models"),
                    help="model configs for --self-test")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.wex, a.models)
    if not a.jobs:
        ap.error("no job files")
    statuses = []
    for job in a.jobs:
        status, line = check_job(a.wex, job, a.max_ranks, not a.no_views)
        print(line, flush=True)
        statuses.append(status)
    if "FAIL" in statuses:
        return 1
    return SKIPPED if all(s == "SKIP" for s in statuses) else 0


if __name__ == "__main__":
    sys.exit(main())
