"""Import circles of a module graph, shared by the layering test and the rooms tests of bundle/
and report/ (each builds its graph from the code with ``ast``)."""

from __future__ import annotations

from collections.abc import Mapping, Set


def strongly_connected(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """Every import circle of ``graph`` (module -> the modules it imports): each strongly connected
    component of more than one module, or a module importing itself, sorted, in sorted order
    (Tarjan's algorithm, iterative so a deep graph cannot exhaust the stack). Edges to modules
    outside ``graph`` are ignored."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work: list[tuple[str, list[str]]] = [(start, sorted(w for w in graph[start] if w in graph))]
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(w for w in graph[nxt] if w in graph)))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1 or node in graph[node]:
                    out.append(sorted(comp))
    return sorted(out)
