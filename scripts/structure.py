#!/usr/bin/env python3
"""The workspace's shape: lines per crate, import cycles inside crates, and
public functions that return `Result<_, String>`.

    scripts/structure.py           # print the report
    scripts/structure.py --check   # also fail if a `pub fn` returns Result<_, String>

An import cycle is a set of a crate's top-level modules that reach each other
through `crate::` paths (a strongly connected component of two or more); a
file's nested modules count as the top-level module they live in.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATE_DIRS = sorted([*ROOT.glob("crates/*"), *ROOT.glob("services/*")])

STRING_ERROR = re.compile(
    r"\bpub\s+(?:async\s+)?fn\s+(\w+)[^{;]*?->\s*Result<[^{;]*?,\s*String\s*>",
    re.S,
)
CRATE_PATH = re.compile(r"\bcrate::(\w+)")
USE_GROUP = re.compile(r"\buse\s+crate::\{([^;]*)\};", re.S)


def rust_files(crate: Path, sub: str = "src"):
    return sorted((crate / sub).rglob("*.rs")) if (crate / sub).exists() else []


def top_module(crate: Path, file: Path) -> str:
    rel = file.relative_to(crate / "src").with_suffix("")
    first = rel.parts[0]
    return "lib" if first in ("lib", "main") else first


def module_graph(crate: Path):
    edges = {}
    for file in rust_files(crate):
        # Comments (doc links included) are not imports.
        src = re.sub(r"//[^\n]*", "", file.read_text())
        module = top_module(crate, file)
        targets = set(CRATE_PATH.findall(src))
        for group in USE_GROUP.findall(src):
            targets |= set(re.findall(r"(?:^|[,{]\s*)(\w+)", group))
        edges.setdefault(module, set()).update(t for t in targets if t != module)
    modules = set(edges)
    return {m: {t for t in ts if t in modules and t != "lib"} for m, ts in edges.items() if m != "lib"}


def cycles(graph):
    """Tarjan's strongly connected components of two or more modules."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    check = "--check" in sys.argv
    total_lines, all_cycles, string_errors = 0, [], []
    print(f"{'crate':<32} {'lines':>7}  import cycles")
    for crate in CRATE_DIRS:
        if not (crate / "Cargo.toml").exists():
            continue
        files = [f for sub in ("src", "tests", "benches") for f in rust_files(crate, sub)]
        lines = sum(len(f.read_text().splitlines()) for f in files)
        total_lines += lines
        found = cycles(module_graph(crate))
        all_cycles += [(crate.name, c) for c in found]
        print(f"{crate.name:<32} {lines:>7}  {'; '.join(' <-> '.join(c) for c in found) or '-'}")
        for file in rust_files(crate):
            for m in STRING_ERROR.finditer(file.read_text()):
                string_errors.append(f"{file.relative_to(ROOT)}: {m.group(1)}")
    print(f"{'total':<32} {total_lines:>7}  {len(all_cycles)} cycles")
    print(f"pub fn returning Result<_, String>: {len(string_errors)}")
    for e in string_errors:
        print(f"  {e}")
    if check and string_errors:
        print("error: public functions return Result<_, String>; give the crate's error type instead")
        sys.exit(1)


if __name__ == "__main__":
    main()
