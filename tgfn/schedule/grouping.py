"""Which materialized values share one kernel: multi-output kernels.

Every realize point is a buffer (see kernelize.py), but not every buffer needs a kernel of its own.
Elementwise values of the same shape that feed one another, or read the same data, are computed by
one kernel that stores each of them: an optimizer's `m`, `v` and new parameters are one pass over
memory instead of three, and a value that is both an output and an operand of another output is
computed once in registers instead of stored and loaded back.

A value joins a group when
  - it has the group's shape and device, and no reduction of its own (reductions keep their loops);
  - it reads a member of the group, or a buffer a member reads;
  - it reads members only element for element (through elementwise ops, never through a movement op):
    a member is then inlined at the very index the kernel stores it, so it is computed once;
  - no other kernel lies between it and the group (that kernel would need the group's output before
    the group could run: a cycle).
"""
from __future__ import annotations

from tgfn.schedule.kernelize import _INPUTS, _unrealized
from tgfn.uop.ops import GroupOp, Ops, UOp


def _reads(node: UOp, realize: set[UOp]) -> tuple[set[UOp], bool]:
  """The realized values and inputs `node`'s kernel loads, and whether its kernel reduces."""
  part = _unrealized(node, realize)
  return {s for x in part for s in x.src if s in realize or s.op in _INPUTS}, any(x.op is Ops.REDUCE_AXIS for x in part)


def _reads_in_place(node: UOp, members: set[UOp], realize: set[UOp]) -> bool:
  """Whether `node` reaches every member of `members` it reads through elementwise ops only."""
  seen, stack = set(), [(node, False)]
  while stack:
    x, moved = stack.pop()
    if (x, moved) in seen: continue
    seen.add((x, moved))
    if x is not node and x in members:
      if moved: return False
      continue
    if x is not node and (x in realize or x.op in _INPUTS): continue
    stack.extend((s, moved or x.op in GroupOp.Movement) for s in x.src)
  return True


def group_kernels(realize: set[UOp], order: list[UOp]) -> list[list[UOp]]:
  """Partition the realize points into kernels, each a list of the values it computes, ordered so that
  every kernel comes after the kernels whose outputs it reads. `order` is a topological order of the graph."""
  reads: dict[UOp, set[UOp]] = {}
  upstream: dict[UOp, set[UOp]] = {}  # what each realize point depends on, transitively
  groups: list[list[UOp]] = []
  alone: set[UOp] = set()             # reductions, copies, scatters, sub-graph and host calls: never grouped
  for node in (n for n in order if n in realize):
    reads[node], reduces = _reads(node, realize)
    upstream[node] = set(reads[node]).union(*(upstream.get(r, ()) for r in reads[node]))
    if reduces or node.op in (Ops.COPY, Ops.CALL, Ops.HOST, Ops.SCATTER): alone.add(node)
    group = None if node in alone else _joinable(node, groups, alone, reads, upstream, realize)
    if group is None: groups.append([node])
    else: group.append(node)
  return _dependency_order(groups, reads)


def _dependency_order(groups: list[list[UOp]], reads: dict[UOp, set[UOp]]) -> list[list[UOp]]:
  """The groups ordered so each comes after those it reads."""
  # listed by first member, a group may still read a kernel listed after it (through a later member)
  owner = {node: i for i, group in enumerate(groups) for node in group}
  needs = [{owner[r] for node in group for r in reads[node] if r in owner} - {i} for i, group in enumerate(groups)]
  # the joining rules check paths through single values: two groups can still each need the other through
  # different members (or copies between devices). Then every value is a kernel of its own
  if not _acyclic(needs): return _dependency_order([[node] for group in groups for node in group], reads)
  placed: list[int] = []
  done: set[int] = set()
  for first in range(len(groups)):
    stack = [first]
    while stack:  # depth first; acyclic, checked above
      g = stack[-1]
      waiting = [] if g in done else [n for n in needs[g] if n not in done]
      if waiting:
        stack.extend(waiting)
        continue
      stack.pop()
      if g not in done:
        done.add(g)
        placed.append(g)
  return [groups[i] for i in placed]


