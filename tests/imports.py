"""What the import tests share (tests/test_layers.py for hpsearch/, tests/test_bench_imports.py for bench/)."""

from __future__ import annotations


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in the graph (module -> modules it imports), as the modules round it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None
