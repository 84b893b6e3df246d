"""Pass ``pipeline``: descriptor loads in a loop -> TME copies into a ring of shared
buffers, software-pipelined over ``num_stages``, optionally warp-specialized.

A top-level ``for`` loop with a constant positive step qualifies when some of its
``desc_load`` results feed only ``dot`` operands that SQMMA takes (directly or through
``trans``), the descriptor is defined before the loop and the load's offsets follow from
the induction variable and values defined before the loop. The loop becomes::

    %ok = and(ph.desc_aligned %desc ...)        // TME needs 4-byte aligned tensors
    if %ok {                                     // else: the original loop, unchanged
      [prologue: loads of steps 0 .. S-2 into stages 0 .. S-2, each on full[j]]
      for %i ... {
        t = (i - lb) / step
        if t + S-1 < n { wait empty[(t+S-1) % S]; expect_tx full[..]; tme_load ... }
        wait full[t % S], phase (t / S) & 1
        ... the body, its dots reading ring stage t % S (pass ``sqmma``) ...
        arrive empty[t % S]
      }
    }

``full`` barriers (one arrival: the ``expect_tx``, plus the copies' bytes) say a stage
landed; ``empty`` barriers (one arrival per consumer warp) say its readers are done.
With ``ml.range(..., warp_specialize=True)`` (or the ``warp_specialize`` option) the
kernel becomes a ``ph.warp_specialize``: the consumer partition (``num_warps`` warps)
runs the whole kernel with the loop waiting on ``full`` and releasing ``empty``; a
producer partition of one warp recomputes the loop bounds and descriptors and issues
every copy, running up to ``num_stages`` steps ahead.
"""
from __future__ import annotations

from mutile.ir import types as T
from mutile.ir.core import Block, Builder, Op
from mutile.ir.ops_pinghu import MAX_DESC_RANK, TME_GLOBAL_ALIGN, TME_MIN_BOX_BYTES, TME_UNIT
from mutile.passes.rewrite import Substitution, clone_block, clone_op, set_ops

from .sqmma import sqmma_fits

MAX_RING_BYTES = 128 * 1024


def _is_inside(v, op: Op) -> bool:
    """Whether value ``v`` is defined inside ``op``'s regions."""
    blk = v.owner.parent if isinstance(v.owner, Op) else v.owner
    while blk is not None:
        if blk.parent is op:
            return True
        holder = blk.parent
        blk = holder.parent if isinstance(holder, Op) else None
    return False


def _uses(block: Block, v) -> list[Op]:
    out = []
    for op in block.ops:
        if v in op.operands:
            out.append(op)
        for r in op.regions:
            out.extend(_uses(r, v))
    return out


def _const_int(v):
    op = v.owner
    if isinstance(op, Op) and op.name == "constant" and isinstance(op.attrs["value"], int):
        return op.attrs["value"]
    return None


def _slice(values, loop: Op, iv) -> list[Op] | None:
    """The body ops computing ``values`` from ``iv`` and values defined before
    ``loop`` (in body order), or None if they need anything else."""
    body, need, seen = loop.regions[0], [], set()

    def visit(v) -> bool:
        if v is iv or not _is_inside(v, loop):
            return True
        op = v.owner
        if not isinstance(op, Op) or op.parent is not body or op.regions or not op.opdef.pure:
            return False
        if id(op) in seen:
            return True
        seen.add(id(op))
        if not all(visit(x) for x in op.operands):
            return False
        need.append(op)
        return True

    if not all(visit(v) for v in values):
        return None
    order = {id(op): i for i, op in enumerate(body.ops)}
    return sorted(need, key=lambda op: order[id(op)])


def _never_aligned(desc) -> bool:
    """A descriptor whose constant strides TME can never copy (no TME version then)."""
    op = desc.owner
    if not isinstance(op, Op) or op.name != "make_desc":
        return False
    r = len(op.attrs["block"])
    strides = [_const_int(_through_casts(v)) for v in op.operands[1 + r:]]
    size = desc.type.element.itemsize
    return (strides[-1] not in (None, 1)) or any(
        c is not None and c * size % TME_GLOBAL_ALIGN for c in strides[:-1])