def _acyclic(needs: list[set[int]]) -> bool:
  """Whether the groups' needs form no cycle (Kahn's algorithm). Joining checks paths through single
  values; two groups on different devices can still each read a copy of the other's output."""
  waiting = [len(n) for n in needs]
  users: list[list[int]] = [[] for _ in needs]
  for g, ns in enumerate(needs):
    for n in ns: users[n].append(g)
  ready, placed = [g for g, w in enumerate(waiting) if w == 0], 0
  while ready:
    placed += 1
    for user in users[ready.pop()]:
      waiting[user] -= 1
      if waiting[user] == 0: ready.append(user)
  return placed == len(needs)


def _joinable(node: UOp, groups: list[list[UOp]], alone: set[UOp], reads: dict[UOp, set[UOp]],
              upstream: dict[UOp, set[UOp]], realize: set[UOp]) -> list[UOp] | None:
  """The latest group `node` may join (see the module docstring), or None."""
  for members in reversed(groups):
    head = members[0]
    if head in alone or head.shape != node.shape or head.device != node.device: continue
    member_set = set(members)
    if not reads[node] & member_set.union(*(reads[m] for m in members)): continue
    if not _reads_in_place(node, member_set, realize): continue
    if any(x not in member_set and upstream.get(x, set()) & member_set for x in upstream[node]): continue
    return members
  return None



_BIJECTIVE_VIEWS = (Ops.RESHAPE, Ops.PERMUTE)  # every element read exactly once: a reduction under one is not redone


def inline_shared_reductions(groups: list[list[UOp]], realize: set[UOp], outs: list[UOp]) -> tuple[list[list[UOp]], set[UOp]]:
  """Move into a multi-output kernel a reduction that only its members read, each element for element: the
  bias gradient that Adam's `m`, `v` and parameter update all read.
  It got a buffer because several values read it (kernelize._reductions_once); computed in their shared
  kernel it is lowered once, at the index where every member reads it, and its kernel and buffer go."""
  owner = {node: i for i, group in enumerate(groups) for node in group}
  readers: dict[UOp, set[UOp]] = {}
  for node in realize:
    for source in _reads(node, realize)[0]: readers.setdefault(source, set()).add(node)
  kept, inlined = set(outs), set()
  for reduction in [g[0] for g in groups if len(g) == 1 and g[0].op is Ops.REDUCE_AXIS and g[0] not in kept]:
    users = readers.get(reduction, set())
    if not users or any(u not in owner for u in users) or len({owner[u] for u in users}) != 1: continue
    members = groups[owner[next(iter(users))]]
    # a contraction (its operands broadcast) stays apart: tiled in a kernel of its own, and the update
    # elementwise after it, the main job's 128x128 weight gradient plus Adam took 45 us, fused 64
    if _contraction(reduction): continue
    if len(members) > 1 and _read_through_one_view(members, reduction, realize - {reduction}): inlined.add(reduction)
  if not inlined: return groups, realize
  return [g for g in groups if g[0] not in inlined], realize - inlined


def _contraction(reduction: UOp) -> bool:
  """A sum of products of broadcast operands (a matmul, as packing.py sees one)."""
  src = reduction.src[0]
  return src.op is Ops.MUL and any(s.op is Ops.EXPAND for s in src.src)


def _read_through_one_view(members: list[UOp], reduction: UOp, realize: set[UOp]) -> bool:
  """Whether every member reaches `reduction` through elementwise ops and then one shared chain of
  reshapes and permutes: each then lowers it at the same index, so the kernel computes it once per element."""
  parts = {x for m in members for x in _unrealized(m, realize)}
  views = {reduction}
  grown = True
  while grown:  # the reshapes and permutes of the reduction, and of those
    fresh = {x for x in parts if x not in views and x.op in _BIJECTIVE_VIEWS and x.src[0] in views}
    views |= fresh
    grown = bool(fresh)
  tops = {m for m in members if m in views}  # a member that is itself a view is stored at its own index
  for x in parts:
    if x in views: continue
    for s in x.src:
      if s not in views: continue
      if x.op not in GroupOp.ALU and x.op is not Ops.DETACH: return False  # broadcast, shrunk, reduced again...
      tops.add(s)
  return len(tops) == 1