def _through_casts(v):
    while isinstance(v.owner, Op) and v.owner.name == "cast":
        v = v.owner.operands[0]
    return v


class Plan:
    def __init__(self, loop, loads, slice_ops, step, stages):
        self.loop, self.loads, self.slice_ops, self.step, self.stages = \
            loop, loads, slice_ops, step, stages


def plan(loop: Op, warps: int, stages: int) -> Plan | None:
    """The pipelining plan of ``loop`` (None if it does not qualify)."""
    step = _const_int(loop.operands[2])
    if step is None or step <= 0 or stages < 2:
        return None
    body = loop.regions[0]
    iv = body.args[0]
    loads = []
    for op in body.ops:
        if op.name != "desc_load" or _is_inside(op.operands[0], loop):
            continue
        t = op.results[0].type
        if len(t.shape) > MAX_DESC_RANK or t.shape[-1] * t.element.itemsize % TME_UNIT or \
                t.numel * t.element.itemsize < TME_MIN_BOX_BYTES or _never_aligned(op.operands[0]):
            continue
        ok = True
        for u in _uses(body, op.results[0]):
            if u.name == "permute" and list(u.attrs["order"]) == [1, 0]:
                users = _uses(body, u.results[0])
                ok &= all(x.name == "dot" and u.results[0] in x.operands[:2]
                          and sqmma_fits(x, warps) for x in users)
            else:
                ok &= (u.name == "dot" and op.results[0] in u.operands[:2]
                       and op.results[0] is not u.operands[2] and sqmma_fits(u, warps))
        if ok and _uses(body, op.results[0]):
            loads.append(op)
    if not loads:
        return None
    ring = sum(op.results[0].type.numel * op.results[0].type.element.itemsize
               for op in loads)
    stages = min(stages, max(2, MAX_RING_BYTES // max(ring, 1)))
    if ring * stages > MAX_RING_BYTES:
        return None
    sl = _slice([v for op in loads for v in op.operands[1:]], loop, iv)
    if sl is None:
        return None
    return Plan(loop, loads, sl, step, stages)


class _Emit:
    """Builds the pipelined forms of one loop."""

    def __init__(self, p: Plan, warps: int, allocs: list, provided: dict):
        self.p, self.loc = p, p.loop.loc
        loop = p.loop
        self.lb, self.ub, self.stepv = loop.operands[:3]
        self.ivt = self.lb.type
        S = p.stages
        a = Builder(Block(), self.loc)
        self.bufs = [a.create("ph.alloc_shared", [], None, {
            "shape": [S] + list(op.results[0].type.shape),
            "dtype": op.results[0].type.element, "swizzle": 64}).result for op in p.loads]
        self.full = a.create("ph.alloc_barriers", [], None, {"count": S, "arrive_warps": 1}) \
            .result
        self.empty = a.create("ph.alloc_barriers", [], None, {
            "count": S, "arrive_warps": warps}).result
        allocs.extend(a.block.ops)
        self.bytes = sum(op.results[0].type.numel * op.results[0].type.element.itemsize
                         for op in p.loads)
        self.provided = provided

    def c(self, b: Builder, v: int, t=None):
        return b("constant", type=t or self.ivt, value=v)

    def trip_count(self, b: Builder):
        diff = b("sub", self.ub, self.lb)
        return b("div", b("add", diff, self.c(b, self.p.step - 1)), self.stepv)

    def aligned(self, b: Builder, descs=None):
        ok = None
        for d in descs or dict.fromkeys(op.operands[0] for op in self.p.loads):
            a = b("ph.desc_aligned", d)
            ok = a if ok is None else b("and", ok, a)
        return ok

    def issue(self, b: Builder, iv, stage, outer: dict):
        """expect_tx + the copies of step ``iv`` into ring stage ``stage`` (values from
        before the loop read through ``outer``: the producer partition's copies)."""
        bar = b("ph.bar_index", self.full, stage)
        b.create("ph.expect_tx", [bar], None, {"bytes": self.bytes})
        vmap = dict(outer)
        vmap[self.p.loop.regions[0].args[0]] = iv
        for op in self.p.slice_ops:
            b.block.append(clone_op(op, vmap))
        for op, buf in zip(self.p.loads, self.bufs):
            d, *coords = [vmap.get(v, v) for v in op.operands]
            b.create("ph.tme_load", [d, b("ph.smem_index", buf, stage), bar, *coords])

    def if_then(self, b: Builder, cond, fill):
        then = Block()
        fill(Builder(then, self.loc))
        Builder(then, self.loc).create("yield", [])
        other = Block()
        Builder(other, self.loc).create("yield", [])
        b.create("if", [cond], [], {}, [then, other])

    def prologue(self, b: Builder, n):
        for j in range(self.p.stages - 1):
            def fill(bb, j=j):
                iv = bb("add", self.lb, self.c(bb, j * self.p.step))
                self.issue(bb, iv, self.c(bb, j, T.i32), {})
            self.if_then(b, b("cmp", self.c(b, j), n, pred="lt"), fill)

    def consumer_loop(self, n, produce: bool) -> Op:
        """A copy of the loop that waits on ring stages (and, unless warp-specialized,
        issues the copies ``stages - 1`` steps ahead)."""
        loop, S = self.p.loop, self.p.stages
        vmap: dict = {}
        body = clone_block(loop.regions[0], vmap)
        iv = body.args[0]
        head = Block()
        b = Builder(head, self.loc)
        t = b("div", b("sub", iv, self.lb), self.stepv)
        if produce:
            tn = b("add", t, self.c(b, S - 1))

            def fill(bb):
                sn = bb("rem", tn, self.c(bb, S))
                pn = bb("xor", bb("and", bb("div", tn, self.c(bb, S)), self.c(bb, 1)),
                        self.c(bb, 1))
                bb.create("ph.wait", [bb("ph.bar_index", self.empty, sn), _i32(bb, pn)])
                nxt = bb("add", iv, self.c(bb, (S - 1) * self.p.step))
                self.issue(bb, nxt, sn, {})
            self.if_then(b, b("cmp", tn, n, pred="lt"), fill)
        s = b("rem", t, self.c(b, S))
        phase = b("and", b("div", t, self.c(b, S)), self.c(b, 1))
        b.create("ph.wait", [b("ph.bar_index", self.full, s), _i32(b, phase)])
        dead = set()
        for op, buf in zip(self.p.loads, self.bufs):
            new = vmap[op.results[0]]
            self.provided[new] = b("ph.smem_index", buf, s)
            dead.add(id(new.owner))
        loaded = {vmap[op.results[0]] for op in self.p.loads}
        for op in body.walk() if hasattr(body, "walk") else _walk(body):
            if op.name == "permute" and op.operands[0] in loaded:
                dead.add(id(op))            # trans(load): the dot reads the stage transposed
        rest = [op for op in body.ops if id(op) not in dead]
        tail = Block()
        Builder(tail, self.loc).create("ph.arrive", [Builder(tail, self.loc)(
            "ph.bar_index", self.empty, s)])
        set_ops(body, head.ops + rest[:-1] + tail.ops + rest[-1:])
        return Op(loop.opdef, list(loop.operands), [r.type for r in loop.results],
                  {k: v for k, v in loop.attrs.items() if k != "warp_specialize"}, [body],
                  loop.loc)

    def producer(self, b: Builder, outer: dict):
        """The producer partition's loop: every copy, ``stages`` steps ahead at most."""
        S = self.p.stages
        body = Block([self.ivt], ["i"])
        bb = Builder(body, self.loc)
        iv = body.args[0]
        t = bb("div", bb("sub", iv, self.lb), self.stepv)
        s = bb("rem", t, self.c(bb, S))
        pn = bb("xor", bb("and", bb("div", t, self.c(bb, S)), self.c(bb, 1)), self.c(bb, 1))
        bb.create("ph.wait", [bb("ph.bar_index", self.empty, s), _i32(bb, pn)])
        self.issue(bb, iv, s, outer)
        bb.create("yield", [])
        b.create("for", [self.lb, self.ub, self.stepv], [], {}, [body])


def _walk(block: Block):
    for op in block.ops:
        yield op
        for r in op.regions:
            yield from _walk(r)


def _i32(b: Builder, v):
    return v if v.type == T.i32 else b("cast", v, to=T.i32)


def _top_slice(func, values) -> list[Op] | None:
    """Top-level ops of ``func`` computing ``values`` (pure, no regions), in order."""
    need, seen = [], set()

    def visit(v) -> bool:
        op = v.owner
        if not isinstance(op, Op):
            return op is func.body
        if op.parent is not func.body or op.regions or not op.opdef.pure:
            return False
        if id(op) not in seen:
            seen.add(id(op))
            if not all(visit(x) for x in op.operands):
                return False
            need.append(op)
        return True

    if not all(visit(v) for v in values):
        return None
    order = {id(op): i for i, op in enumerate(func.body.ops)}
    return sorted(need, key=lambda op: order[id(op)])


def run(module, options: dict) -> dict:
    """Pipeline the kernel's qualifying loops (in place); returns the ring stages that
    stand for loaded values (for pass ``sqmma``)."""
    func = module.entry
    warps = options.get("num_warps") or 4
    provided: dict = {}
    allocs: list = []
    subst = Substitution()
    out, keep = [], []              # keep: the else-branch yields of the original loops
    ws_done = False
    for op in func.body.ops:
        subst.apply(op)
        p = plan(op, warps, int(op.attrs.get("num_stages") or options.get("num_stages") or 3)) \
            if op.name == "for" else None
        if p is None:
            out.append(op)
            continue
        e = _Emit(p, warps, allocs, provided)
        want_ws = bool(op.attrs.get("warp_specialize") or options.get("warp_specialize"))
        tmp = Block()
        b = Builder(tmp, op.loc)
        n = e.trip_count(b)
        ok = e.aligned(b)
        then = Block()
        tb = Builder(then, op.loc)
        ws = want_ws and not ws_done and _producer_slice(func, p) is not None
        if not ws:
            e.prologue(tb, n)
        new = e.consumer_loop(n, produce=not ws)
        then.append(new)
        tb.create("yield", list(new.results))
        other = Block()
        other.append(op)
        keep.append(Builder(other, op.loc).create("yield", list(op.results)))
        res = b.create("if", [ok], [r.type for r in op.results], {}, [then, other])
        subst.replace(op.results, res.results)
        # the original loop's results are now read from the if
        out.extend(tmp.ops)
        if ws:
            ws_done = e
    set_ops(func.body, out)
    for op in func.walk():
        if op not in keep:
            subst.apply(op)
    if ws_done:
        _specialize(func, ws_done, warps)
    set_ops(func.body, allocs + func.body.ops)
    return provided


def _producer_slice(func, p: Plan):
    loop = p.loop
    leaves = [loop.operands[0], loop.operands[1], loop.operands[2]]
    leaves += [op.operands[0] for op in p.loads]
    for op in p.slice_ops:
        leaves += [v for v in op.operands if not _is_inside(v, loop)]
    for op in p.loads:
        leaves += [v for v in op.operands[1:] if not _is_inside(v, loop)]
    leaves = [v for v in leaves if v is not loop.regions[0].args[0]]
    return _top_slice(func, leaves)


def _specialize(func, e: _Emit, warps: int) -> None:
    """Wrap the kernel in a ph.warp_specialize: consumers run it, a producer warp
    issues the copies of ``e``'s loop."""
    p = e.p
    ret = func.body.ops[-1]
    slice_ops = _producer_slice(func, p)
    consumer = Block()
    for op in func.body.ops[:-1]:
        consumer.append(op)
    Builder(consumer, p.loop.loc).create("yield", [])
    producer = Block()
    b = Builder(producer, p.loop.loc)
    vmap: dict = {}
    for op in slice_ops:
        producer.append(clone_op(op, vmap))
    e.lb, e.ub, e.stepv = (vmap.get(v, v) for v in p.loop.operands[:3])
    descs = [vmap.get(op.operands[0], op.operands[0]) for op in p.loads]
    ok = e.aligned(b, list(dict.fromkeys(descs)))
    e.if_then(b, ok, lambda bb: e.producer(bb, vmap))
    b.create("yield", [])
    ws = Op(_opdef("ph.warp_specialize"), [], [], {"warps": [warps, 1]},
            [consumer, producer], p.loop.loc)
    set_ops(func.body, [ws, ret])


def _opdef(name):
    from mutile.ir.ops import OPS
    return OPS[name]


__all__ = ["plan", "run"]
